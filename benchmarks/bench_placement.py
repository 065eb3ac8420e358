"""Preprocessing time of the song-jiang placement against METIS and ROC partitioning, on one graph.

    .venv/bin/python benchmarks/bench_placement.py [--graph products-like] [--scale 0.5] [--gpus 4]

Song & Jiang (paper 002, "Evaluation: Preprocess overhead") report dividing Reddit into
four parts in 0.49 s against 17 s for METIS (Products: 3.6 s against 83 s). On one
products-like graph (default scale: 1,224,514 vertices, ~20.6M edges) this prints, in
one run:

* the song-jiang placement time for ``--gpus`` GPUs of ``--hardware`` (Algorithm 1 on
  an NVSwitch box by default), cache ``--cache`` of the vertices per GPU, from
  probabilities already computed (the median of ``--repeat`` runs), and the time to
  compute those probabilities (exact two-hop full-neighborhood by default; ``--layers``
  for more hops, or ``--sampler`` to pre-sample);
* METIS partition time into ``--gpus`` parts and the ratio (target: song-jiang at
  least 20x faster);
* ROC partition time into 16 parts (target: under 1 s).

The partition timings come from ``benchmarks/bench_partition.py`` (``time_metis``,
``time_roc``). Until that file exists, METIS is timed through pymetis directly and
ROC is reported as unavailable.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def seconds(value: Any) -> float:
    """A timing helper's answer as seconds (a number, or a tuple/object whose first item or .seconds is one)."""
    if isinstance(value, tuple):
        value = value[0]
    return float(getattr(value, "seconds", value))


def partition_timers() -> tuple[Any, Any, str]:
    """(time_metis, time_roc, where from); either may be None."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        bench_partition = importlib.import_module("bench_partition")
    except ImportError:
        bench_partition = None
    if bench_partition is not None:
        return (
            getattr(bench_partition, "time_metis", None),
            getattr(bench_partition, "time_roc", None),
            "benchmarks/bench_partition.py",
        )

    def time_metis_direct(graph: Any, parts: int) -> float:
        import pymetis

        # METIS wants a symmetric graph without self loops; preparing it is not timed.
        sym = graph.symmetrize().remove_self_loops()
        start = time.perf_counter()
        pymetis.part_graph(parts, adjacency=pymetis.CSRAdjacency(sym.indptr, sym.indices))
        return time.perf_counter() - start

    return time_metis_direct, None, "pymetis directly (bench_partition.py not there yet)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="products-like")
    parser.add_argument("--scale", type=float, default=None, help="preset scale (default: the preset's)")
    parser.add_argument("--gpus", type=int, default=4, help="GPUs to place on and METIS parts (default 4)")
    parser.add_argument("--hardware", default="v100x8-nvswitch")
    parser.add_argument("--cache", type=float, default=0.2, help="per-GPU cache, share of vertices (0.2)")
    parser.add_argument(
        "--layers", type=int, default=2, help="hops of the exact full-neighborhood probability"
    )
    parser.add_argument(
        "--sampler", default=None, help="pre-sample with this sampler instead (e.g. neighbor)"
    )
    parser.add_argument("--fanouts", default="15,10,5")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--skip-metis", action="store_true", help="do not run METIS (it takes about a minute)"
    )
    args = parser.parse_args()

    from workbench.graph.datasets import load_dataset
    from workbench.graph.generators import erdos_renyi
    from workbench.hardware import load_hardware
    from workbench.registry import PLACEMENTS, SAMPLERS
    from workbench.strategies.placement.base import PlacementRequest
    from workbench.strategies.placement.probability import (
        full_neighborhood_probability,
        presampled_probability,
    )

    cluster = load_hardware(args.hardware)
    placement = PLACEMENTS.create("song-jiang")
    # Compile the numba loop (or load it from numba's cache) outside the timings.
    tiny = erdos_renyi(64, 4.0, seed=0)
    placement.place(
        PlacementRequest(
            graph=tiny, num_gpus=args.gpus, capacity=8, access_probability=np.ones(64), cluster=cluster
        )
    )

    start = time.perf_counter()
    graph = load_dataset(args.graph, scale=args.scale, progress=lambda m: print(m, file=sys.stderr))
    print(
        f"graph {graph.name}: {graph.num_nodes:,} vertices, {graph.num_edges:,} edges, "
        f"{graph.train_nids().shape[0]:,} training vertices (loaded in {time.perf_counter() - start:.1f} s)",
        flush=True,
    )

    start = time.perf_counter()
    if args.sampler:
        fanouts = [int(f) for f in args.fanouts.split(",")]
        sampler = SAMPLERS.create(args.sampler, fanouts=fanouts)
        prob = presampled_probability(
            graph, sampler, batch_size=args.batch_size, epochs=1, rng=np.random.default_rng(0)
        )
        how = f"pre-sampled ({args.sampler} {args.fanouts}, 1 epoch)"
    else:
        prob = full_neighborhood_probability(graph, args.layers, args.batch_size)
        how = f"exact full-neighborhood, {args.layers} hop(s)"
    prob_seconds = time.perf_counter() - start
    print(f"access probabilities, {how}: {prob_seconds:.2f} s", flush=True)

    capacity = int(args.cache * graph.num_nodes)
    request = PlacementRequest(
        graph=graph, num_gpus=args.gpus, capacity=capacity, access_probability=prob, cluster=cluster
    )
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = placement.place(request)
        times.append(time.perf_counter() - start)
    place_seconds = float(np.median(times))
    rates = result.expected_hit_rate(prob)
    print(
        f"song-jiang placement, {args.gpus} GPUs of {args.hardware}, {capacity:,} vertices each: "
        f"{place_seconds:.3f} s (median of {args.repeat}; min {min(times):.3f}, max {max(times):.3f}); "
        f"expected GPU hit rate {rates.mean_gpu:.1%} (local {rates.mean_local:.1%})",
        flush=True,
    )

    time_metis, time_roc, source = partition_timers()
    print(f"partition timings from {source}", flush=True)
    if time_metis is not None and not args.skip_metis:
        metis_seconds = seconds(time_metis(graph, args.gpus))
        print(f"metis partition into {args.gpus} parts: {metis_seconds:.2f} s", flush=True)
        print(
            f"ratio metis / song-jiang placement: {metis_seconds / place_seconds:.0f}x (target >= 20x); "
            f"metis / (probabilities + placement): {metis_seconds / (prob_seconds + place_seconds):.1f}x",
            flush=True,
        )
    else:
        print("metis partition: not measured")
    if time_roc is not None:
        roc_seconds = seconds(time_roc(graph, 16))
        print(f"roc partition into 16 parts: {roc_seconds:.3f} s (target < 1 s)")
    else:
        print("roc partition into 16 parts: not available (needs time_roc in benchmarks/bench_partition.py)")


if __name__ == "__main__":
    main()
