"""A real run's start: workers forked from a preloaded server against spawned ones, side by side.

    .venv/bin/python benchmarks/bench_launch.py [--config examples/configs/hopgnn-sbm-real.toml]
        [--workers 2] [--epochs 2] [--rounds 4] [--runs 3]

Not a timed test. A grid of real runs (``gnnwb fidelity``, ``gnnwb validate``, the fidelity
study, the real-run tests) launches the same kind of run many times from one process.
:mod:`realrun.processes` forks every worker from a server that imported PyTorch, its
optimizers' ``torch._dynamo`` and DGL once; a spawned worker imports them itself. This
script prepares the run once, then launches it ``--rounds`` times with each start method,
alternating (forkserver, spawn, forkserver, ...; the first forkserver launch, which starts
the server in the first run, is timed apart), through the launcher's own code with only the start method
changed, and prints each method's median wall time per launch and their ratio.

Target (issue 28's form, a ratio measured in the same run): a later forked launch costs at
most half a spawned one.

Measured 2026-11-28 on a 2-core AMD EPYC VM (AVX2-only, quiet: other processes 0.0% of the CPU
time), ``--runs 3``: later forked launches 2.35, 1.95, 2.28 s against spawned 8.10, 7.37, 8.46 s
(medians of 4): ratio 0.29, 0.26, 0.27, PASS. The first forked launch of the process, which
starts the server, 9.47 s (the server lives on: runs 1 and 2 had it). Of a spawned worker's ~7 s
before its first task, its first optimizer's import of ``torch._dynamo`` took 2-3 s and importing
PyTorch and DGL 4-5 s. The real-run tests (``pytest tests/realrun``, 206 tests): 512.6 s
spawned, 150.9 s forked.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

from machine import Machine, add_runs_option

import realrun.processes
from realrun.launcher import launch, prepare_real_run

ROOT = Path(__file__).resolve().parents[1]


def spawn_context() -> object:
    import torch.multiprocessing as mp

    return mp.get_context("spawn")


def timed_launch(prepared: object, plan: object, config: Path, out: Path, epochs: int, spawn: bool) -> float:
    shutil.rmtree(out, ignore_errors=True)
    start_method = (
        mock.patch.object(realrun.processes, "worker_context", spawn_context) if spawn else nullcontext()
    )
    with start_method:
        t0 = time.perf_counter()
        summary = launch(prepared, plan, config, out=out, epochs=epochs, evaluate=False)
        seconds = time.perf_counter() - t0
    if not summary.complete:
        raise SystemExit(f"the run failed: {summary.error}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "examples/configs/hopgnn-sbm-real.toml")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4, help="launches per start method after the first")
    add_runs_option(parser)
    args = parser.parse_args()

    machine = Machine.now()
    prepared, plan, _ = prepare_real_run(args.config, args.workers, "cpu")
    scratch = Path(tempfile.mkdtemp(prefix="gnnwb-bench-launch-"))
    try:
        for run in range(args.runs):
            first = timed_launch(prepared, plan, args.config, scratch / "first", args.epochs, spawn=False)
            forked: list[float] = []
            spawned: list[float] = []
            for k in range(args.rounds):
                forked.append(
                    timed_launch(prepared, plan, args.config, scratch / "f", args.epochs, spawn=False)
                )
                spawned.append(
                    timed_launch(prepared, plan, args.config, scratch / "s", args.epochs, spawn=True)
                )
                print(
                    f"  run {run} round {k}: forked {forked[-1]:.2f} s, spawned {spawned[-1]:.2f} s",
                    flush=True,
                )
            f, s = statistics.median(forked), statistics.median(spawned)
            print(
                f"run {run}: {args.config.name}, {args.workers} workers, {args.epochs} epochs: first forked "
                f"launch (starts the server) {first:.2f} s; later forked {f:.2f} s, spawned {s:.2f} s "
                f"(medians of {args.rounds})"
            )
            machine.verdict(f"run {run}: forked / spawned launch", f / s, at_most=0.5)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    machine.finish()


if __name__ == "__main__":
    main()
