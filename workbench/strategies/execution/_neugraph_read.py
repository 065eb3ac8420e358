"""NeuGraph's ``column-row`` order: accumulate on the GPU, stream read-only vertex chunks.

One :class:`ReadPass` plans one layer's forward, column by column (destination chunk ``j``
outer: ``E_0j .. E_{P-1,j}`` stream their source vertex sub-chunks into the accumulation
``A_j``, which stays on the GPU; then ApplyVertex), or one layer's backward row by row
(source chunk ``i`` outer: the destination chunks' ``dA`` stream into the source gradient
``G_i``; then the layer below's ApplyVertex backward reads ``G_i`` in place).

The streamed vertex sub-chunks are read-only, which is what the streaming switches need:
the CPU may filter one to its useful rows (``selective``) and, in a chain, the first GPU
loads it and each GPU forwards it to the next (``chain``). What streams where and in which
order is the run's schedule (:mod:`._neugraph_schedule`, which the real executor reads too);
this module turns it into tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.strategies.execution._neugraph_schedule import ColumnSchedule, StreamedSubChunk
from workbench.strategies.execution._neugraph_schedule import NeuGraphTaskIds as Ids
from workbench.strategies.execution._neugraph_tasks import READS_DESTINATION, LayerPass, StreamTasks


@dataclass
class Column:
    """What the plan builder tracks while it adds one scheduled column's tasks."""

    schedule: ColumnSchedule
    prefix: list[str]  # each member's task id prefix
    acc: list[str]  # each member's accumulation (gradient in backward) tensor
    dst: list[str | None]  # each member's loaded destination chunk (kinds that read it)
    opened: list[bool]  # whether a member's accumulation exists yet (its first edge compute made it)
    last: list[list[str]]  # each member's last edge compute (what ApplyVertex waits for)

    @property
    def group(self) -> tuple[int, ...]:
        return self.schedule.group

    @property
    def outers(self) -> tuple[int, ...]:
        return self.schedule.outers


class ReadPass(LayerPass):
    """Forward of ``layer`` by columns, or backward of ``layer`` (``>= 1``) by rows, as the
    run's :class:`~._neugraph_schedule.StreamSchedule` lays them out."""

    def __init__(self, tasks: StreamTasks, it: int, layer: int, backward: bool) -> None:
        super().__init__(tasks, it, layer, backward, outer="dst")

    def run(self) -> None:
        for scheduled in self.tasks.schedule.columns(self.layer, self.backward):
            self.tasks.state.filtered_chunks += scheduled.filtered_chunks
            column = self.open_column(scheduled)
            for sub in scheduled.items:
                self.stream(column, sub)
            self.close_column(column)

    def open_column(self, scheduled: ColumnSchedule) -> Column:
        """The column's names, and the destination chunks it reads loaded (kinds that read them)."""
        prefix = [
            Ids.column_prefix(self.it, self.tag, w, o)
            for w, o in zip(scheduled.group, scheduled.outers, strict=True)
        ]
        members = len(scheduled.group)
        column = Column(
            schedule=scheduled,
            prefix=prefix,
            acc=[Ids.accumulation(p, self.backward) for p in prefix],
            dst=[None] * members,
            opened=[False] * members,
            last=[[] for _ in range(members)],
        )
        if not self.backward and self.spec.kind in READS_DESTINATION:
            for m, (w, o) in enumerate(zip(scheduled.group, scheduled.outers, strict=True)):
                column.dst[m] = self.tasks.load_destination(self.it, self.layer, w, o, prefix[m])
        return column

    def stream(self, column: Column, sub: StreamedSubChunk) -> None:
        """One sub-chunk: its rows loaded into the chain's first GPU and forwarded down the chain as
        far as a member has edges in it; each such member's edges loaded and computed."""
        rows_task = self.load_rows(column, sub)
        for m in range(sub.needed + 1):
            if m > 0:
                rows_task = self.forward_rows(column, m, sub, rows_task)
            if sub.edges[m]:
                self.member_edges(column, m, sub, rows_task)

    def load_rows(self, column: Column, sub: StreamedSubChunk) -> str:
        """The sub-chunk's vertex rows from host into the chain's first GPU (after the CPU filter
        when it is filtered). Returns the copy."""
        head = column.group[0]
        source = (self.source, self.source_layer, sub.inner_chunk)
        deps = self.tasks.written(source) + self.tasks.window_deps(head)
        if sub.filtered:
            select = Ids.select(self.it, self.tag, head, column.schedule.c, sub.q)
            self.plan.compute(
                select,
                self.setup.host,
                "other",
                deps,
                worker=head,
                iteration=self.it,
                items=sub.rows,
                label="select",
                features={"bytes": 2.0 * sub.item.select_bytes},
            )
            deps = [select]
        rows_task = Ids.rows(column.prefix[0], sub.q)
        self.plan.transfer(
            rows_task,
            self.setup.host,
            self.setup.gpu(head),
            sub.rows * self.width,
            "h2d",
            deps,
            worker=head,
            iteration=self.it,
            items=sub.rows,
            carries=self.carries,
        )
        return rows_task

    def forward_rows(self, column: Column, m: int, sub: StreamedSubChunk, previous: str) -> str:
        """The chain's member ``m - 1`` forwards the rows it received (copy ``previous``) to member ``m``."""
        w = column.group[m]
        forward = Ids.forward(column.prefix[m], sub.q)
        self.plan.transfer(
            forward,
            self.setup.gpu(column.group[m - 1]),
            self.setup.gpu(w),
            sub.rows * self.width,
            "d2d",
            [previous, *self.tasks.window_deps(w)],
            worker=w,
            iteration=self.it,
            items=sub.rows,
            carries=self.carries,
        )
        return forward

    def member_edges(self, column: Column, m: int, sub: StreamedSubChunk, rows_task: str) -> None:
        """Member ``m``'s edges of the sub-chunk from host, then its Scatter-ApplyEdge-Gather into
        its accumulation (which the first one allocates)."""
        w, o, prefix = column.group[m], column.outers[m], column.prefix[m]
        e = sub.edges[m]
        adj = Ids.adjacency(prefix, sub.q)
        self.plan.transfer(
            adj,
            self.setup.host,
            self.setup.gpu(w),
            self.setup.adjacency_bytes(e, o),
            "h2d",
            self.tasks.window_deps(w),
            worker=w,
            iteration=self.it,
            items=e,
            carries="adjacency",
        )
        edge = Ids.edge(prefix, sub.q)
        n_acc = int(self.setup.sizes[o]) * self.width
        self.tasks.edge_compute(
            edge,
            w,
            self.it,
            self.layer,
            self.backward,
            [rows_task, adj],
            sub.item.features[m],
            e,
            allocate=None if column.opened[m] else {column.acc[m]: n_acc},
        )
        column.opened[m] = True
        column.last[m] = [edge]

    def close_column(self, column: Column) -> None:
        """Each member's chunk done: ApplyVertex (forward), or the layer below's ApplyVertex
        backward for this row's chunk, reading ``G_o`` in place (backward)."""
        for m, (w, o) in enumerate(zip(column.group, column.outers, strict=True)):
            held = column.acc[m] if column.opened[m] else None
            if self.backward:
                self.tasks.vertex_backward(self.it, w, self.layer - 1, o, column.last[m], held)
            else:
                self.tasks.apply_vertex(
                    self.it, w, self.layer, o, column.prefix[m], column.last[m], held, column.dst[m]
                )
