"""GPU memory policies: dpmm's search time on deep models, and the three policies' transfers side by side.

    .venv/bin/python benchmarks/bench_memory.py [--layers 16] [--points 12] [--dags 40]

Three parts, all on ROC's Reddit (paper 000, Table 4: 232,965 vertices, 114,848,857
edges, 602 features, 41 classes) as one partition on one GPU, hidden width 256:

1. ``dpmm`` on the operator graph of a ``--layers``-layer residual GCN (``resgcn``,
   ROC section 7.5; 16 layers: 64 operators, 98 tensors) at ``--points`` capacities
   from its largest operator's working set to everything at once: seconds per
   schedule (target: under 5 s), whether the search was exact, and its loads against
   the optimum of an integer program over the same decisions (one 0/1 variable per
   tensor and gap between two uses: keep it across or load it again; HiGHS via scipy),
   which is exact for a chain and independent of the DP.
2. ROC's Fig. 10 setting (GCN, Reddit, one GPU): host-to-GPU loads of ``streaming``,
   ``lru`` and ``dpmm`` side by side over a range of GPU capacities, with the ratios
   (the paper: 7.29 / 2.15 / 1.45 GB per epoch, 1.4-5x fewer for the DP). Write-backs
   (every output once, the same for all three) are printed apart: Fig. 10's DP figure
   is the unavoidable loads alone, so it counts loads.
3. What ``dpmm``'s beam costs where it binds: ``--dags`` random operator DAGs of 16
   operators with many execution orders (the GNN steps above are chains, where it
   never binds), beams 1 to 64 against the unbounded search.

Measured here (2 cores; 1.5-2.5 minutes in all, most of it part 3):

1. 16-layer resgcn, 12 capacities from 2.04 to 16.4 GB: every schedule exact and equal
   to the integer program's optimum, at most 0.009-0.012 s per schedule over two runs
   (the unbounded search the same); ``--layers 32`` (128 operators): at most 0.03 s.
2. GCN, hidden 256, 2.04-2.23 GB: streaming 5.96, lru 2.05, dpmm 1.72 GB of loads:
   lru/dpmm 1.19x, streaming/dpmm 3.46x; from 2.32 GB both lru and dpmm load only the
   unavoidable 1.48 GB (graph, features, weights, labels once): 4.01x fewer than
   streaming. Hidden 512: 2.04-2.22 GB 7.39 / 3.44 / 2.52 GB (1.37x, 2.93x); 2.59-2.95
   GB 7.39 / 2.05 / 1.96 (1.04x, 3.77x); everything fits (4.03 GB): 1.48 for both,
   4.98x fewer than streaming. Write-backs: 1.59 GB (hidden 256), 2.55 GB (512). The
   direction of Fig. 10 holds everywhere (dpmm <= lru <= streaming, streaming 3-5x
   dpmm, as the paper's 5.03x); the lru gap is at most 1.37x here against the paper's
   1.48x, and closes once everything still needed fits, because this lru releases
   dead tensors at once (a cache with reference counts).
3. 40 random 16-operator DAGs, seed 0 (beam, cases where it bound, cases above the
   optimum, worst, mean): 1: 40, 25, +64%, +7.6%; 2: 40, 15, +27%, +2.9%;
   4: 40, 3, +14%, +0.5%; 16: 40, 0; 64: 30, 0.

Every run prints the machine (CPU model, cores) with the load average before and after,
and PASS/FAIL for its target (issue 28); the target is an absolute bound, so it is a
figure of the machine printed beside it.
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
from machine import Machine

from workbench.model import build_model
from workbench.registry import MEMORY_POLICIES
from workbench.strategies.memory.base import Operator, OperatorGraph, Tensor
from workbench.strategies.memory.graphs import operator_graph
from workbench.strategies.memory.interval_program import interval_program_loads

REDDIT = {"num_vertices": 232_965, "num_edges": 114_848_857}
GB = 1e9


def capacities(graph: OperatorGraph, points: int) -> list[int]:
    low = max(graph.working_set_bytes(k) for k in range(len(graph.operators)))
    return np.linspace(low, graph.total_bytes, points).astype(np.int64).tolist()


def deep(layers: int, points: int) -> float:
    """Part 1; returns the longest dpmm schedule's seconds."""
    graph = operator_graph(build_model("resgcn", 602, 41, hidden=256, num_layers=layers), **REDDIT)
    print(
        f"\n1. dpmm on a {layers}-layer residual GCN: {len(graph.operators)} operators, {len(graph.tensors)} tensors"
    )
    print(
        f"{'GPU GB':>8} {'dpmm s':>8} {'exact':>6} {'no-bound s':>10} {'loads GB':>9} {'optimum GB':>10} {'gap':>7}"
    )
    worst_time = worst_gap = 0.0
    for capacity in capacities(graph, points):
        t0 = time.perf_counter()
        schedule = MEMORY_POLICIES.create("dpmm").schedule(graph, capacity)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        unbounded = MEMORY_POLICIES.create("dpmm", beam=None).schedule(graph, capacity)
        unbounded_s = time.perf_counter() - t0
        optimum = interval_program_loads(graph, capacity)
        gap = schedule.h2d_bytes / optimum - 1
        assert unbounded.h2d_bytes == optimum
        worst_time, worst_gap = max(worst_time, seconds), max(worst_gap, gap)
        print(
            f"{capacity / GB:8.2f} {seconds:8.3f} {schedule.exact!s:>6} {unbounded_s:10.3f} "
            f"{schedule.h2d_bytes / GB:9.3f} {optimum / GB:10.3f} {gap:7.2%}"
        )
    print(f"worst: {worst_time:.3f} s per schedule (target < 5 s), {worst_gap:.2%} above the optimum")
    return worst_time


def fig10(points: int) -> None:
    print("\n2. ROC Fig. 10 setting: GCN on Reddit, one GPU; GB loaded host -> GPU per iteration")
    print(
        f"{'hidden':>6} {'GPU GB':>7} {'streaming':>9} {'lru':>7} {'dpmm':>7} {'lru/dpmm':>8} {'str/dpmm':>8} {'write-back':>10}"
    )
    for hidden in (256, 512):
        graph = operator_graph(build_model("gcn", 602, 41, hidden=hidden), **REDDIT)
        for capacity in capacities(graph, points)[: max(2, points // 2)] + [graph.total_bytes]:
            by = {
                n: MEMORY_POLICIES.create(n).schedule(graph, capacity) for n in ("streaming", "lru", "dpmm")
            }
            stream, lru, dp = (by[n].h2d_bytes for n in ("streaming", "lru", "dpmm"))
            print(
                f"{hidden:6d} {capacity / GB:7.2f} {stream / GB:9.2f} {lru / GB:7.2f} {dp / GB:7.2f} "
                f"{lru / dp:7.2f}x {stream / dp:7.2f}x {by['dpmm'].d2h_bytes / GB:10.2f}"
            )
    print("paper (Fig. 10a, per epoch): no cache 7.29, LRU 2.15, ROC 1.45 GB: 1.48x and 5.03x")


def random_dag(rng: random.Random, num_ops: int = 16, num_inputs: int = 5) -> tuple[OperatorGraph, int]:
    tensors = [Tensor(f"in{h}", rng.randint(1, 8)) for h in range(num_inputs)]
    available = [t.name for t in tensors]
    operators = []
    for k in range(num_ops):
        reads = rng.sample(available, min(len(available), rng.randint(1, 3)))
        writes = [f"t{k}.{j}" for j in range(rng.randint(1, 2))]
        tensors += [Tensor(name, rng.randint(1, 8)) for name in writes]
        operators.append(Operator(f"op{k}", tuple(reads), tuple(writes)))
        available += writes
    graph = OperatorGraph(tuple(operators), tuple(tensors), "random-dag")
    low = max(graph.working_set_bytes(k) for k in range(num_ops))
    return graph, low + rng.randint(0, 10)


def beam_cost(dags: int) -> None:
    print(f"\n3. the beam where it binds: {dags} random DAGs of 16 operators (seed 0)")
    rng = random.Random(0)
    cases = [random_dag(rng) for _ in range(dags)]
    optimum = [MEMORY_POLICIES.create("dpmm", beam=None).schedule(g, c).h2d_bytes for g, c in cases]
    print(f"{'beam':>5} {'binds':>6} {'above opt':>9} {'worst':>7} {'mean':>7} {'seconds':>8}")
    for beam in (1, 2, 4, 16, 64):
        t0 = time.perf_counter()
        schedules = [MEMORY_POLICIES.create("dpmm", beam=beam).schedule(g, c) for g, c in cases]
        seconds = time.perf_counter() - t0
        gaps = [s.h2d_bytes / o - 1 for s, o in zip(schedules, optimum, strict=True)]
        binds = sum(not s.exact for s in schedules)
        above = sum(g > 0 for g in gaps)
        print(f"{beam:5d} {binds:6d} {above:9d} {max(gaps):7.1%} {np.mean(gaps):7.1%} {seconds:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--points", type=int, default=12, help="capacities per sweep")
    parser.add_argument("--dags", type=int, default=40, help="random DAGs for part 3 (0 skips it)")
    args = parser.parse_args()
    machine = Machine.now()
    worst = deep(args.layers, args.points)
    fig10(args.points)
    if args.dags:
        beam_cost(args.dags)
    # An absolute bound (this machine's figure: see the machine line).
    machine.verdict("dpmm, longest schedule, seconds on this machine", worst, at_most=5.0)
    machine.finish()


if __name__ == "__main__":
    main()
