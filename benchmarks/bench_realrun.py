"""The real run's tracing and accounting cost: an epoch of ``model-centric`` through the
workbench's worker loop against a plain training loop, side by side in one run.

    .venv/bin/python benchmarks/bench_realrun.py [--workers 2] [--rounds 7] [--threads N] [--layers auto|dgl|torch] [--no-dgl] [--config CONFIG.toml]

Run on demand; it prints figures and is never a timed test. Target: (A) costs at most 5%
more wall time than the plain loop with the same layers: (C) when (A) trains with DGL's
layers (the default on the CPU, as ``gnnwb realrun``), (B) with ``--layers torch``.

Configuration (default, written to a scratch folder): GraphSAGE (3 layers, hidden 128) on
products-like at 2% scale (about 49,000 vertices, 100 features), fanouts 10/10/5, batch
128, METIS partition, two workers of one machine (``v100x8-nvswitch``, no GPU cache) on
the CPU over gloo. Two workers, so the gradients really are all-reduced every iteration
as in the real run; one machine, so both workers read every input feature from their own
host memory (``h2d``), as a plain single-machine DGL loop does: no remote fetch, which is
the scheme's communication, not tracing or accounting, separates the two.

Both loops run in the same two worker processes, started once (no process startup is
timed), joined by one gloo group; each keeps its own model copy and optimizer, built from
the run's seed, so they start from the same weights:

(A) the workbench: the worker's epoch as :func:`realrun.worker._train` runs it (a
    :class:`~realrun.schemes.base.WorkerContext` with the feature store, the byte counter,
    the part file and the launcher's shared status array), calling
    ``realrun.schemes.model_centric.run_epoch``: every phase of every iteration timed and
    written to the part file, every transfer counted, the plan's feature sources;
(B) a plain loop written here: the same minibatches (the prepared epoch ``epoch[i][w]``,
    which the spine sampled with the workbench's ``neighbor`` sampler from the run's seed;
    each iteration turns them into tensors as (A) does), the same layers
    (:func:`realrun.layers.build_layers`, same seed), the features by one
    ``index_select`` of the host feature matrix, one forward and one backward, the same
    flattened gradient ``all_reduce`` over gloo, the same optimizer; no clock, no
    counting, no trace;
(C) a plain DGL loop (unless ``--no-dgl``): as (B) but with DGL's layers
    (:func:`realrun.layers.build_dgl_layers`, the same weights) on DGL blocks made from the
    same minibatches each iteration (``dgl.create_block``). Context only: it differs from
    (B) in the layer implementation, not in tracing.

Each round runs one epoch of each loop, in an order that alternates between rounds (A B
C, then C B A, ...), after one warm-up epoch of each. An epoch's time is the slowest
worker's, from a barrier to its last update (for (A), its ``epoch_end`` line written).
Medians over the rounds are printed, with the overhead (A - B) / B, and the first epoch's
loss of each loop (they see the same data from the same weights, so they agree).

Measured (2026-11-23, 2-core machine, quiet, 21 rounds each, one run per line; the real run
now trains with DGL's layers on the CPU):

* default, 2 workers x 1 thread, 15 iterations of 128 seeds per worker per epoch: (A, DGL
  layers) 307.0 ms, (B) 321.5 ms, (C) 297.5 ms median wall per epoch; overhead (A - C) / C
  **+3.2%** of the medians, +2.6% median of the rounds' ratios: within 5%; CPU time +1.8% /
  +2.8%. With ``--layers torch`` on the same quiet machine: (A - B) / B +6.0% / +6.0%.
* ``--workers 1`` (2 threads), 31 iterations: (A) 343.5 ms, (B) 357.5 ms, (C) 315.2 ms;
  (A - C) / C **+9.0%** / +8.8%: above 5%. The overhead per iteration is about the same as
  with two workers (0.6-0.9 ms), but one worker's iteration is half as long.

After timing backward by hooks in one pass (``backward_by_layer``, instead of one
``backward`` call per layer on detached inputs) and skipping the read split when a worker
has one source, same machine, quiet: 2 workers +4.1% / +5.0% (21 rounds); 1 worker +8.2% /
+6.6% (31 rounds), still above 5%. The same two loops run in one process (no worker
processes, 5 epochs each after a warm-up) differ by +0.6% (340 vs 338 ms), so what is left
for one worker is not in the worker loop's own code as far as cProfile shows; not found.

Later the same day (quiet, one run each, 21 rounds): 2 workers **+4.1% / +4.0%** (within 5%);
1 worker **+6.3% / +5.8%** (above). Repeated 1-worker runs of 15 rounds gave +4.5%, +6.6% and
+7.4% of the medians: the figure moves by about 3 points from run to run, around 5-6%.
Switching off, inside the worker processes, the trace rows, the part file and the status
array (a scratch copy of this benchmark that patches them out) gave, in three consecutive
1-worker runs, +4.5% and +7.4% unpatched around +1.9% patched (torch layers: +4.8% and
+3.3%): the per-phase records are about 2-3 points; the rest (the feature store's index
lookups, the layer-by-layer forward, the backward hooks) is within the noise of one run.
A py-spy profile (500 Hz, 20 s of a 1-worker run) puts those records at 0.8% of (A)'s
samples; against (C) the extra is spread thin (block building ~+1.5%, all-reduce and step
~+1.5%, backward a few percent), and timing backward by hooks costs nothing measurable in
one process (115-123 ms per 31 backward passes with or without them). No single cause found.

2026-11-25 (another 2-core machine, slower: (C) about 400 ms per 1-worker epoch; quiet; 21
rounds, one run per figure), after formatting trace rows by hand (1.7 us a row instead of about
8 with ``json.dumps``), precomputed status slots and no host-index lookup when one machine holds
every vertex: 1 worker (2 threads) +4.9% / +4.8%, +5.8% / +4.0%, +6.0% / +5.7%, +6.2% / +5.7%,
+2.3% / +2.1%; 1 worker with ``--threads 1`` +2.3% / +3.3%, +2.8% / +3.7%; 2 workers +4.6% /
+6.1%, +4.4% / +3.1%. Around the 5% line, not reliably under it. In one process (the two loops
side by side, per-phase clocks in both) every phase of (A) is as fast as (C)'s; what (A) adds
lies between its phases, about 0.46 ms per iteration, most of it work (C) does too but inside
its loop (freeing an iteration's tensors as the iteration's function returns, flattening the
gradients before the all-reduce's clock); the records themselves (12 rows and a flush) take
about 18 us an iteration. With two threads per worker the same per-iteration cost is about
twice as large a share as with one, which is why one worker with two threads is the worst case.

Earlier figures on a loaded machine (plain-PyTorch layers in (A)): +3.4% (2 workers) and
+6.7% (1 worker) against (B).

Under heavier load (load average 3 to 5) runs scatter by several points either way; with
two threads per process on the two shared cores single epochs stall for seconds, so use
one thread per worker there. The three loops' first-epoch losses agree to every printed
digit (4.505722 with 2 workers), so they train the same model on the same data.

Two fixes came out of this benchmark: the feature store placed a minibatch's rows with a
sort and a sorted search, which cost more than the host read itself (+35% in all before;
now a vertex-indexed slot array, and a single in-order read is the output as it is,
commit 43ea362); and the part file took one line-buffered write per trace row (about 2%;
now one write per iteration, commit 8c683be). What is left, measured in one process by
phase (the phases' own times agree within 1%) and by profile: building the trace rows
(a JSON line per phase), the launcher's status updates and the clock, about 2%; the
plan's read split (``feature_reads``, the host index) about 1%; timing each layer's
backward on its own (one ``backward`` call per layer) about 1%. These are real costs of
per-phase timing and accounting, not artefacts. (C) is 8 to 10% faster than (B): DGL's
``SAGEConv`` on DGL blocks beats the plain-PyTorch layers on the CPU (which rebuild each
block's CSR adjacency); that is the layers, not tracing, and the real run uses the plain
layers on the CPU too.
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
        from realrun.schemes import real_scheme
        from realrun.schemes.base import PartLog, Status, WorkerContext

        prepared = setup["prepared"]
        inputs = prepared.inputs
        self.status = Status(status_array, rank)
        self.log = PartLog(Path(parts) / f"rank{rank}.jsonl")
        self.counter = ByteCounter()
        self.scheme = real_scheme(prepared.scheme.registered_name)
        self.ctx = WorkerContext(
            rank=rank,
            world=world,
            device=torch.device("cpu"),
            config=prepared.config,
            inputs=inputs,
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
        self.scheme.setup(self.ctx)
        self.status.joined()
        self.epochs = 0

    def epoch(self) -> float:
        """One epoch; returns the mean loss of this worker's seeds."""
        epoch, ctx = self.epochs, self.ctx
        self.epochs += 1
        ctx.epoch = epoch
        self.log.write({"t": "epoch_start", "epoch": epoch, "time": ctx.now()})
        totals = self.scheme.run_epoch(ctx, epoch)
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
    loops["B"] = Plain(rank, world, setup, dgl=False)
    if opts["dgl"]:
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
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads per worker (default: the real run's, cores / workers)",
    )
    parser.add_argument("--no-dgl", action="store_true", help="leave out (C), the plain DGL loop")
    parser.add_argument(
        "--layers",
        choices=("auto", "dgl", "torch"),
        default="auto",
        help="(A)'s layers, as gnnwb realrun --layers (auto: DGL's on the CPU); (A) is held against the "
        "plain loop with the same layers: (C) for DGL's, (B) for the plain-PyTorch ones",
    )
    args = parser.parse_args(argv)

    import torch.multiprocessing as mp

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
            "dgl": not args.no_dgl,
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
    verdict = "within" if max(wall, wall_paired) <= 0.05 else "ABOVE"
    print(
        f"overhead (A - {twin}) / {twin} over {len(times['A'])} rounds: wall {wall * 100:+.1f}% of the medians, "
        f"{wall_paired * 100:+.1f}% median of the rounds' ratios ({verdict} the 5% target); "
        f"CPU time {used * 100:+.1f}% / {used_paired * 100:+.1f}%"
    )
    other = "B" if twin == "C" else "C"
    if other in med:
        o, o_paired = ratios(times, other)
        print(
            f"(A) against {labels[other][:3]}: wall {o * 100:+.1f}% / {o_paired * 100:+.1f}% (other layers)"
        )
    return 0


def torch_threads(world: int) -> int:
    return max(1, (os.cpu_count() or 1) // world)


if __name__ == "__main__":
    sys.exit(main())
