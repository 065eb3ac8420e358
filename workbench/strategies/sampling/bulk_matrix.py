"""``bulk-matrix``: matrix-based bulk sampling (paper 004: Tripathy, Yelick, Buluc, MLSys 2024;
``papers/004_48b849e12cfdd076.txt``).

Section 4 of paper 004 writes a sampler as three matrix steps (its Algorithm 1):

1. **probabilities**: build a sparse sampler matrix ``Q``, compute ``P = Q A`` with a
   sparse-sparse product (SpGEMM) and divide every row of ``P`` by its sum;
2. **sampling**: inverse transform sampling (ITS) per row of ``P``: a prefix sum per
   row, one uniform number per missing sample, a binary search of each number in its
   row's prefix sum, repeated until the row has its distinct samples (section 4.1.2);
3. **extraction**: turn the sampled entries into the layer's sampled adjacency matrix.

Minibatches are sampled **in bulk**: the ``Q`` of ``k`` minibatches are stacked
vertically (equation 1), so one SpGEMM and one ITS pass serve all ``k``
(:meth:`BulkMatrixSampler.sample_many`, ``bulk`` = k batches per pass).

GraphSAGE (section 4.1): ``Q`` has one row per destination vertex of the layer (per
batch, stacked) with a single 1 in the vertex's column, so row ``i`` of ``P = Q A`` is
the in-neighborhood of that vertex with values ``1 / deg``; ITS draws ``fanout``
distinct entries per row (all of them when the row has at most ``fanout``, as DGL and
:mod:`.neighbor` do); extraction removes the empty columns, i.e. relabels the sampled
vertices of each batch into the block's local source ids (destinations first). The
distribution of sampled neighbors is that of :mod:`.neighbor`.

LADIES (section 4.2): ``Q`` has one row per batch with a 1 in the column of every
destination vertex, and the right operand is ``A_hat o A_hat`` (entries of the
normalized adjacency squared, see :mod:`.ladies`), so ``P[b, j] = ||A_hat[B_b, j]||^2``
is LADIES' distribution after row normalization. ITS draws ``layer_size`` distinct
columns per row; row extraction is the SpGEMM ``Q_R A_hat`` (``Q_R`` one 1 per
destination vertex, stacked over batches) and column extraction one smaller SpGEMM per
batch with its column extraction matrix ``Q_C`` (the paper's block-diagonal product,
split per batch as its section 8.2.2 does to keep the hypersparse ``Q_C`` small).

SpGEMM back ends (``spgemm``), chosen inside this module only (the one place a strategy
looks for a device: it picks the array library the paper runs on, nothing else):

``"scipy"``
    ``scipy.sparse`` SpGEMM on the CPU, ITS on the materialized ``P`` (a numba
    kernel: prefix sums, binary search, distinct draws);
``"torch"``
    ``torch`` sparse CSR SpGEMM and a vectorized ITS (global prefix sum,
    ``searchsorted``, drawn entries zeroed between rounds) on CUDA when available,
    else on the CPU; sampled ids come back to the host for extraction;
``"fused"`` (GraphSAGE only)
    the product with GraphSAGE's ``Q`` (one 1 per row) copies rows of ``A``; this back
    end reads those rows of ``A`` in place instead of copying them into ``P`` (on
    products-like the materialized ``P`` of 32 batches has 91 M entries and scipy needs
    4.5 s for it), and since an unweighted row of ``P`` is uniform, its prefix sum is
    ``(j + 1) / deg`` and the binary search for ``u`` is ``floor(u * deg)``. Same
    steps, same distribution, no materialized ``P``;
``"auto"`` (default)
    ``torch`` when a CUDA device is present, else ``fused`` for GraphSAGE and
    ``scipy`` for LADIES.

On a CPU, steps 2 and 3 of GraphSAGE run fused in one numba kernel per layer
(:func:`._kernels.uniform_its_relabel_batches`), batch by batch with the batches spread
over the threads. Per batch: the ITS positions of all its rows (arithmetic only, each
row's extent read beforehand in one pass; "drawn already?" is a bit test, and a row
that keeps most of its entries draws the few it leaves out), then one gather of the
drawn column ids from an int32 copy of ``A``'s column ids (each row's cache lines
prefetched a few rows ahead), each id marked as it arrives in per-thread vertex bit
sets, from which the local ids follow (one bit per vertex, 150 KB on products-like;
0.9 MB of scratch per thread with the per-word counts, against a 5 MB vertex map). A block's sources are its destinations, then the other drawn
vertices grouped by word of 64 vertex ids. The ``k`` minibatches' blocks are views into
a few stacked arrays, recycled once no returned minibatch views them
(:class:`._common.OutputBufferPool`). Measured on products-like (1.22 M vertices,
20.6 M edges; fanouts [15, 10, 5], batch 1024, k = 32, ``benchmarks/bench_sampling.py``)
with one thread, where no thread waits on a core taken by other work: fused 64.6
minibatches/s, DGL's CPU NeighborSampler 20.7 (3.1x), :mod:`.neighbor` 31.2; CPU time
per minibatch ~15 ms against DGL's ~47 ms. Figures on 2 shared cores are in the
benchmark's docstring. The torch back end is tested on the CPU; on a CUDA device it
runs the same code.

The distributed forms of section 5 (graph-replicated and 1.5D graph-partitioned) are
iteration plans built by :func:`workbench.strategies.sampling.bulk_matrix_plan.bulk_sampling_plan`.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from workbench.errors import ConfigError, WorkbenchError
from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling import _kernels
from workbench.strategies.sampling._common import (
    MappingScratch,
    OutputBufferPool,
    check_positive_int,
    check_positive_ints,
    new_word_scratch,
    offsets_of,
)
from workbench.strategies.sampling.base import Block, Minibatch, Sampler, check_seeds
from workbench.strategies.sampling.ladies import NormalizedAdjacencyCache, layerwise_block

ALGORITHMS = ("graphsage", "ladies")
SPGEMM_BACKENDS = ("auto", "fused", "scipy", "torch")
WHO = "sampler 'bulk-matrix'"
_NO_WEIGHTS = np.empty(0, dtype=np.float64)


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (False when torch is missing)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return bool(torch.cuda.is_available())


def row_normalize(p: sp.csr_matrix) -> sp.csr_matrix:
    """Divide every row by its sum (paper 004, Algorithm 1, after the SpGEMM)."""
    p = sp.csr_matrix(p, dtype=np.float64)
    lengths = np.diff(p.indptr)
    row_of = np.repeat(np.arange(p.shape[0]), lengths)
    sums = np.bincount(row_of, weights=p.data, minlength=p.shape[0])
    p.data /= sums[row_of]
    return p


def selection_matrix(columns: np.ndarray, num_cols: int) -> sp.csr_matrix:
    """One row per entry of ``columns`` with a single 1 in that column (GraphSAGE's ``Q``, LADIES' ``Q_R``)."""
    rows = columns.shape[0]
    return sp.csr_matrix(
        (np.ones(rows), columns.astype(np.int64), np.arange(rows + 1, dtype=np.int64)), shape=(rows, num_cols)
    )


def batch_indicator_matrix(batches: Sequence[np.ndarray], num_cols: int) -> sp.csr_matrix:
    """One row per batch with a 1 in the column of each of its vertices (LADIES' ``Q``)."""
    lengths = np.array([b.shape[0] for b in batches], dtype=np.int64)
    cols = np.concatenate(batches) if batches else np.empty(0, dtype=np.int64)
    return sp.csr_matrix((np.ones(cols.shape[0]), cols, offsets_of(lengths)), shape=(len(batches), num_cols))


class _TorchSpGEMM:
    """``torch`` sparse CSR products and ITS on one device, with the right operands cached there."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self._cache: dict[str, tuple[weakref.ref[Any], Any]] = {}

    def operand(self, key: str, owner: Any, matrix: sp.csr_matrix) -> Any:
        hit = self._cache.get(key)
        if hit is not None and hit[0]() is owner:
            return hit[1]
        t = self.to_torch(matrix)
        self._cache[key] = (weakref.ref(owner), t)
        return t

    def to_torch(self, m: sp.csr_matrix) -> Any:
        torch = self.torch
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return torch.sparse_csr_tensor(
                torch.from_numpy(m.indptr.astype(np.int64)),
                torch.from_numpy(m.indices.astype(np.int64)),
                torch.from_numpy(m.data.astype(np.float64)),
                size=m.shape,
                device=self.device,
                check_invariants=False,  # scipy built them; checking costs a pass over P
            )

    def product(self, left: sp.csr_matrix, right: Any) -> Any:
        """``left @ right`` on the device, rows normalized; the CSR tensor of ``P``."""
        torch = self.torch
        p = torch.sparse.mm(self.to_torch(left), right)
        crow, col, val = p.crow_indices(), p.col_indices(), p.values()
        lengths = crow[1:] - crow[:-1]
        row_of = torch.repeat_interleave(torch.arange(lengths.shape[0], device=self.device), lengths)
        sums = torch.zeros(lengths.shape[0], dtype=val.dtype, device=self.device).index_add_(0, row_of, val)
        val = val / sums[row_of]
        return crow, col, val, row_of

    def to_scipy(self, crow: Any, col: Any, val: Any, shape: tuple[int, int]) -> sp.csr_matrix:
        return sp.csr_matrix((val.cpu().numpy(), col.cpu().numpy(), crow.cpu().numpy()), shape=shape)

    def its(
        self, crow: Any, col: Any, val: Any, row_of: Any, need: Any, seed: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Distinct draws per row: ``need[r]`` entries of row ``r`` (ITS in rounds, drawn entries zeroed).

        Returns (per-row counts, sampled column ids row by row) on the host.
        """
        torch = self.torch
        gen = torch.Generator(device=self.device)
        gen.manual_seed(int(seed))
        rows = crow.shape[0] - 1
        lengths = crow[1:] - crow[:-1]
        need = torch.minimum(need, lengths)
        selected = torch.zeros(col.shape[0], dtype=torch.bool, device=self.device)
        # Rows that keep everything need no draws.
        take_all = need == lengths
        selected |= take_all[row_of]
        have = torch.where(take_all, lengths, torch.zeros_like(lengths))
        while True:
            missing = need - have
            if not bool((missing > 0).any()):
                break
            weight = torch.where(selected, torch.zeros_like(val), val)
            cum = torch.cumsum(weight, 0)
            end_cum = cum[(crow[1:] - 1).clamp(min=0)]
            start_cum = torch.where(
                crow[:-1] > 0, cum[(crow[:-1] - 1).clamp(min=0)], torch.zeros_like(end_cum)
            )
            start_cum = torch.where(lengths > 0, start_cum, end_cum)
            r = torch.repeat_interleave(torch.arange(rows, device=self.device), missing.clamp(min=0))
            u = start_cum[r] + torch.rand(r.shape[0], generator=gen, device=self.device, dtype=cum.dtype) * (
                end_cum[r] - start_cum[r]
            )
            pos = torch.searchsorted(cum, u, right=True)
            pos = torch.minimum(pos, crow[1:][r] - 1)
            # Rounding can land on a zero-weight (already drawn) entry: such a draw is retried next round.
            pos = torch.unique(pos[~selected[pos]])
            selected[pos] = True
            have = have + torch.bincount(row_of[pos], minlength=rows)
        picked = torch.nonzero(selected).flatten()
        counts = torch.bincount(row_of[picked], minlength=rows)
        return counts.cpu().numpy().astype(np.int64), col[picked].cpu().numpy().astype(np.int64)


@SAMPLERS.register("bulk-matrix")
class BulkMatrixSampler(Sampler):
    """Matrix-based bulk sampling (SpGEMM + inverse transform sampling) of GraphSAGE or LADIES, k batches at once."""

    def __init__(
        self,
        fanouts: Sequence[int] | None = None,
        algorithm: str = "graphsage",
        layer_sizes: Sequence[int] | None = None,
        bulk: int = 32,
        spgemm: str = "auto",
    ) -> None:
        if algorithm not in ALGORITHMS:
            raise ConfigError(f"{WHO}: unknown algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
        if spgemm not in SPGEMM_BACKENDS:
            raise ConfigError(f"{WHO}: unknown spgemm {spgemm!r}; allowed: {', '.join(SPGEMM_BACKENDS)}")
        if algorithm == "graphsage":
            if layer_sizes is not None:
                raise ConfigError(
                    f"{WHO}: layer_sizes belongs to algorithm='ladies'; graphsage takes fanouts"
                )
            if fanouts is None:
                raise ConfigError(f"{WHO}: algorithm='graphsage' needs fanouts (e.g. [15, 10, 5])")
            self.fanouts: tuple[int, ...] | None = check_positive_ints(fanouts, "fanouts", WHO)
            self.layer_sizes: tuple[int, ...] | None = None
        else:
            if fanouts is not None:
                raise ConfigError(
                    f"{WHO}: fanouts belongs to algorithm='graphsage'; ladies takes layer_sizes"
                )
            if layer_sizes is None:
                raise ConfigError(f"{WHO}: algorithm='ladies' needs layer_sizes (e.g. [512])")
            if spgemm == "fused":
                raise ConfigError(
                    f"{WHO}: spgemm='fused' reads GraphSAGE's one-entry rows of Q in place; "
                    "algorithm='ladies' needs 'scipy', 'torch' or 'auto'"
                )
            self.fanouts = None
            self.layer_sizes = check_positive_ints(layer_sizes, "layer_sizes", WHO)
        self.algorithm = algorithm
        self.bulk = check_positive_int(bulk, "bulk", WHO)
        self.spgemm = spgemm
        self._adjacency = NormalizedAdjacencyCache()
        self._binary: tuple[weakref.ref[CSRGraph], sp.csr_matrix] | None = None
        self._narrow: tuple[weakref.ref[CSRGraph], np.ndarray] | None = None
        self._torch: _TorchSpGEMM | None = None
        self._outputs = OutputBufferPool()
        self._scratch = MappingScratch()
        self._words = MappingScratch(new_word_scratch)

    def __repr__(self) -> str:
        sizes = (
            f"fanouts={list(self.fanouts)}" if self.fanouts else f"layer_sizes={list(self.layer_sizes or ())}"
        )
        return f"BulkMatrixSampler(algorithm={self.algorithm!r}, {sizes}, bulk={self.bulk}, spgemm={self.spgemm!r})"

    @property
    def num_layers(self) -> int:
        return len(self.fanouts or self.layer_sizes or ())

    def backend(self) -> str:
        """The SpGEMM back end ``spgemm`` resolves to on this machine."""
        if self.spgemm != "auto":
            return self.spgemm
        if cuda_available():
            return "torch"
        return "fused" if self.algorithm == "graphsage" else "scipy"

    # ---- the Sampler interface ------------------------------------------------------------
    def sample(self, graph: CSRGraph, seeds: np.ndarray, rng: np.random.Generator) -> Minibatch:
        return self.sample_many(graph, [seeds], rng)[0]

    def sample_many(
        self, graph: CSRGraph, batches: Sequence[np.ndarray], rng: np.random.Generator
    ) -> list[Minibatch]:
        """Sample ``batches`` stacked ``bulk`` at a time; one :class:`Minibatch` per batch, in order."""
        checked = [check_seeds(graph, b) for b in batches]
        backend = self.backend()
        out: list[Minibatch] = []
        for start in range(0, len(checked), self.bulk):
            chunk = checked[start : start + self.bulk]
            if self.algorithm == "graphsage":
                out.extend(self._sample_graphsage(graph, chunk, rng, backend))
            else:
                out.extend(self._sample_ladies(graph, chunk, rng, backend))
        return out

    # ---- GraphSAGE ------------------------------------------------------------------------
    def _binary_adjacency(self, graph: CSRGraph) -> sp.csr_matrix:
        """``A`` with value 1 per edge: GraphSAGE samples uniformly whatever the edge weights."""
        if self._binary is None or self._binary[0]() is not graph:
            a = sp.csr_matrix(
                (np.ones(graph.num_edges), graph.indices, graph.indptr), shape=(graph.num_nodes,) * 2
            )
            self._binary = (weakref.ref(graph), a)
        return self._binary[1]

    def _torch_backend(self) -> _TorchSpGEMM:
        if self._torch is None:
            self._torch = _TorchSpGEMM()
        return self._torch

    def _columns(self, graph: CSRGraph) -> np.ndarray:
        """``A``'s column ids as int32 when every vertex id fits (a copy kept per graph), else as stored.

        The fused back end's gather of drawn column ids misses the cache once per
        line; half-width ids put a row in half the lines (products-like: 82 MB more
        memory, the input layer ~8% faster).
        """
        if graph.indices.dtype == np.int32 or graph.num_nodes >= 2**31:
            return graph.indices
        if self._narrow is None or self._narrow[0]() is not graph:
            self._narrow = (weakref.ref(graph), graph.indices.astype(np.int32))
        return self._narrow[1]

    def _probability_rows(
        self, graph: CSRGraph, dst: np.ndarray, backend: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step 1 on the host for the stacked ``Q`` whose row ``i`` selects ``dst[i]``: rows of ``P``.

        Returns (row_of, indptr, cols, values): row ``i`` of the row-normalized
        ``P = Q A`` is ``cols[indptr[row_of[i]]:indptr[row_of[i] + 1]]`` with probabilities
        ``values`` (empty: uniform, the fused back end's implicit ``1 / deg``, reading
        the rows of ``A`` in place).
        """
        if backend == "fused":
            return dst, graph.indptr, self._columns(graph), _NO_WEIGHTS
        p = row_normalize(selection_matrix(dst, graph.num_nodes) @ self._binary_adjacency(graph))
        rows = np.arange(dst.shape[0], dtype=np.int64)
        return rows, p.indptr.astype(np.int64), p.indices.astype(np.int64), p.data

    def _graphsage_layer_torch(
        self, graph: CSRGraph, dst: np.ndarray, row_ptr: np.ndarray, fanout: int, rng: np.random.Generator,
        mappings: np.ndarray,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:  # fmt: skip
        """Steps 1 and 2 on the torch device, step 3 on the host: per batch (src, edge_src, edge_dst)."""
        engine = self._torch_backend()
        right = engine.operand("A", graph, self._binary_adjacency(graph))
        crow, col, val, row_of = engine.product(selection_matrix(dst, graph.num_nodes), right)
        need = engine.torch.full((dst.shape[0],), fanout, dtype=crow.dtype, device=engine.device)
        counts, picked = engine.its(crow, col, val, row_of, need, int(_kernels.draw_seed(rng)))
        offsets = offsets_of(counts)
        src_buf, edge_src, edge_dst, num_src = _kernels.relabel_blocks(
            row_ptr, dst, counts, offsets, picked, mappings
        )
        src_start = row_ptr[:-1] + offsets[row_ptr[:-1]]
        edge_ptr = offsets[row_ptr]
        k = row_ptr.shape[0] - 1
        return (
            [src_buf[src_start[b] : src_start[b] + num_src[b]].copy() for b in range(k)],
            [edge_src[edge_ptr[b] : edge_ptr[b + 1]].copy() for b in range(k)],
            [edge_dst[edge_ptr[b] : edge_ptr[b + 1]].copy() for b in range(k)],
        )

    def _graphsage_layer(
        self, graph: CSRGraph, dst: np.ndarray, row_ptr: np.ndarray, fanout: int, rng: np.random.Generator,
        backend: str, mappings: np.ndarray,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:  # fmt: skip
        """One layer of all stacked batches: per batch (src, edge_src, edge_dst)."""
        if backend == "torch":
            return self._graphsage_layer_torch(graph, dst, row_ptr, fanout, rng, mappings)
        seed = _kernels.draw_seed(rng)
        row_of, indptr, cols, values = self._probability_rows(graph, dst, backend)
        k = row_ptr.shape[0] - 1
        if values.shape[0] == 0:
            # Uniform rows read in place: their extents once, in one pass (scratch from the pool).
            begin = self._outputs.empty(dst.shape[0])
            deg = self._outputs.empty(dst.shape[0])
            counts = _kernels.row_extents(row_of, indptr, fanout, begin, deg)
        else:
            counts = _kernels.indexed_row_counts(row_of, indptr, values, fanout)
        offsets = offsets_of(counts)
        # Stacked outputs, one array per kind for all k batches (views per batch), from a
        # pool that recycles them once the caller has dropped every minibatch viewing them.
        edge_src = self._outputs.empty(offsets[-1])
        edge_dst = self._outputs.empty(offsets[-1])
        src = self._outputs.empty(offsets[-1] + dst.shape[0])
        num_src = np.empty(k, dtype=np.int64)
        # Steps 2 (ITS) and 3 (extraction: dropping each batch's empty columns = local ids), per batch.
        if values.shape[0] == 0:
            with self._words.mappings(graph.num_nodes, mappings.shape[0]) as words:
                _kernels.uniform_its_relabel_batches(
                    row_ptr, dst, begin, deg, cols, counts, offsets, seed, edge_src, edge_dst, src, num_src, words,
                )  # fmt: skip
            del begin, deg
        else:
            _kernels.its_relabel_batches(
                row_ptr, dst, row_of, indptr, cols, values, counts, offsets, seed, edge_src, edge_dst, src,
                num_src, mappings,
            )  # fmt: skip
        edge_ptr = offsets[row_ptr]
        src_start = row_ptr[:-1] + edge_ptr[:-1]
        return (
            [src[src_start[b] : src_start[b] + num_src[b]] for b in range(k)],
            [edge_src[edge_ptr[b] : edge_ptr[b + 1]] for b in range(k)],
            [edge_dst[edge_ptr[b] : edge_ptr[b + 1]] for b in range(k)],
        )

    def _sample_graphsage(
        self, graph: CSRGraph, batches: list[np.ndarray], rng: np.random.Generator, backend: str
    ) -> list[Minibatch]:
        assert self.fanouts is not None
        k = len(batches)
        row_ptr = offsets_of(np.array([b.shape[0] for b in batches], dtype=np.int64))
        dst_of = list(batches)
        per_batch: list[list[Block]] = [[] for _ in range(k)]
        with self._scratch.mappings(graph.num_nodes, max(1, min(_kernels.num_threads(), k))) as mappings:
            self._graphsage_layers(graph, batches, row_ptr, dst_of, rng, backend, mappings, per_batch)
        return [Minibatch(seeds=batches[b], blocks=per_batch[b][::-1]) for b in range(k)]

    def _graphsage_layers(
        self, graph: CSRGraph, batches: list[np.ndarray], row_ptr: np.ndarray, dst_of: list[np.ndarray],
        rng: np.random.Generator, backend: str, mappings: np.ndarray, per_batch: list[list[Block]],
    ) -> None:  # fmt: skip
        assert self.fanouts is not None
        k = len(batches)
        for layer in range(len(self.fanouts) - 1, -1, -1):
            dst = np.concatenate(dst_of)
            srcs, edge_srcs, edge_dsts = self._graphsage_layer(
                graph, dst, row_ptr, self.fanouts[layer], rng, backend, mappings
            )
            for b in range(k):
                per_batch[b].append(
                    Block(
                        src_nodes=srcs[b], dst_nodes=dst_of[b], edge_src=edge_srcs[b], edge_dst=edge_dsts[b]
                    )
                )
            # The next layer's stacked Q selects every batch's sources.
            dst_of = srcs
            row_ptr = offsets_of(np.array([s.shape[0] for s in srcs], dtype=np.int64))

    # ---- LADIES ---------------------------------------------------------------------------
    def _spgemm(
        self, left: sp.csr_matrix, right: sp.csr_matrix, key: str, graph: CSRGraph, backend: str
    ) -> sp.csr_matrix:
        """``left @ right`` as scipy CSR with sorted indices, computed by the chosen back end."""
        if backend == "torch":
            engine = self._torch_backend()
            t = engine.torch.sparse.mm(engine.to_torch(left), engine.operand(key, graph, right))
            out = engine.to_scipy(
                t.crow_indices(), t.col_indices(), t.values(), (left.shape[0], right.shape[1])
            )
        else:
            out = sp.csr_matrix(left @ right)
        out.sort_indices()
        return out

    def _sample_ladies(
        self, graph: CSRGraph, batches: list[np.ndarray], rng: np.random.Generator, backend: str
    ) -> list[Minibatch]:
        assert self.layer_sizes is not None
        a_hat, squared = self._adjacency.get(graph)
        k = len(batches)
        dsts = list(batches)
        per_batch: list[list[Block]] = [[] for _ in range(k)]
        for layer in range(len(self.layer_sizes) - 1, -1, -1):
            size = self.layer_sizes[layer]
            # Step 1: P = Q (A_hat o A_hat), one row per batch, rows normalized.
            p = row_normalize(
                self._spgemm(batch_indicator_matrix(dsts, graph.num_nodes), squared, "A2", graph, backend)
            )
            available = np.diff(p.indptr)
            for b in range(k):
                if size > available[b]:
                    raise WorkbenchError(
                        f"{WHO}: LADIES layer {layer} asks for {size} vertices but batch {b}'s aggregated "
                        f"neighborhood has only {int(available[b])}; lower layer_sizes[{layer}] "
                        f"to at most {int(available.min())}"
                    )
            # Step 2: ITS, `size` distinct columns per row.
            offsets = np.arange(k + 1, dtype=np.int64) * size
            sampled = _kernels.its_sample_rows(
                p.indptr[:-1], p.indptr[1:], p.indices.astype(np.int64), p.data, _NO_WEIGHTS, offsets,
                _kernels.draw_seed(rng),
            )  # fmt: skip
            # Step 3: row extraction for all batches in one SpGEMM, column extraction per batch.
            rows = self._spgemm(
                selection_matrix(np.concatenate(dsts), graph.num_nodes), a_hat, "Ahat", graph, backend
            )
            row_ptr = offsets_of(np.array([d.shape[0] for d in dsts], dtype=np.int64))
            for b in range(k):
                dst = dsts[b]
                drawn = sampled[offsets[b] : offsets[b + 1]]
                src = np.concatenate([dst, drawn[~np.isin(drawn, dst)]])
                row_cols = p.indices[p.indptr[b] : p.indptr[b + 1]]
                probability_of = p.data[p.indptr[b] + np.searchsorted(row_cols, src)]
                block = layerwise_block(rows[row_ptr[b] : row_ptr[b + 1]], dst, drawn, probability_of)
                per_batch[b].append(block)
                dsts[b] = block.src_nodes
        return [Minibatch(seeds=batches[b], blocks=per_batch[b][::-1]) for b in range(k)]
