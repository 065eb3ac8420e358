"""Execution schemes run for real: one module per scheme, each with ``setup(ctx)`` (its model
and state, once per run, before the workers' first barrier), ``run_epoch(ctx, epoch)`` (train
one epoch; returns the worker's ``loss_sum``, ``correct`` and ``seeds``) and ``evaluate(ctx)``
(test accuracy of the worker's model), and optionally ``PLAN_PARAMS`` (scheme parameters the
executor imposes on the run's plan, :func:`realrun.launcher.as_executed`).

A real scheme does what its plan (:mod:`workbench.strategies.execution`) says, with real
tensors and real communication, and reports every planned task it ran through
:meth:`realrun.schemes.base.WorkerContext.row` under the plan's task id. Only the schemes
listed here run for real (``model-centric``; ``hopgnn`` with its three switches, model migration
included; ``roc-fullgraph`` with its parts resident, on the run's fixed partition; ``p3``); the others
are simulated only (``gnnwb sim``) for now.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from workbench.errors import UnknownNameError

# Registered name -> module under realrun.schemes.
REAL_SCHEMES = {
    "model-centric": "model_centric",
    "hopgnn": "hopgnn",
    "roc-fullgraph": "roc_fullgraph",
    "p3": "p3",
}


def real_scheme(name: str) -> ModuleType:
    """The module of scheme ``name``; an unknown name lists the ones that run for real."""
    if name not in REAL_SCHEMES:
        raise UnknownNameError(
            f"execution scheme {name!r} has no real executor yet; real runs support: "
            f"{', '.join(REAL_SCHEMES)} (simulate it with gnnwb sim)"
        )
    return importlib.import_module(f"realrun.schemes.{REAL_SCHEMES[name]}")
