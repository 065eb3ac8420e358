"""ROC's online loop run for real: plan one iteration, train it on the worker processes, refit
the partitioner to the layer times they measured, repartition, and go on from the trained model.

:func:`workbench.online.train_online` is the loop; here its ``run`` launches the real workers
(:func:`realrun.launcher.launch`) on each iteration's plan, in a folder of its own, with one
model-state file that every launch reads at its start and writes at its end, so the iterations
train one model as a single run would. Each launch starts the worker processes anew (seconds
on a CPU): the loop measures what ROC learns from, the layer times, not the launches.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError
from workbench.run import PreparedRun


@dataclass
class OnlineRun:
    """What :func:`run_online` wrote: the folder, each iteration's record and launch summary."""

    out: Path
    records: list[Any]
    summaries: list[Any]


def run_online(prepared: PreparedRun, config_path: str | Path, out: Path, **launch_options: Any) -> OnlineRun:
    """Train ``prepared``'s iterations online, for real; ``launch_options`` go to each launch."""
    import pandas as pd

    from realrun.launcher import launch
    from workbench.online import train_online
    from workbench.trace import read_trace

    if not prepared.scheme.plans_per_iteration:
        raise ConfigError(
            f"--online: execution scheme {prepared.scheme.registered_name!r} does not train online "
            "(roc-fullgraph does)"
        )
    out.mkdir(parents=True, exist_ok=True)
    state = out / "model-state.pt"
    state.unlink(missing_ok=True)  # a new training, not the continuation of an old one
    count = prepared.inputs.num_iterations
    evaluate = launch_options.pop("evaluate", True)  # after the last iteration only
    summaries = []

    def run(plan: Any) -> pd.DataFrame:
        it = len(summaries)
        print(f"online iteration {it + 1}/{count}", flush=True)
        summary = launch(
            prepared, plan, config_path, out=out / f"i{it}", epochs=1, state=state,
            evaluate=evaluate and it == count - 1, **launch_options,
        )  # fmt: skip
        summaries.append(summary)
        return read_trace(summary.out / "trace.parquet")

    records, trace = train_online(prepared, run)
    trace.to_parquet(out / "trace.parquet", index=False)
    with (out / "online.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        layers = prepared.inputs.model.num_layers
        parts = prepared.inputs.num_workers
        writer.writerow(
            ["iteration", "seconds", "boundaries", "loss", "bytes_match_plan"]
            + [f"layer{layer}_part{part}_s" for layer in range(layers) for part in range(parts)]
        )
        for record, summary in zip(records, summaries, strict=True):
            result = summary.results[-1]
            writer.writerow(
                [record.iteration, record.seconds, " ".join(map(str, record.boundaries)), result["loss"],
                 result["bytes_match_plan"]] + record.layer_seconds.ravel().tolist()
            )  # fmt: skip
    return OnlineRun(out, records, summaries)
