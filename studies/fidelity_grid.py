"""The fidelity grid of every real scheme (``gnnwb fidelity --grid schemes``, issue 27 item 2).

Factors: every configuration :func:`studies.validate.cases` gives (each scheme that runs for real,
roc-fullgraph under each memory policy), three graph families (SBM, R-MAT and Erdos-Renyi, of
:data:`NODES` vertices), two feature widths and the worker counts asked for. Held out of
calibration: a checkerboard over the levels' indices (their sum odd), so every level of every
factor is in both halves (tests/studies check it); where a scheme's workers must share one server
(NeuGraph) and there are several, the run is modelled on the one-machine cluster and held out, as
validate does, and its one-worker runs on every family and width are fitted in their place (its
kernels are fitted no other way). A **second held-out set** varies values no fitted configuration
has: a graph of twice the vertices and a width between the two, each configuration once, on the
first worker count.

Everything else (running, repeats kept and not rerun, calibration on the first half's warm
epochs, scoring) is :mod:`studies.fidelity_experiment`'s; the second set is scored into
``second/`` beside the first's files.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NODES = 6000
FAMILIES = {
    "sbm": "sbm:n={n},blocks=8,deg=10,feat={w}",
    "rmat": "rmat:n={n},m={m},feat={w}",
    "er": "er:n={n},deg=10,feat={w}",
}
WIDTHS = (32, 128)
SECOND = {"nodes": 2 * NODES, "width": 64}  # values no fitted configuration has


def graph_spec(family: str, nodes: int, width: int) -> str:
    return FAMILIES[family].format(n=nodes, m=10 * nodes, w=width)


@dataclass(frozen=True)
class SchemePoint:
    """One configuration of the grid: a validation case on a graph family, size and width."""

    case: Any  # studies.validate.Case
    family: str
    width: int
    workers: int
    held_out: bool
    nodes: int = NODES
    second: bool = False
    one_machine: bool = False  # modelled on the one-machine cluster (held out)

    @property
    def name(self) -> str:
        size = "" if self.nodes == NODES else f"-n{self.nodes}"
        return f"{self.case.name}-{self.family}{size}-w{self.width}-p{self.workers}"

    def info(self) -> dict[str, Any]:
        return {
            "scheme": self.case.name,
            "family": self.family,
            "nodes": self.nodes,
            "width": self.width,
            "workers": self.workers,
            "set": "second" if self.second else "held-out",
        }

    def config_text(self, hardware: Path) -> str:
        # A memory policy's arena grows with the largest operator: vertices x the wider of the
        # input width and the hidden width (32), relative to validate's graph (6000 x 64).
        scale = self.nodes / NODES * max(self.width, 64) / 64
        text = self.case.config(
            self.workers, hardware, graph_spec(self.family, self.nodes, self.width), scale
        )
        return text.replace(f'name = "validate-{self.case.name}-w{self.workers}"', f'name = "{self.name}"', 1)


def scheme_grid(workers: list[int], cases: list[Any] | None = None) -> list[SchemePoint]:
    """Every case x family x width x worker count, held out on a checkerboard (module docstring)."""
    from studies.validate import cases as validation_cases

    chosen = cases if cases is not None else validation_cases()
    points = []
    for (i, case), (j, family), (k, width), (m, w) in itertools.product(
        enumerate(chosen), enumerate(FAMILIES), enumerate(WIDTHS), enumerate(workers)
    ):
        shared = case.one_machine and w > 1
        points.append(
            SchemePoint(case, family, width, w, shared or bool((i + j + k + m) % 2), one_machine=shared)
        )
    # A case whose runs on several workers are all held out would never have its tasks fitted:
    # NeuGraph's chunk kernels (0.1-0.2 ms each) were charged the per-task intercept other schemes'
    # layers fit (0.9 ms). Its one-worker runs, a machine of their own, are fitted instead.
    for case, family, width in itertools.product(chosen, FAMILIES, WIDTHS):
        if case.one_machine and 1 not in workers:
            points.append(SchemePoint(case, family, width, 1, False))
    return points


def second_set(workers: list[int], cases: list[Any] | None = None) -> list[SchemePoint]:
    """Each case once on a size and width no fitted configuration has (families alternate)."""
    from studies.validate import cases as validation_cases

    chosen = cases if cases is not None else validation_cases()
    w = workers[0]
    families = list(FAMILIES)
    return [
        SchemePoint(
            case,
            families[i % len(families)],
            SECOND["width"],
            w,
            True,
            SECOND["nodes"],
            True,
            one_machine=case.one_machine and w > 1,
        )  # fmt: skip
        for i, case in enumerate(chosen)
    ]


def scheme_fidelity(opts: Any) -> dict[str, Any]:
    """Run the grid and the second set for real, calibrate on the grid's first half, score its
    held-out half into ``opts.out`` and the second set into ``opts.out / "second"``; returns the
    held-out summary with the second set's under ``"second"``."""
    import dataclasses
    import json

    from studies import fidelity_experiment as fx
    from studies.validate import ONE_MACHINE

    opts.check()
    out = opts.out
    (out / "configs").mkdir(parents=True, exist_ok=True)
    hardware = out / "hardware.toml"
    hardware.write_text(fx.hardware_toml(max(opts.workers)))
    shared = out / ONE_MACHINE
    shared.write_text(fx.hardware_toml(max(opts.workers), one_machine=True))
    grid, second = scheme_grid(list(opts.workers)), second_set(list(opts.workers))

    def write(point: SchemePoint) -> Path:
        config = out / "configs" / f"{point.name}.toml"
        config.write_text(point.config_text(shared if point.one_machine else hardware))
        return config

    prepared, runs, sources = fx.run_and_collect(grid + second, opts, write)
    for point in second:  # scored from second/, where its configurations are not: prepared here
        if point.name not in prepared:
            prepared[point.name] = fx.prepare(out / "configs" / f"{point.name}.toml")
    summary = fx._score(opts, hardware, grid, prepared, runs, sources)
    (out / "second").mkdir(exist_ok=True)
    summary["second"] = fx._score(
        dataclasses.replace(opts, out=out / "second"), hardware, second, prepared, runs, sources
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return summary
