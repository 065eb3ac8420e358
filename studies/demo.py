"""The quick demo that ``gnnwb run`` runs until the paper studies exist.

One small products-like graph, GraphSAGE with fanouts [15, 10, 5], four workers;
data-parallel minibatch training simulated on two clusters (HopGNN's four servers on
10 Gb/s Ethernet, and one Perlmutter-like node with NVLink), each with and without a
degree-ordered GPU feature cache (PaGraph). Writes, under ``reports/demo/``: one trace
per configuration (Parquet), a Chrome timeline of one of them, a result table (CSV),
a figure (PNG) and a page (HTML).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from studies.report import ReportPage, register_page, update_index


@dataclass(frozen=True)
class DemoSettings:
    graph: str = "products-like"
    scale: float = 0.01
    hardware: tuple[str, ...] = ("hopgnn-4xa100-10gbe", "perlmutter-4xa100-slingshot")
    placements: tuple[str, ...] = ("none", "degree")
    partitioner: str = "metis"
    workers: int = 4
    fanouts: tuple[int, ...] = (15, 10, 5)
    batch_size: int = 256
    iterations: int = 4
    cache_fraction: float = 0.1
    seed: int = 0


def run_demo(out_dir: Path, settings: DemoSettings = DemoSettings(), progress: bool = True) -> pd.DataFrame:
    from sim import simulate
    from workbench.config import config_from_dict
    from workbench.graph.datasets import load_dataset
    from workbench.run import prepare_run, results_row
    from workbench.timeline import write_chrome_trace
    from workbench.trace import write_trace

    def say(msg: str) -> None:
        if progress:
            print(f"[demo] {msg}", flush=True)

    t0 = time.perf_counter()
    graph = load_dataset(settings.graph, scale=settings.scale, seed=settings.seed)
    say(f"graph {graph.name}: {graph.num_nodes:,} vertices, {graph.num_edges:,} edges")
    rows = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for hw_name in settings.hardware:
        for placement in settings.placements:
            run_id = f"{hw_name}.{placement}"
            # One run configuration per point, through the same spine as `gnnwb sim CONFIG.toml`;
            # the sampled epoch is cached, so every point after the first reuses it.
            config = config_from_dict(
                {
                    "name": run_id,
                    "seed": settings.seed,
                    "graph": {"name": settings.graph, "scale": settings.scale, "seed": settings.seed},
                    "hardware": {"name": hw_name},
                    "model": {"name": "sage", "hidden": 256, "num_layers": len(settings.fanouts)},
                    "training": {
                        "batch_size": settings.batch_size,
                        "iterations": settings.iterations,
                        "workers": settings.workers,
                    },
                    "cache": {"capacity": f"{settings.cache_fraction:.0%}"},
                    "partition": {"name": settings.partitioner},
                    "placement": {"name": placement},
                    "sampling": {"name": "neighbor", "fanouts": list(settings.fanouts)},
                    "execution": {"name": "model-centric"},
                },
                f"demo {run_id}",
            )
            prepared = prepare_run(config, graph=graph)
            plan = prepared.plan()
            result = simulate(plan, prepared.cluster, run_id=run_id, seed=settings.seed)
            write_trace(result.trace, out_dir / "traces" / f"{run_id}.parquet")
            row = results_row(prepared, result.trace)
            iterations = prepared.inputs.num_iterations
            summary_row = {
                "hardware": hw_name,
                "placement": placement,
                "makespan_s": result.makespan,
                "per_iteration_ms": 1e3 * result.makespan / iterations,
                "feature_bytes_moved": row["h2d_bytes"] + row["gather_remote_bytes"] + row["d2d_bytes"],
            }
            for key, value in row.items():
                if key.endswith("_busy_s") and value:
                    summary_row[key] = value
            rows.append(summary_row)
            say(f"{run_id}: {len(plan.tasks)} tasks, makespan {result.makespan * 1e3:.2f} ms")
            if hw_name == settings.hardware[0] and placement == settings.placements[-1]:
                write_chrome_trace(result.trace, out_dir / "timeline.json")
    table = pd.DataFrame(rows).fillna(0.0)
    table.to_csv(out_dir / "results.csv", index=False)
    _plot(table, out_dir / "phases.png")
    page = ReportPage(
        "Quick demo: data-parallel GraphSAGE, simulated",
        f"{graph.name} ({graph.num_nodes:,} vertices, {graph.num_edges:,} edges), {settings.workers} workers, "
        f"fanouts {list(settings.fanouts)}, batch {settings.batch_size}, {settings.iterations} iterations, "
        "the registered model-centric scheme; "
        f"GPU cache of {settings.cache_fraction:.0%} of the vertices where a placement caches.",
    )
    page.add("Per-iteration time by cluster and placement", image="phases.png", table=table)
    page.add(
        "Files", "traces/*.parquet (one per configuration), results.csv, timeline.json (open in Perfetto)."
    )
    page.write(out_dir)
    register_page(out_dir, page.title, page.summary)
    update_index(out_dir.parent)
    say(f"wrote {out_dir} in {time.perf_counter() - t0:.1f} s")
    return table


def _plot(table: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = [c for c in table.columns if c.endswith("_busy_s")]
    # Preset names are long; break them at their first dash so neighbouring labels do not collide.
    labels = [
        f"{h.replace('-', chr(10), 1)}\n[{p}]"
        for h, p in zip(table["hardware"], table["placement"], strict=True)
    ]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottom = np.zeros(len(table))
    for col in phases:
        vals = table[col].to_numpy() * 1e3
        ax.bar(labels, vals, bottom=bottom, label=col.removesuffix("_busy_s"))
        bottom += vals
    ax.plot(labels, table["makespan_s"] * 1e3, "k*", markersize=12, label="makespan")
    ax.set_ylabel("milliseconds (busy time summed over workers)")
    ax.set_title("Where the time goes")
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
