"""What else used this machine's CPUs while a run ran, counted rather than inferred from the load average.

The 1-minute load average that ``load.json`` has always held cannot tell a quiet machine from a
busy one when runs follow each other: it decays over a minute, so the load "before" a run is
mostly the previous run's own workers. On the scheme grid of 2026-11-27 (272 runs back to back,
6.5 s apart), the load before a run was 1.94 after a 2-worker run and 3.74 after a 4-worker one
(medians) on a machine where nothing else ran, and the grid was reported as measured under load
2.85. What a fidelity figure needs is the share of the machine's CPU time that processes other
than the run took *during* the run: the CPU time the whole machine used over the run's window
(``/proc/stat``), less what the launcher and its workers used, over the window's capacity
(CPUs x seconds). The launcher's own time and its reaped children's come from ``getrusage``; its
live children's from ``/proc``, each with the time of the children it reaped: the workers are
forks of a server process the launcher started (:mod:`realrun.processes`), which reaps them.
``steal`` is the share the hypervisor gave this VM's CPUs to other guests over the same window,
which slows a run as much and shows in no process's time.

Linux only: elsewhere :func:`cpu_sample` returns None and ``load.json`` keeps the load averages.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC_STAT = Path("/proc/stat")
# /proc/stat's aggregate "cpu" line, in clock ticks: user nice system idle iowait irq softirq steal ...
_BUSY_FIELDS = (0, 1, 2, 5, 6)  # user, nice (guest time is inside user), system, irq, softirq
_STEAL_FIELD = 7


@dataclass(frozen=True)
class CpuSample:
    """The machine's and this process tree's CPU seconds at one moment."""

    at: float  # time.monotonic()
    busy: float  # CPU seconds every process on the machine has used (all CPUs summed)
    steal: float  # CPU seconds the hypervisor took from this machine's CPUs
    own: float  # CPU seconds of this process and its descendants, as far as they are known (module doc)
    cpus: int  # CPUs the aggregate line sums over


def cpu_sample(stat: Path = PROC_STAT) -> CpuSample | None:
    """A sample now; None where ``stat`` cannot be read or parsed (not Linux)."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    head = lines[0].split() if lines else []
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    if len(head) < 9 or head[0] != "cpu" or cpus < 1:
        return None
    try:
        ticks = [int(x) for x in head[1:]]
    except ValueError:
        return None
    per_second = float(os.sysconf("SC_CLK_TCK"))
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return CpuSample(
        at=time.monotonic(),
        busy=sum(ticks[i] for i in _BUSY_FIELDS) / per_second,
        steal=ticks[_STEAL_FIELD] / per_second,
        own=mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime + live_children_seconds(),
        cpus=cpus,
    )


def live_children_seconds(proc: Path = Path("/proc"), parent: int | None = None) -> float:
    """CPU seconds of ``parent``'s (default: this process's) children that have not been reaped,
    each with the children it has reaped itself (``/proc/PID/stat``: utime, stime, cutime, cstime).
    A process that ends between the listing and its reading counts nothing here, and its time
    moves to ``getrusage``'s reaped children once this process waits for it."""
    me = os.getpid() if parent is None else parent
    per_second = float(os.sysconf("SC_CLK_TCK"))
    total = 0
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # After the command's closing bracket: state, ppid, ... utime, stime, cutime, cstime (fields 14-17).
        if len(fields) > 14 and fields[1] == str(me):
            total += sum(int(x) for x in fields[11:15])
    return total / per_second


def others_share(before: CpuSample | None, after: CpuSample | None) -> dict[str, Any]:
    """``others_cpu`` (other processes' CPU time over the window's capacity, 0 to 1), ``steal``
    (the same for the hypervisor) and ``window_s``; empty where either sample is missing.

    The share is rounded to 4 places: clock ticks are 10 ms, so a 5-second window on 2 CPUs
    resolves 0.1%. Other processes' time is clipped at 0, since the machine's counters and
    ``getrusage`` are read a moment apart and a run's own time can exceed the window's busy
    time by a tick or two.
    """
    if before is None or after is None:
        return {}
    window = after.at - before.at
    if window <= 0:
        return {}
    capacity = after.cpus * window
    others = max(0.0, (after.busy - before.busy) - (after.own - before.own))
    steal = max(0.0, after.steal - before.steal)
    return {
        "others_cpu": round(min(1.0, others / capacity), 4),
        "steal": round(min(1.0, steal / capacity), 4),
        "window_s": round(window, 3),
    }
