"""One advice from start to end: candidates, preparation, search, table, page, confirmation.

What :func:`advise` refuses, each in one line before or as soon as it knows:

* an unknown name in a restriction list (the dimension and the names allowed);
* a budget smaller than one candidate needs: the first candidate is prepared and its first rung
  simulated, and when that alone took longer than the budget the search stops there, saying both;
* a graph or cluster that nothing fits on: every candidate refused or overflowing a GPU, with the
  smallest requirement among those that overflowed (its peak against the GPU's memory).

Finished work is never lost: a search that runs out of budget after its first rung writes the
ranking from the estimates it has (the page and the printed text say where it stopped).
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from studies.advisor.advice import advice_table, fidelity_error, pareto_front, preprocessing_seconds
from studies.advisor.search import (
    SCREEN_RUNG,
    BudgetExceeded,
    Evaluator,
    Outcome,
    Score,
    SearchResult,
    exhaustive,
    progress_printer,
    successive_halving,
)
from studies.advisor.space import NOT_SEARCHED, Base, Candidate, Restrictions, candidates
from workbench.errors import ConfigError


@dataclass(frozen=True)
class Request:
    """What to advise on (``base``: graph, cluster, model, sampler) and how to search."""

    base: Base
    epochs: int = 10
    budget_s: float = 600.0
    confirm: int = 0
    device: str = "cpu"
    top: int = 5
    fidelity_error: float | None = None
    exhaustive: bool = False
    scheduler: str | None = None
    restrictions: Restrictions = field(default_factory=Restrictions)
    command: str = ""


@dataclass
class Advice:
    table: pd.DataFrame
    search: SearchResult
    text: str
    stopped: str = ""  # where a search out of budget stopped
    confirm: pd.DataFrame | None = None


def advise(request: Request, out: Path, progress: bool = True) -> Advice:
    """Search, rank, write ``out``/advice.csv and the page, and confirm the top ``request.confirm``."""
    start = time.perf_counter()
    say = progress_printer(progress)
    cands = candidates(request.restrictions)
    # With --confirm, what is searched is what the real executors run.
    base = dataclasses.replace(request.base, as_real=request.confirm > 0)
    evaluator = Evaluator(base, scheduler=request.scheduler)
    try:
        return _advise(request, out, base, cands, evaluator, start, say, progress)
    finally:
        evaluator.close()


def _advise(
    request: Request,
    out: Path,
    base: Base,
    cands: list[Candidate],
    evaluator: Evaluator,
    start: float,
    say: Any,
    progress: bool,
) -> Advice:
    first = _first_fits_budget(evaluator, cands, request.budget_s, start)
    if request.scheduler is None:  # on a cluster, each worker prepares what it is sent
        for i, c in enumerate(cands):
            say(f"preparing {i + 1}/{len(cands)}: {c.label}")
            evaluator.prepare(c)
    say("timing preprocessing (partitions and placements, caches off)")
    pre = preprocessing_seconds(evaluator, cands)
    score = Score(request.epochs, pre)
    stopped = ""
    deadline = start + request.budget_s
    if request.exhaustive:
        result = exhaustive(evaluator, cands, say)
    else:
        try:
            result = successive_halving(
                evaluator,
                cands,
                deadline,
                say,
                top=request.top,
                score=score,
                simulated={first.candidate: first},
            )
        except BudgetExceeded as exc:
            stopped = f"the budget ({request.budget_s:g} s) ran out during rung {exc.rung + 1}; ranked from the estimates made so far"
            result = SearchResult(
                list(exc.outcomes.values()),
                [],
                evaluator.sim_s,
                evaluator.prepare_s,
                evaluator.simulations,
                "successive halving (stopped)",
            )
    if progress and sys.stderr.isatty():
        print(file=sys.stderr)
    _refuse_if_nothing_fits(result, request)
    fid = fidelity_error(base.profile, request.fidelity_error)
    table = advice_table(result, pre, fid, request.epochs)
    table["pareto"] = pareto_front(table)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "advice.csv", index=False)
    configs = {o.candidate.label: base.config(o.candidate) for o in result.outcomes}
    confirmed = None
    if request.confirm:
        from studies.advisor.confirm import confirm

        confirmed = confirm(
            table, configs, request.confirm, out, request.device, say=lambda m: print(m, file=sys.stderr)
        )
        confirmed.to_csv(out / "confirm.csv", index=False)
    meta = {
        "graph": base.graph + "".join(f", {k} {v}" for k, v in base.graph_params.items()),
        "hardware": base.hardware,
        "model": f"{base.model}, hidden {base.hidden}, fanouts {'/'.join(map(str, base.fanouts))}",
        "epochs": request.epochs,
        "fidelity_source": fid.source,
        "search": _search_sentence(result, len(cands), result.rungs, stopped, evaluator.prepare_s),
        "not_searched": [
            f"{kind} {name}: {why}" for kind, names in NOT_SEARCHED.items() for name, why in names.items()
        ],
        "command": request.command,
    }
    _write_page(table, result, meta, out, confirmed, evaluator)
    return Advice(table, result, _text(table, request, meta, stopped), stopped, confirmed)


def _first_fits_budget(
    evaluator: Evaluator, cands: list[Candidate], budget_s: float, start: float
) -> Outcome:
    """Refuse a budget smaller than the first candidate's preparation and first rung; the first
    candidate's first rung, for the search to start from."""
    first = Outcome(cands[0])
    evaluator.simulate(first, SCREEN_RUNG, 0)
    spent = time.perf_counter() - start
    if spent > budget_s:
        raise ConfigError(
            f"--budget {budget_s:g} s is less than one candidate needs: preparing {first.candidate.label} and "
            f"simulating its first {SCREEN_RUNG} iterations took {spent:.1f} s"
        )
    return first


def _refuse_if_nothing_fits(result: SearchResult, request: Request) -> None:
    if any(o.estimate is not None for o in result.outcomes):
        return
    from workbench.hardware.units import parse_size

    overflows = []
    for o in result.outcomes:
        m = re.search(r"holds ([0-9.]+ ?\w+) of ([0-9.]+ ?\w+)", o.skipped)
        if m:
            overflows.append(
                (parse_size(m.group(1).replace(" ", ""), "peak"), m.group(1), m.group(2), o.candidate.label)
            )
    if overflows:
        need, peak, cap, label = min(overflows)
        raise ConfigError(
            f"nothing fits on {request.base.hardware}: the smallest requirement is {label}, which needs {peak} "
            f"on a GPU of {cap}"
        )
    reasons = sorted({o.skipped for o in result.outcomes})
    raise ConfigError(f"no candidate could run on {request.base.hardware}: {reasons[0]}")


def _search_sentence(result: SearchResult, n: int, rungs: list[int], stopped: str, prepare_s: float) -> str:
    how = (
        f"every candidate's whole epoch simulated ({result.simulations} simulations)"
        if result.method == "exhaustive"
        else f"successive halving over epoch prefixes of {', '.join(map(str, rungs))} iterations; "
        f"{result.simulations} simulations; survivors after each rung: "
        + (", ".join(str(len(s)) for s in result.survivors) or "none")
    )
    text = (
        f"{n} candidates; {how}; {result.sim_s:.1f} s simulating, {prepare_s:.1f} s preparing "
        "(partitions, placements and sampled epochs, shared through the caches)."
    )
    return text + (f" Stopped: {stopped}." if stopped else "")


def _write_page(
    table: pd.DataFrame,
    result: SearchResult,
    meta: dict[str, Any],
    out: Path,
    confirmed: Any,
    evaluator: Evaluator,
) -> None:
    try:
        from studies.advisor.report import write_report
    except ImportError:  # the page module is optional while it is being written
        return
    ranked = [o for o in result.ranked() if o.estimate is not None]
    winner = (
        next((o for o in ranked if o.candidate.label == table.iloc[0]["label"]), None) if len(table) else None
    )
    write_report(table, winner.trace if winner is not None else None, meta, out, confirmed)


def _text(table: pd.DataFrame, request: Request, meta: dict[str, Any], stopped: str) -> str:
    sim = table[table["skipped"] == ""]
    first = sim.iloc[0]
    tied = sim[sim["tied_with_first"]]["label"].tolist()
    lines = [
        f"first choice: {first['label']}: {request.epochs} epochs in {first['train_s']:.3g} s "
        f"[{first['train_low_s']:.3g}, {first['train_high_s']:.3g}] (epoch {first['epoch_s'] * 1e3:.3g} ms, "
        f"preprocessing {first['preprocess_s']:.3g} s)",
        "tied with it: "
        + (", ".join(tied[:5]) + (f" and {len(tied) - 5} more" if len(tied) > 5 else "") if tied else "none"),
        f"{len(sim)} simulated, {len(table) - len(sim)} not ({', '.join(sorted({r.split(':')[0] for r in table['skipped'] if r}))})"
        if len(table) > len(sim)
        else f"{len(sim)} simulated",
        meta["search"],
        f"intervals: {meta['fidelity_source']}",
    ]
    if stopped:
        lines.append(f"warning: {stopped}")
    return "\n".join(lines)


__all__ = ["Advice", "Request", "advise"]
