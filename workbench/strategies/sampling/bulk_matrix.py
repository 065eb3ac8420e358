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

SpGEMM back ends (``spgemm``, a parameter like any other: the default is the same on
every machine, ``"fused"`` for GraphSAGE and ``"scipy"`` for LADIES, and the sampler
never looks at the machine; whoever builds it, a run configuration or an executor,
names the back end and, for ``"torch"``, the device):

``"scipy"``
    ``scipy.sparse`` SpGEMM on the CPU, ITS on the rows of the materialized ``P`` (numba
    kernels on the host);
``"torch"``
    ``torch`` sparse CSR SpGEMM on ``torch_device`` (default ``"cpu"``; ``"cuda"`` or
    ``"cuda:N"`` for a GPU); GraphSAGE's ITS runs there too, vectorized in rounds
    (:meth:`_TorchSpGEMM.uniform_positions`), and the sampled ids come back to the host
    for extraction; LADIES' ``P`` comes back to the host for ITS and extraction;
``"fused"`` (GraphSAGE only)
    the product with GraphSAGE's ``Q`` (one 1 per row) copies rows of ``A``; this back
    end reads those rows of ``A`` in place instead of copying them into ``P`` (on
    products-like the materialized ``P`` of 32 batches has 91 M entries and scipy needs
    4.5 s for it). Same steps, same samples, no materialized ``P``.

Same seed, same samples, whatever the back end. GraphSAGE's rows of ``P`` are uniform
(every entry ``1 / deg``), so the prefix sum of row ``i`` is ``(j + 1) / deg`` and the
binary search for a uniform number ``u`` is ``floor(u * deg)``: all three back ends
run step 2 in this closed form, with row ``i``'s ``j``-th number from one counter-based
stream (:func:`._kernels._uniform`, from one seed per layer drawn from the caller's
generator), a repeat drawn again, and the same rule for rows that keep all their
entries or (at most 64 entries, keeping more than half) draw the ones they leave out.
The torch back end computes those numbers with int64 arithmetic on its device, bit for
bit (integer operations and one exactly rounded multiplication, so CUDA gives the same
numbers as the CPU; tested here on the CPU only), and all three relabel with the same
kernel: their blocks are equal array for array (``tests/strategies/sampling/
test_bulk_backends.py``). This holds when ``P``'s rows are ``A``'s rows, which is the
case for every graph the workbench builds (rows sorted, no duplicate edges; scipy's and
torch's ``P`` are sorted by column). Where it does not hold, by construction:

* a graph with duplicate edges: scipy's SpGEMM merges the copies of an edge into one
  entry of weight ``copies / deg``, so its row is not uniform and the scipy back end
  draws it with the weighted ITS (prefix sums of the remaining weights, rounds with
  drawn entries set to zero: distinct neighbors, weighted by multiplicity), while fused
  draws edges (DGL's way: both copies can be drawn); torch's SpGEMM decides for itself
  (torch 2.13 on the CPU keeps the copies, so torch draws like fused);
* a ``CSRGraph`` built by hand with unsorted rows: scipy and torch sort ``P``'s columns,
  fused reads ``A``'s order; the same distribution, other samples.

LADIES' rows are weighted; scipy and torch run its step 2 with the same numba kernel on
the host, from ``P`` computed by their own SpGEMM. The two products sum the same terms,
possibly in another order, so ``P`` can differ in the last bits, and a draw can differ
only when ``u`` falls within that rounding of a prefix-sum boundary (on the order of
1e-16 per draw); the samples are otherwise equal and the edge weights equal to rounding.

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
a few stacked arrays, recycled once no returned minibatch views them, by every sampler of
the process (:data:`._common.SHARED_OUTPUTS`). Measured on products-like (1.22 M vertices,
20.6 M edges; fanouts [15, 10, 5], batch 1024, k = 32, ``benchmarks/bench_sampling.py``)
with one thread, where no thread waits on a core taken by other work: fused 64.6
minibatches/s, DGL's CPU NeighborSampler 20.7 (3.1x), :mod:`.neighbor` 31.2; CPU time
per minibatch ~15 ms against DGL's ~47 ms. Figures on 2 shared cores are in the
benchmark's docstring. The torch back end is tested on the CPU; on a CUDA device it
runs the same code.

The distributed forms of section 5 (graph-replicated and 1.5D graph-partitioned) are
iteration plans built by :func:`workbench.strategies.sampling.bulk_matrix_plan.bulk_sampling_plan`.
A distributed sampler (``bulk-pipeline``'s real executor) computes ``P``'s rows with its
collectives and then runs steps 2 and 3 here (:func:`its_uniform_rows`,
:func:`extract_blocks`) with each row's random stream as the one-process sampler drew it
(:meth:`BulkMatrixSampler.graphsage_streams`): the same rows of ``P``, the same samples.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from workbench.errors import ConfigError, WorkbenchError
from workbench.graph.csr import CSRGraph
from workbench.registry import SAMPLERS
from workbench.strategies.sampling import _kernels
from workbench.strategies.sampling._common import (
    SHARED_MAPPINGS,
    SHARED_OUTPUTS,
    SHARED_WORDS,
    check_positive_int,
    check_positive_ints,
    offsets_of,
)
from workbench.strategies.sampling.base import Block, Minibatch, Sampler, check_seeds
from workbench.strategies.sampling.ladies import NormalizedAdjacencyCache, layerwise_block

ALGORITHMS = ("graphsage", "ladies")
SPGEMM_BACKENDS = ("fused", "scipy", "torch")
WHO = "sampler 'bulk-matrix'"
_NO_WEIGHTS = np.empty(0, dtype=np.float64)


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


def _per_batch(
    row_ptr: np.ndarray, offsets: np.ndarray, edge_src: np.ndarray, edge_dst: np.ndarray, src: np.ndarray,
    num_src: np.ndarray,
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:  # fmt: skip
    """Per batch views (src, edge_src, edge_dst) of a layer's stacked outputs (layout of the relabel kernels)."""
    k = row_ptr.shape[0] - 1
    edge_ptr = offsets[row_ptr]
    src_start = row_ptr[:-1] + edge_ptr[:-1]
    return (
        [src[src_start[b] : src_start[b] + num_src[b]] for b in range(k)],
        [edge_src[edge_ptr[b] : edge_ptr[b + 1]] for b in range(k)],
        [edge_dst[edge_ptr[b] : edge_ptr[b + 1]] for b in range(k)],
    )


@dataclass(frozen=True)
class LayerStream:
    """Where one minibatch's rows of one layer drew their random numbers in :meth:`BulkMatrixSampler.sample_many`:
    the layer's seed in its bulk chunk, and the chunk's stacked row of the minibatch's first
    destination (its ``r``-th destination is row ``first_row + r``)."""

    seed: int  # a uint64 value
    first_row: int


def its_uniform_rows(
    indptr: np.ndarray, indices: np.ndarray, fanout: int, seeds: np.ndarray, stream_rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Step 2 (ITS) of GraphSAGE on a materialized ``P`` whose rows are uniform (``P = Q A`` with
    ``A``'s rows, in ``A``'s order): row ``r`` keeps ``min(deg, fanout)`` distinct entries drawn from
    the stream of seed ``seeds[r]`` and stacked row ``stream_rows[r]``. Returns the entries kept per
    row and their column ids, row by row in the fused kernel's order."""
    deg = np.diff(indptr).astype(np.int64)
    counts = np.minimum(deg, fanout)
    offsets = offsets_of(counts)
    positions = np.empty(int(offsets[-1]), dtype=np.int64)
    chunks = max(1, min(_kernels.num_threads(), deg.shape[0]))
    _kernels.uniform_positions_rows(
        deg, counts, offsets, np.asarray(seeds, dtype=np.uint64), np.asarray(stream_rows, dtype=np.int64),
        positions, chunks,
    )  # fmt: skip
    starts = np.repeat(np.asarray(indptr[:-1], dtype=np.int64), counts)
    return counts, np.asarray(indices, dtype=np.int64)[starts + positions]


def extract_blocks(
    dst: np.ndarray, batch_ptr: np.ndarray, counts: np.ndarray, picked: np.ndarray, num_nodes: int
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Step 3 of GraphSAGE: per batch ``b`` (stacked rows ``batch_ptr[b]:batch_ptr[b + 1]``, destinations
    ``dst``, ``counts`` entries kept per row, their ids ``picked``), its sources (destinations first)
    and its edges in local ids, as (src, edge_src, edge_dst): the fused back end's relabelling."""
    offsets = offsets_of(counts)
    edges = int(offsets[-1])
    edge_src = np.empty(edges, dtype=np.int64)
    edge_dst = np.empty(edges, dtype=np.int64)
    src = np.empty(edges + dst.shape[0], dtype=np.int64)
    num_src = np.empty(batch_ptr.shape[0] - 1, dtype=np.int64)
    copies = max(1, min(_kernels.num_threads(), num_src.shape[0]))
    with SHARED_WORDS.mappings(num_nodes, copies) as words:
        _kernels.relabel_words_batches(
            batch_ptr, np.asarray(dst, dtype=np.int64), counts, offsets, picked, words, edge_src, edge_dst, src,
            num_src,
        )  # fmt: skip
    return list(zip(*_per_batch(batch_ptr, offsets, edge_src, edge_dst, src, num_src), strict=True))


def _check_torch_device(device: str, spgemm: str) -> str:
    """``torch_device`` as given, checked: a device name torch parses, and only with ``spgemm='torch'``."""
    if not isinstance(device, str):
        raise ConfigError(
            f"{WHO}: torch_device must be a device name such as 'cpu' or 'cuda:0', got {device!r}"
        )
    if spgemm != "torch":
        if device != "cpu":
            raise ConfigError(
                f"{WHO}: torch_device={device!r} belongs to spgemm='torch' (spgemm is {spgemm!r})"
            )
        return device
    import torch

    try:
        torch.device(device)
    except RuntimeError as exc:
        raise ConfigError(
            f"{WHO}: torch_device {device!r} is not a torch device name (e.g. 'cpu', 'cuda', 'cuda:1')"
        ) from exc
    return device


def _as_int64(x: np.uint64) -> int:
    """The int64 with the bits of ``x``: int64 addition and multiplication wrap modulo 2**64 as uint64's do."""
    v = int(x)
    return v - (1 << 64) if v >= 1 << 63 else v


class _TorchSpGEMM:
    """``torch`` sparse CSR products and GraphSAGE's ITS on the device the caller named, operands cached there."""

    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        try:
            torch.empty(0, device=self.device)
        except (RuntimeError, AssertionError) as exc:  # no such device, or torch built without it
            reason = (str(exc).strip().splitlines() or [""])[0]
            raise WorkbenchError(f"{WHO}: torch_device {device!r} is not usable here ({reason})") from exc
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

    def product(self, left: sp.csr_matrix, right: Any) -> tuple[Any, Any, Any]:
        """``left @ right`` on the device: (crow, col, val) of the CSR product, columns sorted in each row."""
        torch = self.torch
        p = torch.sparse.mm(self.to_torch(left), right)
        crow, col, val = p.crow_indices(), p.col_indices(), p.values()
        if col.shape[0] > 1:
            row_of = self.row_of(crow)
            if bool(((col[1:] < col[:-1]) & (row_of[1:] == row_of[:-1])).any()):
                order = torch.argsort(row_of * right.shape[1] + col)
                col, val = col[order], val[order]
        return crow, col, val

    def row_of(self, crow: Any) -> Any:
        """The row of every entry of a CSR tensor with row pointers ``crow``."""
        torch = self.torch
        lengths = crow[1:] - crow[:-1]
        return torch.repeat_interleave(torch.arange(lengths.shape[0], device=self.device), lengths)

    def to_scipy(self, crow: Any, col: Any, val: Any, shape: tuple[int, int]) -> sp.csr_matrix:
        return sp.csr_matrix((val.cpu().numpy(), col.cpu().numpy(), crow.cpu().numpy()), shape=shape)

    def uniforms(self, seed: int, row: Any, draw: Any) -> Any:
        """:func:`._kernels._uniform` on the device: the same splitmix64 numbers, bit for bit.

        int64 arithmetic stands in for uint64 (same bits: addition and multiplication
        wrap modulo 2**64 in both), a logical right shift is an arithmetic one masked
        to the bits a logical shift keeps, and the top 53 bits become a double exactly.
        """
        torch = self.torch

        def shifted(z: Any, k: int) -> Any:
            return (z >> k) & ((1 << (64 - k)) - 1)

        z = seed + row * _as_int64(_kernels._ROW_STRIDE) + (draw + 1) * _as_int64(_kernels._GOLDEN)
        z = (z ^ shifted(z, 30)) * _as_int64(_kernels._MIX1)
        z = (z ^ shifted(z, 27)) * _as_int64(_kernels._MIX2)
        z = z ^ shifted(z, 31)
        return shifted(z, 11).to(torch.float64) * _kernels._TWO_POW_53_INV

    def uniform_positions(self, crow: Any, need: Any, seed: int) -> Any:
        """Step 2 for uniform rows: ``need[r]`` distinct entries of row ``r``, as :func:`._kernels._uniform_positions` draws them.

        Row ``r``'s ``j``-th uniform number ``u`` is the kernel's (:meth:`uniforms`) and
        picks position ``floor(u * deg)``, a repeat is drawn again, a row keeps all of
        its entries when it needs all, and a row of at most 64 entries that keeps more
        than half draws the ones it leaves out. Vectorized in rounds: a round draws, for
        every row, as many numbers as it still misses distinct entries, and keeps each
        new entry at its first draw; a round of ``m`` draws finds at most ``m`` new
        entries, so the rounds use exactly the draws the kernel's loop uses, and keep
        what it keeps. Returns the drawn entries' indices into the CSR arrays, row by
        row, each row in the kernel's order (drawn order; ascending where it keeps all
        or leaves entries out).
        """
        torch = self.torch
        dev = self.device
        lengths = crow[1:] - crow[:-1]
        rows = lengths.shape[0]
        entries = crow[-1]
        row_of = self.row_of(crow)
        keep_all = need == lengths
        leave_out = ~keep_all & (lengths <= 64) & (lengths - need < need)
        want = torch.where(keep_all, 0, torch.where(leave_out, lengths - need, need))
        drawn_entry = torch.zeros(int(entries), dtype=torch.bool, device=dev)
        have = torch.zeros(rows, dtype=torch.int64, device=dev)
        used = torch.zeros(rows, dtype=torch.int64, device=dev)
        row_ids = torch.arange(rows, device=dev)
        kept_entry: list[Any] = []
        kept_draw: list[Any] = []
        while True:
            missing = (want - have).clamp(min=0)
            if not bool((missing > 0).any()):
                break
            r = torch.repeat_interleave(row_ids, missing)
            first_of_row = torch.cumsum(missing, 0) - missing
            draw = used[r] + torch.arange(r.shape[0], device=dev) - first_of_row[r]
            deg = lengths[r]
            t = torch.minimum((self.uniforms(seed, r, draw) * deg.to(torch.float64)).to(torch.int64), deg - 1)
            entry = crow[:-1][r] + t
            # First draw of each entry in this round (draws are in row, then draw order; the sort is stable).
            order = torch.argsort(entry, stable=True)
            sorted_entry = entry[order]
            first = torch.ones_like(sorted_entry, dtype=torch.bool)
            first[1:] = sorted_entry[1:] != sorted_entry[:-1]
            is_first = torch.empty_like(first).scatter_(0, order, first)
            new = is_first & ~drawn_entry[entry]
            drawn_entry[entry[new]] = True
            kept_entry.append(entry[new])
            kept_draw.append(draw[new])
            have += torch.bincount(r[new], minlength=rows)
            used += missing
        # Rows that draw what they keep: their entries in draw order (sort by draw, then stably by row).
        if kept_entry:
            drawn = torch.cat(kept_entry)
            by_draw = torch.argsort(torch.cat(kept_draw), stable=True)
            drawn = drawn[by_draw]
            drawn = drawn[torch.argsort(row_of[drawn], stable=True)]
            drawn = drawn[~leave_out[row_of[drawn]]]
        else:
            drawn = torch.zeros(0, dtype=torch.int64, device=dev)
        # Rows that keep all, or all but the entries drawn: ascending.
        ascending = torch.nonzero(keep_all[row_of] | (leave_out[row_of] & ~drawn_entry)).flatten()
        picked = torch.cat([drawn, ascending])
        return picked[torch.argsort(row_of[picked], stable=True)]


@SAMPLERS.register("bulk-matrix")
class BulkMatrixSampler(Sampler):
    """Matrix-based bulk sampling (SpGEMM + inverse transform sampling) of GraphSAGE or LADIES, k batches at once."""

    def __init__(
        self,
        fanouts: Sequence[int] | None = None,
        algorithm: str = "graphsage",
        layer_sizes: Sequence[int] | None = None,
        bulk: int = 32,
        spgemm: str | None = None,
        torch_device: str = "cpu",
    ) -> None:
        if algorithm not in ALGORITHMS:
            raise ConfigError(f"{WHO}: unknown algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
        if spgemm == "auto":
            raise ConfigError(
                f"{WHO}: spgemm='auto' is gone (it followed the machine); name the back end: "
                f"{', '.join(SPGEMM_BACKENDS)} (default: fused for graphsage, scipy for ladies), and for "
                "a GPU spgemm='torch' with torch_device='cuda'"
            )
        if spgemm is not None and spgemm not in SPGEMM_BACKENDS:
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
                    "algorithm='ladies' needs 'scipy' or 'torch'"
                )
            self.fanouts = None
            self.layer_sizes = check_positive_ints(layer_sizes, "layer_sizes", WHO)
        self.algorithm = algorithm
        self.bulk = check_positive_int(bulk, "bulk", WHO)
        # The default is the algorithm's CPU back end on every machine: a strategy never picks a device.
        self.spgemm = spgemm if spgemm is not None else ("fused" if algorithm == "graphsage" else "scipy")
        self.torch_device = _check_torch_device(torch_device, self.spgemm)
        self._adjacency = NormalizedAdjacencyCache()
        self._binary: tuple[weakref.ref[CSRGraph], sp.csr_matrix] | None = None
        self._narrow: tuple[weakref.ref[CSRGraph], np.ndarray] | None = None
        self._torch: _TorchSpGEMM | None = None
        self._outputs = SHARED_OUTPUTS
        self._scratch = SHARED_MAPPINGS
        self._words = SHARED_WORDS

    def __repr__(self) -> str:
        sizes = (
            f"fanouts={list(self.fanouts)}" if self.fanouts else f"layer_sizes={list(self.layer_sizes or ())}"
        )
        device = f", torch_device={self.torch_device!r}" if self.spgemm == "torch" else ""
        return (
            f"BulkMatrixSampler(algorithm={self.algorithm!r}, {sizes}, bulk={self.bulk}, "
            f"spgemm={self.spgemm!r}{device})"
        )

    @property
    def num_layers(self) -> int:
        return len(self.fanouts or self.layer_sizes or ())

    def backend(self) -> str:
        """The SpGEMM back end: ``spgemm`` as given, else the algorithm's default (the same on every machine)."""
        return self.spgemm

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

    def sample_window(
        self,
        graph: CSRGraph,
        batches: Sequence[np.ndarray],
        rng: np.random.Generator,
        keep: range,
        sizes_before: Sequence[tuple[int, ...]] | None = None,
    ) -> list[Minibatch]:
        """:meth:`Sampler.sample_window` without the work the kept minibatches do not depend on
        (GraphSAGE; LADIES samples every batch). A row's numbers depend on the layer's seed and
        its place in the stacked rows of its bulk pass, so a pass with nothing kept only draws
        its seeds, batches after the last kept one are not sampled, and batches before the
        first kept one are sampled up to the layer before the input layer (their sizes place
        the kept batches' rows): an epoch streamed a window at a time samples each minibatch
        whole once, not once per window. With ``sizes_before`` the batches before the first kept
        one are not sampled at all: their destination counts are all its rows' places need."""
        if self.algorithm != "graphsage" or not len(keep):
            return super().sample_window(graph, batches, rng, keep, sizes_before)
        backend = self.backend()
        out: list[Minibatch] = []
        for start in range(0, len(batches), self.bulk):
            stop = min(keep.stop, start + self.bulk)
            if stop <= max(keep.start, start):
                for _ in range(self.num_layers):
                    _kernels.draw_seed(rng)  # the pass's draws (one seed per layer); nothing kept from it
                continue
            first_kept = max(keep.start - start, 0)
            if sizes_before is not None and first_kept:
                # Each layer's stacked rows before the first kept batch, from the counts drawn before.
                rows_before = np.sum([sizes_before[b] for b in range(start, start + first_kept)], axis=0)
                chunk = [check_seeds(graph, b) for b in batches[start + first_kept : stop]]
                out.extend(self._sample_graphsage(graph, chunk, rng, backend, 0, rows_before.tolist()))
                continue
            chunk = [check_seeds(graph, b) for b in batches[start:stop]]
            out.extend(self._sample_graphsage(graph, chunk, rng, backend, first_kept))
        return out

    def graphsage_streams(
        self, minibatches: Sequence[Minibatch], rng: np.random.Generator
    ) -> list[tuple[LayerStream, ...]]:
        """Per minibatch, per block (input layer first), the random stream its rows drew from when
        :meth:`sample_many` sampled ``minibatches`` (GraphSAGE) from ``rng`` in one call: the same
        draws from ``rng`` (one seed per layer of each bulk chunk, seeds outwards) and the same
        stacking of each chunk's rows. ``rng`` ends where :meth:`sample_many` left it."""
        if self.algorithm != "graphsage":
            raise ConfigError(
                f"{WHO}: random streams per row are GraphSAGE's; algorithm is {self.algorithm!r}"
            )
        out: list[tuple[LayerStream, ...]] = []
        for start in range(0, len(minibatches), self.bulk):
            chunk = minibatches[start : start + self.bulk]
            layers = len(chunk[0].blocks)
            per: list[list[LayerStream]] = [[] for _ in chunk]
            for layer in range(layers - 1, -1, -1):
                seed = int(_kernels.draw_seed(rng))
                first = offsets_of(np.array([mb.blocks[layer].num_dst for mb in chunk], dtype=np.int64))
                for b in range(len(chunk)):
                    per[b].append(LayerStream(seed, int(first[b])))
            out.extend(tuple(streams[::-1]) for streams in per)
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
            self._torch = _TorchSpGEMM(self.torch_device)
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

    def _graphsage_layer(
        self, graph: CSRGraph, dst: np.ndarray, row_ptr: np.ndarray, fanout: int, rng: np.random.Generator,
        backend: str, mappings: np.ndarray, first_row: int = 0,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:  # fmt: skip
        """One layer of all stacked batches: per batch (src, edge_src, edge_dst). ``first_row``:
        the stacked row ``dst[0]`` is (rows before it were left out), whose numbers its rows draw."""
        seed = _kernels.stream_from(_kernels.draw_seed(rng), first_row)
        copies = mappings.shape[0]  # scratch rows: one per thread that gets batches
        if backend == "fused":
            # Step 1 without P: row i of P = Q A is row dst[i] of A, read in place.
            cols = self._columns(graph)
            return self._uniform_layer(dst, graph.indptr, cols, dst, row_ptr, fanout, seed, graph, copies)
        # Step 1 with P materialized. Its rows are uniform (values 1 / deg) unless the SpGEMM
        # merged duplicate edges of a row into one heavier entry: then P has fewer entries.
        uniform_entries = int(np.sum(graph.indptr[dst + 1] - graph.indptr[dst]))
        q = selection_matrix(dst, graph.num_nodes)
        if backend == "torch":
            engine = self._torch_backend()
            crow, col, val = engine.product(q, engine.operand("A", graph, self._binary_adjacency(graph)))
            if int(crow[-1]) == uniform_entries:
                return self._uniform_layer_torch(engine, crow, col, dst, row_ptr, fanout, seed, graph, copies)
            p = engine.to_scipy(crow, col, val, (q.shape[0], graph.num_nodes))
        else:
            p = sp.csr_matrix(q @ self._binary_adjacency(graph))
            p.sort_indices()
            if p.nnz == uniform_entries:
                rows = np.arange(dst.shape[0], dtype=np.int64)
                indptr = p.indptr.astype(np.int64)
                return self._uniform_layer(rows, indptr, p.indices, dst, row_ptr, fanout, seed, graph, copies)
        return self._weighted_layer(row_normalize(p), dst, row_ptr, fanout, seed, mappings)

    def _uniform_layer(
        self, row_of: np.ndarray, indptr: np.ndarray, cols: np.ndarray, dst: np.ndarray, row_ptr: np.ndarray,
        fanout: int, seed: np.uint64, graph: CSRGraph, copies: int,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:  # fmt: skip
        """Steps 2 and 3 on the host, uniform rows: stacked row ``i`` is ``cols[indptr[row_of[i]]:indptr[row_of[i] + 1]]``."""
        # Each row's extent once, in one pass (scratch from the pool).
        begin = self._outputs.empty(dst.shape[0])
        deg = self._outputs.empty(dst.shape[0])
        counts = _kernels.row_extents(row_of, indptr, fanout, begin, deg)
        offsets = offsets_of(counts)
        edge_src, edge_dst, src, num_src = self._layer_outputs(offsets, dst, row_ptr)
        # Steps 2 (ITS) and 3 (extraction: dropping each batch's empty columns = local ids), per batch.
        with self._words.mappings(graph.num_nodes, copies) as words:
            _kernels.uniform_its_relabel_batches(
                row_ptr, dst, begin, deg, cols, counts, offsets, seed, edge_src, edge_dst, src, num_src, words,
            )  # fmt: skip
        return _per_batch(row_ptr, offsets, edge_src, edge_dst, src, num_src)

    def _uniform_layer_torch(
        self, engine: _TorchSpGEMM, crow: Any, col: Any, dst: np.ndarray, row_ptr: np.ndarray, fanout: int,
        seed: np.uint64, graph: CSRGraph, copies: int,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:  # fmt: skip
        """Step 2 on the torch device (the fused kernel's draws), step 3 on the host."""
        need = (crow[1:] - crow[:-1]).clamp(max=fanout)
        picked = (
            col[engine.uniform_positions(crow, need, int(seed))].cpu().numpy().astype(np.int64, copy=False)
        )
        counts = need.cpu().numpy().astype(np.int64, copy=False)
        offsets = offsets_of(counts)
        edge_src, edge_dst, src, num_src = self._layer_outputs(offsets, dst, row_ptr)
        with self._words.mappings(graph.num_nodes, copies) as words:
            _kernels.relabel_words_batches(
                row_ptr, dst, counts, offsets, picked, words, edge_src, edge_dst, src, num_src
            )
        return _per_batch(row_ptr, offsets, edge_src, edge_dst, src, num_src)

    def _weighted_layer(
        self, p: sp.csr_matrix, dst: np.ndarray, row_ptr: np.ndarray, fanout: int, seed: np.uint64,
        mappings: np.ndarray,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:  # fmt: skip
        """Steps 2 and 3 on the host for a row-normalized ``P`` whose rows are not uniform (a multigraph's)."""
        rows = np.arange(dst.shape[0], dtype=np.int64)
        indptr = p.indptr.astype(np.int64)
        cols = p.indices.astype(np.int64)
        counts = _kernels.indexed_row_counts(rows, indptr, p.data, fanout)
        offsets = offsets_of(counts)
        edge_src, edge_dst, src, num_src = self._layer_outputs(offsets, dst, row_ptr)
        _kernels.its_relabel_batches(
            row_ptr, dst, rows, indptr, cols, p.data, counts, offsets, seed, edge_src, edge_dst, src, num_src,
            mappings,
        )  # fmt: skip
        return _per_batch(row_ptr, offsets, edge_src, edge_dst, src, num_src)

    def _layer_outputs(
        self, offsets: np.ndarray, dst: np.ndarray, row_ptr: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Stacked outputs, one array per kind for all k batches (views per batch), from a pool
        that recycles them once the caller has dropped every minibatch viewing them."""
        edge_src = self._outputs.empty(offsets[-1])
        edge_dst = self._outputs.empty(offsets[-1])
        src = self._outputs.empty(offsets[-1] + dst.shape[0])
        return edge_src, edge_dst, src, np.empty(row_ptr.shape[0] - 1, dtype=np.int64)

    def _sample_graphsage(
        self, graph: CSRGraph, batches: list[np.ndarray], rng: np.random.Generator, backend: str,
        first_kept: int = 0, rows_before: list[int] | None = None,
    ) -> list[Minibatch]:  # fmt: skip
        """One bulk pass over ``batches``; the minibatches from ``first_kept`` on (the batches
        before it are sampled only as far as the kept ones' stacked rows depend on them).
        ``rows_before``: per layer (input first), the pass's stacked rows before ``batches[0]``,
        which is then not the pass's first batch."""
        assert self.fanouts is not None
        k = len(batches)
        row_ptr = offsets_of(np.array([b.shape[0] for b in batches], dtype=np.int64))
        dst_of = list(batches)
        per_batch: list[list[Block]] = [[] for _ in range(k)]
        with self._scratch.mappings(graph.num_nodes, max(1, min(_kernels.num_threads(), k))) as mappings:
            self._graphsage_layers(
                graph, first_kept, row_ptr, dst_of, rng, backend, mappings, per_batch, rows_before
            )
        return [Minibatch(seeds=batches[b], blocks=per_batch[b][::-1]) for b in range(first_kept, k)]

    def _graphsage_layers(
        self, graph: CSRGraph, first_kept: int, row_ptr: np.ndarray, dst_of: list[np.ndarray],
        rng: np.random.Generator, backend: str, mappings: np.ndarray, per_batch: list[list[Block]],
        rows_before: list[int] | None = None,
    ) -> None:  # fmt: skip
        assert self.fanouts is not None
        k = len(dst_of)
        for layer in range(len(self.fanouts) - 1, -1, -1):
            lo = first_kept if layer == 0 else 0  # no later layer needs the left-out batches' input layer
            base = int(row_ptr[lo])
            first_row = base + (rows_before[layer] if rows_before is not None else 0)
            dst = np.concatenate(dst_of[lo:])
            srcs, edge_srcs, edge_dsts = self._graphsage_layer(
                graph, dst, row_ptr[lo:] - base, self.fanouts[layer], rng, backend, mappings, first_row
            )
            for b in range(lo, k):
                per_batch[b].append(
                    Block(
                        src_nodes=srcs[b - lo], dst_nodes=dst_of[b], edge_src=edge_srcs[b - lo],
                        edge_dst=edge_dsts[b - lo],
                    )
                )  # fmt: skip
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
