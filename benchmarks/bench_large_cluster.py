"""Large generated clusters: building the cluster, its routes and one ring all-reduce over every GPU.

Not a timed test; a script that prints figures::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_large_cluster.py [--sizes 16 32 64] [--runs 3]

For each size M (machines of 8 GPUs, on the fat-tree and on the rail network): the time
to generate the ClusterSpec, to build the sim's Topology and find the ring's routes
(each GPU to the next, as the all-reduce's steps use them), and to simulate a one-task
plan, ``plan.collective("ar", "allreduce", all GPUs, 256 MB, "allreduce")`` on a fresh
spec (so its routes are found again inside). Target: the all-reduce over 64 x 8 = 512
GPUs simulates in under 10 s end to end (generation included).

``--alltoall M ...`` (default 8 16 32 64) also simulates one all-to-all of 64 MiB over
every GPU of an M x 8 fat-tree: n(n-1) routes, found by ``sim.topology``'s one cached
search per destination. Target: 64 x 8 (261,632 routes) simulates in under 60 s.

Measured 2026-11-26 on a 2-core AMD EPYC VM shared with other jobs (load 3.77 / 2.57 /
1.98), three runs; ring all-reduce of 256 MiB, generate / routes / simulate::

    16x8 fat-tree  128 GPUs   660 links  0.001 s  0.004-0.005 s  0.015-0.030 s  (24.99 ms simulated)
    16x8 rail      128 GPUs   664 links  0.001 s  0.004 s        0.015 s        (13.89 ms)
    32x8 fat-tree  256 GPUs  1320 links  0.003 s  0.013 s        0.041-0.042 s  (27.89 ms)
    32x8 rail      256 GPUs  1320 links  0.003 s  0.013-0.014 s  0.041-0.043 s  (16.75 ms)
    64x8 fat-tree  512 GPUs  2640 links  0.005 s  0.045-0.046 s  0.136-0.143 s  (33.57 ms)
    64x8 rail      512 GPUs  2632 links  0.005 s  0.046-0.065 s  0.136-0.140 s  (22.40 ms)

All-to-all of 64 MiB on the fat-tree, simulate() alone, before and after the search per
destination (issue 30 item 3), same machine back to back, one run each:

    before (load 0.34 -> 0.67): 8x8 0.312 s, 16x8 2.281 s, 32x8 18.603 s
    after  (load 0.37 -> 0.42): 8x8 0.037 s, 16x8 0.151 s, 32x8 0.677 s, 64x8 3.129 s
    64x8 again, old search then new, back to back (the VM busy with other jobs, load
    1.70 -> 2.90 -> 2.91): before 151.9 s, after 3.035 s, the same makespan (2.7635 ms)

Before, each route ran two breadth-first searches over the whole graph (cProfile of
16x8: 8.5 of 8.6 s in them); at 64x8 about 70% of the time is now the routes' walks.
"""

from __future__ import annotations

import argparse
import time

from machine import Machine, add_runs_option

from sim import simulate
from sim.topology import Topology
from workbench.hardware.generate import generate_cluster
from workbench.plan import Plan

NBYTES = 256 * 2**20


def measure(machines: int, network: str) -> dict[str, float]:
    t0 = time.perf_counter()
    cluster = generate_cluster(machines, 8, network, "h100" if network == "rail" else "a100")
    t1 = time.perf_counter()
    gpus = cluster.gpu_nodes()
    topo = Topology(cluster)
    for a, b in zip(gpus, gpus[1:] + gpus[:1], strict=True):
        topo.route(a, b)
    t2 = time.perf_counter()
    plan = Plan("ar")
    plan.collective("ar", "allreduce", gpus, NBYTES, "allreduce")
    fresh = generate_cluster(machines, 8, network, "h100" if network == "rail" else "a100")
    t3 = time.perf_counter()
    result = simulate(plan, fresh)
    t4 = time.perf_counter()
    return {
        "gpus": len(gpus),
        "links": len(cluster.links),
        "generate_s": t1 - t0,
        "routes_s": t2 - t1,
        "simulate_s": t4 - t3,
        "makespan_s": result.makespan,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[16, 32, 64], help="machine counts (8 GPUs each)"
    )
    parser.add_argument(
        "--alltoall",
        type=int,
        nargs="*",
        default=[8, 16, 32, 64],
        help="machine counts for the all-to-all (none: skip)",
    )
    add_runs_option(parser)
    args = parser.parse_args()
    machine = Machine.now()
    worst = 0.0
    worst_alltoall = 0.0
    for run in range(args.runs):
        print(f"run {run + 1}/{args.runs}")
        print(
            f"  {'cluster':<16} {'GPUs':>5} {'links':>6} {'generate':>9} {'routes':>8} {'simulate':>9} {'all-reduce':>11}"
        )
        for m in args.sizes:
            for network in ("fat-tree", "rail"):
                r = measure(m, network)
                print(
                    f"  {f'{m}x8 {network}':<16} {r['gpus']:>5} {r['links']:>6} {r['generate_s']:>8.3f}s"
                    f" {r['routes_s']:>7.3f}s {r['simulate_s']:>8.3f}s {r['makespan_s'] * 1e3:>9.2f}ms"
                )
                if m == max(args.sizes):
                    worst = max(worst, r["generate_s"] + r["simulate_s"])
        for m in args.alltoall:
            cluster = generate_cluster(m, 8, "fat-tree")
            plan = Plan("a2a")
            plan.collective("a2a", "alltoall", cluster.gpu_nodes(), 64 * 2**20, "alltoall")
            t0 = time.perf_counter()
            simulate(plan, cluster)
            took = time.perf_counter() - t0
            print(f"  {m}x8 fat-tree all-to-all: simulate {took:.3f}s")
            if m == max(args.alltoall):
                worst_alltoall = max(worst_alltoall, took)
    machine.finish()
    machine.verdict(f"{max(args.sizes)}x8 generate + all-reduce simulate, worst run (s)", worst, at_most=10.0)
    if args.alltoall:
        machine.verdict(
            f"{max(args.alltoall)}x8 all-to-all simulate, worst run (s)", worst_alltoall, at_most=60.0
        )


if __name__ == "__main__":
    main()
