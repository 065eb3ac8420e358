"""The one namer of plan task ids, for plan builders and real executors alike.

A plan names every task; a real executor records what it ran under the same name, so a
trace row and the plan task it measures meet by id. Both sides build ids here and nowhere
else: a name typed twice drifts apart, and then a real run reports a task its plan lacks.

Ids are ``i{iteration}.{what}`` for a task of the whole iteration (an all-reduce) and
``i{iteration}.w{worker}.{step}`` for one worker's step; schemes add their own steps under
a worker's prefix (:func:`worker_prefix`).

Calibration reads two things back from an exchange's id (:func:`sim.costmodel.exchange_of`,
:func:`sim.costmodel.exchange_protocol`): fields naming its ends (``w{k}``, a memory node such
as ``m1.host``, ``from{k}``, ``to{k}``, a ``-w{k}`` suffix) are dropped to find the exchange
every pair of ends shares, and its first other field after the iteration and time step, less its
number, is its protocol (``remote``, ``halo``), which prices the exchange's fixed cost. A new
exchange step keeps that shape, or gets a fixed cost shared with whatever name it collides with.
"""

from __future__ import annotations


def iteration_prefix(iteration: int) -> str:
    """The prefix of every task of ``iteration``."""
    return f"i{iteration}"


def worker_prefix(iteration: int, worker: int) -> str:
    """The prefix of worker ``worker``'s tasks in ``iteration``."""
    return f"i{iteration}.w{worker}"


def sample_task(prefix: str) -> str:
    """A worker's sampling (or, for real, the handover of its sampled minibatch)."""
    return f"{prefix}.sample"


def read_task(prefix: str, kind: str, source: str) -> str:
    """A feature read of ``kind`` (local, peer, host, remote) from memory node ``source``."""
    return f"{prefix}.{kind}.{source}"


def forward_task(prefix: str, layer: int) -> str:
    return f"{prefix}.fwd{layer}"


def backward_task(prefix: str, layer: int) -> str:
    return f"{prefix}.bwd{layer}"


def activation_tensor(prefix: str, layer: int) -> str:
    """What layer ``layer``'s forward saves for its backward (allocated by one, freed by the other)."""
    return f"{prefix}.act{layer}"


def allreduce_task(iteration: int) -> str:
    """The gradient all-reduce of ``iteration`` among every worker."""
    return f"{iteration_prefix(iteration)}.allreduce"


def update_task(iteration: int, worker: int) -> str:
    """Worker ``worker``'s optimizer step of ``iteration``."""
    return f"{worker_prefix(iteration, worker)}.update"
