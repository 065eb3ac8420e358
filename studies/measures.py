"""What a study point measures: each a function of a :class:`~studies.runner.Point` returning a flat row.

* ``sim``: build the configuration's plan through the spine and simulate it; the row is
  :func:`workbench.run.results_row` (epoch time, busy seconds and bytes per phase).
  A scheme that learns online (ROC) is trained iteration by iteration
  (:func:`workbench.online.train_online`); its row adds the first and last iteration's
  time.
* ``preprocess``: seconds to partition and place as the configuration says (the
  placement's probability estimate included), nothing simulated.
* ``roc-inference``: ROC's inference on unseen graphs with the cost model learned in
  training (paper 000, Fig. 9).
* ``fidelity``: real runs on this machine, calibration on half, the simulator scored on
  the rest (``gnnwb fidelity``); it must run here, one point at a time.
* ``bulk-sampling-step``: ``sim`` plus the first bulk sampling step's critical path and bytes.
* ``published-fit``: a paper's testbed fitted to its published figures.

The measures live here, not in the study modules, because the runner looks them up here and
every study module imports the runner: a measure in a study module would close an import cycle.

Every function runs in whatever process executes the point, so it imports lazily and
returns plain numbers and strings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from workbench.plan import Plan


def _prepare(point: Any, spine_cache: bool | None = None) -> Any:
    from workbench.config import config_from_dict
    from workbench.run import prepare_run

    config = config_from_dict(point.config, f"study {point.study} point {point.label}")
    return prepare_run(config, spine_cache=spine_cache)


def measure_sim(point: Any) -> dict[str, Any]:
    from sim import simulate
    from sim.calibrate import prepared_cost_model
    from workbench.run import results_row

    prepared = _prepare(point)
    costs = prepared_cost_model(prepared)  # a calibrated profile's ([hardware] profile), else None
    extra: dict[str, Any] = {}
    if prepared.scheme.plans_per_iteration:
        from workbench.online import train_online

        records, trace = train_online(prepared, lambda plan: simulate(plan, prepared.cluster, costs).trace)
        extra = {
            "first_iteration_s": records[0].seconds,
            "last_iteration_s": records[-1].seconds,
            "boundaries_changed": int(records[0].boundaries != records[-1].boundaries),
        }
    else:
        trace = simulate(prepared.plan(), prepared.cluster, costs).trace
    row = results_row(prepared, trace)
    row.update(extra)
    row["prepare_s"] = sum(prepared.seconds.values())
    return row


def measure_preprocess(point: Any) -> dict[str, Any]:
    """Partition and placement seconds (the spine's own stage timings), each the least of three runs."""
    # Computed afresh: a partition or placement that other points of the sweep cached would time a load.
    # The least of three runs, as timeit does: the first in a fresh process also pays imports and JIT
    # cache loads, and other work on a shared machine only ever adds time.
    t0 = time.perf_counter()
    runs = [_prepare(point, spine_cache=False).seconds for _ in range(3)]
    return {
        "partition_s": min(r.get("partition", 0.0) for r in runs),
        "placement_s": min(r.get("placement", 0.0) for r in runs),
        "total_s": (time.perf_counter() - t0) / len(runs),
    }


def measure_roc_inference(point: Any) -> dict[str, Any]:
    """ROC Fig. 9: train online on the point's graph, then partition graphs it never saw with the
    learned cost model and time inference (forward only) on them against equal-edge and equal-vertex.

    ``options``: ``test_graphs`` (a list of ``[graph]`` tables). Returns mean inference seconds
    per partitioning and the learned model's mean speedup over each baseline.
    """
    import dataclasses

    import numpy as np

    from sim import simulate
    from workbench.config import GraphConfig
    from workbench.online import train_online
    from workbench.registry import PARTITIONERS
    from workbench.run import load_graph
    from workbench.strategies.execution.roc_fullgraph import RocFullGraphScheme

    prepared = _prepare(point)
    train_online(prepared, lambda plan: simulate(plan, prepared.cluster).trace)
    inference = RocFullGraphScheme(training=False)
    seconds: dict[str, list[float]] = {"learned": [], "equal-edge": [], "equal-vertex": []}
    workers = prepared.inputs.num_workers
    for table in point.options["test_graphs"]:
        graph = load_graph(GraphConfig(**table))
        for label in seconds:
            partitioner = prepared.partitioner if label == "learned" else PARTITIONERS.create(label)
            partition = partitioner.partition(graph, workers, np.random.default_rng(0))
            inputs = dataclasses.replace(prepared.inputs, graph=graph, partition=partition, iterations=1)
            seconds[label].append(simulate(inference.plan_iteration(inputs, 0), prepared.cluster).makespan)
    mean = {k: float(np.mean(v)) for k, v in seconds.items()}
    return {
        "learned_s": mean["learned"],
        "equal_edge_s": mean["equal-edge"],
        "equal_vertex_s": mean["equal-vertex"],
        "speedup_vs_equal_edge": mean["equal-edge"] / mean["learned"],
        "speedup_vs_equal_vertex": mean["equal-vertex"] / mean["learned"],
        "test_graphs": len(point.options["test_graphs"]),
    }


def measure_bulk_sample_time(point: Any) -> dict[str, Any]:
    """Wall-clock time of the configuration's sampler on its graph, ``bulk`` minibatches per call.

    ``options``: ``bulk`` (k), ``minibatches`` and ``batch_size``; the same seeds for every k.
    One warm-up call compiles the kernels first.
    """
    import numpy as np

    from workbench.config import config_from_dict
    from workbench.registry import SAMPLERS
    from workbench.run import load_graph

    config = config_from_dict(point.config)
    graph = load_graph(config.graph)
    params = dict(config.strategy("sampling").params)  # type: ignore[union-attr]
    sampler = SAMPLERS.create(config.strategy("sampling").name, **params, bulk=point.options["bulk"])  # type: ignore[union-attr]
    rng = np.random.default_rng(0)
    train = graph.train_nids()
    size = min(point.options["batch_size"], train.size)
    batches = [np.sort(rng.choice(train, size, replace=False)) for _ in range(point.options["minibatches"])]
    sampler.sample_many(graph, batches[:1], np.random.default_rng(1))
    t0 = time.perf_counter()
    sampler.sample_many(graph, batches, np.random.default_rng(1))
    seconds = time.perf_counter() - t0
    return {"minibatches": len(batches), "ms_per_minibatch": 1e3 * seconds / len(batches)}


def measure_micrograph_locality(point: Any) -> dict[str, Any]:
    """Paper 003 Table 1: micrograph locality R_micro against subgraph locality R_sub.

    For each sampled root (the first ``roots`` of each minibatch of the first iterations):
    R_micro = share of its micrograph's vertices (its sampled tree) whose owner is the
    root's owner; R_sub = share of the whole minibatch's vertices with the root's owner.
    Both averaged over roots. Owners are the run's partition (one part per server).
    """
    import numpy as np

    from workbench.strategies.execution.micrographs import cut_subtree

    prepared = _prepare(point)
    owner = prepared.inputs.partition.owner
    per_minibatch = int(point.options.get("roots", 32))
    micro, sub = [], []
    for row in prepared.inputs.epoch[:2]:
        for mb in row:
            every = mb.input_nodes
            for k in range(min(per_minibatch, mb.seeds.shape[0])):
                home = owner[mb.seeds[k]]
                _, vertices, _ = cut_subtree(mb, np.array([k]))
                micro.append(float((owner[vertices] == home).mean()))
                sub.append(float((owner[every] == home).mean()))
    return {"roots": len(micro), "r_micro": float(np.mean(micro)), "r_sub": float(np.mean(sub))}


def measure_fidelity(point: Any) -> dict[str, Any]:
    """``gnnwb fidelity``'s experiment (:func:`studies.fidelity_experiment.fidelity`): the grid run for real
    on this machine's CPU worker processes, calibration on one half, the simulator scored on the other.

    ``point.config["fidelity"]``: the experiment's settings (:class:`~studies.fidelity_experiment.FidelityOptions`
    without ``out``). Its folder is ``$GNNWB_CACHE/fidelity/<point key>`` (else under
    ``~/.cache/gnnwb``): an interrupted point, run again, keeps the real runs it finished. Returns the
    summary and every row of the held-out table, so the analysis needs nothing but the stored result.
    """
    import multiprocessing

    import pandas as pd

    from studies.fidelity_experiment import FidelityOptions, fidelity
    from workbench.cache_root import cache_root
    from workbench.errors import WorkbenchError

    if multiprocessing.current_process().daemon:
        raise WorkbenchError(
            f"study {point.study!r} starts real worker processes and times them: run it on this machine, "
            "one point at a time (without --scheduler)"
        )
    settings = dict(point.config["fidelity"])
    settings["workers"] = tuple(settings["workers"])
    out = cache_root() / "fidelity" / point.key
    summary = fidelity(FidelityOptions(out, **settings))
    table = pd.read_csv(out / "table.csv").to_dict("records")
    return {
        "epoch_median_abs_error": summary["epoch_median_abs_error"],
        "epoch_worst_abs_error": summary["epoch_worst_abs_error"],
        "epoch_mean_error": summary["epoch_mean_error"],
        "epoch_median_spread": summary["epoch_median_spread"],
        "configurations": summary["configurations"],
        "summary": summary,
        "table": table,
        "folder": str(out),
    }


# ---- bulk-sampling: the first sampling step of a simulated pipeline -----------------------------
STEP = "b0."  # the first bulk sampling step's task ids (bulk_pipeline names them b{step}.)
COMM_KINDS = ("transfer", "collective")


def measure_bulk_sampling_step(point: Any) -> dict[str, Any]:
    """``sim`` plus the first bulk sampling step's figures (:func:`sampling_step_figures`;
    paper 004's study, ``studies.study_bulk_sampling``) and the graph's size (for the paper's
    cost model beside them)."""
    from sim import simulate
    from sim.calibrate import prepared_cost_model
    from workbench.run import results_row

    prepared = _prepare(point)
    plan = prepared.plan()
    trace = simulate(plan, prepared.cluster, prepared_cost_model(prepared)).trace
    row = results_row(prepared, trace)
    row.update(sampling_step_figures(plan, trace, prepared.inputs.num_workers))
    row["vertices"] = int(prepared.inputs.graph.num_nodes)
    row["edges"] = int(prepared.inputs.graph.num_edges)
    return row


# The terms of the sampling step's critical path: communication by what it carries, then compute.
PATH_TERMS = {"indices": "request", "adjacency": "rows", "probabilities": "allreduce"}
TERMS = (*PATH_TERMS.values(), "compute")


def critical_path(plan: Plan, trace: pd.DataFrame, prefix: str = STEP) -> pd.DataFrame:
    """The critical path of the tasks whose ids start with ``prefix``, from the first to the last.

    Walked back from the last task to finish, at each task to the dependency that finished last.
    One row per task on it, in order: ``task``, ``term`` (:data:`PATH_TERMS`: ``request``, ``rows``,
    ``allreduce``, ``other`` for communication carrying something else, or ``compute``), ``seconds`` (its duration) and ``queued`` (``start - ready``:
    the time it waited, inputs ready, for its engine, e.g. a row reply behind its owner's other
    replies on the owner's copy engine). Durations plus queues sum to the step's time less the
    first task's wait for the step to begin.
    """
    import pandas as pd

    rows = trace[trace["task"].str.startswith(prefix)]
    span = rows.groupby("task").agg(ready=("ready", "min"), start=("start", "min"), end=("end", "max"))
    tasks = {t.id: t for t in plan.tasks if t.id in span.index}
    path = []
    current: str | None = str(span["end"].idxmax())
    while current is not None:
        task = tasks[current]
        start, end = float(span.at[current, "start"]), float(span.at[current, "end"])
        term = PATH_TERMS.get(task.carries, "other") if task.kind in COMM_KINDS else "compute"
        path.append((current, term, end - start, max(start - float(span.at[current, "ready"]), 0.0)))
        deps = [d for d in task.deps if d in tasks]
        current = max(deps, key=lambda d: float(span.at[d, "end"])) if deps else None
    return pd.DataFrame(path[::-1], columns=["task", "term", "seconds", "queued"])


def sampling_step_figures(plan: Plan, trace: pd.DataFrame, workers: int) -> dict[str, float]:
    """The first sampling step's time, its critical path split into communication and compute,
    and the bytes each process sends, by what they carry.

    The critical path is :func:`critical_path`'s; its communication time (``critical_comm_ms``)
    is the summed duration of the transfers and collectives on it (paper 004, section 5.2.1
    counts the P/c^2 steps of the outer loop and the all-reduce along this path). Time on the
    path that no task covers (``critical_wait_ms``) is a task waiting for an engine or a link
    held by work off the path; ``critical_comm_queued_ms`` adds to the communication the time
    the path's transfers waited for their copy engine (held by other transfers: a step's owner
    sends its rows to one process after another). Per term (``path_<term>_ms`` and
    ``path_<term>_queued_ms``; terms of :data:`TERMS`) the durations and queues split.
    """
    import pandas as pd

    rows = trace[trace["task"].str.startswith(STEP)]
    span = rows.groupby("task").agg(start=("start", "min"), end=("end", "max"), sent=("bytes", "sum"))
    tasks = {t.id: t for t in plan.tasks if t.id in span.index}
    path = critical_path(plan, trace)
    comm = path[path["term"] != "compute"]
    seed = comm["task"].str.startswith(STEP + "l0.")  # the layer at the seeds, section 5.2.1's
    step_s = float(span["end"].max() - span["start"].min())
    carries = pd.Series({tid: t.carries for tid, t in tasks.items() if t.kind in COMM_KINDS}, dtype=object)
    sent = span.loc[carries.index, "sent"].groupby(carries).sum() if len(carries) else pd.Series(dtype=float)
    per_process = {
        kind: float(sent.get(kind, 0)) / workers for kind in ("indices", "adjacency", "probabilities")
    }
    comm_s, compute_s = float(comm["seconds"].sum()), float(path["seconds"].sum() - comm["seconds"].sum())
    figures = {
        "step_ms": 1e3 * step_s,
        "critical_comm_ms": 1e3 * comm_s,
        "critical_comm_seed_layer_ms": 1e3 * float(comm["seconds"][seed].sum()),
        "critical_comm_queued_ms": 1e3 * float(comm["seconds"].sum() + comm["queued"].sum()),
        "critical_comm_queued_seed_layer_ms": 1e3 * float((comm["seconds"] + comm["queued"])[seed].sum()),
        "critical_compute_ms": 1e3 * compute_s,
        "critical_wait_ms": 1e3 * max(step_s - comm_s - compute_s, 0.0),
        "MB_per_process": sum(per_process.values()) / 1e6,
        "request_MB_per_process": per_process["indices"] / 1e6,
        "rows_MB_per_process": per_process["adjacency"] / 1e6,
        "allreduce_MB_per_process": per_process["probabilities"] / 1e6,
    }
    for term in TERMS:
        on = path[path["term"] == term]
        figures[f"path_{term}_ms"] = 1e3 * float(on["seconds"].sum())
        figures[f"path_{term}_queued_ms"] = 1e3 * float(on["queued"].sum())
    return figures


# ---- published: a paper's testbed fitted to its published figures ------------------------------
PUBLISHED_FIGURES = Path(__file__).resolve().parent / "published"


def measure_published_fit(point: Any) -> dict[str, Any]:
    """The fit of one paper's figures file (or its evaluation where nothing is fitted), as plain
    data (``studies.study_published``)."""
    from sim.calibrate.published import load_published
    from sim.calibrate.published_fit import fit_published, published_profile

    pub = load_published(PUBLISHED_FIGURES / point.config["figures"], require_fit=False)
    row: dict[str, Any] = {
        "title": pub.title,
        "hardware": pub.hardware,
        "parameters": [p.name for p in pub.parameters],
        "notes": [],
        "rows": [_unused_row(f) for f in pub.figures if not f.use],
    }
    if not any(f.use for f in pub.figures):
        row.update(status="not fitted: no figure the workbench can compute", fitted=False)
        return row
    result = fit_published(pub)
    fitted = bool(pub.parameters) and bool(pub.fitted())
    row.update(
        {
            "status": result.status,
            "fitted": fitted,
            "start": result.start,
            "values": result.values,
            "evaluations": result.evaluations,
            "seconds": result.seconds,
            "sum_squared_residuals": result.cost,
            "notes": result.notes,
            "rows": result.rows,
            "profile": published_profile(result, f"gnnwb study run {point.study}").to_toml()
            if fitted
            else "",
        }
    )
    return row


def _unused_row(f: Any) -> dict[str, Any]:
    return {"id": f.id, "role": "not used", "source": f.source, "paper": f.value_text(), "reason": f.reason}


# How each measure obtains its figures, as a page tells its reader (studies/pages.py).
MEASURE_SOURCES: dict[str, str] = {
    "sim": "simulated",
    "bulk-sampling-step": "simulated",
    "roc-inference": "simulated (ROC's online training loop, then inference on unseen graphs)",
    "published-fit": "simulated on a testbed fitted to a paper's published figures",
    "micrograph-locality": "counted on the sampled minibatches (no timing)",
    "bulk-sample-time": "measured: the sampler's wall-clock time on this machine",
    "preprocess": "measured: the partitioner's or placement's wall-clock time on this machine",
    "fidelity": "measured: real runs on this machine's CPU worker processes, beside their simulation",
}

MEASURES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "published-fit": measure_published_fit,
    "bulk-sampling-step": measure_bulk_sampling_step,
    "fidelity": measure_fidelity,
    "micrograph-locality": measure_micrograph_locality,
    "bulk-sample-time": measure_bulk_sample_time,
    "sim": measure_sim,
    "preprocess": measure_preprocess,
    "roc-inference": measure_roc_inference,
}
