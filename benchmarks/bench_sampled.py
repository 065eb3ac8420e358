"""Sampled simulation against the whole epoch: how often the interval holds it, and how wide it is.

Not a timed test; a script that prints figures::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sampled.py [--scale 1.0] [--machines 4] [--seeds 20]

Issue 30's check: on a graph where exhaustive simulation is affordable (products-like at
scale 1.0, 16 GPUs: Perlmutter's 4 x 4 A100, model-centric, METIS, a 10% degree cache,
fanouts 15/10/5, batch 64 per GPU: 190 iterations), the epoch
is simulated whole once and estimated by ``sim.sampled.sampled_epoch`` under ``--seeds``
seeds (each a different choice of sampled blocks; the plan is the same). Prints per seed
the estimate, its interval and whether it holds the whole epoch, then the coverage, the
half-width (median and largest, relative to the estimate), the estimates' errors, and the
time of one sampled estimate against the whole simulation. Target: the interval holds the
whole epoch in at least 19 of 20 seeds (at 95% confidence 20 seeds miss one on average).

Measured 2026-11-27 on this 2-core AMD EPYC VM (graph and partition cached, load 0.2-0.8):
189 iterations, 49 simulated per estimate; 20 of 20 seeds held the whole epoch (1883.936 ms),
half-width median 4.3%, largest 6.7%, estimate error mean -0.02%, largest 2.0%; one sampled
estimate 1.66 s against 1.45 s for the whole epoch (windows pay the simulator's fixed costs:
sampling pays off on epochs of thousands of iterations).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from machine import Machine

CONFIG = """
name = "sampled-coverage"
seed = 0
[graph]
name = "products-like"
scale = {scale}
[hardware]
name = "perlmutter-4xa100-slingshot"
machines = {machines}
[model]
name = "sage"
hidden = 256
num_layers = 3
[training]
batch_size = {batch}
epochs = 1
[cache]
capacity = "10%"
[partition]
name = "metis"
[placement]
name = "degree"
[sampling]
name = "neighbor"
fanouts = [15, 10, 5]
[execution]
name = "{scheme}"
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument(
        "--machines", type=int, default=4, help="Perlmutter nodes of 4 A100 (default 4: 16 GPUs)"
    )
    parser.add_argument("--batch", type=int, default=64, help="per GPU")
    parser.add_argument("--scheme", default="model-centric")
    parser.add_argument("--samples", type=int, default=48, help="iterations simulated per estimate")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()

    from sim import simulate
    from sim.calibrate import prepared_cost_model
    from sim.sampled import sampled_epoch, simulator
    from workbench.config import load_config
    from workbench.run import prepare_run

    machine = Machine.now()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "c.toml"
        config.write_text(
            CONFIG.format(scale=args.scale, machines=args.machines, batch=args.batch, scheme=args.scheme)
        )
        t0 = time.perf_counter()
        prepared = prepare_run(load_config(config))
        plan, cost_model = prepared.plan(progress=True), prepared_cost_model(prepared)
        print(f"prepared and planned in {time.perf_counter() - t0:.1f} s: {len(plan.tasks):,} tasks")
    t0 = time.perf_counter()
    whole = simulate(plan, prepared.cluster, cost_model=cost_model).makespan
    whole_s = time.perf_counter() - t0
    run = simulator(prepared.cluster, cost_model)
    estimates, times = [], []
    for seed in range(args.seeds):
        t0 = time.perf_counter()
        e = sampled_epoch(plan, run, samples=args.samples, seed=seed)
        times.append(time.perf_counter() - t0)
        estimates.append(e)
        held = e.low_s <= whole <= e.high_s
        print(
            f"seed {seed:2d}: {e.estimate_s * 1e3:9.3f} ms in [{e.low_s * 1e3:.3f}, {e.high_s * 1e3:.3f}] "
            f"({e.estimate_s / whole - 1:+.2%}): {'holds' if held else 'MISSES'} {whole * 1e3:.3f} ms"
        )
    held = sum(e.low_s <= whole <= e.high_s for e in estimates)
    widths = [e.half_width_s / e.estimate_s for e in estimates]
    errors = [e.estimate_s / whole - 1 for e in estimates]
    print(
        f"{args.scheme} on products-like {args.scale:g}, {4 * args.machines} GPUs: {estimates[0].iterations} "
        f"iterations, {len(estimates[0].sampled)} simulated per estimate; whole epoch {whole * 1e3:.3f} ms"
    )
    print(
        f"interval held the whole epoch in {held} of {args.seeds} seeds; half-width median "
        f"{statistics.median(widths):.1%}, largest {max(widths):.1%}; estimate error mean "
        f"{statistics.mean(errors):+.2%}, largest |error| {max(abs(x) for x in errors):.2%}"
    )
    print(f"one sampled estimate {statistics.median(times):.2f} s (median) against {whole_s:.2f} s whole")
    machine.verdict(f"seeds whose interval holds the epoch (/{args.seeds})", held / args.seeds, at_least=0.95)
    machine.finish()


if __name__ == "__main__":
    main()
