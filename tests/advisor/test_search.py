"""Successive halving against exhaustive search: rungs, elimination and ranking by hand, and on a graph."""

from __future__ import annotations

import math

import pytest

from studies.advisor.estimate import Estimate
from studies.advisor.search import (
    BIAS,
    PILOTS,
    Evaluator,
    Outcome,
    Score,
    _contenders,
    _screen,
    bias,
    exhaustive,
    kendall_tau,
    rung_sizes,
    successive_halving,
    true_over_estimate,
)
from studies.advisor.space import Base, Candidate, Restrictions, candidates


def test_rungs_grow_by_three_and_end_at_the_whole_epoch() -> None:
    assert rung_sizes(35) == [2, 4, 12, 35]
    assert rung_sizes(18) == [2, 4, 18]  # a 12-iteration prefix would be two thirds of the epoch
    assert rung_sizes(100) == [2, 4, 12, 36, 100]
    assert rung_sizes(4) == [2, 4]
    assert rung_sizes(8) == [2, 8]  # four iterations would be half the epoch
    assert rung_sizes(2) == [2]


def test_kendall_tau_by_hand() -> None:
    assert kendall_tau(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert kendall_tau(["a", "b", "c"], ["c", "b", "a"]) == -1.0
    assert kendall_tau(["a", "b", "c"], ["a", "c", "b"]) == pytest.approx(1 / 3)  # 2 concordant, 1 not
    assert kendall_tau(["a", "b"], ["b", "x", "a"]) == -1.0  # labels the other order lacks are left out


def _outcome(name: str, epoch: float, half: float, iterations: int = 4, n: int = 40) -> Outcome:
    return Outcome(Candidate(name, "random"), Estimate(epoch, half, iterations, n))


def test_a_candidate_goes_only_when_its_widened_interval_cannot_reach_the_best() -> None:
    # A 4-iteration estimate e may be 15% low or 20% high: the epoch lies in [e / 1.20, e / 0.85];
    # a two-iteration one may be 85% low or 10% high: [e / 1.10, e / 0.15].
    best = _outcome("best", 100.0, 2.0)  # reaches 102 / 0.85 = 120.00
    near = _outcome("near", 143.0, 0.0)  # its low 143 / 1.2 = 119.17: kept
    far = _outcome("far", 146.0, 0.0)  # 146 / 1.2 = 121.67: gone
    unknown = _outcome("unknown", 143.5, math.nan)  # one block: judged by the bias alone, 119.58: kept
    exact = _outcome("exact", 121.0, 0.0, iterations=40)  # exact: no bias, 121 > 120: gone
    screened = _outcome("screened", 80.0, math.nan, iterations=2)  # low 72.73, but reaches 533.33
    outcomes = {o.candidate: o for o in (best, near, far, unknown, exact, screened)}
    kept = _contenders(list(outcomes), outcomes, 1, Score())
    assert [c.scheme for c in kept] == ["best", "near", "unknown", "screened"]
    assert BIAS[4] == (-0.15, 0.20) and BIAS[2] == (-0.85, 0.10)  # the figures above are worked out for them
    # racing for the top two: the second-best upper bound (exact's 121) is the reach; far stays out
    top_two = _contenders(list(outcomes), outcomes, 2, Score())
    assert [c.scheme for c in top_two] == ["best", "near", "unknown", "exact", "screened"]


def test_a_prefix_is_allowed_the_bias_measured_for_the_longest_length_it_reaches() -> None:
    assert bias(Estimate(1.0, 0.0, 2, 40)) == BIAS[2]
    assert bias(Estimate(1.0, 0.0, 6, 40)) == BIAS[4]  # 6 iterations: 4's range, not yet 12's
    assert bias(Estimate(1.0, 0.0, 36, 40)) == BIAS[12] == (-0.05, 0.05)
    assert bias(Estimate(1.0, 0.0, 40, 40)) == (0.0, 0.0)  # the whole epoch: no bias


class _TableEvaluator:
    """Stands for an Evaluator: a prefix's estimate comes from a table by (partitioner, iterations),
    worked out by hand; the partitioner names the candidate."""

    def __init__(self, table: dict[tuple[str, int], float]) -> None:
        self.table = table
        self.asked: list[tuple[str, int]] = []
        self.sim_s = self.prepare_s = 0.0
        self.simulations = 0

    def simulate_many(self, jobs, rung):  # type: ignore[no-untyped-def]
        for outcome, r in jobs:
            self.asked.append((outcome.candidate.partition, r))
            outcome.estimate = Estimate(self.table[(outcome.candidate.partition, r)], math.nan, r, 40)
            yield outcome


def test_screening_drops_by_the_lower_bound_against_the_pilots_and_exact_ones_reach() -> None:
    # Screened (2 iterations, lower bound e / 1.10): scheme x's a 100 -> 90.9, b 110 -> 100,
    # d 150 -> 136.4, e 160 -> 145.5; scheme y's c 120 -> 109.1; scheme z's f has an epoch of 2
    # iterations, exact at 130. With top 1 the pilots are the best screened of each scheme, a and
    # c, simulated at 4 iterations: a 150 -> [125, 176.5], c 200 -> [166.7, 235.3]. The reach is
    # the best upper bound among the pilots and f: f's 130. Kept: a (125), b (100), f (130);
    # c (166.7) goes on its 4 iterations, d (136.4) and e (145.5) on their screened figures alone.
    screened = {"a": ("x", 100.0), "b": ("x", 110.0), "c": ("y", 120.0), "d": ("x", 150.0), "e": ("x", 160.0)}
    outcomes = {}
    for name, (scheme, e) in screened.items():
        o = Outcome(Candidate(scheme, name), Estimate(e, math.nan, 2, 40))
        outcomes[o.candidate] = o
    f = Outcome(Candidate("z", "f"), Estimate(130.0, 0.0, 2, 2))
    outcomes[f.candidate] = f
    ev = _TableEvaluator({("a", 4): 150.0, ("c", 4): 200.0})
    kept = _screen(ev, list(outcomes), outcomes, 1, Score(), None, lambda _: None)  # type: ignore[arg-type]
    assert sorted(c.partition for c in kept) == ["a", "b", "f"]
    assert ev.asked == [("a", 4), ("c", 4)]
    assert PILOTS == 1  # the pilots above are worked out for it


def test_a_space_where_every_candidate_would_be_a_pilot_is_not_screened() -> None:
    # top 1: one pilot per scheme; three schemes of one candidate each would all be pilots, so
    # none is screened: all start at 4 iterations (a 40-iteration epoch), and b and c stop there
    # (lows 166.7 and 250 against a's reach of 117.6).
    ev = _TableEvaluator({("a", 4): 100.0, ("b", 4): 200.0, ("c", 4): 300.0})
    cands = [Candidate(scheme, name) for scheme, name in (("x", "a"), ("y", "b"), ("z", "c"))]
    result = successive_halving(ev, cands, top=1)  # type: ignore[arg-type]
    assert ev.asked == [("a", 4), ("b", 4), ("c", 4)]
    assert result.ranked()[0].candidate.partition == "a" and 2 not in result.rungs


def test_preprocessing_counts_once_and_epochs_scale_the_estimate() -> None:
    a, b = _outcome("a", 100.0, 0.0), _outcome("b", 90.0, 0.0)
    score = Score(epochs=2, fixed_s={b.candidate: 50.0})
    assert score.bounds(a) == pytest.approx((200 / 1.2, 200 / 0.85))
    assert score.bounds(b) == pytest.approx((50 + 180 / 1.2, 50 + 180 / 0.85))


def test_the_advisor_finds_exhaustive_searchs_first_choice_with_less_simulation(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("GNNWB_CACHE", str(tmp_path))
    base = Base(graph="rmat:n=6000,m=72000,feat=64", hardware="hopgnn-4xa100-10gbe", hidden=64)
    cands = candidates(
        Restrictions(
            schemes=("model-centric", "p3", "hopgnn"),
            partitioners=("random", "metis"),
            placements=("none", "degree"),
            capacities=("20%",),
            batch_sizes=(64,),
        )
    )
    ev = Evaluator(base, keep_traces=False)
    assert ev.epoch_iterations(cands[0]) >= 12  # long enough for the search to skip something
    whole = exhaustive(ev, cands)
    sh = successive_halving(ev, cands, top=1)
    assert sh.first().candidate == whole.first().candidate
    # every estimate of a prefix lies within its prefix's bias margin of its whole epoch
    exact = {o.candidate: o.estimate.epoch_s for o in whole.outcomes}
    for o in sh.outcomes:
        a, b = true_over_estimate(o.estimate)
        assert a * o.estimate.epoch_s <= exact[o.candidate] <= b * o.estimate.epoch_s, o.candidate.label
    simulated = sum(o.estimate.iterations for o in sh.outcomes)
    assert simulated < sum(o.estimate.iterations for o in whole.outcomes)


def test_a_dask_cluster_finds_what_this_process_finds(tmp_path, monkeypatch) -> None:
    from distributed import LocalCluster

    monkeypatch.setenv("GNNWB_CACHE", str(tmp_path))
    base = Base(graph="rmat:n=3000,m=30000,feat=16", hardware="hopgnn-4xa100-10gbe", hidden=16)
    cands = candidates(
        Restrictions(
            schemes=("model-centric", "p3"),
            partitioners=("random", "metis"),
            placements=("none",),
            batch_sizes=(64,),
        )
    )
    here = successive_halving(Evaluator(base), cands)
    with LocalCluster(n_workers=1, threads_per_worker=1, host="127.0.0.1", dashboard_address=None) as cluster:
        remote = Evaluator(base, scheduler=cluster.scheduler_address)
        try:
            there = successive_halving(remote, cands)
        finally:
            remote.close()
    assert [o.candidate for o in there.ranked()] == [o.candidate for o in here.ranked()]
    assert [o.estimate for o in there.ranked()] == [o.estimate for o in here.ranked()]
    assert there.simulations == here.simulations and remote.prepare_s > 0


def test_a_scheduler_that_does_not_answer_is_one_line(tmp_path) -> None:
    from workbench.errors import WorkbenchError

    ev = Evaluator(
        Base(graph="rmat:n=300,m=3000,feat=8", hardware="hopgnn-4xa100-10gbe"), scheduler="tcp://127.0.0.1:9"
    )
    with pytest.raises(WorkbenchError, match=r"Dask scheduler tcp://127.0.0.1:9 did not answer within 5 s"):
        successive_halving(ev, [Candidate("model-centric", "random", "none", "-", "-", 64)])


def test_a_search_out_of_budget_keeps_what_it_simulated(tmp_path, monkeypatch) -> None:
    from studies.advisor.search import BudgetExceeded

    monkeypatch.setenv("GNNWB_CACHE", str(tmp_path))
    base = Base(graph="rmat:n=3000,m=30000,feat=16", hardware="hopgnn-4xa100-10gbe", hidden=16)
    cands = candidates(
        Restrictions(
            schemes=("model-centric", "p3"), partitioners=("random",), placements=("none",), batch_sizes=(64,)
        )
    )
    with pytest.raises(BudgetExceeded) as info:
        successive_halving(
            Evaluator(base), cands, deadline=0.0
        )  # long past: stops after the first simulation
    simulated = [o for o in info.value.outcomes.values() if o.estimate is not None]
    assert len(simulated) == 1 and simulated[0].candidate == cands[0]
