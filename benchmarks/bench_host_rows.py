"""Where a scheme's ``h2d`` row spends its time: the host gather and the copy, measured apart.

Not a timed test; a script that prints figures::

    .venv/bin/python benchmarks/bench_host_rows.py [--device cuda] [--repeats 30]

A minibatch scheme's ``h2d`` row (``realrun/host_rows.py`` ``HostRows.gather``) times the
``index_select`` of the minibatch's rows out of the host feature table into the pinned staging
buffer and the DMA copy to the GPU, while the simulator prices an ``h2d`` task by the PCIe link
alone. On the first H200 runs the row ran at 2.7-4 GB/s where the microbenchmark's pinned copy
ran at 55 GB/s. This prints, per shape (rows x width of float32 drawn at random from a
200,000-row table), the median time of each part and of the whole, and the bandwidth each
implies, so the gap can be put where it belongs ("sorted index_select" includes the sort of the
index). On CPU the copy is a no-op and only the gather is timed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import Machine  # noqa: E402
from realrun.host_rows import HostRows  # noqa: E402
from realrun.microbench import SyncedClock, timed_repeats  # noqa: E402

SHAPES = ((5_000, 64), (50_000, 64), (50_000, 512))
TABLE_ROWS = 200_000


def _median_s(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    spans = timed_repeats(SyncedClock(device), fn, 3, repeats)
    return statistics.median(end - start for start, end in spans)


def measure(device: torch.device, rows: int, width: int, repeats: int) -> dict[str, float]:
    """Median seconds of each part of copying ``rows`` random rows of a ``width``-wide table."""
    table = torch.randn(TABLE_ROWS, width)
    index = torch.randint(0, TABLE_ROWS, (rows,))
    host_rows = HostRows(device)
    if host_rows.pin:
        table = table.pin_memory()
    staged = host_rows.staging(rows, (width,), table.dtype) if host_rows.pin else torch.empty(rows, width)
    parts = {
        "index_select into staging": lambda: torch.index_select(table, 0, index, out=staged),
        "sorted index_select": lambda: torch.index_select(table, 0, index.sort().values, out=staged),
        "copy staged -> device": lambda: staged.to(device, non_blocking=True),
        "HostRows.gather (both)": lambda: host_rows.gather(table, index),
        "pageable select + copy": lambda: table.index_select(0, index).to(device),
    }
    return {name: _median_s(fn, device, repeats) for name, fn in parts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    machine = Machine.now()
    print(f"device {device}, torch {torch.__version__}, {torch.get_num_threads()} intra-op threads")
    for rows, width in SHAPES:
        nbytes = rows * width * 4
        print(f"{rows} rows x {width} floats ({nbytes / 1e6:.2f} MB):")
        for name, seconds in measure(device, rows, width, args.repeats).items():
            print(f"  {name:<28} {seconds * 1e6:9.1f} us  {nbytes / seconds / 1e9:7.2f} GB/s")
    machine.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
