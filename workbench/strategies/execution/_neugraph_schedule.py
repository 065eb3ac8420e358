"""NeuGraph's streaming schedule: what each GPU streams in a ``column-row`` layer pass, in which order,
and the names of the tasks that do it.

Every decision of a pass is made here, once, and read by both sides: the plan builder
(:mod:`._neugraph_read`, :mod:`._neugraph_tasks`) turns a :class:`ColumnSchedule` into tasks and
costs, and the real executor (``realrun.schemes.neugraph_stream``, through
:mod:`.neugraph_stream`'s public names) carries out the same columns and records each step under
the id :class:`NeuGraphTaskIds` gives it:

* which columns (rows in backward) each virtual GPU walks, member by member;
* which sub-chunks of the inner vertex range a column streams (those with an edge into a
  member's outer chunk), and in which order (natural, or NeuGraph's swaps on profiled times);
* whether the CPU filters a sub-chunk to its useful rows (``theta < Tcopy / (Tcopy + Ttrans)``,
  per inner chunk), and which rows it then keeps (:meth:`ColumnSchedule.row_vertices`);
* how far down a chain each sub-chunk's rows are forwarded (:attr:`StreamedSubChunk.needed`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from workbench.model import DTYPE_BYTES
from workbench.strategies.execution._neugraph import GridStats
from workbench.strategies.execution._neugraph_profile import StreamItem, edge_features
from workbench.strategies.execution._neugraph_setup import StreamSetup

__all__ = ["ColumnSchedule", "NeuGraphTaskIds", "StreamSchedule", "StreamedSubChunk"]


class NeuGraphTaskIds:
    """The one namer of neugraph-stream's tasks and named GPU tensors (the all-reduce and the
    optimizer steps come from :mod:`task_ids`)."""

    @staticmethod
    def pass_tag(layer: int, backward: bool) -> str:
        return f"b{layer}" if backward else f"f{layer}"

    @staticmethod
    def column_prefix(iteration: int, tag: str, worker: int, outer: int) -> str:
        """Worker ``worker``'s walk of outer chunk ``outer`` in the pass ``tag``."""
        return f"i{iteration}.{tag}.w{worker}.o{outer}"

    @staticmethod
    def rows(prefix: str, q: int) -> str:
        """Sub-chunk ``q``'s vertex rows, host -> the chain's first GPU."""
        return f"{prefix}.x{q}.rows"

    @staticmethod
    def forward(prefix: str, q: int) -> str:
        """Sub-chunk ``q``'s rows, from the previous GPU of the chain."""
        return f"{prefix}.x{q}.fwd"

    @staticmethod
    def adjacency(prefix: str, q: int) -> str:
        return f"{prefix}.x{q}.adj"

    @staticmethod
    def edge(prefix: str, q: int) -> str:
        """Scatter-ApplyEdge-Gather (or its backward) of sub-chunk ``q``'s edges."""
        return f"{prefix}.x{q}.edge"

    @staticmethod
    def select(iteration: int, tag: str, head: int, c: int, q: int) -> str:
        """The CPU filter of sub-chunk ``q`` for the chain headed by ``head``, column ``c``."""
        return f"i{iteration}.{tag}.g{head}.c{c}.x{q}.select"

    @staticmethod
    def accumulation(prefix: str, backward: bool) -> str:
        """The tensor a column accumulates into: ``A_o`` forward, the source gradient ``G_o`` backward."""
        return f"{prefix}.{'grad' if backward else 'acc'}"

    @staticmethod
    def apply_vertex(prefix: str) -> str:
        return f"{prefix}.vertex"

    @staticmethod
    def save(prefix: str) -> str:
        """ApplyVertex's saved tensors (accumulation and output), GPU -> host."""
        return f"{prefix}.save"

    @staticmethod
    def vertex_prefix(iteration: int, layer: int, worker: int, chunk: int) -> str:
        """ApplyVertex backward of ``layer`` for ``chunk`` on ``worker``."""
        return f"i{iteration}.v{layer}.w{worker}.o{chunk}"

    @staticmethod
    def swap_in(prefix: str) -> str:
        return f"{prefix}.swapin"

    @staticmethod
    def gradient_write(prefix: str) -> str:
        """``dA`` of the chunk, GPU -> host, for the layer below's backward pass."""
        return f"{prefix}.write"

    @staticmethod
    def gradient_tensor(prefix: str) -> str:
        return f"{prefix}.dacc"


@dataclass(frozen=True)
class StreamedSubChunk:
    """One sub-chunk of a column, in its place in the column's order."""

    q: int  # the inner sub-chunk: part ``q % k`` of inner chunk ``q // k``
    filtered: bool  # the CPU keeps only its useful rows
    rows: int  # vertex rows loaded (its useful rows when filtered, else its whole sub-range)
    item: StreamItem  # what it moves and computes per member (the reordering's view of it)
    span: tuple[int, int] = (0, 0)  # filtered: its rows' positions in the column's useful vertices

    @property
    def inner_chunk(self) -> int:
        return self.item.inner_chunk

    @property
    def edges(self) -> tuple[int, ...]:
        """Edges into each member's outer chunk."""
        return self.item.edges

    @property
    def needed(self) -> int:
        """The last member of the chain with an edge in it: its rows go down the chain that far."""
        return max(m for m, e in enumerate(self.item.edges) if e > 0)


@dataclass(frozen=True, eq=False)
class ColumnSchedule:
    """One column (one row in backward) of a virtual GPU: member ``m`` walks outer chunk ``outers[m]``."""

    layer: int
    backward: bool
    group_index: int  # which virtual GPU
    c: int  # each member's ``c``-th owned chunk
    group: tuple[int, ...]  # the members, in chain order
    outers: tuple[int, ...]
    items: tuple[StreamedSubChunk, ...]  # in streaming order
    filtered_chunks: int  # inner chunks (with an edge here) the CPU filters
    useful: np.ndarray = field(repr=False)  # inner vertices with an edge into any member's chunk
    sub_bounds: np.ndarray = field(repr=False)  # the inner sub-chunks' vertex boundaries

    @property
    def tag(self) -> str:
        return NeuGraphTaskIds.pass_tag(self.layer, self.backward)

    def row_vertices(self, sub: StreamedSubChunk) -> np.ndarray:
        """The inner vertices whose rows ``sub`` loads, in the order they are loaded."""
        if sub.filtered:
            return self.useful[sub.span[0] : sub.span[1]]
        return np.arange(self.sub_bounds[sub.q], self.sub_bounds[sub.q + 1], dtype=np.int64)


class StreamSchedule:
    """The ``column-row`` passes of a run on ``setup``'s grid, each column computed once."""

    def __init__(self, setup: StreamSetup) -> None:
        self.setup = setup
        self._columns: dict[tuple[int, bool], tuple[ColumnSchedule, ...]] = {}

    def passes(self) -> Iterator[tuple[str, int]]:
        """An iteration's passes in order: ``("forward", l)`` per layer, ``("top", L - 1)`` (the top
        layer's ApplyVertex backward, chunk by chunk), ``("backward", l)`` for ``l = L - 1 .. 1``."""
        layers = self.setup.model.num_layers
        for layer in range(layers):
            yield "forward", layer
        yield "top", layers - 1
        for layer in range(layers - 1, 0, -1):
            yield "backward", layer

    def columns(self, layer: int, backward: bool) -> tuple[ColumnSchedule, ...]:
        """The pass's columns, virtual GPU by virtual GPU, each one's in order."""
        key = (layer, backward)
        if key not in self._columns:
            setup = self.setup
            stats = setup.stats("src" if backward else "dst")
            self._columns[key] = tuple(
                self._column(stats, layer, backward, gi, c, group)
                for gi, group in enumerate(setup.groups)
                for c in range(setup.per_gpu)
            )
        return self._columns[key]

    def _filtered(self, useful_per_sub: np.ndarray) -> np.ndarray:
        """Per inner chunk, whether the CPU filters it: theta_i < Tcopy / (Tcopy + Ttrans)."""
        setup = self.setup
        if not setup.selective:
            return np.zeros(setup.num_chunks, dtype=bool)
        useful = useful_per_sub.reshape(setup.num_chunks, setup.k).sum(axis=1)
        return useful < setup.threshold * setup.sizes

    def _column(
        self, stats: GridStats, layer: int, backward: bool, gi: int, c: int, group: list[int]
    ) -> ColumnSchedule:
        setup = self.setup
        k = setup.k
        spec = setup.model.layers[layer]
        width = spec.in_dim * DTYPE_BYTES  # bytes of a row: H_l forward, dA_l backward
        outers = [setup.owned[w][c] for w in group]
        edges = stats.edges[outers]  # (members, P * k)
        useful = stats.useful_vertices(outers)
        starts = np.searchsorted(useful, stats.sub_bounds)
        selected = self._filtered(np.diff(starts))
        present = np.flatnonzero(edges.sum(axis=0) > 0)
        subs = []
        for q in present.tolist():
            i = q // k
            rows = int(starts[q + 1] - starts[q] if selected[i] else stats.sub_sizes[q])
            e = tuple(int(x) for x in edges[:, q])
            item = StreamItem(
                layer=layer,
                backward=backward,
                inner_chunk=i,
                sub=q % k,
                edges=e,
                load_bytes=tuple(
                    rows * width + (setup.adjacency_bytes(e[m], outers[m]) if e[m] else 0)
                    for m in range(len(group))
                ),
                copies=2,  # the rows and the edges
                select_bytes=rows * width if selected[i] else 0,
                features=tuple(
                    edge_features(spec, int(stats.useful[o, q]), e[m], backward) if e[m] else {}
                    for m, o in enumerate(outers)
                ),
            )
            span = (int(starts[q]), int(starts[q + 1])) if selected[i] else (0, 0)
            subs.append(StreamedSubChunk(q=q, filtered=bool(selected[i]), rows=rows, item=item, span=span))
        tag = NeuGraphTaskIds.pass_tag(layer, backward)
        order = setup.schedule.order((tag, gi, c), [s.item for s in subs])
        return ColumnSchedule(
            layer=layer,
            backward=backward,
            group_index=gi,
            c=c,
            group=tuple(group),
            outers=tuple(outers),
            items=tuple(subs[pos] for pos in order),
            filtered_chunks=int(selected[np.unique(present // k)].sum()),
            useful=useful,
            sub_bounds=stats.sub_bounds,
        )
