"""From a search's outcomes to the advice: time to train, its interval, ties, and the table written.

**Time to train E epochs** = preprocessing + E x the estimated epoch. Preprocessing is what a run
does once before its first epoch and the simulated epoch does not contain: partitioning and the
placement (its access-probability estimate included), each timed afresh on this machine (caches
off) once per distinct choice. Sampling is not preprocessing here: every searched scheme samples
inside its iterations, where the simulator prices it.

**The interval** is ``[t / (1 + d), t (1 + u)]`` (a factor, not a difference: a simulator off by
226%, as P3's held-out CPU run was, predicts a third of the time or three times it, never a
negative time), where ``u`` (how much longer) and ``d`` (how much shorter) each combine two
independent relative errors in quadrature:

* the prefix's error: the range the search allows the epoch around a prefix estimate
  (:func:`studies.advisor.search.true_over_estimate`: its half-width, Student's t over blocks of
  iterations, and the bias range measured for a prefix of that length), so a candidate the table
  shows apart from the first is one the search could tell apart; 0 for a whole-epoch simulation;
* the simulator's measured fidelity error for the scheme: the median |epoch error| of held-out
  configurations that ``gnnwb validate`` or ``gnnwb fidelity`` wrote (``summary.json``) beside the
  profile, per scheme where it has one, else over all; ``--fidelity-error`` overrides it. Without a
  profile there is no measured error: the interval is the variation alone and the page says so.

Two candidates are **tied** when their intervals overlap; the table marks every candidate tied with
the first choice.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from studies.advisor.search import Evaluator, Outcome, SearchResult, true_over_estimate
from studies.advisor.space import Candidate
from workbench.errors import ConfigError


@dataclass(frozen=True)
class FidelityError:
    """The simulator's measured relative epoch error: per scheme, and over all schemes."""

    per_scheme: dict[str, float]
    overall: float | None
    source: str  # where it came from, for the page

    def of(self, scheme: str) -> float:
        if scheme in self.per_scheme:
            return self.per_scheme[scheme]
        return self.overall or 0.0


def fidelity_error(profile: str | None, override: float | None) -> FidelityError:
    """The fidelity error to widen intervals by (see the module docstring)."""
    if override is not None:
        return FidelityError({}, override, "--fidelity-error")
    if profile is None:
        return FidelityError(
            {}, None, "none: no calibrated profile given, intervals show per-iteration variation only"
        )
    summary = Path(profile).resolve().parent / "summary.json"
    if not summary.is_file():
        return FidelityError({}, None, f"none: no summary.json of held-out errors beside {profile}")
    try:
        data = json.loads(summary.read_text())
        block = data.get("fidelity", data)
        overall = float(block["epoch_median_abs_error"])
        per_scheme = {
            str(name): float(v["median_abs_error"])
            for name, v in (block.get("schemes") or {}).items()
            if isinstance(v, dict) and "median_abs_error" in v
        }
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{summary}: not a fidelity summary (epoch_median_abs_error missing or malformed): {exc}"
        ) from None
    return FidelityError(per_scheme, overall, f"held-out median |epoch error| in {summary}")


def preprocessing_seconds(evaluator: Evaluator, cands: list[Candidate]) -> dict[Candidate, float]:
    """Partition plus placement seconds per candidate, timed afresh once per distinct choice."""
    from workbench.config import config_from_dict
    from workbench.run import prepare_run

    timed: dict[tuple[str, str, str], float] = {}
    out = {}
    for c in cands:
        key = (c.partition, c.placement, c.capacity)
        if key not in timed:
            prepared = evaluator.prepare(c)
            if isinstance(prepared, str):
                continue
            config = config_from_dict(evaluator.base.config(c), f"advise candidate {c.label}")
            again = prepare_run(config, graph=prepared.inputs.graph, spine_cache=False)
            timed[key] = again.seconds.get("partition", 0.0) + again.seconds.get("placement", 0.0)
        out[c] = timed[key]
    return out


def advice_table(
    result: SearchResult,
    preprocess_s: dict[Candidate, float],
    fidelity: FidelityError,
    epochs: int,
) -> pd.DataFrame:
    """One row per candidate, ranked by time to train ``epochs`` epochs; skipped ones last, with why."""
    rows = []
    for o in result.ranked():
        rows.append(_row(o, preprocess_s.get(o.candidate, math.nan), fidelity, epochs))
    table = pd.DataFrame(rows)
    simulated = table["skipped"] == ""
    table = pd.concat(
        [table[simulated].sort_values(["train_s", "label"]), table[~simulated]], ignore_index=True
    )
    table.insert(0, "rank", [i + 1 if s else 0 for i, s in enumerate(table["skipped"] == "")])
    if simulated.any():
        first = table.iloc[0]
        table["tied_with_first"] = simulated.reindex(table.index, fill_value=False) & (
            (table["train_low_s"] <= first["train_high_s"]) & (table["skipped"] == "")
        )
        table.loc[0, "tied_with_first"] = False
    else:
        table["tied_with_first"] = False
    return table


def _row(o: Outcome, preprocess_s: float, fidelity: FidelityError, epochs: int) -> dict[str, Any]:
    row: dict[str, Any] = {"label": o.candidate.label, **o.candidate.as_row()}
    e = o.estimate
    if e is None:
        return {**row, "skipped": o.skipped or "not simulated", "epoch_s": math.nan, "train_s": math.nan}
    variation = 0.0 if e.exact or math.isnan(e.half_width_s) else e.half_width_s / e.epoch_s
    shorter, longer = true_over_estimate(e)
    prefix_up = longer - 1
    prefix_down = (1 / shorter - 1) if shorter > 0 else math.inf
    fid = fidelity.of(
        o.candidate.scheme if o.candidate.memory == "-" else f"{o.candidate.scheme}-{o.candidate.memory}"
    )
    low = e.epoch_s / (1 + math.hypot(prefix_down, fid))
    high = e.epoch_s * (1 + math.hypot(prefix_up, fid))
    row.update(
        {
            "skipped": "",
            "epoch_s": e.epoch_s,
            "epoch_low_s": low,
            "epoch_high_s": high,
            "preprocess_s": preprocess_s,
            "train_s": preprocess_s + epochs * e.epoch_s,
            "train_low_s": preprocess_s + epochs * low,
            "train_high_s": preprocess_s + epochs * high,
            "variation": variation,
            "prefix_up": prefix_up,
            "prefix_down": prefix_down,
            "fidelity_error": fid,
            "iterations_simulated": e.iterations,
            "epoch_iterations": e.epoch_iterations,
            "exact": e.exact,
            "rung": o.rung + 1,
            "peak_gpu_bytes": o.peak_gpu_bytes,
            "network_bytes": o.network_bytes,
            **{f"{p}_s": s for p, s in sorted(o.phase_s.items())},
        }
    )
    return row


def pareto_front(
    table: pd.DataFrame, columns: tuple[str, ...] = ("train_s", "peak_gpu_bytes", "network_bytes")
) -> pd.Series:
    """Whether each simulated candidate is on the Pareto front of ``columns`` (all minimised)."""
    sim = table[table["skipped"] == ""]
    values = sim[list(columns)].to_numpy(dtype=float)
    front = []
    for i in range(len(values)):
        dominated = ((values <= values[i]).all(axis=1) & (values < values[i]).any(axis=1)).any()
        front.append(not dominated)
    return pd.Series(front, index=sim.index).reindex(table.index, fill_value=False)
