"""Simulator throughput: simulated tasks per second on a 100,000-task plan over an 8-GPU PCIe tree.

Not a timed test; a script that prints figures::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sim.py [--tasks 100000] [--allreduce-every 1] [--runs 3]

The plan is data-parallel training on ``neugraph-8xp100-pcie`` (two levels of PCIe
switches, so feature copies from host share switch uplinks): per iteration and GPU,
one host-to-GPU feature copy (prefetched one iteration ahead), three forward and
three backward layers; every ``--allreduce-every`` iterations a ring all-reduce of
the gradients over the 8 GPUs (14 steps of 8 concurrent chunks each). Compute times
come from the default cost model's features. Reports the wall time to build, to
validate and simulate, to assemble the trace, and tasks per second.

Measured on a quiet 2-core VM (the default plan: 100,000 tasks, 220,701 events, 38,159
rate recomputations, 112,278 trace rows), ``--repeat 3`` three times, the version before
issue 10 (9787250) and after it run alternately in one session::

    version                       simulate() wall   tasks/s end to end   tasks/s executing
    before (v1: one H2D/D2H       0.54-0.64 s       156,000-184,000      239,000-246,000
      engine pair, max-buffer
      memory check)
    after (v2: engine pools,      0.83-0.92 s       109,000-121,000      244,000-258,000
      legs, memory timeline,
      typed validation)

After, per run: Plan.validate 0.13-0.15 s (every field's type checked), setup 0.22-0.25 s
(the plan read into the run's lists, memory actions prepared, compute durations from
the cost model), execute 0.39-0.41 s, trace table 0.07-0.11 s. The event loop itself is
a little faster than before (each task's life is three small methods; engines are
asked through ``Engine.request`` only); what costs more is the work before it: type
checks on every field, and the memory timeline's per-task actions (a landing buffer for
each of the 14,054 copies, released by its reader).

Issue 28 (figures must hold on any machine of this kind): every run prints the machine,
the load before and after, and PASS/FAIL per target, ``--runs N`` times (default 3).
Each run builds the plan, simulates it once as a fresh ``Plan`` (validated and read into
columns in that call), then ``--again`` more times through one ``plan.checked()`` snapshot
(validated once; dependency lists, memory actions and the trace's per-task columns
derived on its first run and reused), as a plan simulated under several seeds or
hardware files is. The targets (end to end at least 0.75 of the executing rate, at least
100k tasks/s) are judged on the last simulation of the snapshot, and shown for the first
simulation too. Measured 2026-11-25 on this 2-core AMD EPYC VM shared with other jobs
(load 2.6-2.7), the version before issue 28 (14360dc) and after it alternately, three
times each::

    before: simulate() 0.90-1.21 s (validate 0.15-0.31, setup 0.26-0.30, execute 0.38-0.39,
            trace table 0.08-0.20): 83-111k tasks/s end to end, ratio 0.32-0.42
    after, first simulation of a plan: 0.95-1.18 s (validate 0.23-0.26, setup 0.19-0.41,
            execute 0.39, trace 0.13-0.22): 85-106k tasks/s, ratio 0.33-0.41: FAIL
    after, the checked plan again: 0.47-0.63 s (validate 0.000, setup 0.06-0.08,
            execute 0.38-0.52, trace 0.025): 159-214k tasks/s, ratio 0.82-0.83: PASS

Then (2026-11-26, the same kind of VM, load 1.6-1.9, the commit before c914d6a and
c914d6a+, three runs each of this script, one after the other): the first simulation
0.768-0.873 s -> 0.715-0.756 s (validate 0.165-0.178 -> 0.125-0.139, setup 0.140-0.146
-> 0.112-0.152, execute 0.350-0.362 -> 0.348-0.351, trace table 0.112-0.185 ->
0.111-0.167): 114-130k -> 132-140k tasks/s, ratio 0.41-0.46 -> 0.46-0.49, still FAIL; the
checked plan again 0.82-0.85 both. What changed: check_task tests the common values
inline (a call per group only when they are not plain), the columns are sliced out of
one flat attribute pass, the memory actions come from the columns.

Then (the same kind of VM, shared: load 2.4-2.9 on its 2 cores, so the figures are noisy;
256b314 and 179a6bc alternately, one run of this script each, three times): the trace
table stage of the first simulation 0.150-0.193 s -> 0.075-0.109 s, validate and setup
unchanged within the noise (0.15-0.25 s, 0.13-0.21 s), execute 0.36-0.63 s either way:
ratio 0.43-0.54 -> 0.50-0.54, still FAIL; the checked plan again 0.74-0.82 both. What
changed: simulate() frees the run's lists (and a snapshot taken for that call alone)
before the paused collector resumes, which otherwise began a generation-0 pass over
them at the first allocation after (0.035 s); task_table codes a transfer's ends from
the column's own codes (8 ms). Profiled first (a quiet moment, best of three, the
100,000-task plan): task fields checked 54 ms + the scan around it (ids' positions,
dependencies in order, nodes, tensors) 33 ms, fields read into columns 50 ms, the
dependency structure 41 ms + memory actions 25 ms, compute durations 35 ms (the cost
model's pass over the feature dicts), the rest of the run's lists 14 ms, task table
42 ms, trace frame 23 ms + its schema check 4 ms. A fused read-and-check pass (one
attribute read per task, checked from the tuple) took 113-139 ms against 112-116 ms
for the two passes, and the scan's bookkeeping done over the columns (positions by
``dict(zip)``, nodes by set) 120 ms against 130 ms: the Python work per task, not
cache misses, is the floor.

The first simulation of a plan cannot reach 0.75 while it takes task objects: each run
prints the per-task floor measured on its plan, every task's fields read once into
columns (0.04 s) and checked (0.05 s), which alone leaves at most 0.78, before the
dependency lists, memory actions, compute durations and the trace table (together
about 0.2 s more). A bulk screen of the columns instead of the per-task check was
tried twice and was no faster (each pass over 100,000 scattered objects misses the
cache again): the plan would have to be built as columns, not as task objects.

The garbage the script's own plan building leaves is collected before each timed call
(:func:`simulate_timed`): the full collection it owes otherwise lands inside the next
simulate() in one run of three (0.3 s, in whichever stage allocates first).

Where the speed comes from: the work per task is kept off the event path (fields read
once into lists, compute durations in one numpy pass, dependency users as one flat
list, a compute task's end queued as its bare index); flows find a link list's links
and flow sets once and skip the component search for a flow that starts alone (most
ring-collective steps); and a run leaves no reference cycle, so no GC pass over its
lists follows it.

The flow network on slot arrays and numba kernels (2026-11-26, for all-to-alls among 128
GPUs: papers-like at scale 0.01, one bulk-pipeline iteration, about 10 minutes -> 36 s)
costs this plan's small components: its version before (ad3354b, a worktree) and after,
alternately, twice each, on the 2-core VM with another job on the other core::

    before: first simulation execute 0.360-0.362 s, 125-140k tasks/s end to end (ratio
            0.45-0.50); checked plan again execute 0.357-0.368 s, 227-230k tasks/s
    after:  first simulation execute 0.645-0.696 s, 86-93k tasks/s end to end (ratio 0.60):
            about 0.27 s of it is numba loading the kernels from its cache on their first
            call in a process (a run of the workbench pays it in sampling or placement
            anyway; this script does not); checked plan again execute 0.455-0.475 s,
            180-187k tasks/s (ratio 0.85)

so the first simulation of a fresh process misses the 100k tasks/s target here, and a flow
costs about 2.5 us more (a kernel call to set its rate, one to find the next completion).

Of those 0.27 s, about 0.25 s is numba starting at all (LLVM and its runtime, paid by the
first compiled call of any kernel: calling a trivial kernel first, the flow kernels load from
the cache in 0.01 s). The script now starts numba before any timing and prints how long that
took; loading the simulator's own kernels stays in the first simulation. Measured so
(2026-11-26, quiet, load 0.25-0.42, ``--runs 3`` then ``--runs 1``; numba's start 0.25 s):
first simulation 0.81-0.95 s (validate 0.14-0.16, setup 0.13-0.14, execute 0.47-0.49, trace
table 0.08-0.16), 105-123k tasks/s end to end: PASS; its ratio 0.52-0.58: still FAIL (the
per-task floor, fields read and checked once, is 0.11 s: even with nothing else besides
execute the ratio would be 0.81). The checked plan again: 170-189k tasks/s, ratio 0.84-0.86:
PASS.

2026-11-27, a fresh machine of the same kind (slower: execute 0.71-1.00 s instead of 0.47-0.49),
``--runs 3``, load 0.1-1.1: first simulation 1.28-1.72 s (validate 0.25-0.33, setup 0.19-0.22,
trace table 0.13-0.23), 58-78k tasks/s end to end: both targets FAIL (ratio 0.55-0.58); the checked
plan's last simulation 96-111k tasks/s, ratio 0.85-0.88 (100k missed in one run of three). The
absolute rate is this machine's; the ratio held where it was.

2026-11-28, a slower machine still (AVX2-only EPYC; execute 1.2-1.7 s), ``--runs 3``, quiet
(other processes 0.4% of the CPU time): first simulation ratio 0.60, 0.65, 0.57 (FAIL; 38-47k
tasks/s end to end, 60-82k executing); the checked plan again 0.91, 0.88, 0.89 (PASS; 52-70k
tasks/s). Here the executing rate alone is below 100k tasks/s, so no fixed-cost work can meet it.
"""

from __future__ import annotations

import argparse
import gc
import time

from machine import Machine, add_runs_option

from sim import simulate
from sim.executor import paused_gc
from workbench.hardware import load_hardware
from workbench.hardware.spec import ClusterSpec
from workbench.plan import CheckedPlan, Plan, PlanColumns, check_task


def build_plan(target_tasks: int, gpus: list[str], allreduce_every: int, layers: int = 3) -> Plan:
    plan = Plan("bench-data-parallel")
    per_iter = len(gpus) * (1 + 2 * layers)
    it = 0
    last_allreduce: str | None = None
    while len(plan.tasks) + per_iter <= target_tasks:
        finals = []
        for w, gpu in enumerate(gpus):
            load = f"i{it}.w{w}.h2d"
            prefetch = [f"i{it - 1}.w{w}.fwd0"] if it else []
            nbytes = 8_000_000 + 100_000 * ((it * 7 + w * 3) % 11)  # sampled inputs vary in size
            plan.transfer(load, "m0.host", gpu, nbytes, "h2d", prefetch, worker=w, iteration=it)
            prev = [load] + ([last_allreduce] if last_allreduce else [])
            for layer in range(layers):
                tid = f"i{it}.w{w}.fwd{layer}"
                feats = {
                    "flops": 2e9 / (layer + 1),
                    "bytes": 2e8 / (layer + 1),
                    "edges": 1e5,
                    "vertices": 1e4,
                }
                plan.compute(tid, gpu, "forward", prev, worker=w, iteration=it, features=feats)
                prev = [tid]
            for layer in reversed(range(layers)):
                tid = f"i{it}.w{w}.bwd{layer}"
                feats = {"flops": 4e9 / (layer + 1), "bytes": 4e8 / (layer + 1)}
                plan.compute(tid, gpu, "backward", prev, worker=w, iteration=it, features=feats)
                prev = [tid]
            finals.extend(prev)
        if (it + 1) % allreduce_every == 0 and len(plan.tasks) < target_tasks:
            last_allreduce = f"i{it}.allreduce"
            plan.collective(last_allreduce, "allreduce", gpus, 4_000_000, "allreduce", finals, iteration=it)
        it += 1
    # Top up to the exact count with small host-to-GPU copies (stats uploads, say).
    k = 0
    while len(plan.tasks) < target_tasks:
        w = k % len(gpus)
        plan.transfer(f"extra{k}", "m0.host", gpus[w], 4096, "h2d", worker=w)
        k += 1
    return plan


def start_numba() -> float:
    """Seconds to compile and call a trivial function: numba's per-process start (LLVM, its runtime),
    which the first kernel a process calls pays whatever the kernel. The simulator's kernels are
    not called here: loading them from numba's cache stays in the first simulation."""
    import numba

    t0 = time.perf_counter()
    numba.njit(lambda x: x + 1)(1)
    return time.perf_counter() - t0


def simulate_timed(plan: Plan | CheckedPlan, cluster: ClusterSpec, seed: int) -> dict[str, float]:
    """One simulate() call: its wall time and stages (validate, setup, execute, trace table).

    The garbage the benchmark's own work left (building a 100,000-task plan promotes some
    700,000 objects, and the interpreter owes a full collection for them) is collected
    first: otherwise that collection falls on the first allocation after simulate()'s
    paused collector, 0.3 s here in one run of three, charged to whichever stage allocates.
    """
    gc.collect()
    t0 = time.perf_counter()
    result = simulate(plan, cluster, run_id="bench", seed=seed)
    total = time.perf_counter() - t0
    st = result.stats
    return {
        "total": total,
        "validate": st["validate_s"],
        "setup": st["setup_s"],
        "execute": st["execute_s"],
        "trace": total - st["wall_s"],
        "events": st["events"],
        "rebalances": st["rebalances"],
        "rows": len(result.trace),
        "makespan": result.makespan,
    }


def per_task_floor(plan: Plan) -> tuple[float, float]:
    """Seconds of what any first simulation of a plan of task objects does per task in Python,
    measured on this plan in this run: (one read of every task's fields into columns, every
    task's own fields checked with :func:`workbench.plan.check_task`)."""
    with paused_gc():
        t0 = time.perf_counter()
        PlanColumns.of(plan.tasks)
        t1 = time.perf_counter()
        for task in plan.tasks:
            check_task(task, plan.name)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def describe(label: str, tasks: int, t: dict[str, float]) -> str:
    return (
        f"{label}: simulate() wall {t['total']:.3f} s = validate {t['validate']:.3f} s + setup {t['setup']:.3f} s "
        f"+ execute {t['execute']:.3f} s + trace table {t['trace']:.3f} s; {tasks / t['total']:,.0f} tasks/s "
        f"end to end, {tasks / t['execute']:,.0f} executing: ratio {t['execute'] / t['total']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--allreduce-every", type=int, default=1, help="iterations between all-reduces")
    parser.add_argument("--hardware", default="neugraph-8xp100-pcie")
    parser.add_argument(
        "--again", type=int, default=2, help="simulations of the checked plan after the first"
    )
    add_runs_option(parser)
    args = parser.parse_args()

    machine = Machine.now()
    cluster = load_hardware(args.hardware)
    print(
        f"numba's compiler and runtime started in {start_numba():.3f} s, before any timing (once per process: "
        "the first compiled call of any kernel pays it, in a real run the sampler's)"
    )
    for run in range(args.runs):
        t0 = time.perf_counter()
        plan = build_plan(args.tasks, cluster.gpu_nodes(), args.allreduce_every)
        build_s = time.perf_counter() - t0
        n = len(plan.tasks)
        kinds = {k: sum(t.kind == k for t in plan.tasks) for k in ("transfer", "compute", "collective")}
        print(f"run {run}: plan of {n:,} tasks ({kinds}) on {cluster.name}; built in {build_s:.2f} s")
        first = simulate_timed(plan, cluster, seed=0)
        print("  " + describe("first simulation of the plan", n, first))
        print(
            f"  {first['events']:,.0f} events, {first['rebalances']:,.0f} rate recomputations, "
            f"{first['rows']:,.0f} trace rows; simulated makespan {first['makespan']:.3f} s"
        )
        # The same plan under more seeds (or hardware files): validated once, its
        # plan-only setup and per-task trace columns derived once, in the snapshot.
        t0 = time.perf_counter()
        checked = plan.checked(cluster.memory_nodes())
        check_s = time.perf_counter() - t0
        again = [simulate_timed(checked, cluster, seed=1 + k) for k in range(args.again)]
        for k, t in enumerate(again):
            print(
                "  "
                + describe(f"checked plan, seed {1 + k}", n, t)
                + (f" (checked in {check_s:.3f} s)" if not k else "")
            )
        read_s, check_s = per_task_floor(plan)
        floor = read_s + check_s
        print(
            f"  per-task floor of a first simulation, this plan, this run: its tasks' fields read once "
            f"{read_s:.3f} s + checked {check_s:.3f} s = {floor:.3f} s; with nothing else besides "
            f"execute, end to end / executing could reach {first['execute'] / (first['execute'] + floor):.2f}"
        )
        later = again[-1] if again else first
        machine.verdict(
            f"run {run}: first simulation, end to end / executing rate",
            first["execute"] / first["total"],
            at_least=0.75,
        )
        machine.verdict(
            f"run {run}: first simulation, tasks/s end to end (/100k)", n / first["total"] / 1e5, at_least=1.0
        )
        machine.verdict(
            f"run {run}: checked plan simulated again, end to end / executing rate",
            later["execute"] / later["total"],
            at_least=0.75,
        )
        machine.verdict(
            f"run {run}: checked plan simulated again, tasks/s end to end (/100k)",
            n / later["total"] / 1e5,
            at_least=1.0,
        )
    machine.finish()


if __name__ == "__main__":
    main()
