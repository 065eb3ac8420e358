"""One worker of a real run under ``torchrun``, across machines::

    # on each of 2 machines (node ranks 0 and 1), one worker per GPU:
    torchrun --nnodes 2 --nproc-per-node 1 --node-rank K \\
        --rdzv-backend c10d --rdzv-endpoint HOST0:29500 \\
        -m realrun.torchrun CONFIG.toml --device cuda --out reports/runs/NAME-real

Every process prepares the run itself from the configuration (:mod:`realrun.launcher`'s
preparation: graph, partition, placement, the sampled epoch, all deterministic for the
configuration's seed and cached on disk) and trains as :mod:`realrun.worker`; rank 0 gathers
every worker's rows and writes the run's folder. It sits apart from the worker so that the
launcher imports the worker and nothing imports back.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from realrun.faults import FAULT_ENV, check_fault
from realrun.launcher import DEFAULT_COLLECTIVE_TIMEOUT, default_out, finish_run, prepare_real_run
from realrun.layers import LAYER_CHOICES
from realrun.schemes.base import Status
from realrun.worker import WorkerSetup, run_worker


def main(argv: list[str] | None = None) -> int:
    """``torchrun ... -m realrun.torchrun CONFIG.toml --device cpu|cuda [--out DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m realrun.torchrun", description=main.__doc__)
    parser.add_argument("config")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--out", default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--no-eval", action="store_true")
    parser.add_argument("--layers", choices=LAYER_CHOICES, default="auto")
    parser.add_argument("--collective-timeout", type=float, default=DEFAULT_COLLECTIVE_TIMEOUT)
    args = parser.parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    prepared, plan, config = prepare_real_run(
        args.config, world, args.device, progress=rank == 0, local_workers=local_world
    )
    out = Path(args.out) if args.out else default_out(config)
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    setup = WorkerSetup(
        prepared=prepared,
        task_index={t.id: k for k, t in enumerate(plan.tasks)},
        device=args.device,
        parts=str(parts),
        epochs=args.epochs or config.training.epochs,
        evaluate=not args.no_eval,
        backend_timeout=args.collective_timeout,
        init_method="env://",
        fault=check_fault(os.environ.get(FAULT_ENV)),
        collect=True,
        layers=args.layers,
    )
    code = run_worker(rank, world, local_rank, setup, Status(None, rank))
    if code == 0 and rank == 0:
        summary = finish_run(prepared, plan, out, args.config, complete=True)
        print(summary.describe())
    return code


if __name__ == "__main__":
    sys.exit(main())
