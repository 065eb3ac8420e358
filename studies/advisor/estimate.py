"""An epoch's simulated time from a prefix of its iterations, with the interval its variation gives.

A candidate's first ``r`` iterations are simulated alone (the plan of ``r`` iterations, not a
window of the whole epoch). Iteration ``k``'s increment is the moment its last task ends minus
the moment iteration ``k - 1``'s last did (the first from the start); the increments sum to the
makespan even where iterations overlap (:mod:`sim.sampled` uses the same). In a prefix, the first
increment is the cold start (nothing prefetched yet) and the last is a tail (no later iteration's
prefetch competes with it), exactly as the whole epoch's first and last are. So the estimate keeps
both as they are and extrapolates only the middle::

    epoch = first + (N - 2) * mean(middle) + last

The middle increments are a sample of the epoch's ``N - 2``. Measured on the crossover grid's
graphs, they alternate with period two under prefetching (a step that samples ahead, then one that
does not: model-centric on 4 A100s 5.4, 3.1, 5.4, 3.1 ms), so a single increment's spread says
nothing about the mean's; the sample unit is a **block** of ``BLOCK`` consecutive middle increments,
as :mod:`sim.sampled` samples blocks. The interval on the blocks' mean is Student's t with the finite
population correction; with fewer than two blocks there is no spread to measure and the half-width
is NaN (the search then judges by its bias margin alone); once ``r = N`` the estimate is the
simulated epoch itself. The first prefix estimates were 3-24% low when they averaged over the tail,
which is why the tail is kept apart.

A **two-iteration** prefix (the search's screening rung) has no middle: its second increment stands
for all ``N - 1`` after the cold first. It sees one phase of whatever pattern the increments follow
and its tail has no later prefetch competing with it (model-centric on the 8-P100 PCIe tree: 1.75 ms
where the epoch's mean is 2.84), so it is a coarse figure with no interval of its own, low far more
often than high; the search uses it as a lower bound only (:data:`studies.advisor.search.BIAS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

CONFIDENCE = 0.95
BLOCK = 2


@dataclass(frozen=True)
class Estimate:
    """The epoch time an ``iterations``-long prefix of an ``epoch_iterations`` epoch predicts."""

    epoch_s: float
    half_width_s: float  # from the variation of the middle increments (0 when exact)
    iterations: int  # simulated
    epoch_iterations: int

    @property
    def exact(self) -> bool:
        return self.iterations >= self.epoch_iterations

    @property
    def low_s(self) -> float:
        return self.epoch_s - self.half_width_s

    @property
    def high_s(self) -> float:
        return self.epoch_s + self.half_width_s


def increments(trace: pd.DataFrame) -> np.ndarray:
    """Each iteration's increment of the makespan, in iteration order."""
    if trace.empty:
        return np.zeros(0)
    ends = trace.groupby("iteration")["end"].max().sort_index().to_numpy(dtype=float)
    ends = np.maximum.accumulate(ends)
    return np.diff(np.concatenate([[0.0], ends]))


def t_quantile(dof: int, confidence: float = CONFIDENCE) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, dof))


def from_prefix(trace: pd.DataFrame, epoch_iterations: int) -> Estimate:
    """The estimate of the epoch from the trace of its first iterations (see the module docstring)."""
    inc = increments(trace)
    r = len(inc)
    n = epoch_iterations
    if r >= n:
        return Estimate(float(inc.sum()), 0.0, r, n)
    if r < 2:
        raise ValueError(
            f"a prefix of {r} iteration(s) has nothing after the cold start to extrapolate (need 2)"
        )
    if r == 2:
        return Estimate(float(inc[0] + (n - 1) * inc[1]), math.nan, r, n)
    middle = inc[1:-1]
    epoch = float(inc[0] + (n - 2) * middle.mean() + inc[-1])
    blocks = middle[: len(middle) // BLOCK * BLOCK].reshape(-1, BLOCK).sum(axis=1)
    k = len(blocks)
    if k < 2:
        return Estimate(epoch, math.nan, r, n)  # one block: no variation to measure yet
    fpc = math.sqrt(max(0.0, 1 - k * BLOCK / (n - 2)))
    sd = float(blocks.std(ddof=1))
    half = t_quantile(k - 1) * sd / math.sqrt(k) * fpc * (n - 2) / BLOCK
    return Estimate(epoch, half, r, n)
