"""Degree statistics for reports and ``gnnwb datasets show``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.graph.csr import CSRGraph


@dataclass(frozen=True)
class DegreeStats:
    mean: float
    median: float
    p99: float
    max: int
    isolated: int
    # (low, high, count) per log2 bin: degree 0, 1, 2-3, 4-7, ...
    histogram: list[tuple[int, int, int]]
    tail_exponent: float | None  # Hill estimate of the power-law exponent over degrees >= tail_from
    tail_from: int


def degree_stats(graph: CSRGraph) -> DegreeStats:
    """In-degree statistics (for a symmetric graph, in and out coincide)."""
    deg = graph.in_degrees()
    if deg.size == 0:
        return DegreeStats(0.0, 0.0, 0.0, 0, 0, [], None, 0)
    bins = np.zeros(deg.size, dtype=np.int64)
    positive = deg > 0
    bins[positive] = np.floor(np.log2(deg[positive])).astype(np.int64) + 1
    counts = np.bincount(bins)
    histogram = []
    for b, count in enumerate(counts.tolist()):
        if count:
            low = 0 if b == 0 else 2 ** (b - 1)
            high = 0 if b == 0 else 2**b - 1
            histogram.append((low, high, count))
    tail_from = max(2, int(np.ceil(np.percentile(deg, 90))))
    return DegreeStats(
        mean=float(deg.mean()),
        median=float(np.median(deg)),
        p99=float(np.percentile(deg, 99)),
        max=int(deg.max()),
        isolated=int(np.count_nonzero((deg == 0) & (graph.out_degrees() == 0))),
        histogram=histogram,
        tail_exponent=hill_exponent(deg, tail_from),
        tail_from=tail_from,
    )


def hill_exponent(degrees: np.ndarray, d_min: int) -> float | None:
    """Maximum-likelihood exponent of a discrete power-law tail above ``d_min`` (Clauset et al. 2009, eq. 3.7).

    ``d_min`` is taken as given (the 90th percentile in :func:`degree_stats`), not fitted;
    the figure says "heavy tail, roughly this steep", not more. ``None`` with < 50 tail points.
    """
    tail = degrees[degrees >= d_min].astype(np.float64)
    if tail.size < 50:
        return None
    return float(1.0 + tail.size / np.sum(np.log(tail / (d_min - 0.5))))
