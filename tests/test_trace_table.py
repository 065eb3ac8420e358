"""The per-task half of the trace (:func:`workbench.trace.task_table`) on odd field values."""

from __future__ import annotations

from workbench.plan import Task
from workbench.trace import TraceRows, build_trace, task_table


def test_src_and_dst_are_a_transfers_own_and_a_copy_within_one_memory_sends_nothing() -> None:
    tasks = [
        Task("c", "compute", device="m0.gpu0", src="m0.host", dst="m0.gpu1", bytes=7),  # stray ends
        Task("t", "transfer", src="m0.host", dst="m0.gpu0", bytes=100),
        Task("same", "transfer", src="m0.gpu0", dst="m0.gpu0", bytes=50),
        Task("back", "transfer", src="m0.gpu0", dst="m0.host", bytes=30),
    ]
    table = task_table(tasks)
    rows = TraceRows(
        [0, 1, 2, 3], ["m0.gpu0"] * 4, ["compute", "h2d", "d2d", "d2h"], [0.0] * 4, [0.0] * 4, [1.0] * 4
    )
    trace = build_trace(tasks, rows, "r", "sim", {"m0.gpu0": 0})
    assert trace["src"].tolist() == ["", "m0.host", "m0.gpu0", "m0.gpu0"]
    assert trace["dst"].tolist() == ["", "m0.gpu0", "m0.gpu0", "m0.host"]
    assert trace["bytes"].tolist() == [0, 100, 0, 30]
    assert trace["buffer_bytes"].tolist() == [0, 100, 50, 30]
    assert table.n == 4


def test_an_empty_plan_has_an_empty_table() -> None:
    table = task_table([])
    assert table.n == 0 and len(table.sent) == 0
