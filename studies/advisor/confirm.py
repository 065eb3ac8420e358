"""``--confirm K``: the advisor's top ``K`` run for real, predicted beside measured.

Each candidate's configuration is written as ``confirm/<rank>/config.toml`` and run through the
same path as ``gnnwb realrun`` (:func:`realrun.launcher.prepare_real_run` and ``launch``): one
process per worker on the CPU here, one per GPU where there are GPUs. The measured epoch is the
median of the warm epochs (the first is left out: it builds schedules and warms caches), and the
spread is their range over that median. The predicted order is judged pair by pair: a pair whose
measured times differ by more than the larger of their spreads must be in the predicted order,
else the rank is shown as wrong; a closer pair is within noise.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import ConfigError, WorkbenchError

EPOCHS = 6  # the first is cold; five warm ones give a median and a spread


def confirm(
    table: pd.DataFrame,
    configs: dict[str, dict[str, Any]],
    k: int,
    out: Path,
    device: str = "cpu",
    say: Callable[[str], None] = print,
) -> pd.DataFrame:
    """Run the first ``k`` simulated rows of ``table`` for real; their configs by label in ``configs``."""
    from realrun.launcher import launch, prepare_real_run
    from workbench.tomlfile import toml_text

    top = table[table["skipped"] == ""].head(k)
    rows = []
    for i, row in enumerate(top.itertuples(), start=1):
        folder = out / "confirm" / f"{i}"
        folder.mkdir(parents=True, exist_ok=True)
        config_path = folder / "config.toml"
        config_path.write_text(toml_text(configs[row.label]))
        say(f"confirm {i}/{len(top)}: {row.label} for real on {device}")
        measured, spread, error = math.nan, math.nan, ""
        try:
            prepared, plan, _ = prepare_real_run(config_path, None, device)
            summary = launch(
                prepared, plan, config_path, device=device, out=folder / "run", epochs=EPOCHS, evaluate=False
            )
            if not summary.complete:
                raise ConfigError(f"the real run failed: {summary.error}")
            measured, spread = warm_epochs(summary.results)
        except WorkbenchError as exc:
            error = str(exc).splitlines()[0]
        rows.append(
            {
                "label": row.label,
                "predicted_s": row.epoch_s,
                "predicted_low_s": row.epoch_low_s,
                "predicted_high_s": row.epoch_high_s,
                "measured_s": measured,
                "measured_spread": spread,
                "predicted_rank": i,
                "error": error,
            }
        )
    result = pd.DataFrame(rows)
    return judge_order(result)


def warm_epochs(results: list[dict[str, Any]]) -> tuple[float, float]:
    """The median epoch time of the warm epochs and their spread (range over median)."""
    times = sorted(float(r["epoch_s"]) for r in results[1:]) or [float(r["epoch_s"]) for r in results]
    median = statistics.median(times)
    return median, (times[-1] - times[0]) / median if median > 0 else math.nan


def judge_order(result: pd.DataFrame) -> pd.DataFrame:
    """Measured ranks, and per candidate whether the predicted order holds against every other
    (``agrees``), fails against one whose measured difference exceeds both spreads (``wrong: ...``),
    or only against ones within noise (``within noise``)."""
    result = result.copy()
    ok = result["measured_s"].notna()
    result["measured_rank"] = result["measured_s"].rank(method="min").where(ok).astype("Int64")
    notes = []
    for i, a in result.iterrows():
        if not ok[i]:
            notes.append(f"not measured: {a['error']}")
            continue
        wrong, noise = [], []
        for j, b in result.iterrows():
            if i == j or not ok[j]:
                continue
            predicted_faster = a["predicted_rank"] < b["predicted_rank"]
            measured_faster = a["measured_s"] < b["measured_s"]
            if predicted_faster == measured_faster:
                continue
            gap = abs(a["measured_s"] - b["measured_s"]) / min(a["measured_s"], b["measured_s"])
            if gap > max(a["measured_spread"], b["measured_spread"]):
                wrong.append(f"measured {'faster' if measured_faster else 'slower'} than {b['label']}")
            else:
                noise.append(b["label"])
        notes.append(("wrong: " + "; ".join(wrong)) if wrong else ("within noise" if noise else "agrees"))
    result["order_note"] = notes
    return result
