"""``bulk-sampling``: matrix-based bulk sampling (paper 004, Figs. 4 and 7, sections 5.2.1 and 8.2.1).

Two parts:

* **Sampling time against bulk size k**, measured for real on this machine: the
  workbench's ``bulk-matrix`` sampler (GraphSAGE as SpGEMM plus inverse transform
  sampling) sampling the same minibatches ``k`` at a time, wall-clock milliseconds per
  minibatch. Bulk sampling amortises per-call work over ``k`` minibatches (paper:
  "our sampling optimizations are intended to amortize the cost of sampling over many
  minibatches").
* **Graph-replicated vs 1.5D partitioned**, simulated: the ``bulk-pipeline`` scheme on
  Perlmutter-like nodes (4 A100 each) with 4, 8 and 16 GPUs, the adjacency replicated on
  every GPU or split into ``P/c`` block rows with replication factor ``c``; and at the paper's
  largest setting (:func:`large_setting`): papers-like at full size on 128 GPUs in full mode
  (each point alone in this machine's memory), at 1% on 32 GPUs in quick mode. Per point the
  first sampling step's time, the communication time on its critical path and the bytes
  each process sends (:func:`studies.measures.sampling_step_figures`).

The paper's claim that 1.5D communication falls with ``c`` is about time: section 5.2.1
prices the outer loop's ``P/c^2`` dependent steps and the all-reduce as
``alpha (P/c^2 + log c) + beta (n d / c + b k d c / P)`` and section 8.2.1 reads it as
"communication overall scales when c increases" because the row data (``n d / c``)
dominates for ``c <= sqrt(P)``. The verdict is computed on the critical path's
communication time with the paper's schedule (``schedule="stepped"``,
``row_allreduce="pairwise"``: CAGNET's ``dist_saspgemm15D`` and ``csr_allreduce``), a transfer's
wait for its copy engine counted as communication (within a node a step's owner sends the
column's rows one reply after another: the paper's owner-bound row-data term); bytes per process
are reported beside it. The critical path is split into its terms (row-id requests, row data,
row all-reduce, compute) per c, and an ablation changes one element of the step or of its
measure at a time toward the paper's and gives the claim's figure before and after.

A third part is **measured for real**: the pipeline run by ``realrun`` (one process per worker,
``torch.distributed`` between them, the 1.5D products' rows, row sums and feature rows really
sent) on 4 CPU workers for the replicated layout and 1.5D with c = 1 and 2, the communication
each process sent in the first sampling step read from the real trace with the same analysis
as the simulated points, beside the same plan simulated. Real runs time this machine and must
not share it with the simulated points, so they are recorded by :func:`record_real_runs` (run
on a quiet machine) into ``studies/measured/bulk-sampling-real.json``, which the page reads.
"""

from __future__ import annotations

import json
import platform
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studies.plots import bar_chart, line_chart, save
from studies.report import ReportPage
from studies.runner import Point, Study, register_study
from studies.verdict import Claim, judge, span

AMORTISES = Claim(
    "bulk sampling amortises its cost over the k minibatches it samples at once",
    "Fig. 4",
    "ms per minibatch at the smallest k / at the largest",
)
REPLICATED_SILENT = Claim(
    "sampling with a replicated graph needs no communication",
    "section 5.1",
    "bytes each process sends",
    direction="at_most",
    threshold=0.0,
    unit=" B",
)
FALLS_WITH_C = Claim(
    "the 1.5D algorithm's communication time falls with the replication factor c (c <= sqrt(P))",
    "sections 5.2.1 and 8.2.1",
    "critical-path communication time (transfers and their queueing for a copy engine) at c=1 / at the largest c",
)

NAME = "bulk-sampling"
# The paper's schedule of the 1.5D product, and the workbench's default, for the ablation.
PAPER_SCHEDULE = ("stepped", "pairwise")
SCHEDULES = {
    ("overlapped", "ring"): "overlapped fetches, ring all-reduce (workbench default)",
    ("stepped", "ring"): "P/c^2 dependent steps, ring all-reduce",
    PAPER_SCHEDULE: "P/c^2 dependent steps, pairwise sparse all-reduce (paper)",
}
# What measure "bulk-sampling-step" returns, in the scaling points' options: a change to it gives these
# points new keys (and recomputes them) without invalidating every other study's stored results.
STEP_FIGURES = 2  # 2: the critical path's terms and queues (studies.measures.critical_path)
# The claim's figure: the critical path's communication, transfers' queueing for a copy engine included.
CLAIM_MEASURE = "critical_comm_queued_ms"
# (GPUs, c) of the 1.5D grid: every c with c | P and c <= sqrt(P) that is a power of two.
GRID = [(4, 1), (4, 2), (8, 1), (8, 2), (16, 1), (16, 2), (16, 4)]


def setting(full: bool) -> dict[str, Any]:
    """The study's setting beside the paper's (Table 4, section 7.2, Fig. 7)."""
    return {
        "graph": {"name": "products-like", "scale": 1.0 if full else 0.1},
        "batch_size": 1024 if full else 256,
        "iterations": 4 if full else 2,
    }


def large_setting(full: bool) -> dict[str, Any]:
    """Paper 004's largest setting (Table 3, Fig. 7): Papers (111 M vertices, 1.6 B edges) sampled on up
    to 128 GPUs. Full mode: papers-like at full size on 128 GPUs (32 Perlmutter-like nodes), one
    sampling step (the measure reads the first); quick mode: papers-like at 1% on 32 GPUs."""
    return {
        "graph": {"name": "papers-like", "scale": 1.0 if full else 0.01},
        "gpus": 128 if full else 32,
        "batch_size": 1024 if full else 256,
        "iterations": 1,
    }


def _pipeline(
    full: bool, gpus: int, mode: str, c: int, schedule: tuple[str, str], s: dict[str, Any] | None = None
) -> dict[str, Any]:
    s = s or setting(full)
    return {
        "name": f"{NAME}-{gpus}-{mode}-{c}-{schedule[0]}-{schedule[1]}",
        "graph": s["graph"],
        # 4 GPUs per node: the preset's 4 nodes hold up to 16.
        "hardware": {"name": "perlmutter-4xa100-slingshot", **({"machines": gpus // 4} if gpus > 16 else {})},
        "model": {"name": "sage", "hidden": 256, "num_layers": 3},
        "training": {"batch_size": s["batch_size"], "workers": gpus, "iterations": s["iterations"]},
        "partition": {"name": "random"},
        # CAGNET samples its first fanout (15) at the seeds; the workbench lists fanouts from
        # the input layer to the seeds (DGL's order), so the paper's (15, 10, 5) is [5, 10, 15].
        "sampling": {"name": "bulk-matrix", "fanouts": [5, 10, 15]},
        "execution": {
            "name": "bulk-pipeline",
            "mode": mode,
            "replication": c,
            "schedule": schedule[0],
            "row_allreduce": schedule[1],
        },  # bulk: the whole epoch in one step, as the paper does where memory allows
    }


def points(full: bool) -> list[Point]:
    out = []
    for k in (1, 4, 16, 64) if full else (1, 8, 32):
        config = _pipeline(full, 4, "replicated", 1, ("overlapped", "ring"))
        config["graph"] = {"name": "products-like", "scale": 0.1 if full else 0.03}
        out.append(
            Point(
                NAME,
                {"part": "bulk", "k": k},
                config,
                measure="bulk-sample-time",
                options={"bulk": k, "minibatches": 64, "batch_size": 256},
            )
        )
    for gpus in (4, 8, 16):
        label = {"part": "scaling", "gpus": gpus, "layout": "replicated", "c": 1, "schedule": ""}
        config = _pipeline(full, gpus, "replicated", 1, ("overlapped", "ring"))
        out.append(
            Point(NAME, label, config, measure="bulk-sampling-step", options={"figures": STEP_FIGURES})
        )
    for gpus, c in GRID:
        for schedule, words in SCHEDULES.items():
            label = {"part": "scaling", "gpus": gpus, "layout": f"1.5D c={c}", "c": c, "schedule": words}
            config = _pipeline(full, gpus, "partitioned-1.5d", c, schedule)
            out.append(
                Point(NAME, label, config, measure="bulk-sampling-step", options={"figures": STEP_FIGURES})
            )
    return out + _large_points(full)


def _large_points(full: bool) -> list[Point]:
    """:func:`large_setting`'s points: replicated and 1.5D under the paper's schedule, every power of
    two c <= sqrt(P) (the other schedules of the ablation are left out at this size)."""
    s = large_setting(full)
    gpus = s["gpus"]
    layouts = [("replicated", 1, ("overlapped", "ring"), "")]
    c = 1
    while c * c <= gpus:
        layouts.append(("partitioned-1.5d", c, PAPER_SCHEDULE, SCHEDULES[PAPER_SCHEDULE]))
        c *= 2
    out = []
    for mode, c, schedule, words in layouts:
        layout = "replicated" if mode == "replicated" else f"1.5D c={c}"
        label = {"part": "scaling", "gpus": gpus, "layout": layout, "c": c, "schedule": words}
        config = _pipeline(full, gpus, mode, c, schedule, s)
        # At full size the graph takes half this machine's memory: one such point at a time.
        options = {"figures": STEP_FIGURES}
        out.append(Point(NAME, label, config, measure="bulk-sampling-step", options=options, alone=full))
    return out


# ---- measured for real: communication per process against c ---------------------------------
REAL_RECORD = Path(__file__).resolve().parent / "measured" / "bulk-sampling-real.json"
REAL_WORKERS = 4
REAL_EPOCHS = 3  # the sampling step's times are the median epoch's (a shared machine is noisy)
# (mode, c): the study's 4-GPU points' layouts, 1.5D under the paper's schedule.
REAL_LAYOUTS = (("replicated", 1), ("partitioned-1.5d", 1), ("partitioned-1.5d", 2))
REAL_CONFIG = """
name = "{name}"
seed = 0

[graph]
name = "products-like"
scale = 0.01

[hardware]
name = "perlmutter-4xa100-slingshot"

[model]
name = "sage"
hidden = 256
num_layers = 3

[training]
batch_size = 128
iterations = 2

[partition]
name = "random"

[sampling]
name = "bulk-matrix"
fanouts = [5, 10, 15]

[execution]
name = "bulk-pipeline"
mode = "{mode}"
replication = {c}
schedule = "stepped"
row_allreduce = "pairwise"
"""


def _real_row(mode: str, c: int, folder: Path) -> dict[str, Any]:
    """One layout run for real and its plan simulated: the first sampling step's figures from each
    trace (:func:`studies.measures.sampling_step_figures`) and the feature bytes per process."""
    from realrun.launcher import launch, prepare_real_run
    from sim import simulate
    from studies.measures import sampling_step_figures
    from workbench.trace import read_trace

    name = f"{NAME}-real-{mode}-{c}"
    config = folder / f"{name}.toml"
    config.write_text(REAL_CONFIG.format(name=name, mode=mode, c=c))
    prepared, plan, _ = prepare_real_run(config, REAL_WORKERS, "cpu")
    summary = launch(prepared, plan, config, out=folder / name, epochs=REAL_EPOCHS, layers="torch")
    trace = read_trace(summary.out / "trace.parquet")
    # Every epoch samples the same step again: its bytes are equal, its times vary; the median epoch's.
    epochs = [
        sampling_step_figures(plan, trace[trace["epoch"] == e], REAL_WORKERS) for e in range(REAL_EPOCHS)
    ]
    real = {key: float(np.median([f[key] for f in epochs])) for key in epochs[0]}
    simulated = sampling_step_figures(plan, simulate(plan, prepared.cluster).trace, REAL_WORKERS)
    result = summary.results[0]
    row: dict[str, Any] = {"layout": "replicated" if mode == "replicated" else f"1.5D c={c}", "c": c}
    row["vertices"] = prepared.inputs.graph.num_nodes
    for key in ("MB_per_process", "critical_comm_ms", "step_ms"):
        row[f"real_{key}"] = real[key]
        row[f"sim_{key}"] = simulated[key]
    for phase in ("gather_remote", "d2d"):
        row[f"real_{phase}_MB_per_process"] = result[f"measured_{phase}_bytes"] / REAL_WORKERS / 1e6
        row[f"plan_{phase}_MB_per_process"] = result[f"planned_{phase}_bytes"] / REAL_WORKERS / 1e6
    row["bytes_match_plan"] = bool(result["bytes_match_plan"])
    return row


def record_real_runs(path: Path = REAL_RECORD) -> dict[str, Any]:
    """Run :data:`REAL_LAYOUTS` for real on this machine's CPU (gloo) and write what they measured,
    beside the same plans simulated, to ``path`` (the page reads it). Run it on a quiet machine:
    ``python -c "from studies.study_bulk_sampling import record_real_runs; record_real_runs()"``."""
    with tempfile.TemporaryDirectory() as tmp:
        rows = [_real_row(mode, c, Path(tmp)) for mode, c in REAL_LAYOUTS]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    record = {
        "recorded": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit.stdout.strip(),
        "machine": f"{platform.machine()}, {platform.system()}, CPU workers over gloo (loopback)",
        "setting": f"products-like at 1% ({rows[0]['vertices']:,} vertices), sage 3 x 256, batch 128, fanouts "
        f"15/10/5 from the seeds, {REAL_WORKERS} workers, bulk = the whole epoch, 1.5D under the paper's schedule",
        "rows": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return record


def _real_section(page: ReportPage, folder: Path, record: dict[str, Any]) -> None:
    table = pd.DataFrame(record["rows"])
    by_c = table[table["layout"] != "replicated"].set_index("c").sort_index()
    chart = pd.DataFrame(
        {"measured (real run)": by_c["real_MB_per_process"], "simulated (plan)": by_c["sim_MB_per_process"]}
    )
    save(
        line_chart(chart, "1.5D sampling step: bytes each process sends vs c, real and simulated", "c", "MB"),
        folder / "real_bytes_vs_c.png",
    )
    matched = (
        "every run moved exactly its plan's bytes"
        if table["bytes_match_plan"].all()
        else ("a run's bytes differ from its plan's (see bytes_match_plan)")
    )
    page.add(
        "Communication per process against c, measured for real",
        f"The pipeline run for real ({record['setting']}; {record['machine']}; recorded {record['recorded']} "
        f"at commit {record['commit']}): the sampling step's rows of A, row requests and pairwise row sums "
        "really sent between worker processes, read from the real trace with the same critical-path "
        "analysis as the simulated points, beside the same plan simulated on Perlmutter-like nodes. Bytes "
        f"per process are the plan's in both ({matched}); times are this machine's CPU and loopback, not "
        f"Perlmutter's (the median of {REAL_EPOCHS} epochs, each sampling the step again), so only their trend "
        "against c "
        "compares, and on a shared machine loosely. Feature rows of the all-to-allv per process "
        "(d2d within a machine, gather_remote across) are shown measured and planned.",
        image="real_bytes_vs_c.png",
        table=table,
    )


# ---- the page ------------------------------------------------------------------------------
def _setting_table(results: pd.DataFrame) -> pd.DataFrame:
    scaling = results[results["part"] == "scaling"]
    grids = []
    for (graph, vertices), sub in scaling.groupby(["graph", "vertices"], sort=False):
        gpus = ", ".join(str(int(g)) for g in sorted(sub["gpus"].unique()))
        cs = ", ".join(str(int(c)) for c in sorted(sub["c"].unique()))
        batch, iterations = int(sub["batch_size"].iloc[0]), int(sub["iterations"].iloc[0])
        grids.append(
            (f"{graph} ({vertices / 1e6:.3g} M vertices)", f"P = {gpus}; c = {cs}", batch, iterations)
        )
    rows = [
        (
            "graph",
            "Protein (8.7 M vertices, 1.3 B edges), Papers (111 M, 1.6 B); Products not shown",
            "; ".join(g[0] for g in grids) or "?",
        ),
        ("model", "GraphSAGE, 3 layers, hidden 256", "sage, 3 layers, hidden 256"),
        ("fanouts", "(15, 10, 5), 15 at the seeds", "15 at the seeds, then 10, then 5"),
        ("batch", "1024", "; ".join(f"{g[2]} ({g[0].split(' ')[0]})" for g in grids)),
        (
            "bulk k",
            "all minibatches where memory allows",
            "the whole simulated epoch: " + "; ".join(f"{g[3]} x P ({g[0].split(' ')[0]})" for g in grids),
        ),
        (
            "GPUs P, replication c",
            "16 up to 128; the largest c that fits",
            "; ".join(f"{g[1]} ({g[0].split(' ')[0]})" for g in grids),
        ),
        (
            "hardware",
            "Perlmutter: 4 A100 per node, NVLink 3, 4 Slingshot 11 NICs",
            "perlmutter-4xa100-slingshot, P / 4 nodes",
        ),
        (
            "1.5D schedule",
            "P/c^2 dependent steps, pairwise CSR all-reduce (CAGNET)",
            "the same (schedule options); the ablation's other schedules on the first graph only",
        ),
    ]
    return pd.DataFrame(rows, columns=["", "paper 004 (Fig. 7, Table 3, section 7)", "this study"])


def _bulk_section(page: ReportPage, bulk: pd.DataFrame, folder: Path) -> None:
    bulk = bulk.copy()
    bulk["k"] = bulk["k"].astype(int)
    table = bulk.set_index("k")[["ms_per_minibatch"]].sort_index()
    save(
        line_chart(
            table.rename(columns={"ms_per_minibatch": "bulk-matrix sampler"}),
            "Sampling time per minibatch vs bulk size k (paper 004, bulk sampling)",
            "k",
            "milliseconds per minibatch (this machine's CPU)",
            logx=True,
        ),
        folder / "bulk.png",
    )
    first, last = float(table.iloc[0, 0]), float(table.iloc[-1, 0])
    page.add(
        "Sampling time against bulk size k (measured)",
        f"k = {table.index[0]}: {first:.2f} ms per minibatch; k = {table.index[-1]}: {last:.2f} ms.",
        image="bulk.png",
        table=bulk[["k", "minibatches", "ms_per_minibatch"]],
        judgement=judge(AMORTISES, {f"k = {table.index[0]} vs {table.index[-1]}": first / last}),
    )


def _falls(table: pd.DataFrame, value: str) -> dict[str, float]:
    """Per GPU count, ``value`` at c=1 over ``value`` at the largest c."""
    out = {}
    for gpus, sub in table.groupby("gpus"):
        by_c = sub.set_index("c")[value].sort_index()
        if len(by_c) > 1 and by_c.iloc[-1] > 0:
            out[f"{int(gpus)} GPUs, c=1 vs c={int(by_c.index[-1])}"] = float(by_c.iloc[0] / by_c.iloc[-1])
    return out


def _comm_section(page: ReportPage, paper: pd.DataFrame, folder: Path) -> None:
    comm = paper.pivot_table(index="c", columns="P", values=CLAIM_MEASURE, sort=False)
    comm.columns = [_gpus_label(p) for p in comm.columns]
    save(
        line_chart(
            comm, "Communication on the sampling step's critical path vs c (paper 004, 5.2.1)", "c", "ms"
        ),
        folder / "comm_vs_c.png",
    )
    page.add(
        "1.5D communication time against c (simulated, the paper's schedule)",
        "The quantity the paper's claim is about (section 5.2.1's cost alpha (P/c^2 + log c) + beta (n d/c + "
        "b k d c/P), read in section 8.2.1 as 'communication overall scales when c increases'): the time the "
        "sampling step's critical path spends in transfers and all-reduce rounds, with P/c^2 dependent steps "
        "per process column and the pairwise sparse all-reduce. A transfer on the path that waited for its "
        "copy engine (a step's owner sending its rows to the column's processes one after another over "
        "NVLink) counts its wait as communication (critical_comm_queued_ms); critical_comm_ms is the transfers' "
        "durations alone, and critical_wait_ms what of the step neither covers.",
        image="comm_vs_c.png",
        table=paper[
            [
                "gpus",
                "c",
                "step_ms",
                "critical_comm_queued_ms",
                "critical_comm_ms",
                "critical_compute_ms",
                "critical_wait_ms",
            ]
        ],
        judgement=judge(FALLS_WITH_C, _falls(paper, CLAIM_MEASURE), "the grid has one c per GPU count"),
    )


def _with_p(scaling: pd.DataFrame) -> pd.DataFrame:
    """``scaling`` with ``P``: the GPU count as the charts show it, with the graph where it is not the
    main grid's (the large setting's points)."""
    scaling = scaling.copy()
    scaling["gpus"] = scaling["gpus"].astype(int)
    scaling["c"] = scaling["c"].astype(int)
    main = scaling["graph"].mode().iloc[0] if len(scaling) else ""
    scaling["P"] = [
        f"{g}" if graph == main else f"{g} ({graph})" for g, graph in scaling[["gpus", "graph"]].to_numpy()
    ]
    return scaling


def _gpus_label(p: str) -> str:
    """A chart legend's name for ``P``: "16 GPUs", "128 GPUs (papers-like)"."""
    count, _, graph = p.partition(" ")
    return f"{count} GPUs {graph}".rstrip()


def _scaling_sections(page: ReportPage, scaling: pd.DataFrame, folder: Path) -> None:
    scaling = _with_p(scaling)
    replicated = scaling[scaling["layout"] == "replicated"]
    paper = scaling[scaling["schedule"] == SCHEDULES[PAPER_SCHEDULE]]
    shown = pd.concat([replicated, paper])
    pivot = shown.pivot_table(index="gpus", columns="layout", values="step_ms")
    pivot.index = [shown.loc[shown["gpus"] == g, "P"].iloc[0] for g in pivot.index]
    save(
        bar_chart(
            pivot,
            "First sampling step, paper's 1.5D schedule (paper 004, Fig. 7)",
            "GPUs",
            "simulated ms",
            log=True,  # replicated steps of 0.1 ms beside 1.5D steps of 600 ms on 128 GPUs
        ),
        folder / "scaling.png",
    )
    page.add(
        "Graph-replicated vs 1.5D partitioned (simulated)",
        "Replicated: every GPU samples alone, no communication. 1.5D: P/c block rows of A; in each process "
        "column the P/c^2 owners serve the rows of their block one step after another, then each process row "
        "sums its c partial products in log2(c) pairwise rounds. Time is the first sampling step's; bytes are "
        "what each process sends in it.",
        image="scaling.png",
        table=shown[
            [
                "gpus",
                "graph",
                "vertices",
                "layout",
                "step_ms",
                "critical_comm_ms",
                "MB_per_process",
                "epoch_s",
            ]
        ],
        judgement=judge(
            REPLICATED_SILENT,
            {f"{int(g)} GPUs": b for g, b in replicated[["gpus", "MB_per_process"]].to_numpy()},
        ),
    )
    _comm_section(page, paper, folder)
    volume = paper.pivot_table(index="c", columns="P", values="MB_per_process", sort=False)
    volume.columns = [_gpus_label(p) for p in volume.columns]
    save(
        line_chart(volume, "Bytes each process sends in the sampling step vs c", "c", "MB"),
        folder / "bytes_vs_c.png",
    )
    page.add(
        "1.5D bytes per process against c (simulated, reported, not judged)",
        "Bytes sent per process, averaged, split into requested ids, rows of A and all-reduce rounds. The plan "
        "is sparsity-aware: a process row's Q_i has b k c / P rows, one nonzero each, so the rows of A a "
        "process fetches total about b k d / P whatever c is, while the all-reduce moves (c-1)/c of nnz(P_i) "
        "(b k c d / P). Bytes averaged over processes therefore do not fall with c; the time falls because a "
        "column's rows cross its owners' links in P/c^2 steps. The paper's n d / c counts whole block rows "
        "(sparsity-oblivious), which the sparsity-aware fetch reaches only when Q_i touches every row of A.",
        image="bytes_vs_c.png",
        table=paper[
            [
                "gpus",
                "c",
                "MB_per_process",
                "request_MB_per_process",
                "rows_MB_per_process",
                "allreduce_MB_per_process",
            ]
        ],
    )
    _terms_section(page, paper, folder)
    _ablation_section(page, scaling)


# ---- why the figure moves with c: the critical path's terms and the ablation -------------------
LAYERS = 3  # the model's layers: the step samples three
NONZERO_BYTES = 8 + 4  # a row's nonzero as the plan sends it: index and value
TERM_NAMES = {
    "request": "row-id requests",
    "rows": "row data",
    "allreduce": "row all-reduce",
    "compute": "compute",
}
# Each element changes one thing of the 1.5D sampling step toward the paper's analysis, in turn:
# (what changes, (schedule, measure) before, (schedule, measure) after).
ELEMENTS = (
    (
        "P/c^2 dependent steps (section 5.2.1's outer loop)",
        (("overlapped", "ring"), "critical_comm_ms"),
        (("stepped", "ring"), "critical_comm_ms"),
    ),
    (
        "pairwise sparse all-reduce (CAGNET's csr_allreduce)",
        (("stepped", "ring"), "critical_comm_ms"),
        (PAPER_SCHEDULE, "critical_comm_ms"),
    ),
    (
        "a transfer's wait for its copy engine counted as communication",
        (PAPER_SCHEDULE, "critical_comm_ms"),
        (PAPER_SCHEDULE, "critical_comm_queued_ms"),
    ),
    (
        "only the layer at the seeds (the one section 5.2.1 works through)",
        (PAPER_SCHEDULE, "critical_comm_queued_ms"),
        (PAPER_SCHEDULE, "critical_comm_queued_seed_layer_ms"),
    ),
)


def paper_model_ratio(vertices: float, batch: float, iterations: float, c: int) -> float:
    """Section 5.2.1's bandwidth terms, ``n d / c + b k d c / P``, at c=1 over at ``c``, with ``k = iterations P``
    (the whole epoch in one bulk step, so ``b k / P`` is ``batch * iterations``; ``d`` cancels)."""
    return vertices / (vertices / c + batch * iterations * c)


def path_terms(paper: pd.DataFrame) -> pd.DataFrame:
    """Per (gpus, c) of the paper's schedule, the critical path's terms in ms, each with its tasks' queueing
    (``rows_queued_ms``: the row data's), the rows of A fetched as a share of the paper's ``n d / c`` per
    process (its ``LAYERS`` layers, ``NONZERO_BYTES`` a nonzero), and row data over all-reduce: the paper's
    ``n P / (b k c^2)`` and the simulated path's (c > 1)."""
    t = paper.sort_values(["gpus", "c"]).reset_index(drop=True)
    out = pd.DataFrame({"gpus": t["gpus"].astype(int), "c": t["c"].astype(int)})
    for term in TERM_NAMES:
        out[f"{term}_ms"] = t[f"path_{term}_ms"] + t[f"path_{term}_queued_ms"]
    out["rows_queued_ms"] = t["path_rows_queued_ms"]
    out["step_ms"] = t["step_ms"]
    model_rows = LAYERS * t["edges"] / out["c"] * NONZERO_BYTES
    out["rows fetched / paper's n d / c"] = 1e6 * t["rows_MB_per_process"] / model_rows
    multi = out["c"] > 1
    out["rows / all-reduce, paper"] = (
        t["vertices"] / (t["batch_size"] * t["iterations"] * out["c"] ** 2)
    ).where(multi)
    out["rows / all-reduce, simulated"] = (out["rows_ms"] / out["allreduce_ms"]).where(multi)
    return out


def term_findings(terms: pd.DataFrame) -> str:
    """Sentences from :func:`path_terms`: per GPU count how each term moves from c=1 to the largest c."""
    parts = []
    for gpus, sub in terms.groupby("gpus"):
        sub = sub.set_index("c").sort_index()
        one, top = sub.iloc[0], sub.iloc[-1]
        cmax = int(sub.index[-1])
        fall = one["rows_ms"] / top["rows_ms"] if top["rows_ms"] > 0 else float("inf")
        text = (
            f"{int(gpus)} GPUs, c=1 -> c={cmax}: row data {one['rows_ms']:.3g} -> {top['rows_ms']:.3g} ms "
            f"({fall:.2f}x lower; the paper's n d / c: {cmax}x)"
        )
        if one["rows_queued_ms"] > 0 or top["rows_queued_ms"] > 0:
            text += (
                f", of which queued for the owner's copy engine {one['rows_queued_ms']:.3g} -> "
                f"{top['rows_queued_ms']:.3g} ms"
            )
        text += (
            f"; row all-reduce {one['allreduce_ms']:.3g} -> {top['allreduce_ms']:.3g} ms; requests "
            f"{one['request_ms']:.3g} -> {top['request_ms']:.3g} ms; compute {one['compute_ms']:.3g} -> "
            f"{top['compute_ms']:.3g} ms"
        )
        parts.append(text)
    text = ". ".join(parts) + "."
    multi = terms[terms["c"] > 1]
    if len(multi):
        over = multi[multi["allreduce_ms"] > multi["rows_ms"]]
        where = ", ".join(f"{int(r.gpus)} GPUs c={int(r.c)}" for r in over.itertuples()) or "no point"
        paper, sim = multi["rows / all-reduce, paper"], multi["rows / all-reduce, simulated"]
        share = terms["rows fetched / paper's n d / c"]
        text += (
            f" The row all-reduce outweighs the row data at {where}. The paper's terms put the row data at "
            f"{span(paper.min(), paper.max())} the all-reduce where c > 1 (n P / (b k c^2)), the simulated path at "
            f"{span(sim.min(), sim.max())}: the sparsity-aware fetch moves {share.min():.1%}-{share.max():.1%} of "
            "the paper's n d / c (rows of A that Q_i touches, not whole block rows)."
        )
    return text


def element_table(scaling: pd.DataFrame) -> pd.DataFrame:
    """One row per element of :data:`ELEMENTS` and GPU count: the claim's figure (c=1 over the largest c)
    before and after the element changes."""
    rows = []
    for element, (sched_a, measure_a), (sched_b, measure_b) in ELEMENTS:
        before = _falls(scaling[scaling["schedule"] == SCHEDULES[sched_a]], measure_a)
        after = _falls(scaling[scaling["schedule"] == SCHEDULES[sched_b]], measure_b)
        for point in before:
            rows.append(
                {"element": element, "point": point, "before": before[point], "after": after.get(point)}
            )
    return pd.DataFrame(rows, columns=["element", "point", "before", "after"])


def element_findings(table: pd.DataFrame) -> str:
    """Sentences from :func:`element_table`: each element's figures and verdict before and after, and which
    element changes the verdict."""
    parts, turning = [], []
    for element, sub in table.groupby("element", sort=False):
        before, after = (
            judge(FALLS_WITH_C, dict(zip(sub["point"], sub["before"], strict=True))),
            judge(FALLS_WITH_C, dict(zip(sub["point"], sub["after"], strict=True))),
        )
        parts.append(
            f"{element}: {span(sub['before'].min(), sub['before'].max())} ({before.verdict}) -> "
            f"{span(sub['after'].min(), sub['after'].max())} ({after.verdict})"
        )
        if before.verdict != after.verdict:
            turning.append(f"{element} ({before.verdict} -> {after.verdict})")
    text = "; ".join(parts) + "."
    if turning:
        return text + " The element that changes the verdict: " + "; ".join(turning) + "."
    return text + " No element changes the verdict."


def _terms_section(page: ReportPage, paper: pd.DataFrame, folder: Path) -> None:
    terms = path_terms(paper)
    chart = terms.set_index("P=" + terms["gpus"].astype(str) + "\nc=" + terms["c"].astype(str))
    chart = chart[[f"{t}_ms" for t in TERM_NAMES]].rename(
        columns={f"{t}_ms": w for t, w in TERM_NAMES.items()}
    )
    save(
        bar_chart(
            chart.where(chart > 0),
            "Sampling step's critical path by term (paper's schedule)",
            "",
            "ms",
            log=True,
        ),
        folder / "terms_vs_c.png",
    )
    page.add(
        "The critical path's terms against c (simulated, the paper's schedule)",
        "The sampling step's critical path split into its terms, each with the time its tasks queued for an "
        "engine: requests of row ids, row data of A (the paper's beta n d / c), the pairwise all-reduce of the "
        "partial products (beta b k d c / P) and compute. " + term_findings(terms),
        image="terms_vs_c.png",
        table=terms,
    )


def _ablation_section(page: ReportPage, scaling: pd.DataFrame) -> None:
    table = element_table(scaling)
    models = {}
    paper = scaling[scaling["schedule"] == SCHEDULES[PAPER_SCHEDULE]]
    for gpus, sub in paper.groupby("gpus"):
        top = sub.sort_values("c").iloc[-1]
        ratio = paper_model_ratio(top["vertices"], top["batch_size"], top["iterations"], int(top["c"]))
        models[f"{int(gpus)} GPUs, c=1 vs c={int(top['c'])}"] = ratio
    page.add(
        "Ablation: what turns the workbench's figure into the paper's",
        "Each line changes one element of the 1.5D sampling step or of its measure toward the paper's, in turn, "
        "on the same sampled epoch, and gives the claim's figure (communication on the critical path at c=1 / "
        "at the largest c; above 1: it falls with c) before and after. "
        + element_findings(table)
        + " Section "
        "5.2.1's bandwidth terms on this setting (n, b, k of each point) give "
        f"{span(min(models.values()), max(models.values()))}. Within a node a peer copy holds its source's copy "
        "engine, so a step's owner sends the column's rows one reply after another and a reply on the path "
        "waits for the others; across nodes the replies share the owner's NIC as flows and the same time is in "
        "their durations. Durations alone drop the first and keep the second: only the one-node point changes.",
        table=table,
    )


def analyze(results: pd.DataFrame, folder: Path) -> ReportPage:
    page = ReportPage(
        "Bulk matrix sampling (paper 004): bulk size, graph replication and 1.5D partitioning",
        "Tripathy, Yelick and Buluc sample minibatches as sparse matrix products, k at a time, and distribute the "
        "graph in 1.5D when it does not fit on one GPU; sampling with a replicated graph needs no communication "
        "and 'scales nearly linearly', and the 1.5D algorithm's communication falls with the replication factor c "
        "(sections 5.2.1 and 8.2.1). Bulk sampling time is measured for real on this machine's CPU; the pipeline "
        "is simulated on Perlmutter-like nodes.",
    )
    page.add("The setting", "The paper's Fig. 7 setting beside this run's.", table=_setting_table(results))
    bulk = results[results["part"] == "bulk"]
    if len(bulk):
        _bulk_section(page, bulk, folder)
    scaling = results[results["part"] == "scaling"]
    if len(scaling):
        _scaling_sections(page, scaling, folder)
        page.add(
            "The communication model's terms",
            "Per layer, the paper's sparsity-oblivious 1.5D algorithm receives n d / c nonzeros per process "
            "(P/c^2 block rows of n c / P rows of d nonzeros) and all-reduces b k d c / P nonzeros in each "
            "process row; the workbench's plan is sparsity-aware and counts what is actually needed (rows Q A "
            "touches), so its bytes fall below the model's when the frontier does not cover the graph. See "
            "workbench/strategies/execution/bulk_pipeline.py and its test against the model on a complete graph, "
            "where they agree.",
        )
    if REAL_RECORD.is_file():
        _real_section(page, folder, json.loads(REAL_RECORD.read_text()))
    results.to_csv(folder / "results.csv", index=False)
    return page


register_study(
    Study(
        NAME,
        "Bulk matrix sampling: bulk size, replication and 1.5D partitioning",
        "paper 004 (Tripathy, Yelick, Buluc), Figs. 4 and 7",
        "bulk sampling amortises over k minibatches; replicated sampling needs no communication; 1.5D "
        "communication time falls with c",
        points,
        analyze,
    )
)
