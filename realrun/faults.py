"""Test-only fault injection into real workers: a worker that raises, hangs or exits at a chosen
iteration, so the launcher's failure handling can be tested on real processes.

Set ``GNNWB_REALRUN_FAULT=KIND:RANK:ITERATION`` (KIND one of :data:`FAULT_KINDS`) before a run;
the worker of that rank carries it out as that iteration of its first epoch begins.
"""

from __future__ import annotations

import os
import time

FAULT_ENV = "GNNWB_REALRUN_FAULT"
FAULT_KINDS = ("raise", "hang", "exit")


def inject_fault(spec: str, rank: int, epoch: int, iteration: int) -> None:
    """Carry out ``spec`` (``KIND:RANK:ITERATION``) if it names this worker and iteration."""
    kind, target, at = spec.split(":")
    if int(target) != rank or int(at) != iteration or epoch != 0:
        return
    if kind == "raise":
        raise RuntimeError(f"injected fault ({FAULT_ENV}={spec})")
    if kind == "hang":
        while True:
            time.sleep(3600)
    if kind == "exit":
        os._exit(17)


def check_fault(spec: str | None) -> str | None:
    if not spec:
        return None
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] not in FAULT_KINDS or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"{FAULT_ENV}={spec!r}: expected KIND:RANK:ITERATION with KIND in {FAULT_KINDS}")
    return spec
