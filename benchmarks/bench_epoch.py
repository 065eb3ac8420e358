"""An epoch from a configuration, end to end, against DGL sampling the same epoch; and a sweep on cached samples.

    .venv/bin/python benchmarks/bench_epoch.py [--graph products-like] [--rounds 3] [--threads N] [--runs 3]

(a) One epoch of ``model-centric`` on products-like (4 workers of hopgnn-4xa100-10gbe,
    GraphSAGE fanouts 15/10/5, batch 1024, each worker's seeds from its part of an
    equal-vertex partition) through the spine, with sampling (``bulk-matrix``, which
    draws DGL's distribution: uniform neighbours without replacement), plan building and
    simulation, the sample cache off; against DGL's CPU ``NeighborSampler`` sampling the
    same seed batches, with the same threads. Rounds alternate, medians are printed.
    Target: the workbench's epoch in at most 0.5x DGL's sampling time.
(b) A sweep of 12 configurations (3 placements x 2 hardware presets x 2 schemes) on the
    cached samples, against the first configuration alone with an empty sample cache.
    Target: at most 2x.

The graph is loaded once, before any timing (it is on disk after its first generation).

Measured (2 cores, quiet, ``--rounds 5``, one run of both parts, 2026-11-23, after the
changes below):

* (a) workbench epoch 0.78 / 0.71 / 0.72 / 0.94 / 0.78 s (sampling 0.52-0.60 s, plan
  0.15-0.32 s, simulate 0.03 s; 96 minibatches, 1,176 tasks) against DGL sampling 1.74 /
  1.90 / 2.00 / 1.80 / 2.02 s: median **0.41x, target 0.5x met**. The process's first
  epoch, not in the median, took 2.93 s (sampling 2.71 s): it compiles or loads numba's
  kernels and faults in the samplers' output pages, which later epochs reuse.
* (b) 12 configurations in 10.84 s against the first alone 6.85 s: **1.58x, target 2x
  met**. The first point (sampling and writing the 1.3 GB sample cache) 4.80 s;
  model-centric's later points 0.04-0.58 s; hopgnn's first 1.37 s (plan 1.30 s), its
  other five 0.19-0.98 s (plan 0.13-0.54 s: the cut trees are kept with the epoch).

Issue 28 (every run prints the machine, the load before and after and PASS/FAIL,
``--runs N`` times, default 3): the spine caches partitions, deterministic access
estimates and placements beside the sample cache (``workbench/spine_cache.py``), so the
sweep's song-jiang placement is computed once per hardware (0.30-0.34 s; 0.08-0.10 s for
the second hardware, whose estimate is cached; 0.01 s for the hopgnn points) instead of
0.31-0.42 s at every point. (b) measured 2026-11-25 on this 2-core AMD EPYC VM shared with
other jobs (load 1.1-2.7), before (14360dc) twice and after (``--runs 2``)::

    before: 12 configurations in 10.81 / 12.74 s vs the first alone 8.03 / 8.84 s: 1.35x / 1.44x
    after:  12 configurations in  8.44 /  8.45 s vs the first alone 6.85 / 5.63 s: 1.23x / 1.50x

The ratio swings with its denominator, the first point's sampling (2.9-4.5 s here); the
sweep itself is 2.4-4.3 s shorter. What the remaining points still pay: model-centric's
plan (0.17-0.35 s) and hopgnn's (0.3-0.6 s; its first 1.1-1.4 s), which the caches leave
to the schemes.

Issue 24 (one schedule per scheme, the minibatch template), measured side by side with the
commit before it (4afe3ab), alternating, ``--rounds 3 --runs 1`` twice each, 2026-11-25,
load 1.3-1.5: (a) before 0.88x (the process's caches cold) / 0.34x, after 0.40x / 0.36x;
(b) before 1.58x / 1.56x, after 1.36x / 1.34x; the simulated epochs identical (the plans
are byte-for-byte the same).

Before (same day, same machine): (a) 1.04x, its sampling swinging 0.66-2.58 s; (b) 2.61x.
What changed: (1) every bulk sampler of the process shares one output pool and relabel
scratch (``SHARED_OUTPUTS``), so an epoch samples into the pages the last one left instead
of faulting in 1.3 GB of fresh ones, where huge-page compaction stalled some epochs for
seconds; (2) a read is split by source with a compiled counting sort (the plan 0.33 ->
0.16 s); (3) HopGNN cuts every tree of a minibatch in one pass per layer, as bits of one
mask per vertex, instead of one scattered pass per cell (its plan 1.95 -> 1.0 s); (4) the
cut trees depend on the epoch, the partition and the switches only, so they are kept with
the epoch and a sweep over placements and hardware cuts them once.

2026-11-26, quiet (load 0.5-1.1), ``--runs 3``: (a) was bimodal, before this day's changes too
(the commit before them, 3d1fbb6, in a worktree: 0.61x and 1.27x in two runs): some runs
sampled every epoch in 1.8-2.2 s instead of 0.5 s, with 2.5-3 s of system time. The last
epoch was still alive while the next one sampled: ``inputs.read_sources`` held objects that
pointed back at the inputs, a reference cycle only the collector frees, so the output pool
saw its buffers in use and faulted in 1.6 GB of fresh ones (counted: 60 new buffers per
round). With the cycle gone (7d73b61) every round after the first reuses the pool (0.48-0.53
s, no new buffer): (a) 0.30x / 0.32x / 0.45x, PASS in all three; (b) 2.12x / 1.59x / 1.55x
(the first run's sweep paid 3.8 s for its first point's sampling and cache write), 2 of 3.

2026-11-26, a fresh checkout, quiet (load 0.5-0.9), ``--only b --runs 3``: (b) 1.85x / 3.86x /
3.74x, 1 of 3. The plans had grown since the morning's 128-GPU work (where a worker reads each
vertex is worked out per minibatch): model-centric's with a cache 0.62-0.94 s, HopGNN's 1.1-1.8
s and its first 3.1-3.6 s. With the read codes in one compiled pass over int8 homes and
micrographs' distinct ids as bits (c836efc), the same three runs: 1.16x / 1.25x / 1.93x, PASS in
all three (the sweep 7.2-11.8 s; its other eleven points 5-6 s: model-centric's plans 0.17-0.56
s, HopGNN's 0.34-0.58 s and its first 1.0-1.7 s; the first alone 4.7-10.2 s, its sampling the
swing); every point's simulated epoch unchanged.

2026-11-28, a slower AVX2-only EPYC, quiet, ``--runs 3`` from a fresh clone: (a) 0.43x / 0.47x / 0.42x,
PASS; (b) 2.35x / 1.94x / 1.29x (the first run's sweep compiled HopGNN's kernels, numba's cache
being empty: its first plan 6.0 s). The plans were most of the sweep after its first point, and
most of each plan was working out and sorting where every input vertex is read from (model-centric
with a cache 0.33-0.77 s, HopGNN 0.69-0.81 s). With a code table per worker (worked out once for the
graph) and the reads counted instead of sorted (87583fd), before and after alternately, ``--only b
--runs 1`` three times each::

    before: 12 configurations in 13.72 / 18.22 / 17.21 s vs the first alone 6.08 / 8.46 / 7.44 s: 2.26x / 2.15x / 2.31x
            the 11 plans after the first point 5.4-8.0 s
    after:  12 configurations in 12.96 / 12.43 / 14.45 s vs the first alone 5.72 / 9.90 / 6.51 s: 2.27x / 1.26x / 2.22x
            the 11 plans after the first point 4.0-4.3 s

every simulated epoch unchanged. The ratio still misses 2x in two runs of three: after its first point
the sweep costs about 6 s (HopGNN's first plan 1.6-1.9 s, cutting the epoch's micrographs, which
the later HopGNN points reuse; the other ten plans 2.2-2.5 s; the placements 0.7-0.9 s; the
simulations about 1 s), against a first point of 5.7-9.9 s whose sampling swings by 3 s.

Most of that first point was the sample cache, not sampling: writing the 1.2 GB epoch took 4.4-9.0
s (concatenating its fields into fresh pages first) against 1.1 s to sample it, and the sweep's first
point sampled into fresh pages too, because the process still kept the first alone's epoch. With the
fields streamed into the file (265fa0f) and the kept epoch let go before the next is sampled, the
same day, before (7dc8018, a worktree) and after alternately, ``--only b --runs 1`` twice each::

    before: 12 configurations in 17.47 / 17.29 s vs the first alone 13.31 / 12.44 s: 1.31x / 1.39x
    after:  12 configurations in  8.87 / 10.00 s vs the first alone  5.38 /  5.92 s: 1.65x / 1.69x

and ``--runs 3`` in one process after: 8.68 / 10.32 / 10.22 s vs 5.66 / 2.78 / 4.36 s: 1.53x / 3.72x /
2.35x (a later run's first point samples into the pool the earlier runs filled). The sweep takes half
as long; its first point a third to a half, so the ratio gets worse: the other eleven points cost
6.5-7 s (HopGNN's first plan 1.6-1.7 s, ten plans 0.2-0.4 s each, placements 0.9 s, simulations 1
s), more than a first point that now costs 2.8-5.9 s. The 2x target needs those eleven points at
0.25 s each, HopGNN's micrograph cut included.

With the sample cache mapped instead of copied as well (058df89), ``--runs 3``, quiet (other processes
0.4% of the CPU time), the whole script in 101 s: (a) 0.37x / 0.34x / 0.42x, PASS; (b) 10.78 / 8.87 /
7.82 s vs the first alone 2.91 / 3.63 / 2.75 s: 3.71x / 2.44x / 2.84x, FAIL in all three, for the
reason above (the sweep's later points do not read the cache file: the process keeps the epoch).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import numpy as np
from machine import Machine, add_runs_option

HARDWARE = ("hopgnn-4xa100-10gbe", "perlmutter-4xa100-slingshot")
PLACEMENTS = ("none", "degree", "song-jiang")
WARM_SCALE = 0.01


def config(graph: str, scale: float | None, hardware: str, placement: str, scheme: str, sampler: str) -> Any:
    from workbench.config import config_from_dict

    data: dict[str, Any] = {
        "name": f"bench-{hardware}-{placement}-{scheme}",
        "graph": {"name": graph, **({"scale": scale} if scale else {})},
        "hardware": {"name": hardware},
        "model": {"name": "sage", "hidden": 256, "num_layers": 3},
        "training": {"batch_size": 1024, "workers": 4},
        "partition": {"name": "equal-vertex"},
        "sampling": {"name": sampler, "fanouts": [15, 10, 5]},
        "execution": {"name": scheme},
        "cache": {"capacity": "10%"},
    }
    if placement != "none":
        data["placement"] = {"name": placement}
    return config_from_dict(data, "bench")


def run_epoch(cfg: Any, graph: Any, cache_dir: str | None) -> dict[str, float]:
    """Seconds per stage of one configuration: prepare (partition, placement, sampling), plan, simulate."""
    from sim import simulate
    from workbench.run import prepare_run

    t0 = time.perf_counter()
    prepared = prepare_run(cfg, graph=graph, sample_cache=cache_dir is not None, cache_dir=cache_dir)
    plan = prepared.plan()
    t1 = time.perf_counter()
    result = simulate(plan, prepared.cluster)
    t2 = time.perf_counter()
    return {
        **{k: v for k, v in prepared.seconds.items() if k != "graph"},
        "simulate": t2 - t1,
        "total": t2 - t0,
        "tasks": len(plan.tasks),
        "minibatches": sum(len(row) for row in prepared.inputs.epoch),
        "epoch_s": result.makespan,
    }


def dgl_epoch(graph: Any, cfg: Any) -> tuple[float, int]:
    """DGL's NeighborSampler over the same seed batches as the spine (same partition and seed)."""
    import torch

    from workbench.dgl_loader import dgl_graph_from_csr, load_dgl
    from workbench.epoch import worker_seed_batches
    from workbench.registry import PARTITIONERS

    dgl = load_dgl()
    owner = PARTITIONERS.create("equal-vertex").partition(graph, 4, np.random.default_rng(cfg.seed)).owner
    batches = worker_seed_batches(graph, owner, 4, cfg.training.batch_size, cfg.seed)
    g = dgl_graph_from_csr(graph)
    sampler = dgl.dataloading.NeighborSampler([15, 10, 5])
    seeds = [torch.from_numpy(b) for row in batches for b in row]
    t0 = time.perf_counter()
    for s in seeds:
        sampler.sample_blocks(g, s)
    return time.perf_counter() - t0, len(seeds)


def part_a(args: Any, graph: Any, machine: Machine, run: int) -> None:
    """(a): one epoch end to end against DGL sampling the same seed batches."""
    cfg = config(args.graph, args.scale, HARDWARE[0], "none", "model-centric", args.sampler)
    # The first epoch of a process also compiles or loads numba's kernels and faults in the
    # samplers' output pages (later epochs reuse them): shown, not counted in the median.
    cold = run_epoch(cfg, graph, None)
    print(
        f"(a) first epoch of the process: {cold['total']:.2f} s (sample {cold['sample']:.2f}, "
        f"plan {cold['plan']:.2f}, simulate {cold['simulate']:.2f})"
    )
    ours, dgl = [], []
    for r in range(args.rounds):
        stages = run_epoch(cfg, graph, None)
        ours.append(stages)
        seconds, count = dgl_epoch(graph, cfg)
        dgl.append(seconds)
        print(
            f"(a) round {r}: workbench {stages['total']:.2f} s (partition {stages['partition']:.2f}, "
            f"sample {stages['sample']:.2f}, plan {stages['plan']:.2f}, simulate {stages['simulate']:.2f}; "
            f"{stages['minibatches']:.0f} minibatches, {stages['tasks']:.0f} tasks, simulated epoch "
            f"{stages['epoch_s'] * 1e3:.1f} ms) | DGL sampling {seconds:.2f} s ({count} minibatches)"
        )
    mine = statistics.median(s["total"] for s in ours)
    theirs = statistics.median(dgl)
    print(f"(a) median: workbench epoch {mine:.2f} s vs DGL sampling {theirs:.2f} s: {mine / theirs:.2f}x")
    machine.verdict(f"run {run}: (a) workbench epoch / DGL sampling, median", mine / theirs, at_most=0.5)


def part_b(args: Any, graph: Any, machine: Machine, run: int) -> None:
    """(b): the 12-configuration sweep on cached work against its first configuration alone."""
    from workbench.registry import EXECUTION_SCHEMES

    schemes = [s for s in args.schemes.split(",") if s in EXECUTION_SCHEMES.names()]
    missing = [s for s in args.schemes.split(",") if s not in schemes]
    if missing:
        print(f"(b) not registered, left out: {', '.join(missing)}")
    grid = [(h, pl, s) for s in schemes for h in HARDWARE for pl in PLACEMENTS]
    # The grid once on a small graph first: a fresh installation compiles the schemes' numba
    # kernels on their first call (HopGNN's: 4.4 s here), once per installation, not per sweep.
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as small:
        for point in grid:
            run_epoch(config(args.graph, WARM_SCALE, *point, args.sampler), None, small)
    print(
        f"(b) every point's kernels compiled or loaded on {args.graph} at scale {WARM_SCALE}: "
        f"{time.perf_counter() - t0:.2f} s, before any timing"
    )
    with tempfile.TemporaryDirectory() as fresh:
        first = run_epoch(config(args.graph, args.scale, *grid[0], args.sampler), graph, fresh)
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        for point in grid:
            stages = run_epoch(config(args.graph, args.scale, *point, args.sampler), graph, cache)
            print(
                f"(b) {point[0]:<28} {point[1]:<11} {point[2]:<14} {stages['total']:6.2f} s "
                f"(placement {stages['placement']:.2f}, sample {stages['sample']:.2f}, plan {stages['plan']:.2f}, "
                f"simulate {stages['simulate']:.2f}); epoch {stages['epoch_s'] * 1e3:8.1f} ms"
            )
        sweep = time.perf_counter() - t0
    print(f"(b) {len(grid)} configurations in {sweep:.2f} s vs the first alone {first['total']:.2f} s")
    machine.verdict(
        f"run {run}: (b) sweep of {len(grid)} / the first alone", sweep / first["total"], at_most=2.0
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", default="products-like")
    p.add_argument("--scale", type=float, default=None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch and numba threads (default: all cores)")
    p.add_argument("--sampler", default="bulk-matrix")
    p.add_argument("--schemes", default="model-centric,hopgnn", help="the sweep's two schemes")
    p.add_argument("--only", default="a,b", help="which parts to run: a, b or both")
    add_runs_option(p)
    args = p.parse_args(argv)
    machine = Machine.now()

    import os

    import numba
    import torch

    from workbench.graph.datasets import load_dataset

    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    t0 = time.perf_counter()
    graph = load_dataset(args.graph, scale=args.scale)
    print(
        f"graph {graph.name}: {graph.num_nodes:,} vertices, {graph.num_edges:,} edges, "
        f"{graph.train_nids().shape[0]:,} training vertices (loaded in {time.perf_counter() - t0:.1f} s); "
        f"{threads} threads"
    )
    parts = set(args.only.split(","))
    for run in range(args.runs):
        print(f"run {run}:", flush=True)
        if "a" in parts:
            part_a(args, graph, machine, run)
        if "b" in parts:
            part_b(args, graph, machine, run)
    machine.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
