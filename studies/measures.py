"""What a study point measures: each a function of a :class:`~studies.runner.Point` returning a flat row.

* ``sim``: build the configuration's plan through the spine and simulate it; the row is
  :func:`workbench.run.results_row` (epoch time, busy seconds and bytes per phase).
  A scheme that learns online (ROC) is trained iteration by iteration
  (:func:`workbench.online.train_online`); its row adds the first and last iteration's
  time.
* ``preprocess``: seconds to partition and place as the configuration says (the
  placement's probability estimate included), nothing simulated.

Every function runs in whatever process executes the point, so it imports lazily and
returns plain numbers and strings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def _prepare(point: Any) -> Any:
    from workbench.config import config_from_dict
    from workbench.run import prepare_run

    config = config_from_dict(point.config, f"study {point.study} point {point.label}")
    return prepare_run(config)


def measure_sim(point: Any) -> dict[str, Any]:
    from sim import simulate
    from workbench.run import results_row

    prepared = _prepare(point)
    extra: dict[str, Any] = {}
    if hasattr(prepared.scheme, "plan_iteration"):
        from workbench.online import train_online

        records, trace = train_online(prepared, lambda plan: simulate(plan, prepared.cluster).trace)
        extra = {
            "first_iteration_s": records[0].seconds,
            "last_iteration_s": records[-1].seconds,
            "boundaries_changed": int(records[0].boundaries != records[-1].boundaries),
        }
    else:
        trace = simulate(prepared.plan(), prepared.cluster).trace
    row = results_row(prepared, trace)
    row.update(extra)
    row["prepare_s"] = sum(prepared.seconds.values())
    return row


def measure_preprocess(point: Any) -> dict[str, Any]:
    """Partition and placement seconds (the spine's own stage timings)."""
    t0 = time.perf_counter()
    prepared = _prepare(point)
    seconds = prepared.seconds
    return {
        "partition_s": seconds.get("partition", 0.0),
        "placement_s": seconds.get("placement", 0.0),
        "total_s": time.perf_counter() - t0,
    }


MEASURES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "sim": measure_sim,
    "preprocess": measure_preprocess,
}
