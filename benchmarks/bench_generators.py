"""Time the graph generators at benchmark size.

    .venv/bin/python benchmarks/bench_generators.py [--repeat N]

Prints the wall time of a 1M-vertex, 20M-edge R-MAT (the issue's bound: under 30 s on
the 2-core development machine), of the products-like preset at its default scale
(no cache), of a degree-corrected SBM of the same size, and of reading products-like
back from the disk cache.

Every run prints the machine (CPU model, cores) with the load average before and after,
and PASS/FAIL for its target (issue 28); the target is an absolute bound, so it is a
figure of the machine printed beside it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

from machine import Machine

from workbench.graph.csr import CSRGraph


def timed(label: str, build: Callable[[], CSRGraph], repeat: int) -> float:
    """Print and return the median wall seconds of ``repeat`` builds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        graph = build()
        times.append(time.perf_counter() - start)
    spread = f" (min {min(times):.2f} s, max {max(times):.2f} s over {repeat})" if repeat > 1 else ""
    print(
        f"{label:<42} {sorted(times)[len(times) // 2]:6.2f} s{spread}   "
        f"{graph.num_nodes:>10,} vertices {graph.num_edges:>12,} edges",
        flush=True,
    )
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (the median is printed)")
    args = parser.parse_args()

    from workbench.graph.datasets import load_dataset
    from workbench.graph.generators import rmat, sbm

    machine = Machine.now()
    rmat_s = timed("rmat 1M vertices / 20M edges", lambda: rmat(1_000_000, 20_000_000, seed=0), args.repeat)
    timed(
        "sbm (degree-corrected) 1M / 20M",
        lambda: sbm(1_000_000, 200, 20.0, 0.8, seed=0, degree_exponent=2.5),
        args.repeat,
    )
    timed(
        "products-like preset, default scale, no cache",
        lambda: load_dataset("products-like", cache=False),
        args.repeat,
    )
    with tempfile.TemporaryDirectory() as cache:
        load_dataset("products-like", cache_dir=cache)
        timed(
            "products-like from the disk cache",
            lambda: load_dataset("products-like", cache_dir=cache),
            args.repeat,
        )
    # An absolute bound (this machine's figure: see the machine line).
    machine.verdict("rmat 1M / 20M, seconds on this machine", rmat_s, at_most=30.0)
    machine.finish()


if __name__ == "__main__":
    main()
