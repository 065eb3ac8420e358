"""The real run's tracing and accounting cost: an epoch of ``model-centric`` through the
workbench's worker loop against a plain training loop, side by side in one run.

    .venv/bin/python benchmarks/bench_realrun.py [--workers 2] [--rounds 41] [--threads N] [--layers auto|dgl|torch] [--context] [--no-dgl] [--config CONFIG.toml]

Run on demand; it prints figures and is never a timed test. Target: (A) costs at most 5%
more wall time than the plain loop with the same layers, its twin: (C) when (A) trains with
DGL's layers (the default on the CPU, as ``gnnwb realrun``), (B) with ``--layers torch``.
Every run prints the machine (CPU model, cores), the load average before and after, and
PASS/FAIL for the target, a ratio against the twin measured in the same run (issue 28).

Configuration (default, written to a scratch folder): GraphSAGE (3 layers, hidden 128) on
products-like at 2% scale (about 49,000 vertices, 100 features), fanouts 10/10/5, batch
128, METIS partition, two workers of one machine (``v100x8-nvswitch``, no GPU cache) on
the CPU over gloo. Two workers, so the gradients really are all-reduced every iteration
as in the real run; one machine, so both workers read every input feature from their own
host memory (``h2d``), as a plain single-machine DGL loop does: no remote fetch, which is
the scheme's communication, not tracing or accounting, separates the two.

The loops run in the same worker processes, started once (no process startup is timed),
joined by one gloo group; each keeps its own model copy and optimizer, built from the run's
seed, so they start from the same weights:

(A) the workbench: the worker's epoch as :func:`realrun.worker._train` runs it (a
    :class:`~realrun.schemes.base.WorkerContext` with the feature store, the byte counter,
    the part file and the launcher's shared status array), calling the model-centric
    executor's ``run_epoch`` (:mod:`realrun.schemes.model_centric`): every phase of every
    iteration timed and written to the part file, every transfer counted, the plan's feature
    sources;
(B) a plain loop written here: the same minibatches (the prepared epoch ``epoch[i][w]``,
    which the spine sampled with the workbench's ``neighbor`` sampler from the run's seed;
    each iteration turns them into tensors as (A) does), the plain-PyTorch layers
    (:func:`realrun.layers.build_layers`, same seed), the features by one
    ``index_select`` of the host feature matrix, one forward and one backward, the same
    flattened gradient ``all_reduce`` over gloo, the same optimizer; no clock, no
    counting, no trace;
(C) a plain DGL loop: as (B) but with DGL's layers (:func:`realrun.layers.build_dgl_layers`,
    the same weights) on DGL blocks made from the same minibatches each iteration
    (``dgl.create_block``).

By default only (A) and its twin run; ``--context`` adds the other plain loop (it differs
from the twin in the layers, not in tracing). Each round runs one epoch of each loop, in an
order that alternates between rounds, after one warm-up epoch of each. An epoch's time is the
slowest worker's, from a barrier to its last update (for (A), its ``epoch_end`` line
written). Printed: each loop's median, the overhead as the difference of the medians and as
the median of the rounds' paired ratios with a 95% bootstrap interval for the latter (how
far the figure moves on this machine's noise), the overhead per iteration in milliseconds,
and each loop's first-epoch loss (same data, same weights: they agree).

Measured 2026-11-25 (2-core machine, slower than the earlier ones: (C) about 760 ms per
1-worker epoch; 41 rounds, one run per figure; (A - C) / C of the medians / median of the
paired ratios, its 95% interval):

* 2 workers (default, 1 thread each): +1.5% / +0.8% (-0.2% to +3.0%); +0.9% / +1.0%
  (-1.3% to +2.4%); with ``--context``: +1.0% / +0.9% (-0.6% to +2.5%).
* 1 worker (2 threads): +0.7% / +1.9% (+0.8% to +3.3%); +1.2% / +1.2% (+0.7% to +2.4%);
  +2.2% / +2.0% (+0.5% to +2.9%); with ``--context``: +0.9% / +0.7%, and (A) 14% faster
  than (B) (DGL's ``SAGEConv`` on DGL blocks beats the plain-PyTorch layers on the CPU).
* 1 worker, ``--threads 1``: +1.7% / +1.1% (+0.5% to +2.2%).
* After the last trims, on the same machine under some load ((C) 710 ms with 2 workers, 964 ms
  with 1): 2 workers +1.5% / +1.3% (-0.1% to +2.8%), 0.70 ms per iteration; 1 worker +2.3% /
  +2.2% (+1.7% to +2.7%), 0.72 ms per iteration.
* Issue 24 (executors as classes, the schedule from the scheme), side by side with the commit
  before it (4afe3ab), alternating, ``--rounds 21`` twice each, 2026-11-25, load about 1.4:
  median of the paired ratios before +4.4% (-2.5% to +8.8%) and -2.0% (-3.8% to +0.9%), after
  +4.5% (-2.0% to +6.0%) and +1.3% (-2.6% to +3.1%): no change beyond the noise.

What (A) adds is a fixed cost per iteration, about 0.25-0.5 ms of Python (cProfile: the trace
rows, the clock, the status array, the backward hooks, the feature store's read split): the
torch operations per epoch are the same as (C)'s (the profiler finds two more ``empty`` and
one more ``zeros`` per iteration), garbage collection takes about 2 ms over 12 epochs, and
page faults and context switches are equal. On a faster machine the same cost is a larger
share: on the previous 2-core machine ((C) about 400 ms per 1-worker epoch, 21 rounds) the
figures were +2.3% to +6.2% for 1 worker and +3.1% to +6.1% for 2, around the 5% line; an
epoch's time there moved by about 4% from round to round, so those were noisy readings of an
overhead near 3%. Under heavy load (load average 3 to 5) runs scatter by several points
either way; with two threads per process on two shared cores single epochs stall for
seconds, so use ``--threads 1`` there.

Fixes that came out of this benchmark: the feature store placed a minibatch's rows with a
sort and a sorted search, which cost more than the host read itself (+35% in all; now a
vertex-indexed slot array, and a single in-order read is the output as it is, commit
43ea362); the part file took one line-buffered write per trace row (about 2%; now one write
per iteration, 8c683be); trace rows formatted by hand instead of ``json.dumps`` (1.7 us a
row instead of 8), backward timed by hooks in one pass instead of one ``backward`` call per
layer, precomputed status slots, no host-index lookup when one machine holds every vertex.
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIG = """
name = "bench-realrun"
seed = 0

[graph]
name = "products-like"
scale = 0.02

[hardware]
name = "v100x8-nvswitch"

[model]
name = "sage"
hidden = 128
num_layers = 3

[training]
batch_size = 128
epochs = 1
optimizer = "adam"
learning_rate = 0.003

[cache]
capacity = "0%"

[partition]
name = "metis"

[sampling]
name = "neighbor"
fanouts = [10, 10, 5]

[execution]
name = "model-centric"
"""

LOOPS = ("A", "B", "C")


# ---- the loops, inside each worker process -------------------------------------------------------
class Workbench:
    """(A): the real run's worker state and its epoch, as realrun.worker._train builds and runs them."""

    def __init__(self, rank: int, world: int, setup: dict[str, Any], status_array: Any, parts: str) -> None:
        import torch

        from realrun.feature_store import ByteCounter, FeatureStore
        from realrun.layers import LayerBackend
        from realrun.schemes import real_executor
        from realrun.schemes.base import PartLog, Status, WorkerContext

        prepared = setup["prepared"]
        inputs = prepared.inputs
        self.status = Status(status_array, rank)
        self.log = PartLog(Path(parts) / f"rank{rank}.jsonl")
        self.counter = ByteCounter()
        executor_class = real_executor(prepared.scheme.registered_name)
        self.ctx = WorkerContext(
            rank=rank,
            world=world,
            device=torch.device("cpu"),
            config=prepared.config,
            inputs=inputs,
            scheme=prepared.scheme,
            task_index=setup["task_index"],
            store=None,
            counter=self.counter,
            log=self.log,
            status=self.status,
            t0=time.perf_counter(),
            layers=LayerBackend(setup["layers"]),
        )
        self.ctx.store = FeatureStore(
            inputs,
            rank,
            self.ctx.device,
            inputs.graph.features,
            self.counter,
            self.ctx.now,
            on_comm=self.status.comm,
        )
        self.executor = executor_class(self.ctx)
        self.status.joined()
        self.epochs = 0

    def epoch(self) -> float:
        """One epoch; returns the mean loss of this worker's seeds."""
        epoch, ctx = self.epochs, self.ctx
        self.epochs += 1
        ctx.epoch = epoch
        self.log.write({"t": "epoch_start", "epoch": epoch, "time": ctx.now()})
        totals = self.executor.run_epoch(epoch)
        end = ctx.now()
        self.log.write(
            {
                "t": "epoch_end",
                "epoch": epoch,
                "time": end,
                "bytes": self.counter.take(),
                "test_acc": None,
                **totals,
            }
        )
        return totals["loss_sum"] / max(totals["seeds"], 1)


class Plain:
    """(B) and (C): a plain data-parallel loop over the same minibatches, layers and optimizer."""

    def __init__(self, rank: int, world: int, setup: dict[str, Any], dgl: bool) -> None:
        import numpy as np
        import torch

        from realrun.layers import build_dgl_layers, build_layers
        from realrun.schemes.base import make_optimizer

        prepared = setup["prepared"]
        self.inputs = inputs = prepared.inputs
        self.rank, self.world, self.dgl = rank, world, dgl
        config = prepared.config
        build = build_dgl_layers if dgl else build_layers
        self.model = build(inputs.model, seed=config.seed)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(config.training.optimizer, self.params, config.training.learning_rate)
        graph = inputs.graph
        # The machine's host memory holds every vertex (one machine): the whole feature matrix.
        self.features = torch.from_numpy(
            np.ascontiguousarray(graph.features(np.arange(graph.num_nodes)), dtype=np.float32)
        )
        self.labels = torch.as_tensor(np.asarray(graph.labels, dtype=np.int64))

    def epoch(self) -> float:
        import torch
        import torch.distributed as dist
        from torch.nn import functional as F

        from realrun.layers import TensorBlock, to_dgl_block

        loss_sum, seeds = 0.0, 0
        for it in range(self.inputs.num_iterations):
            mb = self.inputs.epoch[it][self.rank]
            if self.dgl:
                blocks = [to_dgl_block(b) for b in mb.blocks]
            else:
                blocks = [TensorBlock.from_block(b) for b in mb.blocks]
            labels = self.labels[torch.from_numpy(mb.blocks[-1].dst_nodes)]
            x = self.features.index_select(0, torch.from_numpy(mb.input_nodes))
            out = self.model(blocks, x)
            loss = F.cross_entropy(out, labels)
            correct = int((out.argmax(dim=1) == labels).sum())  # noqa: F841 - what a training loop logs
            loss.backward()
            flat = torch.cat([p.grad.reshape(-1) for p in self.params])
            dist.all_reduce(flat)
            flat /= self.world
            offset = 0
            for p in self.params:
                n = p.numel()
                p.grad.copy_(flat[offset : offset + n].view_as(p))
                offset += n
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=False)
            loss_sum += float(loss.detach()) * labels.shape[0]
            seeds += int(labels.shape[0])
        return loss_sum / max(seeds, 1)


def _worker(
    rank: int, world: int, setup_path: str, status_array: Any, port: int, opts: dict[str, Any]
) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    with open(setup_path, "rb") as f:
        setup = pickle.load(f)
    # As the real run's worker: the machine's cores shared among its workers.
    torch.set_num_threads(opts["threads"])
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=300),
    )
    loops: dict[str, Any] = {"A": Workbench(rank, world, setup, status_array, opts["parts"])}
    if "B" in opts["loops"]:
        loops["B"] = Plain(rank, world, setup, dgl=False)
    if "C" in opts["loops"]:
        loops["C"] = Plain(rank, world, setup, dgl=True)
    names = [n for n in LOOPS if n in loops]

    def timed(name: str) -> tuple[float, float, float]:
        """The epoch's wall seconds (slowest worker), CPU seconds (all workers) and this worker's loss."""
        dist.barrier()
        start, cpu = time.perf_counter(), time.process_time()
        loss = loops[name].epoch()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        slowest = torch.tensor([seconds])
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        used = torch.tensor([cpu], dtype=torch.float64)
        dist.all_reduce(used)
        return float(slowest), float(used), loss

    first_loss = {n: timed(n)[2] for n in names}  # warm-up: one epoch of each, from the same weights
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(opts["rounds"]):
        for n in names if r % 2 == 0 else list(reversed(names)):
            wall, used, _ = timed(n)
            times[n].append(wall)
            cpu[n].append(used)
    dist.barrier()
    if rank == 0:
        with open(opts["result"], "wb") as f:
            pickle.dump({"times": times, "cpu": cpu, "first_loss": first_loss}, f)
    dist.destroy_process_group()
    # As the real worker (realrun.worker): skip the interpreter's teardown, where gloo's and
    # DGL's threads sometimes abort the process ("terminate called without an active
    # exception", exit -6) after the results are written.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---- the benchmark -------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", default=None, help="a model-centric configuration (default: the one above)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--rounds",
        type=int,
        default=41,
        help="epochs of each loop, after a warm-up (one epoch's time moves by a few percent on a shared "
        "2-core machine: the median of 41 paired ratios is good to about a point)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads per worker (default: the real run's, cores / workers)",
    )
    parser.add_argument("--no-dgl", action="store_true", help="leave out (C), the plain DGL loop")
    parser.add_argument(
        "--context",
        action="store_true",
        help="also run the plain loop with the other layers ((B) when (A) trains with DGL's): context, "
        "not the overhead's figure; it makes every round a third longer",
    )
    parser.add_argument(
        "--layers",
        choices=("auto", "dgl", "torch"),
        default="auto",
        help="(A)'s layers, as gnnwb realrun --layers (auto: DGL's on the CPU); (A) is held against the "
        "plain loop with the same layers: (C) for DGL's, (B) for the plain-PyTorch ones",
    )
    args = parser.parse_args(argv)

    import torch.multiprocessing as mp
    from machine import Machine

    machine = Machine.now()

    from realrun.launcher import free_port, prepare_real_run
    from realrun.layers import layer_backend
    from realrun.schemes.base import STATUS_FIELDS

    layers = "torch" if args.no_dgl else layer_backend(args.layers, "cpu").name

    scratch = Path(tempfile.mkdtemp(prefix="gnnwb-bench-realrun-"))
    try:
        config_path = Path(args.config) if args.config else scratch / "bench-realrun.toml"
        if not args.config:
            config_path.write_text(CONFIG)
        prepared, plan, config = prepare_real_run(config_path, args.workers, "cpu")
        inputs = prepared.inputs
        if inputs.worker_machine.max() != inputs.worker_machine.min():
            print("note: the workers are on several machines: (A) fetches remote features, (B) does not")
        setup = {
            "prepared": prepared,
            "task_index": {t.id: k for k, t in enumerate(plan.tasks)},
            "layers": layers,
        }
        setup_path = scratch / "setup.pickle"
        with setup_path.open("wb") as f:
            pickle.dump(setup, f, protocol=pickle.HIGHEST_PROTOCOL)
        opts = {
            "rounds": args.rounds,
            "threads": args.threads or torch_threads(args.workers),
            "loops": loops_to_run(layers, args.context, not args.no_dgl),
            "parts": str(scratch / "parts"),
            "result": str(scratch / "result.pickle"),
        }
        (scratch / "parts").mkdir()
        world = inputs.num_workers
        context = mp.get_context("spawn")
        status = context.Array("d", world * len(STATUS_FIELDS), lock=False)  # as the launcher's
        port = free_port()
        procs = [
            context.Process(target=_worker, args=(r, world, str(setup_path), status, port, opts))
            for r in range(world)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if any(p.exitcode != 0 for p in procs):
            print(f"a worker failed: exit codes {[p.exitcode for p in procs]}", file=sys.stderr)
            return 1
        with open(opts["result"], "rb") as f:
            result = pickle.load(f)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    sampling = config.strategy("sampling")
    seeds = sum(len(mb.blocks[-1].dst_nodes) for row in inputs.epoch for mb in row)
    print(
        f"{config.name}: {config.graph.name} ({inputs.graph.num_nodes:,} vertices, {inputs.graph.feat_dim} features), "
        f"{inputs.model.name} {inputs.model.num_layers} layers, fanouts {sampling.params.get('fanouts') if sampling else None}, "
        f"batch {config.training.batch_size}, {world} worker(s) on CPU (gloo), {args.threads or torch_threads(world)} thread(s) each; "
        f"{inputs.num_iterations} iterations per epoch, {seeds:,} seeds"
    )
    times, cpu, first = result["times"], result["cpu"], result["first_loss"]
    labels = {
        "A": f"(A) workbench worker loop ({layers} layers)",
        "B": "(B) plain loop (plain-PyTorch layers)",
        "C": "(C) plain DGL loop (dgl.nn, DGL blocks)",
    }
    med = {n: statistics.median(t) for n, t in times.items()}
    med_cpu = {n: statistics.median(t) for n, t in cpu.items()}
    for n, t in times.items():
        print(
            f"{labels[n]:45s} wall median {med[n] * 1e3:7.1f} ms/epoch (min {min(t) * 1e3:.1f}, "
            f"max {max(t) * 1e3:.1f}), CPU median {med_cpu[n] * 1e3:7.1f} ms; first epoch's loss {first[n]:.6f}"
        )

    def ratios(values: dict[str, list[float]], other: str) -> tuple[float, float]:
        a, b = values["A"], values[other]
        return (statistics.median(a) - statistics.median(b)) / statistics.median(b), statistics.median(
            (x - y) / y for x, y in zip(a, b, strict=True)
        )

    twin = "C" if layers == "dgl" else "B"  # the plain loop with (A)'s layers: the difference is tracing
    wall, wall_paired = ratios(times, twin)
    used, used_paired = ratios(cpu, twin)
    low, high = paired_median_interval(times["A"], times[twin])
    verdict = "within" if max(wall, wall_paired) <= 0.05 else "ABOVE"
    print(
        f"overhead (A - {twin}) / {twin} over {len(times['A'])} rounds: wall {wall * 100:+.1f}% of the medians, "
        f"{wall_paired * 100:+.1f}% median of the rounds' ratios (95% interval {low * 100:+.1f}% to "
        f"{high * 100:+.1f}%; {verdict} the 5% target); CPU time {used * 100:+.1f}% / {used_paired * 100:+.1f}%"
    )
    per_iteration = (med["A"] - med[twin]) / inputs.num_iterations
    print(f"(A)'s extra time per iteration: {per_iteration * 1e3:+.2f} ms (difference of the medians)")
    other = "B" if twin == "C" else "C"
    if other in med:
        o, o_paired = ratios(times, other)
        print(
            f"(A) against {labels[other][:3]}: wall {o * 100:+.1f}% / {o_paired * 100:+.1f}% (other layers)"
        )
    machine.verdict(
        f"(A) / ({twin}) - 1, wall, the larger of the two overheads", max(wall, wall_paired), at_most=0.05
    )
    machine.finish()
    return 0


def loops_to_run(layers: str, context: bool, dgl: bool) -> tuple[str, ...]:
    """(A) and the plain loop with its layers (its twin: the difference is tracing and
    accounting); the other plain loop only with ``context`` (and (C) only where DGL runs)."""
    twin = "C" if layers == "dgl" else "B"
    wanted = {"A", twin} | ({"B", "C"} if context else set())
    return tuple(n for n in LOOPS if n in wanted and (n != "C" or dgl))


def paired_median_interval(a: list[float], b: list[float], draws: int = 4000) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval for the median of the rounds' ratios (a - b) / b:
    how far the figure could move from run to run on this machine's noise."""
    import numpy as np

    ratios = (np.asarray(a) - np.asarray(b)) / np.asarray(b)
    rng = np.random.default_rng(0)
    medians = np.median(ratios[rng.integers(0, ratios.size, (draws, ratios.size))], axis=1)
    return float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def torch_threads(world: int) -> int:
    return max(1, (os.cpu_count() or 1) // world)


if __name__ == "__main__":
    sys.exit(main())
