"""Sampled simulation: an epoch's time from a stratified sample of its iterations, with an interval.

Simulating every iteration of a long epoch is not needed to know its time, as sampled
architecture simulation (SMARTS, SimPoint) estimates a program's run from a sample of its
intervals. An epoch's simulated time is the sum of its iterations' increments: iteration
``k``'s increment is the moment its last task ends minus the moment iteration ``k - 1``'s
last task ended (the first iteration's from the start), and they sum to the makespan even
where iterations overlap (a prefetched sample starts before the previous step ends).

The unit sampled is a **block** of ``block`` consecutive iterations, whose increments summed are
measured by simulating it with ``warmup`` iterations before it and one after it (their tasks
alone, dependencies on other iterations dropped): the iterations before warm up what the block
overlaps with, as SMARTS warms up before each measured unit, and the one after competes with the
block's last iteration for cores and links as the next iteration does in the whole epoch
(without it, P3's increments came out 11% short). One iteration's increment alone is noisy (an
iteration that ends late makes the next one's short); a block's sum is not. The first block is
always simulated (the cold start), and so is a last block shorter than the others.

The other blocks are **stratified** by their planned work (bytes moved plus items computed,
each relative to its mean over the epoch, read from the plan without simulating): split into
strata of equal count by that work, each stratum sampled at random without replacement in
proportion to its size (at least two blocks, so its variance can be estimated). The epoch is
the simulated blocks' time plus the sum over strata of the stratum's size times its sampled mean;
its variance is the stratified estimator's, with the finite population correction, and Student's
t on the samples' degrees of freedom gives the sampling half of the interval.

A window is an approximation (the whole epoch warms each block up with every iteration before
it, and queues it leaves behind shape the next): measured on products-like, the block sums came
out 1.1% long with 2 warm-up iterations and 0.0-0.7% with 8, each block off by up to 6% either
way. So a **check stretch** of ``CHECK`` consecutive blocks at a random place is also simulated
whole (with its own warm-up), and each of its blocks but the first is compared with its own
window: their mean relative difference is the windows' bias, by which the sampled part of the
estimate is corrected, and Student's t on its standard error is added to the half-width.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from workbench.errors import ConfigError
from workbench.plan import Plan, Task

CONFIDENCE = 0.95
BLOCK = 4
WARMUP = 8  # products-like, 4 GPUs: block sums 1.1% long with 2 warm-up iterations, 0.3-0.4% with 4, 0.0% with 8; 16 GPUs: 1.2% with 4, -0.2% with 8
CHECK = 6  # blocks in the check stretch: five compared with their windows
MAX_STRATA = 5


@dataclass(frozen=True)
class SampledEpoch:
    """An epoch's estimated time and its interval, from ``sampled`` iterations of ``iterations``."""

    estimate_s: float
    low_s: float
    high_s: float
    confidence: float
    sampling_s: float  # the interval's half-width from sampling (Student's t)
    window_s: float  # and from the windows' bias, as the check stretch measured it
    window_bias: float  # the windows' mean relative bias the estimate was corrected for
    iterations: int
    sampled: tuple[int, ...]  # the plan's iteration numbers whose increments were simulated
    strata: int
    block: int
    warmup: int
    simulated_tasks: int  # tasks simulated over all windows
    plan_tasks: int

    @property
    def half_width_s(self) -> float:
        return (self.high_s - self.low_s) / 2

    def text(self) -> str:
        return (
            f"sampled epoch: {self.estimate_s * 1e3:.3f} ms, {self.confidence:.0%} interval "
            f"[{self.low_s * 1e3:.3f}, {self.high_s * 1e3:.3f}] ms (+/-{self.half_width_s / self.estimate_s:.1%}: "
            f"sampling {self.sampling_s * 1e3:.3f} ms, windows {self.window_s * 1e3:.3f} ms; windows' bias "
            f"{self.window_bias:+.2%} corrected), "
            f"from {len(self.sampled)} of {self.iterations} iterations in blocks of {self.block} "
            f"({self.strata} strata, {self.warmup} warm-up iterations); the windows simulated "
            f"{self.simulated_tasks / max(self.plan_tasks, 1):.2f}x the plan's {self.plan_tasks} tasks"
        )


def iteration_work(plan: Plan) -> tuple[list[int], np.ndarray]:
    """The plan's iteration numbers, sorted, and each one's planned work: its transfers' and
    collectives' bytes plus its computes' items, each relative to its mean over iterations."""
    numbers = sorted({t.iteration for t in plan.tasks})
    index = {it: k for k, it in enumerate(numbers)}
    moved = np.zeros(len(numbers))
    computed = np.zeros(len(numbers))
    for t in plan.tasks:
        if t.kind == "compute":
            computed[index[t.iteration]] += t.items
        else:
            moved[index[t.iteration]] += t.bytes
    work = np.zeros(len(numbers))
    for part in (moved, computed):
        if part.mean() > 0:
            work += part / part.mean()
    return numbers, work


def window_plan(plan: Plan, iterations: set[int]) -> Plan:
    """The tasks of ``iterations`` alone: dependencies on other iterations dropped, and frees of
    tensors no task in the window allocates (they were allocated before it)."""
    tasks = [t for t in plan.tasks if t.iteration in iterations]
    ids = {t.id for t in tasks}
    allocated = {name for t in tasks for name in t.allocate} | {r.name for r in plan.resident}
    kept = [
        Task(
            **{
                **t.__dict__,
                "deps": [d for d in t.deps if d in ids],
                "free": [name for name in t.free if name in allocated],
            }
        )
        for t in tasks
    ]
    return Plan(plan.name, kept, list(plan.resident), dict(plan.meta), dict(plan.workers))


Simulate = Callable[[Plan], tuple[dict[int, float], int]]


def block_time(
    simulate: Simulate, plan: Plan, numbers: Sequence[int], first: int, last: int, warmup: int
) -> tuple[float, int]:
    """The increments of iterations ``numbers[first..last]`` summed, from a simulated window of
    ``warmup`` iterations before them and one after; and how many tasks the window simulated."""
    ends, tasks = simulate(window_plan(plan, set(numbers[max(0, first - warmup) : last + 2])))
    before = ends[numbers[first - 1]] if first > 0 else 0.0
    return ends[numbers[last]] - before, tasks


def strata_of(work: np.ndarray, count: int) -> list[np.ndarray]:
    """Positions into ``work`` split into ``count`` strata of (nearly) equal size by work."""
    order = np.argsort(work, kind="stable")
    return [s for s in np.array_split(order, count) if len(s)]


def allocate(sizes: Sequence[int], samples: int) -> list[int]:
    """Samples per stratum: proportional to its size, at least two (one where the stratum has one
    unit), never more than its size."""
    total = sum(sizes)
    return [max(min(2, n), min(n, round(samples * n / total))) for n in sizes]


@dataclass
class _Tally:
    """What the simulated blocks add up to: the exactly simulated blocks' time, the sampled part's
    estimate, its variance and degrees of freedom, the iterations measured, the tasks simulated, and
    each block's windowed time by (first, last), simulated once (a sampled block may also be in the
    check stretch)."""

    exact: float = 0.0
    estimate: float = 0.0
    variance: float = 0.0
    dof: int = 0
    measured: list[int] = field(default_factory=list)
    simulated: int = 0
    windows: dict[tuple[int, int], float] = field(default_factory=dict)

    def block(
        self, simulate: Simulate, plan: Plan, numbers: Sequence[int], first: int, last: int, warmup: int
    ) -> float:
        """:func:`block_time` of ``numbers[first..last]``, each block simulated once per estimate."""
        if (first, last) not in self.windows:
            value, tasks = block_time(simulate, plan, numbers, first, last, warmup)
            self.windows[first, last] = value
            self.simulated += tasks
        return self.windows[first, last]


def sampled_epoch(
    plan: Plan,
    simulate: Simulate,
    *,
    samples: int,
    block: int = BLOCK,
    warmup: int = WARMUP,
    strata: int | None = None,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> SampledEpoch:
    """The epoch's estimated time from about ``samples`` sampled iterations (module docstring).
    ``simulate(plan)`` returns each iteration's last end and how many tasks it simulated."""
    from scipy import stats

    numbers, work = iteration_work(plan)
    _check(len(numbers), samples, block, warmup)
    starts = list(range(block, len(numbers), block))
    whole = [s for s in starts if s + block <= len(numbers)]  # the last block may be shorter
    tally = _Tally()
    for first, last in [(0, block - 1), *[(s, len(numbers) - 1) for s in starts if s not in whole]]:
        tally.exact += tally.block(simulate, plan, numbers, first, last, warmup)
        tally.measured += numbers[first : last + 1]
    block_work = np.array([work[s : s + block].sum() for s in whole])
    count = strata or max(1, min(MAX_STRATA, samples // (2 * block)))
    groups = [[whole[i] for i in g] for g in strata_of(block_work, count)]
    shares = allocate([len(g) for g in groups], max(1, round(samples / block)))
    rng = np.random.default_rng(seed)
    for group, n in zip(groups, shares, strict=True):
        picked = sorted(int(x) for x in rng.choice(group, size=n, replace=False))
        _sample_stratum(simulate, plan, numbers, picked, len(group), block, warmup, tally)
    bias, bias_se, bias_dof = _window_bias(simulate, plan, numbers, whole, block, warmup, rng, tally)
    corrected = tally.estimate / (1 + bias)
    t = stats.t.ppf(0.5 + confidence / 2, max(tally.dof, 1))
    sampling = float(t) * math.sqrt(tally.variance) / (1 + bias)
    window = float(stats.t.ppf(0.5 + confidence / 2, max(bias_dof, 1))) * bias_se * corrected
    estimate = tally.exact + corrected
    spread = sampling + window
    return SampledEpoch(
        estimate,
        estimate - spread,
        estimate + spread,
        confidence,
        sampling,
        window,
        bias,
        len(numbers),
        tuple(sorted(set(tally.measured))),
        len(groups),
        block,
        warmup,
        tally.simulated,
        len(plan.tasks),
    )


def _sample_stratum(
    simulate: Simulate,
    plan: Plan,
    numbers: Sequence[int],
    picked: Sequence[int],
    size: int,
    block: int,
    warmup: int,
    tally: _Tally,
) -> None:
    """Simulate the stratum's ``picked`` blocks and add the stratum's share to ``tally``."""
    values = []
    for first in picked:
        values.append(tally.block(simulate, plan, numbers, first, first + block - 1, warmup))
        tally.measured += numbers[first : first + block]
    n = len(values)
    tally.estimate += size * float(np.mean(values))
    if n > 1:
        tally.variance += size**2 * (1 - n / size) * float(np.var(values, ddof=1)) / n
        tally.dof += n - 1


def _window_bias(
    simulate: Simulate,
    plan: Plan,
    numbers: Sequence[int],
    whole: Sequence[int],
    block: int,
    warmup: int,
    rng: np.random.Generator,
    tally: _Tally,
) -> tuple[float, float, int]:
    """The windows' mean relative bias, its standard error and degrees of freedom, from a check
    stretch of :data:`CHECK` consecutive blocks simulated whole and block by block."""
    count = min(CHECK, len(whole))
    first = whole[int(rng.integers(0, len(whole) - count + 1))]
    last = first + count * block - 1
    ends, tasks = simulate(window_plan(plan, set(numbers[max(0, first - warmup) : last + 2])))
    tally.simulated += tasks
    errors = []
    for start in range(first + block, last + 1, block):  # the stretch's own first block is its warm-up
        whole_value = ends[numbers[start + block - 1]] - ends[numbers[start - 1]]
        windowed = tally.block(simulate, plan, numbers, start, start + block - 1, warmup)
        errors.append(windowed / whole_value - 1)
    if len(errors) < 2:
        return 0.0, 0.0, 0
    return float(np.mean(errors)), float(np.std(errors, ddof=1) / math.sqrt(len(errors))), len(errors) - 1


def _check(iterations: int, samples: int, block: int, warmup: int) -> None:
    if block < 1 or warmup < 0:
        raise ConfigError(
            f"sampled simulation: block must be >= 1 and warm-up >= 0, got {block} and {warmup}"
        )
    if samples < 4 * block:
        raise ConfigError(
            f"sampled simulation needs at least 4 blocks of {block} iterations sampled, got {samples} iterations"
        )
    if iterations < samples + 2 * block:
        raise ConfigError(
            f"the plan has {iterations} iterations: sampling {samples} of them saves little; simulate it whole"
        )


def simulator(cluster: object, cost_model: object = None, seed: int = 0) -> Simulate:
    """``simulate`` for :func:`sampled_epoch`: the simulator on ``cluster`` (each window's trace
    reduced to its iterations' last ends)."""
    from sim import simulate

    def run(plan: Plan) -> tuple[dict[int, float], int]:
        trace = simulate(plan, cluster, cost_model=cost_model, seed=seed).trace  # type: ignore[arg-type]
        ends = trace.groupby("iteration")["end"].max()
        return {int(k): float(v) for k, v in ends.items()}, len(plan.tasks)

    return run
