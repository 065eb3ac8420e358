"""Execution schemes run for real: one executor class per scheme (:class:`realrun.schemes.base.RealExecutor`),
one file each, registered here under the scheme's name by the line above its class::

    @REAL_EXECUTORS.register("p3")
    class P3Executor(RealExecutor): ...

An executor does what its scheme's schedule and plan (:mod:`workbench.strategies.execution`)
say, with real tensors and real communication, and reports every planned task it ran under
the plan's task id. The scheme declares what a real run imposes on its plan
(``real_run_params``); a scheme without an executor is simulated only (``gnnwb sim``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.errors import UnknownNameError
from workbench.registry import Registry

if TYPE_CHECKING:
    from realrun.schemes.base import RealExecutor

REAL_EXECUTORS: Registry[RealExecutor] = Registry("real executor", package="realrun.schemes")


def real_executor(name: str) -> type[RealExecutor]:
    """The executor class of scheme ``name``; an unknown name lists the schemes that run for real."""
    if name not in REAL_EXECUTORS.names():
        raise UnknownNameError(
            f"execution scheme {name!r} has no real executor yet; real runs support: "
            f"{', '.join(REAL_EXECUTORS.names())} (simulate it with gnnwb sim)"
        )
    return REAL_EXECUTORS.get(name)
