"""``gnnwb validate --device cpu|cuda``: what a machine runs first to validate the workbench on it.

Five steps, each shown as it runs:

1. **microbenchmarks**: the full sweep of :mod:`realrun.microbench` on the device (copies,
   gather, sparse aggregation, all-reduce and point-to-point between two worker processes);
2. **real runs**: every scheme that runs for real (:data:`realrun.schemes.REAL_EXECUTORS`, read
   when validate runs) in its small validation configuration (:data:`CASES`; roc-fullgraph
   resident and under every registered memory policy), on one worker and on all of them: on
   ``cpu`` 2 worker processes over gloo, on ``cuda`` every GPU of the machine over NCCL. A run
   passes when it finishes its :data:`EPOCHS` epochs and every epoch's bytes per phase equal
   the plan's (``results.csv``'s ``bytes_match_plan``);
3. **calibration** on half of the runs (a checkerboard over case x worker count, so every
   case and every worker count is in both halves), their warm epochs (the first, cold, is left
   out) with the microbenchmarks' point-to-point and all-reduce rows, gaps attributed as
   ``gnnwb fidelity`` does: ``profile.toml``;
4. **fidelity** of the other half: each held-out run simulated on the profile against its warm
   epochs (each warm epoch one repeat), per epoch and per phase (:mod:`sim.calibrate.fidelity`);
5. **summary**: ``summary.json`` and the page ``index.html`` (with ``fidelity.csv``,
   ``scatter.png`` and ``phase_errors.png``).

A scheme without a validation configuration stops validate before any work (the next scheme
registered cannot be skipped silently); a run that fails is recorded with its one-line error
and the others go on; the summary's ``passed`` holds only when every run finished with the
plan's bytes and calibration and fidelity ran.

The output folder (default ``reports/traces/<device>/``: ``cpu``, or the GPU's model as a slug,
``nvidia-h100-80gb-hbm3``) is small enough to commit (about 2.5 MB): ``hardware.toml`` (the
modelled cluster), ``configs/``, ``microbench/`` and ``runs/<case>-w<workers>/`` (each real
run's folder less its raw ``parts/``), ``profile.toml``, ``fidelity.csv``, the plots,
``summary.json`` and ``index.html``. A new validate clears the folders an earlier one wrote
there.

The hardware validate models is :func:`studies.fidelity_experiment.hardware_toml`: on CPU one
machine per worker process joined over loopback (as ``gnnwb fidelity``), and for a scheme whose
workers must share one server (NeuGraph) the workers as GPUs of one machine
(``hardware-one-machine.toml``; those runs are held out of calibration); on CUDA this machine
with its GPUs. Every figure on the page comes from this machine: on CPU it says nothing of
NCCL, GPU copies or GPU timing, and the page says whether the CUDA branch has ever run (a
``summary.json`` from ``--device cuda`` beside the output folder).

Only the standard library and :mod:`workbench.errors` load with this module (the rest is
imported where it is used), so the command line's ``--help`` stays fast.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError

DEVICES = ("cpu", "cuda")
EPOCHS = 4  # the first is cold (left out); the other three are each one measurement
GRAPH = "sbm:n=6000,blocks=8,deg=10,feat=64"
TIME_LIMIT_S = 600.0  # one run; a hung scheme is stopped and recorded, the others go on
COLLECTIVE_TIMEOUT_S = 60.0
# What a run folder keeps (the launcher's raw parts/ go: trace.parquet holds their rows).
KEPT = (
    "trace.parquet",
    "results.csv",
    "run.json",
    "config.toml",
    "config.given.toml",
    "plan.json",
    "hardware.toml",
    "load.json",
)
KIND = "gnnwb validate"

CONFIG = """name = "{name}"
seed = 0

[graph]
name = "{graph}"

[hardware]
name = "{hardware}"

[model]
name = "{model}"
hidden = 32
num_layers = 2

[training]
workers = {workers}
{training}
[partition]
name = "{partition}"
{partition_params}{tables}
[execution]
name = "{scheme}"
{execution}
"""
MINIBATCH_TRAINING = 'batch_size = 256\niterations = 6\nseeds = "global"\n'
FULL_GRAPH_TRAINING = "iterations = 4\nlearning_rate = 0.05\n"
CACHE_TABLES = """
[cache]
capacity = "10%"

[placement]
name = "degree"
"""
SAMPLING_TABLE = """
[sampling]
name = "{sampler}"
fanouts = [10, 10]
"""
HOPGNN = 'micrographs = true\npregather = true\nmerge = {merge}\nminibatches = "as-sampled"\n'


@dataclass(frozen=True)
class Case:
    """One small validation configuration of a real scheme. ``sampler`` empty: full-graph
    training; ``cache``: a feature cache placed by degree; ``execution``: the lines of its
    ``[execution]`` table (``{arena_kib}``: a part's device arena on the run's worker count,
    :func:`arena_kib`), ``one_worker`` those on one worker where they differ; ``one_machine``: the
    scheme's workers must be GPUs of one machine (NeuGraph's server), see :func:`run_points`."""

    scheme: str
    variant: str = ""
    model: str = "sage"
    sampler: str = "neighbor"
    partition: str = "metis"
    partition_params: str = ""
    cache: bool = True
    execution: str = ""
    one_worker: str | None = None
    one_machine: bool = False

    @property
    def name(self) -> str:
        return f"{self.scheme}-{self.variant}" if self.variant else self.scheme

    def config(self, workers: int, hardware: Path, graph: str = GRAPH, memory_scale: float = 1.0) -> str:
        """The configuration's TOML on ``workers`` workers; ``memory_scale``: how much larger the
        device memory budgets (a memory policy's arena, NeuGraph's chunk budget) are than those sized
        for :data:`GRAPH` (:func:`graph_memory_scale`), so a larger graph keeps their shape."""
        execution = self.one_worker if workers == 1 and self.one_worker is not None else self.execution
        return CONFIG.format(
            name=f"validate-{self.name}-w{workers}",
            graph=graph,
            hardware=_portable(hardware),
            model=self.model,
            workers=workers,
            training=MINIBATCH_TRAINING if self.sampler else FULL_GRAPH_TRAINING,
            partition=self.partition,
            partition_params=self.partition_params.format(chunk_kib=int(CHUNK_KIB * memory_scale)),
            tables=(CACHE_TABLES if self.cache and self.sampler else "")
            + (SAMPLING_TABLE.format(sampler=self.sampler) if self.sampler else ""),
            scheme=self.scheme,
            execution=execution.format(arena_kib=int(arena_kib(workers) * memory_scale)),
        )


def _portable(path: Path) -> str:
    """``path`` relative to the working folder when it lies below it (committed configurations then
    name ``reports/traces/<device>/hardware.toml``, not this machine's checkout), else absolute."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(resolved)


# Every scheme with a real executor needs one here; roc-fullgraph's memory policies are added per
# registered policy (memory_cases) since they share one shape.
CASES: tuple[Case, ...] = (
    Case("model-centric"),
    Case("hopgnn", execution=HOPGNN.format(merge="true"), one_worker=HOPGNN.format(merge="false")),
    Case("naive-feature-centric", model="gcn", execution='minibatches = "as-sampled"\n'),
    Case("p3", partition="random"),
    Case(
        "bulk-pipeline",
        sampler="bulk-matrix",
        partition="random",
        cache=False,
        execution='mode = "partitioned-1.5d"\nreplication = 1\n',
    ),
    Case("roc-fullgraph", "resident", sampler="", partition="random"),
    Case(
        "neugraph-stream",
        model="gcn",
        sampler="",
        partition="chunk2d",
        partition_params='gpu_memory_bytes = "{chunk_kib}KiB"\n',
        execution='order = "column-row"\nselective = true\npipeline = true\nsub_chunks = 2\nchain = true\n',
        one_machine=True,
    ),
)


# NeuGraph's device budget for chunks on GRAPH: a few chunks per side, so streaming, selective
# loading and the pipeline all have work.
CHUNK_KIB = 6144


def graph_memory_scale(graph: str) -> float:
    """How many times larger ``graph``'s features and edges are than :data:`GRAPH`'s (at least 1):
    the device budgets sized for :data:`GRAPH` grow by this much, so on a larger graph a memory
    policy still moves about as many tensors and NeuGraph streams about as many chunks (with the
    default 6 MiB, NeuGraph on a 100,000-vertex 256-wide graph wrote 232,268 trace rows an epoch on
    an H200 and ran past validate's time limit)."""
    from workbench.config import GraphConfig
    from workbench.run import load_graph

    def graph_bytes(name: str) -> float:
        g = load_graph(GraphConfig(name=name))
        return 4.0 * g.num_nodes * max(g.feat_dim, 1) + 8.0 * g.num_edges

    return 1.0 if graph == GRAPH else max(1.0, graph_bytes(graph) / graph_bytes(GRAPH))


def arena_kib(workers: int) -> int:
    """A part's device arena under a memory policy: a quarter above what the largest operator of a
    part of :data:`GRAPH` needs on ``workers`` workers (about 1.5 MiB + 3 MiB / workers, the halo
    included), far below what the part's tensors need together, so the policy moves tensors."""
    return int(1.25 * (1536 + 3072 / workers))


def memory_cases(policies: Sequence[str]) -> list[Case]:
    """roc-fullgraph under each memory policy, its arena smaller than the part."""
    table = 'memory_policy = "{policy}"\ngpu_memory = "{{arena_kib}}KiB"\n'
    return [
        Case("roc-fullgraph", p, sampler="", partition="random", execution=table.format(policy=p))
        for p in policies
    ]


def cases(schemes: Sequence[str] | None = None, real: Sequence[str] | None = None) -> list[Case]:
    """The validation cases of ``schemes`` (default: every scheme with a real executor, ``real``,
    read from the registry). A real scheme without a case is an error before any work: validate
    runs every real scheme or none. A case of a scheme that does not run for real (any more) is
    left out."""
    from workbench.registry import MEMORY_POLICIES

    if real is None:
        from realrun.schemes import REAL_EXECUTORS

        real = REAL_EXECUTORS.names()
    covered = [c.scheme for c in CASES]
    missing = [s for s in real if s not in covered]
    if missing:
        raise ConfigError(
            f"real scheme(s) {', '.join(missing)} have no validation configuration: add a Case to "
            "studies/validate.py CASES, so gnnwb validate runs them"
        )
    unknown = [s for s in schemes or () if s not in real]
    if unknown:
        raise ConfigError(f"scheme(s) {', '.join(unknown)} do not run for real; real: {', '.join(real)}")
    every = [*CASES, *memory_cases(MEMORY_POLICIES.names())]
    return [c for c in every if c.scheme in real and (schemes is None or c.scheme in schemes)]


HARDWARE = "hardware.toml"
ONE_MACHINE = "hardware-one-machine.toml"


@dataclass(frozen=True)
class RunPoint:
    """One real run of validate: a case on a worker count, in the calibration or held-out half, on
    the modelled cluster in ``hardware`` (a file of the output folder)."""

    case: Case
    workers: int
    held_out: bool
    hardware: str = HARDWARE

    @property
    def name(self) -> str:
        return f"{self.case.name}-w{self.workers}"


def run_points(chosen: Sequence[Case], workers: Sequence[int], device: str = "cpu") -> list[RunPoint]:
    """Every case on every worker count; held out where the two indices sum to an odd number. On
    CPU, where each worker is modelled as a machine of its own, a ``one_machine`` case on several
    workers runs on :data:`ONE_MACHINE` (the workers as GPUs of one machine) and is held out (the
    profile is fitted on the other cluster and applies to this one by link kind), its one-worker run
    calibrates."""
    points = []
    for i, case in enumerate(chosen):
        own = [device == "cpu" and case.one_machine and w > 1 for w in workers]
        for j, w in enumerate(workers):
            held = own[j] if any(own) else bool((i + j) % 2)
            points.append(RunPoint(case, w, held, ONE_MACHINE if own[j] else HARDWARE))
    return points


def device_slug(device: str) -> str:
    """``cpu``, or the first GPU's model as a folder name (``nvidia-h100-80gb-hbm3``)."""
    if device != "cuda":
        return device
    import torch

    return re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name(0).lower()).strip("-") or "cuda"


def worker_counts(device: str) -> tuple[int, ...]:
    """One worker and all of them: 2 CPU worker processes, or every GPU."""
    if device == "cpu":
        return (1, 2)
    import torch

    n = torch.cuda.device_count()
    return (1, n) if n > 1 else (1,)


@dataclass(frozen=True)
class ValidateOptions:
    """One validation: the device, where it writes (default ``reports/traces/<slug>``), which
    schemes (default all that run for real) on which worker counts (default 1 and all)."""

    device: str = "cpu"
    out: Path | None = None
    schemes: tuple[str, ...] | None = None
    workers: tuple[int, ...] | None = None
    epochs: int = EPOCHS
    microbench: bool = True
    graph: str = GRAPH
    time_limit_s: float = TIME_LIMIT_S
    reports: Path = field(default=Path("reports"))
    memory_scale: float = 1.0

    def resolved(self) -> ValidateOptions:
        """Checked, with its defaults filled in: every refusal comes here, before any work."""
        from realrun.launcher import check_device
        from workbench import validate as check

        check_device(self.device, 0)  # an unknown device, or cuda without one, in one line
        if not self.time_limit_s > 0:
            raise ConfigError(
                f"validate's time limit per run must be positive seconds, got {self.time_limit_s}"
            )
        if self.epochs < 2:
            raise ConfigError(f"validate needs at least 2 epochs (the first is cold), got {self.epochs}")
        workers = self.workers or worker_counts(self.device)
        if min(workers) < 1:
            raise ConfigError(f"worker counts must be positive, got {list(workers)}")
        check_device(self.device, max(workers))
        out = Path(self.out) if self.out is not None else self.reports / "traces" / device_slug(self.device)
        check.writable_folder(out, "validation output folder")
        return replace(self, out=out, workers=tuple(workers), memory_scale=graph_memory_scale(self.graph))


def _budget_note(scale: float) -> str:
    """What the page says of device budgets grown for a graph larger than :data:`GRAPH`."""
    if scale <= 1.0:
        return ""
    return (
        f" (its feature and edge bytes {scale:.3g}x the default graph's, so the memory policies' arenas "
        "and NeuGraph's chunk budget are that much larger)"
    )


def _print(line: str) -> None:
    print(line, flush=True)


def validate(opts: ValidateOptions, say: Callable[[str], None] = _print) -> dict[str, Any]:
    """Run the five steps (module docstring) and write the output folder; the summary."""
    from studies.fidelity_experiment import hardware_toml

    opts = opts.resolved()
    chosen = cases(opts.schemes)  # a real scheme without a case stops validate here
    out = opts.out
    assert out is not None and opts.workers is not None
    began = time.perf_counter()
    _clear_previous(out)
    (out / "configs").mkdir(parents=True, exist_ok=True)
    hardware = out / HARDWARE
    hardware.write_text(hardware_toml(max(opts.workers), opts.device))
    points = run_points(chosen, opts.workers, opts.device)
    if any(p.hardware == ONE_MACHINE for p in points):
        (out / ONE_MACHINE).write_text(hardware_toml(max(opts.workers), opts.device, one_machine=True))
    say(
        f"gnnwb validate --device {opts.device}: writing {out}/ ({len(chosen)} configurations x "
        f"{', '.join(map(str, opts.workers))} worker(s): {len(points)} real runs of {opts.epochs} epochs)"
    )
    micro = _microbench_step(opts, say)
    runs, prepared = _run_step(points, opts, say)
    calibration, profile = _calibration_step(opts, hardware, points, runs, prepared, micro, say)
    fidelity = _fidelity_step(opts, points, runs, prepared, profile, say)
    summary = build_summary(opts, micro, runs, calibration, fidelity, time.perf_counter() - began)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    write_page(summary, out)
    say(f"[5/5] summary: {out}/index.html and summary.json ({_folder_size(out) / 2**20:.1f} MB in all)")
    return summary


def _clear_previous(out: Path) -> None:
    """The folders an earlier validate wrote in ``out`` (its summary.json says so), removed."""
    summary = out / "summary.json"
    try:
        earlier = json.loads(summary.read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        earlier = False
    if earlier:
        for name in ("runs", "microbench", "configs"):
            shutil.rmtree(out / name, ignore_errors=True)


def _folder_size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def one_line(exc: BaseException) -> str:
    """An exception as one line: its first line, and its type where it is not a workbench error."""
    from workbench.errors import WorkbenchError

    text = (str(exc).strip().splitlines() or [""])[0]
    return text if isinstance(exc, WorkbenchError) else f"{type(exc).__name__}: {text}"


# ---- 1. microbenchmarks -------------------------------------------------------------------------
def _microbench_step(opts: ValidateOptions, say: Callable[[str], None]) -> dict[str, Any]:
    """The full microbenchmark sweep into ``microbench/``; what ran, or its one-line error."""
    from realrun.microbench import MicrobenchConfig, run_microbench

    assert opts.out is not None
    if not opts.microbench:
        say("[1/5] microbenchmarks: skipped")
        return {"status": "skipped"}
    say("[1/5] microbenchmarks: copies, gather, spmm, all-reduce and p2p (full sweep) ...")
    began = time.perf_counter()
    folder = opts.out / "microbench"
    try:
        result = run_microbench(MicrobenchConfig.default(opts.device), folder)
    except Exception as exc:  # noqa: BLE001 - recorded; the runs go on
        say(f"      failed: {one_line(exc)}")
        return {"status": "failed", "error": one_line(exc)}
    summary = result.summary
    largest = summary.loc[summary.groupby(["benchmark", "variant"])["size"].idxmax()]
    say(f"      done in {time.perf_counter() - began:.1f} s ({len(result.trace)} timed repeats)")
    return {
        "status": "ok",
        "seconds": round(time.perf_counter() - began, 1),
        "rows": len(result.trace),
        "notes": result.meta["notes"],
        "environment": result.meta["environment"],
        "largest": [
            {
                "benchmark": r.benchmark,
                "variant": r.variant,
                "size": int(r.size),
                "median_s": float(r.median_s),
                "gb_per_s": None if r.gb_per_s != r.gb_per_s else float(r.gb_per_s),
            }
            for r in largest.itertuples(index=False)
        ],
    }


# ---- 2. real runs -------------------------------------------------------------------------------
def _run_step(
    points: list[RunPoint], opts: ValidateOptions, say: Callable[[str], None]
) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[Any, Any]]]:
    """Every point run for real; its record (the failed ones' with their error) and, for those
    that ran, the prepared run and plan (calibration and fidelity need them)."""
    say(f"[2/5] real runs: {len(points)} ({'gloo' if opts.device == 'cpu' else 'NCCL'} between workers)")
    records: dict[str, dict[str, Any]] = {}
    prepared: dict[str, tuple[Any, Any]] = {}
    width = len(str(len(points)))
    for n, point in enumerate(points, 1):
        began = time.perf_counter()
        record = {
            "name": point.name,
            "scheme": point.case.scheme,
            "variant": point.case.variant,
            "workers": point.workers,
            "half": "held-out" if point.held_out else "calibration",
            "hardware": point.hardware,
            "folder": f"runs/{point.name}",
        }
        try:
            prepared[point.name] = _run_one(point, opts)
            record.update(run_record(opts.out / "runs" / point.name))  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001 - one scheme's failure must not lose the others
            prepared.pop(point.name, None)
            record.update(status="failed", error=one_line(exc))
        record["seconds"] = round(time.perf_counter() - began, 1)
        records[point.name] = record
        say(f"      [{n:>{width}}/{len(points)}] {point.name} ({record['half']}): {_run_line(record)}")
    return records, prepared


def _run_one(point: RunPoint, opts: ValidateOptions) -> tuple[Any, Any]:
    """Prepare and run ``point`` into ``runs/<name>/``, then drop what the folder need not keep."""
    from studies.fidelity_experiment import prepare, run_real

    assert opts.out is not None
    config = opts.out / "configs" / f"{point.name}.toml"
    config.write_text(
        point.case.config(point.workers, opts.out / point.hardware, opts.graph, opts.memory_scale)
    )
    folder = opts.out / "runs" / point.name
    try:
        prep, plan = prepare(config, opts.device)
        run_real(
            prep, plan, config, folder, opts.epochs, opts.device,
            time_limit=opts.time_limit_s, collective_timeout=min(COLLECTIVE_TIMEOUT_S, opts.time_limit_s),
        )  # fmt: skip
    finally:
        prune_run_folder(folder)
    return prep, plan


def prune_run_folder(folder: Path) -> None:
    """Keep what the summary, calibration and a later reader need (:data:`KEPT`); the raw parts go."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.name not in KEPT:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def run_record(folder: Path) -> dict[str, Any]:
    """A finished run's figures from its ``results.csv``: epoch times, and bytes per phase against
    the plan's (the last epoch's; ``bytes_match_plan`` over every epoch)."""
    import pandas as pd

    results = pd.read_csv(folder / "results.csv")
    epochs = [float(x) * 1e3 for x in results["epoch_s"]]
    last = results.iloc[-1]
    phases = {}
    for column in results.columns:
        m = re.fullmatch(r"planned_(\w+)_bytes", column)
        if m:
            measured = int(last.get(f"measured_{m[1]}_bytes", 0))
            planned = int(last[column])
            if measured or planned:
                phases[m[1]] = {"measured": measured, "planned": planned}
    match = bool(results["bytes_match_plan"].astype(bool).all()) if len(results) else False
    warm = epochs[1:] or epochs
    return {
        "status": "ok" if match else "bytes differ",
        "error": None if match else "bytes per phase differ from the plan's: " + _differing(phases),
        "epochs": len(epochs),
        "epoch_ms": [round(x, 3) for x in epochs],
        "warm_epoch_ms": round(sorted(warm)[len(warm) // 2], 3) if warm else None,
        "bytes_match_plan": match,
        "bytes": phases,
    }


def _differing(phases: dict[str, dict[str, int]]) -> str:
    wrong = [
        f"{p} {v['measured']:,} vs {v['planned']:,}"
        for p, v in phases.items()
        if v["measured"] != v["planned"]
    ]
    return "; ".join(wrong) or "in an earlier epoch (results.csv)"


def _run_line(record: dict[str, Any]) -> str:
    if record["status"] == "failed":
        return f"FAILED after {record['seconds']} s: {record['error']}"
    check = "bytes = plan" if record["bytes_match_plan"] else f"BYTES DIFFER ({_differing(record['bytes'])})"
    return f"ok in {record['seconds']} s, warm epoch {record['warm_epoch_ms']:.1f} ms, {check}"


# ---- 3. calibration -----------------------------------------------------------------------------
def _calibration_step(
    opts: ValidateOptions,
    hardware: Path,
    points: list[RunPoint],
    runs: dict[str, dict[str, Any]],
    prepared: dict[str, tuple[Any, Any]],
    micro: dict[str, Any],
    say: Callable[[str], None],
) -> tuple[dict[str, Any], tuple[Path, Any] | None]:
    """A profile fitted to the calibration half's warm epochs (and the microbenchmarks'
    communication rows, where the modelled cluster names their memories: two or more workers)."""
    from studies.fidelity_experiment import calibrate_profile, comm_source, first_warm, warm_source

    assert opts.out is not None and opts.workers is not None
    half = [p.name for p in points if not p.held_out]
    ran = [name for name in half if name in prepared]
    with_micro = micro["status"] == "ok" and max(opts.workers) > 1
    say(
        f"[3/5] calibration on {len(ran)} of the {len(half)} calibration-half runs"
        + (" and the microbenchmarks' p2p and all-reduce rows" if with_micro else "")
    )
    record: dict[str, Any] = {"runs": ran, "missing": [n for n in half if n not in ran]}
    if not ran:
        return {**record, "status": "failed", "error": "no run of the calibration half finished"}, None
    try:
        sources = [comm_source(opts.out / "microbench")] if with_micro else []
        sources += [
            warm_source(opts.out / "runs" / name, prepared[name][1], first_warm(opts.epochs)) for name in ran
        ]
        command = f"gnnwb validate --device {opts.device} (calibration half)"
        path, profile = calibrate_profile(sources, hardware, opts.out / "profile.toml", command)
    except Exception as exc:  # noqa: BLE001 - recorded; the summary is still written
        say(f"      failed: {one_line(exc)}")
        return {**record, "status": "failed", "error": one_line(exc)}, None
    fit = profile.data.get("fit", {})
    say(f"      profile.toml: {len(sources)} traces, {len(fit.get('notes', []))} note(s)")
    return {
        **record,
        "status": "ok",
        "traces": len(sources),
        "microbench": with_micro,
        "profile": "profile.toml",
        "notes": list(fit.get("notes", [])),
        "links_fit": _jsonable(fit.get("links", {})),
        "links": fitted_links(profile.data.get("links", {})),
        "compute": compute_fits(fit.get("compute", {})),
    }, (path, profile)


def fitted_links(links: dict[str, Any]) -> list[dict[str, Any]]:
    """Each link kind of the profile: its bandwidth and latency, and which of them were fitted."""
    rows = []
    for kind, v in links.items():
        if not isinstance(v, dict):
            continue
        fitted = [x for x in ("bandwidth", "latency") if v.get(f"{x}_fitted")]
        rows.append(
            {
                "kind": kind,
                "fitted": ", ".join(fitted) or "none (the modelled hardware's kept)",
                "bandwidth_gb_per_s": v["bandwidth"] / 1e9 if "bandwidth" in v else None,
                "latency_us": v["latency"] * 1e6 if "latency" in v else None,
                "from": ", ".join(v.get("from", [])),
            }
        )
    return _jsonable(rows)


def compute_fits(compute: dict[str, Any]) -> list[dict[str, Any]]:
    """Each compute phase's fit per device model: its rows, the model chosen and how well it fits."""
    return _jsonable(
        [
            {
                "phase": phase,
                "device_model": model,
                "rows": q.get("rows"),
                "model": q.get("model"),
                "r2": q.get("r2"),
                "residual_median_abs": q.get("residual_median_abs"),
                "heldout_linear": q.get("heldout_linear"),
                "heldout_trees": q.get("heldout_trees"),
            }
            for phase, models in compute.items()
            for model, q in models.items()
        ]
    )


# ---- 4. fidelity --------------------------------------------------------------------------------
def _fidelity_step(
    opts: ValidateOptions,
    points: list[RunPoint],
    runs: dict[str, dict[str, Any]],
    prepared: dict[str, tuple[Any, Any]],
    profile: tuple[Path, Any] | None,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Each finished held-out run simulated on the profile against its warm epochs."""
    from sim.calibrate.fidelity import compare, plot, summarize, tails_sentence
    from studies.fidelity_experiment import measure, noise_sentence, per_scheme, predict, warm_epochs

    assert opts.out is not None
    held = [p for p in points if p.held_out and p.name in prepared]
    say(f"[4/5] fidelity: {len(held)} held-out runs simulated on the profile")
    if profile is None:
        return {"status": "failed", "error": "no calibrated profile to simulate with"}
    if not held:
        return {"status": "failed", "error": "no held-out run finished"}
    measured, predicted, info, errors = {}, {}, {}, {}
    for p in held:
        try:
            predicted[p.name] = predict(*prepared[p.name], p.name, *profile)
            measured[p.name], _ = measure([opts.out / "runs" / p.name], warm_epochs(opts.epochs))
            info[p.name] = {"scheme": p.case.name, "workers": p.workers}
        except Exception as exc:  # noqa: BLE001 - recorded per run
            errors[p.name] = one_line(exc)
            predicted.pop(p.name, None)
    if not measured:
        return {"status": "failed", "error": "no held-out run could be simulated", "errors": errors}
    table = compare(measured, predicted, info)
    table.to_csv(opts.out / "fidelity.csv", index=False)
    result = summarize(table)
    result.update(status="ok" if not errors else "failed", errors=errors, schemes=per_scheme(table))
    result["calibration"] = {"noise": profile[1].data.get("noise")}
    if errors:
        result["error"] = "; ".join(f"{k}: {v}" for k, v in errors.items())
    result["images"] = [p.name for p in plot(table, result, opts.out)]
    epoch = table[table["quantity"] == "epoch"]
    result["runs"] = [
        {
            "name": r.config,
            "measured_ms": r.measured_s * 1e3,
            "spread": r.spread,
            "simulated_ms": r.predicted_s * 1e3,
            "error": r.error,
        }
        for r in epoch.itertuples(index=False)
    ]
    say(
        f"      epoch |error|: median {result['epoch_median_abs_error']:.1%}, worst "
        f"{result['epoch_worst_abs_error']:.1%} (run-to-run spread {result['epoch_median_spread']:.1%})"
    )
    say(f"      {tails_sentence(result)} {noise_sentence(result)}")
    return _jsonable(result)


def _jsonable(value: Any) -> Any:
    """``value`` with NaN and infinities as None and numpy scalars as Python numbers (strict JSON)."""
    import math

    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ---- 5. summary ---------------------------------------------------------------------------------
def build_summary(
    opts: ValidateOptions,
    micro: dict[str, Any],
    runs: dict[str, dict[str, Any]],
    calibration: dict[str, Any],
    fidelity: dict[str, Any],
    seconds: float,
) -> dict[str, Any]:
    """What validate found: every run, the calibration and the fidelity, the failures, and
    ``passed`` (every run finished with the plan's bytes, and calibration and fidelity ran)."""
    assert opts.out is not None and opts.workers is not None
    failures = [f"{r['name']}: {r['error']}" for r in runs.values() if r["status"] != "ok"]
    for step, record in (("microbenchmarks", micro), ("calibration", calibration), ("fidelity", fidelity)):
        if record.get("status") == "failed":
            failures.append(f"{step}: {record.get('error')}")
    return _jsonable(
        {
            "kind": KIND,
            "device": opts.device,
            "slug": opts.out.name,
            "backend": "gloo" if opts.device == "cpu" else "nccl",
            "workers": list(opts.workers),
            "epochs": opts.epochs,
            "graph": opts.graph,
            "memory_scale": round(opts.memory_scale, 2),
            "written": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "seconds": round(seconds, 1),
            "passed": not failures,
            "failures": failures,
            "cuda_branch": cuda_branch(opts.device, opts.out),
            "microbench": micro,
            "runs": list(runs.values()),
            "calibration": calibration,
            "fidelity": fidelity,
            "machine": machine(opts),
        }
    )


def machine(opts: ValidateOptions) -> dict[str, Any]:
    """What ran: the CPU, the GPUs, the libraries, and the 1-minute load average around the runs
    (other processes on the machine inflate and scatter the measured times)."""
    from realrun.microbench import environment
    from studies.fidelity_experiment import machine_load

    assert opts.out is not None
    env = environment(opts.device)
    env.pop("hostname", None)
    loads = []
    for path in sorted((opts.out / "runs").glob("*/load.json")):
        try:
            loads.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return {**env, **machine_load(loads)}


def cuda_branch(device: str, out: Path) -> dict[str, Any]:
    """Whether ``gnnwb validate --device cuda`` has ever run: this run, or a summary it wrote beside
    ``out`` (``reports/traces/<gpu>/summary.json``); said plainly either way."""
    if device == "cuda":
        return {
            "has_run": True,
            "statement": "This is the CUDA branch of gnnwb validate, run on this machine's GPUs.",
        }
    found = []
    for path in sorted(out.resolve().parent.glob("*/summary.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("kind") == KIND and data.get("device") == "cuda":
            found.append(f"{path.parent.name} ({data.get('written', 'undated')})")
    if found:
        return {
            "has_run": True,
            "statement": f"The CUDA branch of gnnwb validate has run on: {', '.join(found)} (beside this folder).",
        }
    return {
        "has_run": False,
        "statement": "The CUDA branch (gnnwb validate --device cuda) has never run: no machine with a GPU has "
        "run it yet, so nothing here shows that NCCL between GPUs, copies to and from GPU memory or the GPU "
        "timings work. Everything on this page ran on CPU worker processes over gloo.",
    }


def write_page(summary: dict[str, Any], out: Path) -> Path:
    """``index.html``: the result, the CUDA branch, every run, the bytes against the plan, the
    microbenchmarks, the calibration and the fidelity of the held-out runs."""
    from studies.fidelity_experiment import load_sentence
    from studies.report import ReportPage

    verdict = "PASSED" if summary["passed"] else f"FAILED ({len(summary['failures'])} problem(s))"
    page = ReportPage(
        f"gnnwb validate --device {summary['device']}: {summary['slug']} — {verdict}",
        f"Every scheme that runs for real, on {' and '.join(map(str, summary['workers']))} worker(s) "
        f"({summary['backend']} between workers), {summary['epochs']} epochs each on {summary['graph']}"
        + _budget_note(summary.get("memory_scale", 1.0))
        + "; "
        f"calibrated on half of the runs, the other half simulated on the profile. Took {summary['seconds']:.0f} s. "
        + summary["cuda_branch"]["statement"],
    )
    if summary["failures"]:
        page.add("What failed", table=_words(summary["failures"], "problem"))
    else:
        page.add(
            "Result",
            "Every run finished with bytes per phase equal to its plan's; calibration and fidelity ran. The "
            "fidelity errors below are reported, not judged"
            + (
                ": on a machine other processes share, they measure the load as much as the simulator (see Machine)."
                if _load_above_workers(summary)
                else "."
            ),
        )
    page.add("Real runs", _RUNS_NOTE, table=runs_table(summary["runs"]))
    page.add("Bytes per phase against the plan (last epoch)", _BYTES_NOTE, table=bytes_table(summary["runs"]))
    _microbench_sections(page, summary["microbench"])
    _calibration_sections(page, summary["calibration"])
    _fidelity_sections(page, summary["fidelity"])
    m = summary.get("machine") or {}
    page.add(
        "Machine",
        f"{m.get('cpus')} CPUs ({m.get('cpu')}); torch {m.get('torch')}"
        + (
            f", CUDA {m.get('cuda')}, NCCL {m.get('nccl')}, GPUs {', '.join(m.get('gpus') or [])}"
            if m.get("gpus")
            else ""
        )
        + f". {_capitalised(load_sentence(m))} "
        + (
            "Other processes shared the cores: they inflate and scatter the measured times, which the "
            "simulator does not model."
            if _load_above_workers(summary)
            else "The runs had the machine's cores to themselves."
        ),
    )
    return page.write(out)


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _load_above_workers(summary: dict[str, Any]) -> bool:
    from studies.fidelity_experiment import machine_was_shared

    return machine_was_shared(summary.get("machine") or {}, max(summary.get("workers") or [1]))


_RUNS_NOTE = (
    "One row per run: its half (calibration or held out of it), whether it finished with every epoch's bytes "
    "per phase equal to the plan's, the median of its warm epochs (the first is cold) and every epoch. On CPU "
    "each worker process is modelled as a machine of its own, except where a scheme's workers must share one "
    "server (NeuGraph): there they are modelled as GPUs of one machine ('modelled as'), and that run is held "
    "out of calibration."
)
_BYTES_NOTE = (
    "Bytes each phase moved in the run's last epoch as the workers counted them (MB = 10^6 bytes), against "
    "what the plan moves: \u2713 where they are equal to the byte, \u2717 with both counts where they are not "
    "('bytes = plan' in the table above checks every epoch). An empty cell: the phase moves nothing in that run."
)


def _words(lines: list[str], column: str) -> Any:
    import pandas as pd

    return pd.DataFrame({column: lines})


def runs_table(runs: list[dict[str, Any]]) -> Any:
    import pandas as pd

    rows = []
    for r in runs:
        ok = r["status"] == "ok"
        rows.append(
            {
                "configuration": r["scheme"] + (f" ({r['variant']})" if r["variant"] else ""),
                "workers": r["workers"],
                "half": r["half"],
                "modelled as": "GPUs of one machine" if r.get("hardware") == ONE_MACHINE else "",
                "status": "ok" if ok else r["status"].upper(),
                "bytes = plan": {True: "yes", False: "NO"}.get(r.get("bytes_match_plan"), "n/a"),
                "warm epoch (ms)": r.get("warm_epoch_ms"),
                "epochs (ms)": ", ".join(f"{x:.1f}" for x in r.get("epoch_ms", [])),
                "run (s)": r["seconds"],
                "error": r.get("error") or "",
            }
        )
    return pd.DataFrame(rows)


def bytes_table(runs: list[dict[str, Any]]) -> Any:
    import pandas as pd

    rows = []
    for r in runs:
        row: dict[str, Any] = {"run": r["name"]}
        for phase, v in r.get("bytes", {}).items():
            if v["measured"] == v["planned"]:
                row[phase] = f"{v['measured'] / 1e6:.3f} MB \u2713"
            else:
                row[phase] = f"\u2717 {v['measured']:,} B, plan {v['planned']:,} B"
        if r["status"] == "failed":
            row["note"] = "did not finish"
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def _microbench_sections(page: Any, micro: dict[str, Any]) -> None:
    import pandas as pd

    from workbench.hardware.units import format_size

    if micro["status"] != "ok":
        page.add("Microbenchmarks", f"{micro['status']}: {micro.get('error', '')}")
        return
    table = pd.DataFrame(micro["largest"])
    table["size"] = [
        format_size(s) if b not in ("gather", "spmm") else f"{s:,} {'rows' if b == 'gather' else 'seeds'}"
        for b, s in zip(table["benchmark"], table["size"], strict=True)
    ]
    table["median (ms)"] = table.pop("median_s") * 1e3
    table = table.rename(columns={"gb_per_s": "GB/s"})
    page.add(
        "Microbenchmarks",
        f"The full sweep ({micro['rows']} timed repeats in {micro['seconds']} s; microbench/summary.csv has every "
        "size): each benchmark's largest size here. " + " ".join(micro.get("notes", [])),
        table=table,
    )


def _calibration_sections(page: Any, calibration: dict[str, Any]) -> None:
    import pandas as pd

    if calibration["status"] != "ok":
        page.add("Calibration", f"failed: {calibration.get('error')}")
        return
    fit = calibration.get("links_fit") or {}
    text = (
        f"profile.toml, fitted to the warm epochs of {len(calibration['runs'])} runs ({', '.join(calibration['runs'])})"
        + (" and the microbenchmarks' p2p and all-reduce rows" if calibration.get("microbench") else "")
        + f"; {calibration['traces']} traces in all. The links' fit: {fit.get('rows', 0)} transfer rows, "
        f"r2 {_num(fit.get('r2'))}, median |relative residual| {_num(fit.get('residual_median_abs'))}."
    )
    if calibration.get("notes"):
        text += " Notes: " + " ".join(calibration["notes"])
    links = pd.DataFrame(calibration["links"]).rename(
        columns={"kind": "link kind", "bandwidth_gb_per_s": "bandwidth (GB/s)", "latency_us": "latency (us)"}
    )
    page.add("Calibration", text, table=links if len(links) else None)
    if calibration["compute"]:
        page.add(
            "Calibration: compute fits",
            "Per phase and device model: the rows fitted, the model kept (linear or trees), r2 and the median "
            "|relative residual| on the fitted rows, and each model's held-out relative error (cross-validated).",
            table=pd.DataFrame(calibration["compute"]),
        )


def _fidelity_sections(page: Any, fidelity: dict[str, Any]) -> None:
    import pandas as pd

    from sim.calibrate.fidelity import tails_sentence
    from studies.fidelity_experiment import noise_sentence

    if fidelity.get("status") != "ok" and not fidelity.get("runs"):
        page.add("Fidelity of the held-out runs", f"failed: {fidelity.get('error')}")
        return
    page.add(
        "Fidelity of the held-out runs",
        f"{len(fidelity['runs'])} held-out runs simulated on the profile against their warm epochs; over the "
        f"{fidelity['configurations']} scored, epoch |error| median {_pct(fidelity['epoch_median_abs_error'])}, worst {_pct(fidelity['epoch_worst_abs_error'])}, "
        f"mean signed {_pct(fidelity['epoch_mean_error'], True)}; the measurement's own epoch-to-epoch spread "
        f"(median) {_pct(fidelity['epoch_median_spread'])}. Error = (simulated - measured) / measured. "
        + tails_sentence(fidelity)
        + " "
        + noise_sentence(fidelity)
        + (f" Not simulated: {fidelity['error']}." if fidelity.get("error") else ""),
        table=pd.DataFrame(
            [
                {
                    "run": r["name"],
                    "measured (ms)": r["measured_ms"],
                    "spread": _pct(r["spread"]),
                    "simulated (ms)": r["simulated_ms"],
                    "error": _pct(r["error"], True),
                    "scored": "no: spread" if r["name"] in (fidelity.get("unreliable") or []) else "yes",
                }
                for r in fidelity["runs"]
            ]
        ),
    )
    phases = pd.DataFrame(
        [
            {
                "phase": phase,
                "share of measured busy time": _pct(v["share_of_busy"]),
                "median |error|": _pct(v["median_abs_error"]),
                "worst |error|": _pct(v["worst_abs_error"]),
                "mean signed error": _pct(v["mean_error"], True),
                "epoch-to-epoch spread": _pct(v["median_spread"]),
            }
            for phase, v in fidelity["phases"].items()
        ]
    )
    page.add("Fidelity per phase (busy seconds summed over workers)", table=phases)
    for image in fidelity.get("images", []):
        page.add("Simulated against measured" if image == "scatter.png" else "Error per phase", image=image)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.1%}" if signed else f"{value:.1%}"
