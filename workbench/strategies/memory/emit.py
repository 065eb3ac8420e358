"""A :class:`MemorySchedule` in the plan's tensor vocabulary, so the simulator's memory
timeline checks it and the real executor can carry it out.

Per step ``k`` (operator ``op``), :func:`schedule_to_plan` appends:

* ``{prefix}{op}.load.{x}``: a transfer host -> GPU (phase ``h2d``) for each tensor the
  step loads, allocating ``{prefix}{x}`` on the GPU;
* ``{prefix}{op}``: the compute task on the GPU (the operator's phase, layer and cost
  features), after the loads; it allocates its outputs ``{prefix}{y}`` and, when it
  ends, frees the inputs the step does not keep;
* ``{prefix}{op}.wb.{y}``: a transfer GPU -> host (phase ``d2h``) for each output,
  allocating the host copy ``{prefix}{y}@host``; it frees the GPU copy when the step
  does not keep ``y`` (a swap-out). A kept output stays live on the GPU (reuse) until
  the compute task of the step that releases it, which waits for its write-back.

The next step's loads (and its compute) wait for this step's compute and for the
write-backs that free GPU memory, so at no moment does the GPU hold more than the
schedule's ``peak_bytes`` of that step, and the simulated h2d plus d2h bytes are the
schedule's ``volume_bytes``. Write-backs of kept outputs overlap the next steps, as
ROC overlaps "the data transfers back to DRAM with subsequent GNN computations".
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.plan import Plan
from workbench.strategies.memory.base import MemorySchedule


def operator_task(prefix: str, op: str) -> str:
    """The id of operator ``op``'s task under ``prefix`` (which carries its own separator)."""
    return f"{prefix}{op}"


def load_task(operator: str, tensor: str) -> str:
    """The host-to-GPU load of ``tensor`` before the operator task ``operator``."""
    return f"{operator}.load.{tensor}"


def write_back_task(operator: str, tensor: str) -> str:
    """The GPU-to-host write-back of ``tensor`` after the operator task ``operator``."""
    return f"{operator}.wb.{tensor}"


def schedule_to_plan(
    plan: Plan,
    schedule: MemorySchedule,
    *,
    gpu: str = "m0.gpu0",
    host: str = "m0.host",
    prefix: str = "",
    deps: Sequence[str] = (),
    worker: int = 0,
    iteration: int = 0,
) -> list[str]:
    """Append ``schedule``'s loads, operators and write-backs to ``plan`` (see the module
    docstring). The first tasks depend on ``deps``. Returns the ids a later task should
    depend on to run after the whole step (its last operator and the write-backs nothing
    waits for yet)."""
    graph = schedule.graph
    tensors = {t.name: t for t in graph.tensors}
    operators = {op.name: op for op in graph.operators}
    common = {"worker": worker, "iteration": iteration}
    barrier = list(deps)
    write_back_of: dict[str, str] = {}  # kept output on the GPU -> its write-back task
    write_backs: list[str] = []
    waited: set[str] = set()  # tasks some later task depends on
    last = ""
    for step in schedule.steps:
        op = operators[step.operator]
        tid = operator_task(prefix, op.name)
        loads = []
        for name in step.load:
            t = tensors[name]
            lid = load_task(tid, name)
            plan.transfer(
                lid, host, gpu, t.bytes, "h2d", barrier,
                allocate={prefix + name: t.bytes}, carries=t.carries, layer=op.layer, **common,
            )  # fmt: skip
            loads.append(lid)
        kept = set(step.keep)
        released = [name for name in op.reads if name not in kept]
        # Freeing an output produced earlier waits until its write-back has read it.
        after_wb = [write_back_of.pop(name) for name in released if name in write_back_of]
        waited.update(after_wb)
        plan.compute(
            tid, gpu, op.phase, [*barrier, *loads, *after_wb],
            allocate={prefix + y: tensors[y].bytes for y in op.writes},
            free=[prefix + name for name in released],
            layer=op.layer, features=dict(op.features), **common,
        )  # fmt: skip
        waited.update(barrier)
        barrier = [tid]
        for name in step.write_back:
            t = tensors[name]
            wid = write_back_task(tid, name)
            swap_out = name not in kept
            plan.transfer(
                wid, gpu, host, t.bytes, "d2h", [tid],
                allocate={f"{prefix}{name}@host": t.bytes},
                free=[prefix + name] if swap_out else [],
                carries=t.carries, layer=op.layer, **common,
            )  # fmt: skip
            write_backs.append(wid)
            if swap_out:
                barrier.append(wid)
            else:
                write_back_of[name] = wid
        last = tid
    return [last, *(w for w in write_backs if w not in waited)]
