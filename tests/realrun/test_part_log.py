"""The worker's part file: rows formatted by hand read back as the JSON ``json.dumps`` writes."""

from __future__ import annotations

import json
from pathlib import Path

from realrun.schemes.base import PartLog, Status


def test_row_lines_are_the_json_of_their_record(tmp_path: Path) -> None:
    log = PartLog(tmp_path / "rank0.jsonl")
    rows = [
        (0, "m0.gpu0", "compute", 0.0, 1e-7, 0, 0),
        (17, "m1.gpu3", "net", 12.345678901234567, 12.5, 123_456_789, 3),
        (5, 'odd "name"\\', "h2d", 3.0000000000000004, 1e20, 1, 0),
    ]
    for row in rows:
        log.add_row(*row)
    log.write({"t": "epoch_end", "epoch": 0})
    log.close()
    lines = (tmp_path / "rank0.jsonl").read_text().splitlines()
    assert len(lines) == len(rows) + 1
    for line, (task, device, engine, start, end, nbytes, epoch) in zip(lines, rows, strict=False):
        record = {
            "t": "row",
            "task": task,
            "device": device,
            "engine": engine,
            "start": start,
            "end": end,
            "bytes": nbytes,
            "epoch": epoch,
        }
        assert line == json.dumps(record, separators=(",", ":"))
        assert json.loads(line) == record
    assert json.loads(lines[-1]) == {"t": "epoch_end", "epoch": 0}


def test_rows_wait_for_the_next_flush(tmp_path: Path) -> None:
    log = PartLog(tmp_path / "rank0.jsonl")
    log.add_row(1, "m0.gpu0", "compute", 0.5, 0.75, 0, 0)
    assert (tmp_path / "rank0.jsonl").read_text() == ""
    log.flush()
    assert json.loads((tmp_path / "rank0.jsonl").read_text())["task"] == 1
    log.close()


def test_status_writes_each_field_in_its_slot() -> None:
    from realrun.schemes.base import STATUS_FIELDS, STATUS_PHASES, read_status

    array = [0.0] * (2 * len(STATUS_FIELDS))
    status = Status(array, 1)
    status.phase("backward", 7, 2)
    status.comm(True)
    got = read_status(array, 1)
    assert got["phase"] == STATUS_PHASES.index("backward")
    assert (got["iteration"], got["epoch"], got["in_comm"]) == (7, 2, 1.0)
    assert got["since"] > 0
    assert read_status(array, 0) == dict.fromkeys(STATUS_FIELDS, 0.0)
