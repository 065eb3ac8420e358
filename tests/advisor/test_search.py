"""Successive halving against exhaustive search: rungs, elimination and ranking by hand, and on a graph."""

from __future__ import annotations

import math

import pytest

from studies.advisor.estimate import Estimate
from studies.advisor.search import (
    MARGIN,
    Evaluator,
    Outcome,
    Score,
    _contenders,
    exhaustive,
    kendall_tau,
    rung_sizes,
    successive_halving,
)
from studies.advisor.space import Base, Candidate, Restrictions, candidates


def test_rungs_grow_by_three_and_end_at_the_whole_epoch() -> None:
    assert rung_sizes(35) == [4, 12, 35]
    assert rung_sizes(18) == [4, 18]  # a 12-iteration prefix would be two thirds of the epoch
    assert rung_sizes(100) == [4, 12, 36, 100]
    assert rung_sizes(4) == [4]
    assert rung_sizes(8) == [4, 8]


def test_kendall_tau_by_hand() -> None:
    assert kendall_tau(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert kendall_tau(["a", "b", "c"], ["c", "b", "a"]) == -1.0
    assert kendall_tau(["a", "b", "c"], ["a", "c", "b"]) == pytest.approx(1 / 3)  # 2 concordant, 1 not
    assert kendall_tau(["a", "b"], ["b", "x", "a"]) == -1.0  # labels the other order lacks are left out


def _outcome(name: str, epoch: float, half: float, iterations: int = 4, n: int = 40) -> Outcome:
    return Outcome(Candidate(name, "random"), Estimate(epoch, half, iterations, n))


def test_a_candidate_goes_only_when_its_widened_interval_cannot_reach_the_best() -> None:
    best = _outcome("best", 100.0, 2.0)  # reaches 102 * 1.08 = 110.16
    near = _outcome("near", 118.0, 0.0)  # its low 118 * 0.92 = 108.56: kept
    far = _outcome("far", 121.0, 0.0)  # 121 * 0.92 = 111.32: gone
    unknown = _outcome("unknown", 119.0, math.nan)  # one block: judged by the margin alone, 109.48: kept
    exact = _outcome("exact", 110.5, 0.0, iterations=40)  # exact: no margin, 110.5 > 110.16: gone
    outcomes = {o.candidate: o for o in (best, near, far, unknown, exact)}
    kept = _contenders(list(outcomes), outcomes, 1, Score())
    assert [c.scheme for c in kept] == ["best", "near", "unknown"]
    assert MARGIN == 0.08  # the figures above are worked out for it
    # racing for the top two: the second-best upper bound (exact's 110.5) is the reach; far stays out
    top_two = _contenders(list(outcomes), outcomes, 2, Score())
    assert [c.scheme for c in top_two] == ["best", "near", "unknown", "exact"]


def test_preprocessing_counts_once_and_epochs_scale_the_estimate() -> None:
    a, b = _outcome("a", 100.0, 0.0), _outcome("b", 90.0, 0.0)
    score = Score(epochs=2, fixed_s={b.candidate: 50.0})
    assert score.bounds(a) == pytest.approx((200 * (1 - MARGIN), 200 * (1 + MARGIN)))
    assert score.bounds(b) == pytest.approx((50 + 180 * (1 - MARGIN), 50 + 180 * (1 + MARGIN)))


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
    # every estimate of a prefix lies within the bias margin of its whole epoch
    exact = {o.candidate: o.estimate.epoch_s for o in whole.outcomes}
    for o in sh.outcomes:
        assert abs(o.estimate.epoch_s / exact[o.candidate] - 1) <= MARGIN, o.candidate.label
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
