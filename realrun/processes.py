"""Where worker processes come from: forks of one process that imported PyTorch (and DGL) once.

A spawned worker starts a fresh interpreter and imports PyTorch, DGL, numpy and the
workbench before it runs anything; its first optimizer imports ``torch._dynamo`` besides.
On a 2-core machine that was about 7 s of a 2-worker run's 9 s, the same for every run of
a grid (``gnnwb fidelity``, ``gnnwb validate``, the fidelity study, the real-run tests).
Python's forkserver start method instead starts one clean server process per launcher
process (a new interpreter with no threads and none of the launcher's state), imports
:data:`PRELOAD` into it once, and forks each worker from it: the server's start costs what
one spawn did, every later worker starts in milliseconds. The server never runs a worker,
so what the forks inherit has initialised nothing (no CUDA context, OpenMP pool or process
group), which is what PyTorch's own DataLoader workers rely on when they fork.

What a fork does not get from the launcher is the environment of the moment it starts: the
server's is the launcher's when the server started. Libraries read some variables once, as
they load into the server (OpenMP's ``OMP_*``: :func:`worker_context` sets its default
first); Python code reads others when it runs, so :func:`worker_process` hands each worker
the launcher's environment of the moment it is made, and the worker takes it before it runs
its target.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

# Imported once, into the forkserver: what every worker imports before its first task.
PRELOAD = ["realrun.preload"]


def worker_context() -> Any:
    """The multiprocessing context to start workers with (torch's, so tensors it shares are
    handled as spawn's are): a forkserver that preloads :data:`PRELOAD`.

    Every process the workbench starts comes from here (the study runner's point workers too):
    a process has one fork server, started by its first fork with the preload of that moment,
    and a preload set later changes nothing."""
    import multiprocessing

    import torch.multiprocessing as mp

    # OpenMP threads that spin while they wait for a busy core slow a CPU worker's epoch up to 100x
    # when another process shares the cores (a 1-worker run's 2 threads: 2.5-3.1 s against 22 ms
    # for the same epoch with passive waiting, measured by gnnwb validate under load). OpenMP reads
    # the setting as PyTorch loads it, in the server, which starts with the environment of this
    # moment; GPU workers' few CPU threads lose nothing by it. A user's own setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if "forkserver" not in multiprocessing.get_all_start_methods():  # not on Windows
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def worker_process(
    context: Any,
    target: Callable[..., Any],
    args: tuple[Any, ...],
    name: str | None = None,
    daemon: bool | None = None,
) -> Any:
    """An unstarted process of ``context`` that runs ``target(*args)`` with ``os.environ`` as the
    launcher's is now."""
    return context.Process(
        target=in_environment, args=(dict(os.environ), target, *args), name=name, daemon=daemon
    )


def in_environment(environment: Mapping[str, str], target: Callable[..., Any], *args: Any) -> Any:
    """Run ``target(*args)`` with ``os.environ`` replaced by ``environment`` (a worker's first step)."""
    os.environ.clear()
    os.environ.update(environment)
    return target(*args)
