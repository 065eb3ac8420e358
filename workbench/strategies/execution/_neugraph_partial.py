"""NeuGraph's ``row-column`` order (the one Fig. 16 compares against): keep the input chunk,
stream partial sums in and out.

One :class:`PartialPass` plans one layer's forward by source rows (source chunk ``i``
outer: the GPU keeps ``H_i`` and every edge sub-chunk ``E_ij`` adds into this GPU's partial
sum of destination sub-chunk ``j``, loaded from host unless the GPU's first to touch it, and
written back), or one layer's backward by destination columns (the partial source
gradients make the same round trips). Then each chunk's owner loads every GPU's partial
sums of it, adds them up and finishes the chunk (ApplyVertex, or the layer below's
ApplyVertex backward). The streamed chunks are per-GPU partial sums, so neither the CPU
filter nor the chain applies (the scheme refuses them with this order).
"""

from __future__ import annotations

import numpy as np

from workbench.strategies.execution._neugraph_profile import StreamItem, edge_features
from workbench.strategies.execution._neugraph_tasks import READS_DESTINATION, LayerPass, StreamTasks


class PartialPass(LayerPass):
    """Forward of ``layer`` by source rows, or backward of ``layer`` (``>= 1``) by destination
    columns: every edge (sub-)chunk loads this GPU's partial sum of its inner vertices
    (unless it is the first to touch it) and writes it back."""

    def __init__(self, tasks: StreamTasks, it: int, layer: int, backward: bool) -> None:
        # Outer: the chunk this GPU keeps (source rows forward, destination columns backward).
        super().__init__(tasks, it, layer, backward, outer="src")
        self.written: dict[tuple[int, int], str] = {}  # (worker, sub-chunk) -> its partial's last write-back
        self.writes: list[list[str]] = [[] for _ in self.setup.workers]  # each GPU's write-backs, in order

    def run(self) -> None:
        for w, owned in enumerate(self.setup.owned):
            for c, o in enumerate(owned):
                self.stream_chunk(w, c, o)
        # Each chunk's owner folds in every GPU's partial sums of it, one GPU's at a time (its
        # buffer freed by the addition), then finishes the chunk; its chunks one after another.
        for w, owned in enumerate(self.setup.owned):
            previous: list[str] = []
            for x in owned:
                previous = [self.fold_chunk(w, x, previous)]

    def stream_chunk(self, w: int, c: int, o: int) -> None:
        """GPU ``w``'s ``c``-th chunk ``o``: kept on the GPU while its edge sub-chunks stream past."""
        present = np.flatnonzero(self.stats.edges[o] > 0).tolist()
        if not present:
            return
        prefix = f"i{self.it}.{self.tag}.w{w}.o{o}"
        keep = self.keep_chunk(w, o, prefix)
        items = [self.item(w, o, q) for q in present]
        order = self.setup.schedule.order((self.tag, w, c), items)
        for n_done, pos in enumerate(order):
            self.stream_partial(w, o, prefix, keep, items[pos], last=n_done == len(order) - 1)

    def keep_chunk(self, w: int, o: int, prefix: str) -> str:
        """Load chunk ``o`` (kept until its last edge compute) into GPU ``w``. Returns the copy."""
        keep = f"{prefix}.in"
        n_o = int(self.setup.sizes[o])
        self.plan.transfer(
            keep,
            self.setup.host,
            self.setup.gpu(w),
            n_o * self.width,
            "h2d",
            self.tasks.written((self.source, self.source_layer, o)) + self.tasks.window_deps(w),
            worker=w,
            iteration=self.it,
            items=n_o,
            carries=self.carries,
            allocate={keep: n_o * self.width},
        )
        return keep

    def item(self, w: int, o: int, q: int) -> StreamItem:
        """Sub-chunk ``q`` of chunk ``o``'s edges on GPU ``w``, with its partial sum's load."""
        k = self.setup.k
        e = int(self.stats.edges[o, q])
        back = int(self.stats.sub_sizes[q]) * self.width if (w, q) in self.written else 0
        return StreamItem(
            layer=self.layer,
            backward=self.backward,
            inner_chunk=q // k,
            sub=q % k,
            edges=(e,),
            load_bytes=(back + self.setup.adjacency_bytes(e, o),),
            copies=2 if back else 1,  # the edges, and the partial sum unless it is new
            select_bytes=0,  # partial sums are never filtered
            features=(edge_features(self.spec, int(self.stats.useful[o, q]), e, self.backward),),
        )

    def stream_partial(self, w: int, o: int, prefix: str, keep: str, item: StreamItem, last: bool) -> None:
        """One edge sub-chunk: its edges (and the partial sum, unless new) in, the edge compute adding
        into the partial sum (the ``last`` one frees the kept chunk), the partial sum back out."""
        # A partial buffer is free again once its write-back ends: the window counts them too.
        free = self.tasks.window_deps(w)
        if len(self.writes[w]) >= self.setup.window:
            free.append(self.writes[w][-self.setup.window])
        q = item.inner_chunk * self.setup.k + item.sub
        part_bytes = int(self.stats.sub_sizes[q]) * self.width
        part = f"i{self.it}.{self.tag}.w{w}.part{q}"
        adj = f"{prefix}.x{q}.adj"
        self.plan.transfer(
            adj,
            self.setup.host,
            self.setup.gpu(w),
            self.setup.adjacency_bytes(item.edges[0], o),
            "h2d",
            free,
            worker=w,
            iteration=self.it,
            items=item.edges[0],
            carries="adjacency",
        )
        deps = [keep, adj, *free]
        allocate: dict[str, int] | None = {part: part_bytes}
        if (w, q) in self.written:
            deps.append(self.load_partial(w, q, f"{prefix}.x{q}.partin", part, free))
            allocate = None
        edge = f"{prefix}.x{q}.edge"
        self.tasks.edge_compute(
            edge,
            w,
            self.it,
            self.layer,
            self.backward,
            deps,
            item.features[0],
            item.edges[0],
            allocate=allocate,
            free=[keep] if last else None,
        )
        write = f"{prefix}.x{q}.partout"
        self.plan.transfer(
            write,
            self.setup.gpu(w),
            self.setup.host,
            part_bytes,
            "d2h",
            [edge],
            worker=w,
            iteration=self.it,
            items=int(self.stats.sub_sizes[q]),
            carries="partials",
            free=[part],
        )
        self.written[(w, q)] = write
        self.writes[w].append(write)

    def load_partial(self, w: int, q: int, tid: str, part: str, free: list[str]) -> str:
        """GPU ``w``'s partial sum of sub-chunk ``q`` back from host (into tensor ``part``)."""
        rows = int(self.stats.sub_sizes[q])
        self.plan.transfer(
            tid,
            self.setup.host,
            self.setup.gpu(w),
            rows * self.width,
            "h2d",
            [self.written[(w, q)], *free],
            worker=w,
            iteration=self.it,
            items=rows,
            carries="partials",
            allocate={part: rows * self.width},
        )
        return tid

    def fold_chunk(self, w: int, x: int, previous: list[str]) -> str:
        """Owner ``w`` adds up every GPU's partial sums of its chunk ``x`` (after its previous
        chunk, ``previous``), then finishes the chunk. Returns the finishing compute."""
        prefix = f"i{self.it}.{self.tag}.w{w}.o{x}"
        total = f"{prefix}.{'grad' if self.backward else 'acc'}"
        added: list[str] = []  # the last addition into this chunk's total
        k = self.setup.k
        for g in range(len(self.setup.workers)):
            subs = [q for q in range(x * k, (x + 1) * k) if (g, q) in self.written]
            if subs:
                added = [self.add_partials(w, x, g, subs, prefix, total, added or previous, added)]
        held = total if added else None
        if self.backward:
            return self.tasks.vertex_backward(self.it, w, self.layer - 1, x, added, held)
        dst = None
        if self.spec.kind in READS_DESTINATION:
            dst = self.tasks.load_destination(self.it, self.layer, w, x, prefix)
        return self.tasks.apply_vertex(self.it, w, self.layer, x, prefix, added, held, dst)

    def add_partials(
        self,
        w: int,
        x: int,
        g: int,
        subs: list[int],
        prefix: str,
        total: str,
        after: list[str],
        added: list[str],
    ) -> str:
        """GPU ``g``'s partial sums of chunk ``x`` (sub-chunks ``subs``) loaded into owner ``w``
        once ``after`` is done, and added into ``total`` (allocated by the first addition, ``added``
        empty). Returns the addition."""
        rows = int(sum(self.stats.sub_sizes[q] for q in subs))
        load = f"{prefix}.from{g}"
        self.plan.transfer(
            load,
            self.setup.host,
            self.setup.gpu(w),
            rows * self.width,
            "h2d",
            [*(self.written[(g, q)] for q in subs), *after, *self.tasks.window_deps(w)],
            worker=w,
            iteration=self.it,
            items=rows,
            carries="partials",
        )
        add = f"{prefix}.add{g}"
        self.plan.compute(
            add,
            self.setup.gpu(w),
            "backward" if self.backward else "forward",
            [load, *added],
            worker=w,
            iteration=self.it,
            layer=self.layer,
            items=rows,
            features={
                "vertices": float(rows),
                "flops": float(rows * self.spec.in_dim),
                "bytes": 3.0 * rows * self.width,  # read both addends, write the sum
            },
            allocate={} if added else {total: int(self.setup.sizes[x]) * self.width},
        )
        return add
