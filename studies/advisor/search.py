"""Searching the candidates by simulation: successive halving over epoch prefixes, and exhaustive search.

Every candidate is prepared once (graph, partition, placement and the whole epoch's samples, through
the spine and sample caches, so candidates that share a partition or a sampled epoch share it). A
**rung** simulates each surviving candidate's first ``r`` iterations and estimates its epoch from
them (:mod:`studies.advisor.estimate`). The first rung **screens**: two iterations, the least that
says anything past the cold start. Then rungs of 4 iterations growing by ``ETA`` (4, 12, 36, ...),
the last being the whole epoch, where the estimate is exhaustive search's own figure.

Who survives a rung: the candidates whose interval, widened by the prefix's bias range, still
reaches the ``top``-th best upper bound (the **reach**). This is successive halving's elimination with
the fraction kept set by the evidence instead of fixed at ``1 / ETA``: a fixed fraction drops a
candidate tied with the best as readily as a hopeless one, and the advisor must find exhaustive
search's first choice, so a candidate goes only when its prefix says it cannot be among the first.
Candidates dropped keep their last estimate for the ranking (and say at which rung they stopped).
After the ranking rungs only the race for first place goes on; the search ends when the survivors'
intervals no longer overlap or every survivor has been simulated whole.

**Screening** prunes as branch and bound does. A space's candidates lie far apart (on the crossover
grid's full-mode cells, 2-3% of the 259 minibatch candidates on the 8-GPU clusters are within twice
the best one's epoch), and where an epoch is short (17 iterations on 8 GPUs) a first rung of four
iterations alone costs a quarter of simulating every epoch whole, so a cheaper first look pays. But a
two-iteration estimate is one-sided: its second iteration is a tail that no later prefetch competes
with, so it can be far too low (up to 83% where feature copies dominate) and is never much too high
(at most ``BIAS[SCREEN_RUNG][1]``). It is therefore used only as a **lower bound**: the reach comes from
candidates whose bounds hold both ways, the exact ones and the **pilots**, the ``PILOTS x top`` best
screened of each scheme, which are simulated at the first full rung first; every other candidate
whose screened lower bound is past that reach is dropped without a longer look. A space where every
candidate would be a pilot is not screened.

The bias ranges ``BIAS`` are measured, on other graphs than the crossover study's
(its generators with seed 1), by ``benchmarks/bench_advise.py --margins --graph-seed 1``:
over the 12 cells' 272 candidates each, the 2-iteration estimates were -83.1% to +7.5% off the
whole epoch (1,554 estimates), the 4-iteration ones -14.4% to +15.1% (1,554), the 12-iteration ones
-2.8% to +3.6% (518, the 4-GPU cells' epochs only).

**Score.** Candidates race on time to train ``epochs`` epochs: their preprocessing seconds (given,
measured once per distinct partition and placement) plus ``epochs`` times the epoch estimate; with
``epochs = 1`` and no preprocessing it is the epoch itself.

Exhaustive search simulates every candidate's whole epoch; it is what the advisor is checked against.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from studies.advisor.estimate import Estimate, from_prefix
from studies.advisor.space import Base, Candidate
from workbench.errors import ConfigError, InfeasiblePlanError, PlanError, WorkbenchError

SCREEN_RUNG = 2
FIRST_RUNG = 4
ETA = 3
PILOTS = 1  # x top, per scheme: the best screened candidates simulated at the first full rung
# The range of a prefix estimate's bias ``estimate / whole epoch - 1`` the search allows, by the
# prefix's length (the longest listed at or below it): measured on other graphs than the study's
# (see the module docstring), rounded out to the next 5%.
BIAS = {
    SCREEN_RUNG: (-0.85, 0.10),  # far too low at times, never far too high: a lower bound only
    FIRST_RUNG: (-0.15, 0.20),
    FIRST_RUNG * ETA: (-0.05, 0.05),
}


def bias(e: Estimate) -> tuple[float, float]:
    """The bias range the search allows estimate ``e`` (none once the epoch was simulated whole)."""
    if e.exact:
        return (0.0, 0.0)
    return BIAS[max(r for r in BIAS if r <= e.iterations)]


def true_over_estimate(e: Estimate) -> tuple[float, float]:
    """How far the whole epoch may lie from estimate ``e``, as factors ``(a, b)`` with
    ``a e <= epoch <= b e``: the estimate's half-width and its bias range (an exact estimate:
    ``(1, 1)``; one block's has no width yet, so its bias range alone)."""
    if e.exact or e.epoch_s <= 0:
        return (1.0, 1.0)
    low_bias, high_bias = bias(e)
    half = 0.0 if math.isnan(e.half_width_s) else e.half_width_s / e.epoch_s
    return (max(0.0, 1 - half) / (1 + high_bias), (1 + half) / (1 + low_bias))


@dataclass
class Outcome:
    """What the search learned of one candidate: its last estimate and what that simulation showed."""

    candidate: Candidate
    estimate: Estimate | None = None
    skipped: str = ""  # why it was not simulated (does not fit, refused by the scheme)
    rung: int = -1  # the last rung it was simulated at
    peak_gpu_bytes: int = 0
    network_bytes: float = 0.0  # over the epoch (the prefix's bytes scaled to it)
    phase_s: dict[str, float] = field(
        default_factory=dict
    )  # busy seconds per phase over the epoch, summed over workers
    trace: pd.DataFrame | None = None  # the longest prefix simulated (kept for the winner's timeline)
    sim_s: float = 0.0  # wall seconds spent planning and simulating it


@dataclass
class PrefixRun:
    """What simulating one candidate's first iterations showed: plain data, so it can come back
    from another process (a Dask worker)."""

    estimate: Estimate | None = None
    skipped: str = ""
    peak_gpu_bytes: int = 0
    network_bytes: float = 0.0
    phase_s: dict[str, float] = field(default_factory=dict)
    sim_s: float = 0.0
    prepare_s: float = 0.0
    trace: pd.DataFrame | None = None

    def apply(self, outcome: Outcome, rung: int) -> None:
        outcome.sim_s += self.sim_s
        if self.estimate is None:
            outcome.skipped = self.skipped
            return
        outcome.estimate = self.estimate
        outcome.rung = rung
        outcome.peak_gpu_bytes = self.peak_gpu_bytes
        outcome.network_bytes = self.network_bytes
        outcome.phase_s = self.phase_s
        if self.trace is not None:
            outcome.trace = self.trace


WHOLE_EPOCH = 2**62  # as many iterations as asked: every candidate's whole epoch


class Evaluator:
    """Prepares candidates once and simulates prefixes of their epochs, here or on a Dask cluster
    (``scheduler``: each worker process prepares what it is sent through the same disk caches)."""

    def __init__(
        self,
        base: Base,
        keep_traces: bool = True,
        scheduler: str | None = None,
    ) -> None:
        self.base = base
        self.keep_traces = keep_traces and scheduler is None
        self.scheduler = scheduler
        self._client: Any = None
        self._prepared: dict[Candidate, Any] = {}
        self._graphs: dict[str, Any] = {}
        self.prepare_s = 0.0
        self.sim_s = 0.0
        self.simulations = 0

    def prepare(self, c: Candidate) -> Any:
        """The candidate's prepared run (its whole epoch sampled), or a ``str`` saying why there is none."""
        prepared, seconds = self._prepare_timed(c)
        self.prepare_s += seconds
        return prepared

    def _prepare_timed(self, c: Candidate) -> tuple[Any, float]:
        """:meth:`prepare`'s result and the seconds it took now (0 when prepared before)."""
        if c in self._prepared:
            return self._prepared[c], 0.0
        from workbench.config import config_from_dict
        from workbench.run import load_graph, prepare_run

        t0 = time.perf_counter()
        try:
            config = config_from_dict(self.base.config(c), f"advise candidate {c.label}")
            graph = self._graphs.get(self.base.graph)
            if graph is None:
                graph = self._graphs[self.base.graph] = load_graph(config.graph)
            prepared: Any = prepare_run(config, graph=graph)
        except (ConfigError, PlanError) as exc:
            prepared = f"refused: {exc}"
        self._prepared[c] = prepared
        return prepared, time.perf_counter() - t0

    def epoch_iterations(self, c: Candidate) -> int:
        prepared = self.prepare(c)
        return 0 if isinstance(prepared, str) else prepared.inputs.num_iterations

    def simulate(self, outcome: Outcome, iterations: int, rung: int) -> None:
        """Simulate the candidate's first ``iterations`` here and update ``outcome`` with what it showed."""
        self._count(self.run(outcome.candidate, iterations, self.keep_traces)).apply(outcome, rung)

    def simulate_many(self, jobs: list[tuple[Outcome, int]], rung: int) -> Iterator[Outcome]:
        """Simulate each (outcome, iterations) here or on the Dask cluster, yielding each as it is done."""
        if self.scheduler is None:
            for outcome, iterations in jobs:
                self.simulate(outcome, iterations, rung)
                yield outcome
            return
        from distributed import as_completed as dask_completed

        client = self._dask()
        futures = {client.submit(run_prefix, self.base, o.candidate, r, pure=False): o for o, r in jobs}
        for future in dask_completed(futures):
            outcome = futures[future]
            self._count(future.result()).apply(outcome, rung)
            yield outcome

    def _count(self, run: PrefixRun) -> PrefixRun:
        self.sim_s += run.sim_s
        self.prepare_s += run.prepare_s
        self.simulations += 1
        return run

    def _dask(self) -> Any:
        if self._client is None:
            try:
                from distributed import Client
            except ImportError:
                raise WorkbenchError(
                    "--scheduler needs dask's distributed package (pip install 'dask[distributed]')"
                ) from None
            try:
                self._client = Client(self.scheduler, timeout="5s")
            except (OSError, TimeoutError) as exc:
                raise WorkbenchError(
                    f"Dask scheduler {self.scheduler} did not answer within 5 s ({type(exc).__name__})"
                ) from None
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def run(self, c: Candidate, iterations: int, keep_trace: bool) -> PrefixRun:
        """Simulate candidate ``c``'s first ``iterations`` (at most its epoch) in this process."""
        from sim import simulate
        from sim.calibrate import prepared_cost_model

        prepared, spent_preparing = self._prepare_timed(c)  # counted by _count, with the run
        if isinstance(prepared, str):
            return PrefixRun(skipped=prepared, prepare_s=spent_preparing)
        n = prepared.inputs.num_iterations
        r = min(iterations, n)
        t0 = time.perf_counter()
        try:
            inputs = prepared.inputs
            if not prepared.scheme.full_graph and r < n:
                inputs = dataclasses.replace(inputs, epoch=inputs.epoch[:r])
            plan = prepared.scheme.build(inputs)
            result = simulate(plan, prepared.cluster, prepared_cost_model(prepared))
        except InfeasiblePlanError as exc:
            return PrefixRun(
                skipped=f"does not fit: {exc}", sim_s=time.perf_counter() - t0, prepare_s=spent_preparing
            )
        except WorkbenchError as exc:
            return PrefixRun(
                skipped=f"refused: {exc}", sim_s=time.perf_counter() - t0, prepare_s=spent_preparing
            )
        sim_s = time.perf_counter() - t0
        scale = n / max(r, 1)
        gpus = set(prepared.cluster.gpu_nodes())
        busy = (result.trace["end"] - result.trace["start"]).groupby(result.trace["phase"]).sum()
        return PrefixRun(
            estimate=from_prefix(result.trace, n),
            peak_gpu_bytes=max((b for m, b in result.memory.items() if m in gpus), default=0),
            network_bytes=network_bytes(result.trace, prepared.cluster) * scale,
            phase_s={str(p): float(v) * scale for p, v in busy.items()},
            sim_s=sim_s,
            prepare_s=spent_preparing,
            trace=result.trace if keep_trace else None,
        )


_PROCESS_EVALUATORS: dict[str, Evaluator] = {}


def run_prefix(base: Base, c: Candidate, iterations: int) -> PrefixRun:
    """One prefix simulation in whatever process runs it (a Dask worker keeps one evaluator per
    request, so a candidate sent again is not prepared again)."""
    key = repr(base)
    evaluator = _PROCESS_EVALUATORS.get(key)
    if evaluator is None:
        evaluator = _PROCESS_EVALUATORS[key] = Evaluator(base, keep_traces=False)
    return evaluator.run(c, iterations, keep_trace=False)


def network_bytes(trace: pd.DataFrame, cluster: Any) -> float:
    """Bytes that cross between machines: transfers whose ends are on two machines (memories are
    named ``machine.node``), and the inter-machine hops' share of every collective (a ring over ``n``
    devices grouped by machine crosses machines ``M`` times of its ``n`` hops when ``M > 1``)."""
    machines = len(cluster.machines)
    if machines <= 1 or trace.empty:
        return 0.0
    total = 0.0
    transfers = trace[trace["kind"] == "transfer"]
    if len(transfers):
        src = transfers["src"].str.split(".", n=1).str[0]
        dst = transfers["dst"].str.split(".", n=1).str[0]
        total += float(transfers["bytes"][src != dst].sum())
    collectives = trace[trace["kind"] == "collective"]
    if len(collectives):
        total += float(collectives["bytes"].sum()) * machines / max(cluster.num_gpus, 1)
    return total


@dataclass
class SearchResult:
    outcomes: list[Outcome]
    rungs: list[int]  # iterations per rung, as planned for the longest epoch
    sim_s: float
    prepare_s: float
    simulations: int
    method: str  # "successive halving" or "exhaustive"
    survivors: list[list[str]] = field(default_factory=list)  # labels alive after each rung

    def ranked(self) -> list[Outcome]:
        """Simulated candidates by estimated epoch time, then the skipped ones."""
        done = [o for o in self.outcomes if o.estimate is not None]
        done.sort(key=lambda o: (o.estimate.epoch_s, o.candidate.label))  # type: ignore[union-attr]
        return done + [o for o in self.outcomes if o.estimate is None]

    def first(self) -> Outcome:
        ranked = self.ranked()
        if not ranked or ranked[0].estimate is None:
            raise ConfigError(
                "no candidate could be simulated: "
                + "; ".join(f"{o.candidate.label}: {o.skipped}" for o in self.outcomes[:3])
            )
        return ranked[0]


def rung_sizes(epoch_iterations: int) -> list[int]:
    """2 (screening), 4, 12, 36, ... iterations, then the whole epoch (reached only by candidates
    still tied): after the first, a rung of half the epoch or more is skipped for the whole, which
    costs little more and tells everything."""
    sizes = []
    r = SCREEN_RUNG
    while r < epoch_iterations:
        sizes.append(r)
        r = next_rung(r, epoch_iterations)
    sizes.append(epoch_iterations)
    return sizes


def next_rung(r: int, epoch_iterations: int) -> int:
    """The rung after one of ``r`` iterations: the first with a middle after screening, then
    ``ETA`` times as many, or the whole epoch (:data:`WHOLE_EPOCH`) once that would be half the
    longest epoch or more."""
    longer = FIRST_RUNG if r < FIRST_RUNG else r * ETA
    return longer if 2 * longer < epoch_iterations else WHOLE_EPOCH


def successive_halving(
    evaluator: Evaluator,
    cands: list[Candidate],
    deadline: float | None = None,
    progress: Callable[[str], None] | None = None,
    top: int = 5,
    rank_rungs: int = 1,
    score: Score | None = None,
    simulated: dict[Candidate, Outcome] | None = None,
) -> SearchResult:
    """The advisor's search (see the module docstring): the ``top`` candidates' order is refined for
    ``rank_rungs`` rungs after the first with a middle (the one after screening), the first place's
    until it is resolved. ``simulated``: candidates already simulated (a prefix that covers a rung is
    not simulated again)."""
    say = progress or (lambda _: None)
    score = score or Score()
    sim0, prep0, n0 = evaluator.sim_s, evaluator.prepare_s, evaluator.simulations
    outcomes = {c: (simulated or {}).get(c) or Outcome(c) for c in cands}
    survivors: list[list[str]] = []
    # Where every candidate would be a pilot, a screen only adds its two iterations to each.
    screens = any(n > PILOTS * top for n in Counter(c.scheme for c in cands).values())
    alive = list(cands)
    if screens:
        _simulate_rung(evaluator, alive, outcomes, SCREEN_RUNG, 0, deadline, say)
        ran = [c for c in cands if outcomes[c].estimate is not None]
        alive = _screen(evaluator, ran, outcomes, top, score, deadline, say)
        survivors.append([c.label for c in alive])
    r, k = FIRST_RUNG, 1
    while alive and not _resolved(alive, outcomes, score):
        r = _rung_for(r, alive, outcomes)
        _simulate_rung(evaluator, alive, outcomes, r, k, deadline, say)
        ran = [c for c in alive if outcomes[c].estimate is not None]
        # Past the ranking rungs only the race for first place goes on.
        alive = _contenders(ran, outcomes, top if k <= rank_rungs else 1, score)
        survivors.append([c.label for c in alive])
        if r == WHOLE_EPOCH:
            break
        r = next_rung(r, max(outcomes[c].estimate.epoch_iterations for c in alive))  # type: ignore[union-attr]
        k += 1
    longest_epoch = max((o.estimate.epoch_iterations for o in outcomes.values() if o.estimate), default=1)
    rungs = rung_sizes(longest_epoch)
    return SearchResult(
        list(outcomes.values()),
        rungs if screens else [r for r in rungs if r != SCREEN_RUNG] or rungs,
        evaluator.sim_s - sim0,
        evaluator.prepare_s - prep0,
        evaluator.simulations - n0,
        "successive halving",
        survivors,
    )


def _rung_for(r: int, alive: list[Candidate], outcomes: dict[Candidate, Outcome]) -> int:
    """``r``, or the whole epoch where ``r`` would be half the longest survivor's epoch or more
    (``r`` while no survivor has been simulated yet)."""
    known = [o.estimate.epoch_iterations for c in alive if (o := outcomes[c]).estimate is not None]
    return r if not known or 2 * r < max(known) else WHOLE_EPOCH


def _screen(
    evaluator: Evaluator,
    ran: list[Candidate],
    outcomes: dict[Candidate, Outcome],
    top: int,
    score: Score,
    deadline: float | None,
    say: Callable[[str], None],
) -> list[Candidate]:
    """Drop the screened candidates whose two-iteration lower bound is past the reach, the
    ``top``-th best upper bound among candidates whose bounds hold: the exact ones and the pilots
    (:func:`pilots`), simulated at the first full rung now (see the module docstring)."""
    exact = [c for c in ran if outcomes[c].estimate.exact]  # type: ignore[union-attr]
    chosen = pilots([c for c in ran if c not in exact], outcomes, top, score)
    if chosen:
        _simulate_rung(evaluator, chosen, outcomes, _rung_for(FIRST_RUNG, chosen, outcomes), 1, deadline, say)
    known = exact + [c for c in chosen if outcomes[c].estimate is not None]
    if not known:
        return ran
    reach = _reach(known, outcomes, top, score)
    return [c for c in ran if outcomes[c].estimate is not None and score.bounds(outcomes[c])[0] <= reach]


def pilots(
    screened: list[Candidate], outcomes: dict[Candidate, Outcome], top: int, score: Score
) -> list[Candidate]:
    """The ``PILOTS x top`` best screened candidates of each scheme, by their lower bounds. Per
    scheme, because how far a two-iteration estimate falls short is a matter of the scheme's
    pipeline (which copies its tail leaves out): the best screened over all would be the schemes
    screened lowest, not the fastest."""
    by_scheme: dict[str, list[Candidate]] = {}
    for c in sorted(screened, key=lambda c: (score.bounds(outcomes[c])[0], c.label)):
        by_scheme.setdefault(c.scheme, []).append(c)
    return [c for group in by_scheme.values() for c in group[: PILOTS * top]]


def _simulate_rung(
    evaluator: Evaluator,
    alive: list[Candidate],
    outcomes: dict[Candidate, Outcome],
    r: int,
    k: int,
    deadline: float | None,
    say: Callable[[str], None],
) -> None:
    jobs = [(outcomes[c], r) for c in alive if not _covers(outcomes[c].estimate, r)]
    what = "whole epochs" if r == WHOLE_EPOCH else f"{r} iterations"
    for i, o in enumerate(evaluator.simulate_many(jobs, k)):
        say(f"rung {k + 1} ({what}): {i + 1}/{len(jobs)} {o.candidate.label}")
        if deadline is not None and time.perf_counter() > deadline:
            raise BudgetExceeded(k, outcomes)


@dataclass(frozen=True)
class Score:
    """What candidates race on: ``fixed_s`` (preprocessing) plus ``epochs`` epochs."""

    epochs: int = 1
    fixed_s: dict[Candidate, float] = field(default_factory=dict)

    def bounds(self, o: Outcome) -> tuple[float, float]:
        """The interval a candidate's score may lie in: its estimate's, widened by its prefix's bias
        range (:func:`true_over_estimate`)."""
        e = o.estimate
        assert e is not None
        fixed = self.fixed_s.get(o.candidate, 0.0)
        a, b = true_over_estimate(e)
        return fixed + self.epochs * a * e.epoch_s, fixed + self.epochs * b * e.epoch_s


def _covers(estimate: Estimate | None, r: int) -> bool:
    """Whether an estimate already rests on ``r`` iterations or on its whole epoch."""
    return estimate is not None and (estimate.exact or estimate.iterations >= r)


def _contenders(
    alive: list[Candidate], outcomes: dict[Candidate, Outcome], top: int, score: Score
) -> list[Candidate]:
    """The candidates that may still be among the first ``top``: their interval reaches the
    ``top``-th best upper bound."""
    if not alive:
        return []
    reach = _reach(alive, outcomes, top, score)
    return [c for c in alive if score.bounds(outcomes[c])[0] <= reach]


def _reach(known: list[Candidate], outcomes: dict[Candidate, Outcome], top: int, score: Score) -> float:
    """The ``top``-th best upper bound among ``known``: a candidate whose lower bound is past it
    cannot be among the first ``top``."""
    uppers = sorted(score.bounds(outcomes[c])[1] for c in known)
    return uppers[min(top, len(uppers)) - 1]


def _resolved(alive: list[Candidate], outcomes: dict[Candidate, Outcome], score: Score) -> bool:
    """Every survivor exact, or no two survivors' intervals overlap (their order is known); not
    while one is still unsimulated."""
    if not alive:
        return True
    if any(outcomes[c].estimate is None for c in alive):
        return False
    if all(outcomes[c].estimate.exact for c in alive):  # type: ignore[union-attr]
        return True
    spans = sorted(score.bounds(outcomes[c]) for c in alive)
    return all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))


def exhaustive(
    evaluator: Evaluator, cands: list[Candidate], progress: Callable[[str], None] | None = None
) -> SearchResult:
    """Every candidate's whole epoch simulated: what the advisor must agree with."""
    say = progress or (lambda _: None)
    sim0, prep0, n0 = evaluator.sim_s, evaluator.prepare_s, evaluator.simulations
    outcomes = [Outcome(c) for c in cands]
    for i, o in enumerate(evaluator.simulate_many([(o, WHOLE_EPOCH) for o in outcomes], 0)):
        say(f"exhaustive: {i + 1}/{len(cands)} {o.candidate.label}")
    return SearchResult(
        outcomes,
        [],
        evaluator.sim_s - sim0,
        evaluator.prepare_s - prep0,
        evaluator.simulations - n0,
        "exhaustive",
    )


class BudgetExceeded(WorkbenchError):
    """The search ran past its budget; what it learned so far is kept in ``outcomes``."""

    def __init__(self, rung: int, outcomes: dict[Candidate, Outcome]) -> None:
        super().__init__(f"the budget ran out during rung {rung + 1}")
        self.rung = rung
        self.outcomes = outcomes


def kendall_tau(a: list[str], b: list[str]) -> float:
    """Kendall's tau between two orders of the same labels (1: same order, -1: reversed)."""
    pos = {x: i for i, x in enumerate(b)}
    items = [x for x in a if x in pos]
    n = len(items)
    if n < 2:
        return 1.0
    concordant = discordant = 0
    for i in range(n):
        for j in range(i + 1, n):
            if pos[items[i]] < pos[items[j]]:
                concordant += 1
            else:
                discordant += 1
    return (concordant - discordant) / (n * (n - 1) / 2)


def progress_printer(enabled: bool, every_s: float = 2.0) -> Callable[[str], None]:
    """Progress on stderr: rewritten in place on a terminal, else a line at most every ``every_s``."""
    tty = sys.stderr.isatty()
    last = [-every_s]

    def say(message: str) -> None:
        if not enabled:
            return
        if tty:
            print(f"\r\033[K[advise] {message}", end="", file=sys.stderr, flush=True)
        elif time.perf_counter() - last[0] >= every_s:
            last[0] = time.perf_counter()
            print(f"[advise] {message}", file=sys.stderr, flush=True)

    return say


__all__ = [
    "ETA",
    "FIRST_RUNG",
    "BIAS",
    "SCREEN_RUNG",
    "bias",
    "true_over_estimate",
    "BudgetExceeded",
    "Evaluator",
    "Outcome",
    "SearchResult",
    "exhaustive",
    "kendall_tau",
    "rung_sizes",
    "successive_halving",
]
