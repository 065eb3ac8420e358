"""``roc``: ROC's online linear-regression partitioner (paper 000, Section 4, Table 2, Eq. 4-7).

**Features (Table 2).** For a vertex ``v`` with in-neighbor list ``N(v)`` (a CSR row),
split into maximal runs of consecutively numbered vertices ``C(v) = {c_1, ..., c_|C|}``
(the paper's example: neighbors ``{1, 3, 4, 6, 8}`` minus the example's ``v_1`` read as
``{3, 4}, {6}, {8}``: three runs):

    x1(v) = 1                                  the vertex itself
    x2(v) = |N(v)|                             in-degree
    x3(v) = |C(v)|                             runs ("continuity of neighbors")
    x4(v) = sum_i ceil(|c_i| / WS)             memory accesses to load the neighbor ids
    x5(v) = sum_i ceil(|c_i| * d_in / WS)      memory accesses to load their input activations

``WS`` is the warp size (32). ``d_in`` is the width of the activations the layer reads
(the layer's input dimension): a run of ``|c_i|`` consecutive neighbors is one block of
``|c_i| * d_in`` contiguous floats, loaded by coalesced warp accesses. So ``x5`` is the
only feature that depends on the layer, and when ``d_in`` is a multiple of 32 it is
exactly ``d_in / 32 * x2`` (the paper's definition; the regression then cannot tell
``w2`` from ``w5`` apart, only their combination, which is all a split needs). Runs are
counted in stored order: rows are sorted by construction here, and an unsorted row is
what a GPU would coalesce anyway. A duplicate neighbor starts a new run.

**Cost model (Eq. 4-7).** ROC keeps one linear model per GNN layer ``l``: the time of
layer ``l`` on any vertex set ``G`` is ``t(l, G) = sum_i w_i(l) x_i(G)``, ``x_i(G)`` the
sum of feature ``i`` over ``G``; each layer's weights minimize the squared error over all
its measurements so far (every iteration gives layers x parts points). ``in_dims`` lists
``d_in`` for each layer; the part split balances the predicted time of a whole pass,
``sum_l t(l, range)`` (one split serves all layers).

We fit with **non-negative** least squares (scipy's ``nnls``) rather than the paper's
plain least squares. Every feature counts work (vertices, edges, memory accesses) whose
time cannot be negative, and the features are strongly correlated (``x5`` is nearly a
multiple of ``x2``; ``x3`` and ``x4`` agree whenever runs are shorter than a warp), so an
unconstrained fit can trade a large positive weight for a negative one. A negative
weight can make a vertex's predicted cost negative, the prefix cost then is not
monotone, and the binary search below would no longer find balanced splits. When the
unconstrained optimum is non-negative (as for times that a non-negative model produced)
both fits agree. Columns are scaled to unit maximum before the fit and scaled back.

**Split rule (Section 4.2).** Parts are contiguous vertex ranges, part ``i`` being
``[p_i, p_{i+1})`` with ``p_0 = 0`` and ``p_N = V``. With ``C(p)`` the predicted cost of
``[0, p)`` (prefix sums of each feature, so ``C(p) = sum_j W_j P_j[p]`` is ``O(1)`` per
``p`` and non-decreasing) and ``T = C(V)``: for ``i = 1 .. N-1``, let ``q_i`` be the
first ``p`` with ``C(p) >= i T / N`` (binary search, ``O(log V)``); ``p_i`` is whichever
of ``q_i - 1`` and ``q_i`` has ``C`` nearer to ``i T / N``, ``q_i`` on a tie. Rounding
to the nearest, instead of always taking ``q_i``, keeps a heavy vertex from always
landing in the earlier part. Then, so that no part is empty, ``p_i`` is clipped to
``[i, V - N + i]`` and raised to at least ``p_{i-1} + 1``. After the ``O(E)`` feature pass
(one compiled pass, cached per graph) a split costs ``O(N log V)``.

**Before the model exists** (a layer with fewer measurements than the 5 features and no
initial ``weights``), or when the model predicts zero cost for the whole graph, the split
falls back to equal-edge: the same rule with ``C(p)`` the number of in-edges of
``[0, p)`` (on a graph without edges, the number of vertices: equal-vertex).
``details`` holds ``fallback`` (True/False) and, when True, ``fallback_to`` and
``fallback_reason``; always the current ``weights`` (per layer, None where unknown),
``in_dims`` and the ``observations`` per layer.

**Measurements** come back through :meth:`RocPartitioner.observe` as
:class:`RangeMeasurement` records (graph, vertex range, layer, seconds): an executor
that ran parts ``[p_i, p_{i+1})`` and timed each layer on each builds them with
:meth:`RangeMeasurement.from_partition`. Measurements on other graphs count too: that is
how ROC partitions a new inference graph with a model learned in training.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from scipy.optimize import nnls

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS
from workbench.strategies.partition.base import (
    Partitioner,
    PartitionResult,
    check_num_parts,
    contiguous_owner,
)

WARP_SIZE = 32
NUM_FEATURES = 5
FEATURE_NAMES = ("vertex", "in_edges", "runs", "neighbor_loads", "activation_loads")
# Prefix tables cached per partitioner (a study alternates a few graphs at most).
_CACHED_GRAPHS = 4


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def feature_prefix(graph: CSRGraph, in_dims: Sequence[int], warp_size: int = WARP_SIZE) -> np.ndarray:
    """Prefix sums of Table 2's features over vertices: an int64 ``(V + 1, 4 + L)`` table.

    Row ``p`` sums vertices ``[0, p)``. Columns 0-3 are ``x1 .. x4``; column ``4 + l`` is
    ``x5`` for layer ``l`` (input width ``in_dims[l]``). A range's features are the
    difference of two rows.
    """
    n = graph.num_nodes
    dims = np.asarray([int(d) for d in in_dims], dtype=np.int64)
    table = np.zeros((n + 1, 4 + dims.size), dtype=np.int64)
    table[:, 0] = np.arange(n + 1, dtype=np.int64)
    table[:, 1] = graph.indptr
    # One pass over the rows: the vectorized form allocated several edge-sized
    # temporaries, and their page faults made it 0.5-1.9 s on products-like.
    _row_runs(graph.indptr, graph.indices, int(warp_size), dims, table[1:, 2:])
    np.cumsum(table[:, 2:], axis=0, out=table[:, 2:])
    return table


@numba.njit(cache=True, nogil=True)
def _row_runs(
    indptr: np.ndarray, indices: np.ndarray, warp: int, dims: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Per vertex: runs, neighbor loads, and per layer activation loads, into ``out`` (V, 2 + L)."""
    layers = dims.size
    for v in range(indptr.size - 1):
        lo = indptr[v]
        hi = indptr[v + 1]
        if lo == hi:
            continue
        run = 1
        for j in range(lo + 1, hi + 1):
            # A run ends at the row's end or where a neighbor is not its predecessor + 1.
            if j < hi and indices[j] == indices[j - 1] + 1:
                run += 1
                continue
            out[v, 0] += 1
            out[v, 1] += (run + warp - 1) // warp
            for layer in range(layers):
                out[v, 2 + layer] += (run * dims[layer] + warp - 1) // warp
            run = 1


def layer_columns(layer: int) -> list[int]:
    """The prefix-table columns holding ``x1 .. x5`` of ``layer``."""
    return [0, 1, 2, 3, 4 + layer]


def vertex_features(graph: CSRGraph, in_dim: int, warp_size: int = WARP_SIZE) -> np.ndarray:
    """Table 2's ``x1 .. x5`` of every vertex for one layer reading ``in_dim``-wide activations: ``(V, 5)``."""
    return np.diff(feature_prefix(graph, [in_dim], warp_size), axis=0)


def balanced_boundaries(table: np.ndarray, weights: np.ndarray, num_parts: int) -> np.ndarray:
    """Split points ``p_0 = 0 < p_1 < ... < p_N = V`` by the module's split rule.

    ``table`` holds prefix sums (row ``p`` covers ``[0, p)``), ``weights`` one
    non-negative weight per column, so ``C(p) = table[p] @ weights`` is non-decreasing.
    All ``N - 1`` binary searches run together: ``O(N log V)`` work.
    """
    n = table.shape[0] - 1
    k = num_parts
    w = np.asarray(weights, dtype=np.float64)

    def cost(p: np.ndarray) -> np.ndarray:
        return table[p].astype(np.float64) @ w

    total = float(cost(np.array([n]))[0])
    targets = total * np.arange(1, k, dtype=np.float64) / k
    lo = np.zeros(k - 1, dtype=np.int64)
    hi = np.full(k - 1, n, dtype=np.int64)  # C(V) = T >= every target
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        reached = cost(mid) >= targets
        hi = np.where(reached, mid, hi)
        lo = np.where(reached, lo, mid + 1)
    first = lo
    before = np.maximum(first - 1, 0)
    take_before = (first > 0) & (targets - cost(before) < cost(first) - targets)
    cut = np.where(take_before, before, first)
    # Nonempty parts: p_i in [i, V - N + i] and p_i >= p_{i-1} + 1, i.e. p_i - i non-decreasing.
    i = np.arange(1, k, dtype=np.int64)
    cut = np.clip(cut, i, n - k + i)
    cut = i + np.maximum.accumulate(cut - i) if k > 1 else cut
    return np.concatenate([[0], cut, [n]]).astype(np.int64)


def _check_weight_row(row: Any, where: str) -> np.ndarray:
    try:
        w = np.asarray(row, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: weights must be numbers, got {row!r}") from None
    if w.shape != (NUM_FEATURES,):
        raise ConfigError(
            f"{where}: weights need {NUM_FEATURES} numbers (x1..x5: {', '.join(FEATURE_NAMES)}), "
            f"got {w.size}: {row!r}"
        )
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError(f"{where}: weights must be finite and non-negative, got {w.tolist()}")
    if not np.any(w > 0):
        raise ConfigError(f"{where}: at least one weight must be positive, got {w.tolist()}")
    return w


@dataclass(frozen=True, eq=False)
class RangeMeasurement:
    """The measured time of one GNN layer on the contiguous vertex range ``[start, end)`` of ``graph``."""

    graph: CSRGraph
    start: int
    end: int
    seconds: float
    layer: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.graph, CSRGraph):
            raise ConfigError(f"roc measurement: graph must be a CSRGraph, got {type(self.graph).__name__}")
        n = self.graph.num_nodes
        if not (_is_int(self.start) and _is_int(self.end)) or not 0 <= self.start < self.end <= n:
            raise ConfigError(
                f"roc measurement: range [{self.start!r}, {self.end!r}) is not a nonempty range of "
                f"integers inside [0, {n}) of graph {self.graph.name!r}"
            )
        if not _is_int(self.layer) or self.layer < 0:
            raise ConfigError(f"roc measurement: layer must be a non-negative integer, got {self.layer!r}")
        try:
            secs = float(self.seconds)
        except (TypeError, ValueError):
            raise ConfigError(f"roc measurement: seconds must be a number, got {self.seconds!r}") from None
        if not math.isfinite(secs) or secs < 0:
            raise ConfigError(f"roc measurement: seconds must be finite and non-negative, got {secs!r}")

    @classmethod
    def from_partition(
        cls, result: PartitionResult, seconds: Sequence[float] | np.ndarray, layer: int | None = None
    ) -> list[RangeMeasurement]:
        """Measurements for the contiguous parts of ``result``.

        ``seconds`` is per part (``(P,)``, for ``layer``, default 0) or per layer and part
        (``(L, P)``, row ``l`` for layer ``l``; then ``layer`` must be None). Parts must be
        ranges in part order (owner non-decreasing, as ``roc``, equal-vertex and equal-edge
        give); empty parts are skipped.
        """
        owner = result.owner
        if owner.size and np.any(np.diff(owner) < 0):
            raise ConfigError(
                f"roc measurement: partition {result.strategy!r} is not contiguous ranges in part order"
            )
        try:
            secs = np.asarray(seconds, dtype=np.float64)
        except (TypeError, ValueError):
            raise ConfigError(f"roc measurement: seconds must be numbers, got {seconds!r}") from None
        if secs.ndim == 1:
            secs = secs[None, :]
            layers = [0 if layer is None else layer]
        elif secs.ndim == 2 and layer is None:
            layers = list(range(secs.shape[0]))
        else:
            raise ConfigError(
                f"roc measurement: seconds must be (parts,) or (layers, parts) with layer=None, "
                f"got shape {secs.shape} and layer={layer!r}"
            )
        if secs.shape[1] != result.num_parts:
            raise ConfigError(
                f"roc measurement: {secs.shape[1]} times for the {result.num_parts} parts of {result.strategy!r}"
            )
        bounds = np.searchsorted(owner, np.arange(result.num_parts + 1), side="left")
        return [
            cls(result.graph, int(bounds[p]), int(bounds[p + 1]), float(row[p]), lay)
            for lay, row in zip(layers, secs, strict=True)
            for p in range(result.num_parts)
            if bounds[p + 1] > bounds[p]
        ]


@PARTITIONERS.register("roc")
class RocPartitioner(Partitioner):
    """ROC's learned contiguous split (see the module docstring for features, fit and split rule).

    ``weights``: optional initial model, ``x1 .. x5`` weights (seconds per unit of each
    feature), one list for every layer or one list per layer; measurements replace a
    layer's initial weights once it has at least 5 of them. ``in_dims``: each layer's
    input activation width ``d_in`` (the length is the number of layers; default one
    128-wide layer). ``warp_size``: ``WS`` in ``x4`` and ``x5``.
    """

    def __init__(
        self,
        # A string ("1,1,2,1,0.5", layers split by ";") is what a command line gives.
        weights: Sequence[float] | Sequence[Sequence[float]] | str | None = None,
        in_dims: int | Sequence[int] | str = (128,),
        warp_size: int = WARP_SIZE,
    ) -> None:
        if isinstance(in_dims, str):  # "100,128" from a command line
            in_dims = [int(d) if d.strip().isdigit() else d for d in in_dims.split(",")]  # type: ignore[misc]
        dims = [in_dims] if _is_int(in_dims) else list(in_dims)  # type: ignore[arg-type]
        if not dims or not all(_is_int(d) and d > 0 for d in dims):
            raise ConfigError(f"partitioner 'roc': in_dims must be positive integers, got {in_dims!r}")
        if not _is_int(warp_size) or warp_size < 1:
            raise ConfigError(f"partitioner 'roc': warp_size must be a positive integer, got {warp_size!r}")
        self.in_dims = tuple(int(d) for d in dims)
        self.warp_size = int(warp_size)
        num_layers = len(self.in_dims)
        self._seed: list[np.ndarray | None] = [None] * num_layers
        if isinstance(weights, str):  # "w1,..,w5" or "layer0;layer1" from a command line
            layers = [part.split(",") for part in weights.split(";")]
            weights = layers if len(layers) > 1 else layers[0]  # type: ignore[assignment]
        if weights is not None:
            rows = list(weights)
            if rows and all(isinstance(r, (Sequence, np.ndarray)) and not isinstance(r, str) for r in rows):
                if len(rows) != num_layers:
                    raise ConfigError(
                        f"partitioner 'roc': {len(rows)} weight lists for {num_layers} layers (in_dims)"
                    )
                self._seed = [
                    _check_weight_row(r, f"partitioner 'roc' layer {i}") for i, r in enumerate(rows)
                ]
            else:
                row = _check_weight_row(rows, "partitioner 'roc'")
                self._seed = [row.copy() for _ in range(num_layers)]
        self._features: list[list[np.ndarray]] = [[] for _ in range(num_layers)]
        self._seconds: list[list[float]] = [[] for _ in range(num_layers)]
        self._fitted: list[np.ndarray | None] = [None] * num_layers
        self._tables: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    # ---- the model ---------------------------------------------------------
    @property
    def weights(self) -> list[np.ndarray | None]:
        """Each layer's current ``x1 .. x5`` weights: fitted, else initial, else None."""
        return [fit if fit is not None else seed for fit, seed in zip(self._fitted, self._seed, strict=True)]

    def observation_counts(self) -> list[int]:
        return [len(s) for s in self._seconds]

    def prefix_table(self, graph: CSRGraph) -> np.ndarray:
        """``feature_prefix`` of ``graph`` for this partitioner's layers, cached by the graph's arrays."""
        key = (id(graph.indptr), id(graph.indices))
        hit = self._tables.get(key)
        if hit is not None and hit[0] is graph.indptr and hit[1] is graph.indices:
            return hit[2]
        table = feature_prefix(graph, self.in_dims, self.warp_size)
        if len(self._tables) >= _CACHED_GRAPHS:
            self._tables.pop(next(iter(self._tables)))
        # Holding the arrays keeps their ids from being reused while cached.
        self._tables[key] = (graph.indptr, graph.indices, table)
        return table

    def range_features(self, graph: CSRGraph, start: int, end: int, layer: int = 0) -> np.ndarray:
        """``x1(G) .. x5(G)`` of layer ``layer`` for the vertex range ``G = [start, end)``."""
        table = self.prefix_table(graph)
        return (table[end, layer_columns(layer)] - table[start, layer_columns(layer)]).astype(np.float64)

    def observe(self, measurements: RangeMeasurement | Iterable[RangeMeasurement]) -> None:
        """Add measured (range, layer, seconds) points and refit the layers they belong to."""
        items = [measurements] if isinstance(measurements, RangeMeasurement) else measurements
        try:
            items = list(items)
        except TypeError:
            raise ConfigError(
                f"roc observe: expected RangeMeasurement records, got {type(measurements).__name__}"
            ) from None
        for i, m in enumerate(items):
            if not isinstance(m, RangeMeasurement):
                raise ConfigError(
                    f"roc observe: item {i} is a {type(m).__name__}, not a RangeMeasurement "
                    "(build them with RangeMeasurement(graph, start, end, seconds, layer) "
                    "or RangeMeasurement.from_partition)"
                )
            if m.layer >= len(self.in_dims):
                raise ConfigError(
                    f"roc observe: item {i} is for layer {m.layer}, but the model has "
                    f"{len(self.in_dims)} layer(s) (in_dims={list(self.in_dims)})"
                )
        touched = set()
        for m in items:
            self._features[m.layer].append(self.range_features(m.graph, m.start, m.end, m.layer))
            self._seconds[m.layer].append(float(m.seconds))
            touched.add(m.layer)
        for layer in touched:
            self._refit(layer)

    def _refit(self, layer: int) -> None:
        if len(self._seconds[layer]) < NUM_FEATURES:
            return
        x = np.vstack(self._features[layer])
        y = np.asarray(self._seconds[layer], dtype=np.float64)
        # Unit-maximum columns and target: the features span orders of magnitude (x1 vs x5).
        col_scale = np.abs(x).max(axis=0)
        col_scale[col_scale == 0] = 1.0
        y_scale = float(np.abs(y).max()) or 1.0
        w_scaled, _ = nnls(x / col_scale, y / y_scale)
        self._fitted[layer] = w_scaled * y_scale / col_scale

    # ---- the split ---------------------------------------------------------
    def partition(self, graph: CSRGraph, num_parts: int, rng: np.random.Generator) -> PartitionResult:
        k = check_num_parts(graph, num_parts, "roc")
        n = graph.num_nodes
        weights = self.weights
        details: dict[str, Any] = {
            "weights": [None if w is None else [float(x) for x in w] for w in weights],
            "in_dims": list(self.in_dims),
            "observations": self.observation_counts(),
        }
        missing = [layer for layer, w in enumerate(weights) if w is None]
        reason = ""
        if missing:
            reason = (
                f"no cost model for layer(s) {missing}: fewer than {NUM_FEATURES} measurements "
                "and no initial weights"
            )
        else:
            table = self.prefix_table(graph)
            combined = np.zeros(table.shape[1], dtype=np.float64)
            for layer, w in enumerate(weights):
                combined[layer_columns(layer)] += w  # type: ignore[index]
            total = float(table[n].astype(np.float64) @ combined)
            if total > 0:
                bounds = balanced_boundaries(table, combined, k)
                part_cost = np.diff(table[bounds].astype(np.float64) @ combined)
                details["fallback"] = False
                details["predicted_balance"] = float(part_cost.max() / part_cost.mean())
            else:
                reason = "the model predicts zero cost for the whole graph"
        if reason:
            details["fallback"] = True
            if graph.num_edges:
                details["fallback_to"] = "equal-edge"
                bounds = balanced_boundaries(graph.indptr[:, None], np.ones(1), k)
            else:
                details["fallback_to"] = "equal-vertex"
                bounds = balanced_boundaries(np.arange(n + 1, dtype=np.int64)[:, None], np.ones(1), k)
            details["fallback_reason"] = reason
        return PartitionResult(graph, contiguous_owner(bounds, n), k, "roc", details=details)
