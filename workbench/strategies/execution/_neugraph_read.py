"""NeuGraph's ``column-row`` order: accumulate on the GPU, stream read-only vertex chunks.

One :class:`ReadPass` plans one layer's forward, column by column (destination chunk ``j``
outer: ``E_0j .. E_{P-1,j}`` stream their source vertex sub-chunks into the accumulation
``A_j``, which stays on the GPU; then ApplyVertex), or one layer's backward row by row
(source chunk ``i`` outer: the destination chunks' ``dA`` stream into the source gradient
``G_i``; then the layer below's ApplyVertex backward reads ``G_i`` in place).

The streamed vertex sub-chunks are read-only, which is what the streaming switches need:
the CPU may filter one to its useful rows (``selective``) and, in a chain, the first GPU
loads it and each GPU forwards it to the next (``chain``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.strategies.execution._neugraph_profile import StreamItem, edge_features
from workbench.strategies.execution._neugraph_tasks import READS_DESTINATION, LayerPass, StreamTasks


@dataclass
class Column:
    """One column (row in backward) of a virtual GPU: each member GPU walks its ``c``-th chunk."""

    c: int  # which of its chunks each member walks
    group: list[int]  # the member GPUs, in chain order
    outers: list[int]  # each member's outer chunk
    prefix: list[str]  # each member's task id prefix
    acc: list[str]  # each member's accumulation (gradient in backward) tensor
    dst: list[str | None]  # each member's loaded destination chunk (kinds that read it)
    opened: list[bool]  # whether a member's accumulation exists yet (its first edge compute made it)
    last: list[list[str]]  # each member's last edge compute (what ApplyVertex waits for)


class ReadPass(LayerPass):
    """Forward of ``layer`` by columns, or backward of ``layer`` (``>= 1``) by rows."""

    def __init__(self, tasks: StreamTasks, it: int, layer: int, backward: bool) -> None:
        super().__init__(tasks, it, layer, backward, outer="dst")

    def run(self) -> None:
        for gi, group in enumerate(self.setup.groups):
            for c in range(self.setup.per_gpu):
                outers = [self.setup.owned[w][c] for w in group]
                items, item_rows = self.items(group, outers)
                column = self.open_column(c, group, outers)
                for pos in self.setup.schedule.order((self.tag, gi, c), items):
                    self.stream(column, items[pos], item_rows[pos])
                self.close_column(column)

    def filtered(self, union: np.ndarray) -> np.ndarray:
        """Per inner chunk, whether the CPU filters it: theta_i < Tcopy / (Tcopy + Ttrans)."""
        setup = self.setup
        if not setup.selective:
            return np.zeros(setup.num_chunks, dtype=bool)
        useful = union.reshape(setup.num_chunks, setup.k).sum(axis=1)
        return useful < setup.threshold * setup.sizes

    def items(self, group: list[int], outers: list[int]) -> tuple[list[StreamItem], list[int]]:
        """The column's streamed sub-chunks (those with an edge into any member's chunk), and the
        vertex rows each loads (its useful rows when filtered)."""
        k = self.setup.k
        edges = self.stats.edges[outers]  # (members, P * k)
        union = self.stats.union_useful(outers)
        selected = self.filtered(union)
        present = np.flatnonzero(edges.sum(axis=0) > 0)
        self.tasks.state.filtered_chunks += int(selected[np.unique(present // k)].sum())
        items, item_rows = [], []
        for q in present.tolist():
            i = q // k
            rows = int(union[q] if selected[i] else self.stats.sub_sizes[q])
            item_rows.append(rows)
            e = [int(x) for x in edges[:, q]]
            items.append(
                StreamItem(
                    layer=self.layer,
                    backward=self.backward,
                    inner_chunk=i,
                    sub=q % k,
                    edges=tuple(e),
                    load_bytes=tuple(
                        rows * self.width + (self.setup.adjacency_bytes(e[m], outers[m]) if e[m] else 0)
                        for m in range(len(group))
                    ),
                    copies=2,  # the rows and the edges
                    select_bytes=rows * self.width if selected[i] else 0,
                    features=tuple(
                        edge_features(self.spec, int(self.stats.useful[o, q]), e[m], self.backward)
                        if e[m]
                        else {}
                        for m, o in enumerate(outers)
                    ),
                )
            )
        return items, item_rows

    def open_column(self, c: int, group: list[int], outers: list[int]) -> Column:
        """The column's names, and the destination chunks it reads loaded (kinds that read them)."""
        prefix = [f"i{self.it}.{self.tag}.w{w}.o{o}" for w, o in zip(group, outers, strict=True)]
        column = Column(
            c=c,
            group=group,
            outers=outers,
            prefix=prefix,
            acc=[f"{p}.{'grad' if self.backward else 'acc'}" for p in prefix],
            dst=[None] * len(group),
            opened=[False] * len(group),
            last=[[] for _ in group],
        )
        if not self.backward and self.spec.kind in READS_DESTINATION:
            for m, (w, o) in enumerate(zip(group, outers, strict=True)):
                column.dst[m] = self.tasks.load_destination(self.it, self.layer, w, o, prefix[m])
        return column

    def stream(self, column: Column, item: StreamItem, rows: int) -> None:
        """One sub-chunk: its rows loaded into the chain's first GPU and forwarded down the chain as
        far as a member has edges in it; each such member's edges loaded and computed."""
        q = item.inner_chunk * self.setup.k + item.sub
        rows_task = self.load_rows(column, item, q, rows)
        needed = max(m for m in range(len(column.group)) if item.edges[m] > 0)
        for m in range(needed + 1):
            if m > 0:
                rows_task = self.forward_rows(column, m, q, rows, rows_task)
            if item.edges[m]:
                self.member_edges(column, m, item, q, rows_task)

    def load_rows(self, column: Column, item: StreamItem, q: int, rows: int) -> str:
        """The sub-chunk's vertex rows from host into the chain's first GPU (after the CPU filter
        when it is filtered). Returns the copy."""
        head = column.group[0]
        deps = self.tasks.written(
            (self.source, self.source_layer, item.inner_chunk)
        ) + self.tasks.window_deps(head)
        if item.select_bytes:
            select = f"i{self.it}.{self.tag}.g{head}.c{column.c}.x{q}.select"
            self.plan.compute(
                select,
                self.setup.host,
                "other",
                deps,
                worker=head,
                iteration=self.it,
                items=rows,
                label="select",
                features={"bytes": 2.0 * item.select_bytes},
            )
            deps = [select]
        rows_task = f"{column.prefix[0]}.x{q}.rows"
        self.plan.transfer(
            rows_task,
            self.setup.host,
            self.setup.gpu(head),
            rows * self.width,
            "h2d",
            deps,
            worker=head,
            iteration=self.it,
            items=rows,
            carries=self.carries,
        )
        return rows_task

    def forward_rows(self, column: Column, m: int, q: int, rows: int, previous: str) -> str:
        """The chain's member ``m - 1`` forwards the rows it received (copy ``previous``) to member ``m``."""
        w = column.group[m]
        forward = f"{column.prefix[m]}.x{q}.fwd"
        self.plan.transfer(
            forward,
            self.setup.gpu(column.group[m - 1]),
            self.setup.gpu(w),
            rows * self.width,
            "d2d",
            [previous, *self.tasks.window_deps(w)],
            worker=w,
            iteration=self.it,
            items=rows,
            carries=self.carries,
        )
        return forward

    def member_edges(self, column: Column, m: int, item: StreamItem, q: int, rows_task: str) -> None:
        """Member ``m``'s edges of the sub-chunk from host, then its Scatter-ApplyEdge-Gather into
        its accumulation (which the first one allocates)."""
        w, o, prefix = column.group[m], column.outers[m], column.prefix[m]
        e = item.edges[m]
        adj = f"{prefix}.x{q}.adj"
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
        edge = f"{prefix}.x{q}.edge"
        n_acc = int(self.setup.sizes[o]) * self.width
        self.tasks.edge_compute(
            edge,
            w,
            self.it,
            self.layer,
            self.backward,
            [rows_task, adj],
            item.features[m],
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
