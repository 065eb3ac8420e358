"""Other processes' share of the machine's CPU time during a run (realrun.machine_cpu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from realrun.machine_cpu import CpuSample, cpu_sample, others_share


def test_share_by_hand() -> None:
    # A 4-second window on 2 CPUs (8 CPU-seconds): the machine used 5 s, the run 3 s of them,
    # so others used 2 s = 25%; the hypervisor took 0.4 s = 5%.
    before = CpuSample(at=100.0, busy=1000.0, steal=10.0, own=50.0, cpus=2)
    after = CpuSample(at=104.0, busy=1005.0, steal=10.4, own=53.0, cpus=2)
    assert others_share(before, after) == {"others_cpu": 0.25, "steal": 0.05, "window_s": 4.0}


def test_own_time_above_the_machines_by_a_tick_is_zero_not_negative() -> None:
    before = CpuSample(at=0.0, busy=10.0, steal=0.0, own=1.0, cpus=2)
    after = CpuSample(at=1.0, busy=11.0, steal=0.0, own=2.01, cpus=2)
    assert others_share(before, after)["others_cpu"] == 0.0


def test_missing_or_empty_window_gives_nothing() -> None:
    s = CpuSample(at=5.0, busy=1.0, steal=0.0, own=0.0, cpus=1)
    assert others_share(None, s) == {} and others_share(s, None) == {} and others_share(s, s) == {}


def test_reads_a_proc_stat_file(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice, in ticks
    stat.write_text(
        "cpu  100 20 30 5000 7 1 2 9 0 0\ncpu0 50 10 15 2500 3 1 1 4 0 0\ncpu1 50 10 15 2500 4 0 1 5 0 0\nintr 1\n"
    )
    s = cpu_sample(stat)
    assert s is not None and s.cpus == 2
    import os

    hz = os.sysconf("SC_CLK_TCK")
    assert s.busy == pytest.approx((100 + 20 + 30 + 1 + 2) / hz)  # idle and iowait are not busy
    assert s.steal == pytest.approx(9 / hz)


@pytest.mark.parametrize(
    "text", ["", "intr 1 2\n", "cpu  a b c d e f g h\ncpu0 1\n", "cpu 1 2 3\ncpu0 1 2 3\n"]
)
def test_unreadable_stat_gives_none(tmp_path: Path, text: str) -> None:
    stat = tmp_path / "stat"
    stat.write_text(text)
    assert cpu_sample(stat) is None
    assert cpu_sample(tmp_path / "absent") is None


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="Linux only")
def test_this_machine() -> None:
    s = cpu_sample()
    assert s is not None and s.cpus >= 1 and s.busy > 0 and s.own >= 0


def _stat_line(pid: int, comm: str, ppid: int, utime: int, stime: int, cutime: int, cstime: int) -> str:
    # /proc/PID/stat: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime ...
    return f"{pid} ({comm}) S {ppid} 1 1 0 -1 0 0 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0\n"


def test_live_children_count_their_own_and_their_reaped_childrens_time(tmp_path: Path) -> None:
    import os

    hz = os.sysconf("SC_CLK_TCK")
    rows = {
        11: _stat_line(11, "forkserver", 7, 100, 50, 30, 20),  # a child: 200 ticks
        12: _stat_line(12, "odd) name (x", 7, 1, 2, 3, 4),  # a child whose name holds brackets: 10 ticks
        13: _stat_line(13, "python", 8, 999, 999, 999, 999),  # someone else's
        14: "garbage",
    }
    for pid, text in rows.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(text)
    (tmp_path / "self").mkdir()  # not a process number: skipped
    from realrun.machine_cpu import live_children_seconds

    assert live_children_seconds(tmp_path, parent=7) == pytest.approx(210 / hz)
    assert live_children_seconds(tmp_path, parent=99) == 0.0


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="Linux only")
def test_a_forked_workers_cpu_time_is_the_launchers_own() -> None:
    """A worker forked from the forkserver is reaped by the server, not by this process: its time
    (and that of a process it ran) must still count as this process's own, not as another's."""
    import os
    import sys

    from realrun.processes import worker_context, worker_process

    burn = f'{sys.executable} -c "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"'
    context = worker_context()
    start = worker_process(context, os.system, ("true",))
    start.start()
    start.join(60)  # the server runs now
    before = cpu_sample()
    worker = worker_process(context, os.system, (burn,))
    worker.start()
    worker.join(60)
    after = cpu_sample()
    assert worker.exitcode == 0
    assert before is not None and after is not None
    assert after.own - before.own >= 0.45  # the 0.5 s burnt, less a tick's rounding
