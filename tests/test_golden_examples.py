"""Every example configuration has golden figures, and every real scheme a golden plan.

The figures of each example configuration (its plan's digest, the simulated epoch time and
the bytes moved per phase) and the digest of the plan each real executor runs (the
configuration as executed, :func:`realrun.launcher.as_executed`) are saved in
``tests/golden/example_configs.json``. A change that alters one fails here and must update
the file knowingly: ``GNNWB_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_examples.py``
rewrites it (commit the diff with the reason).

The plans were saved before the schemes moved to one schedule object each (issue 24), so
this is also the test that the move changed no plan byte.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

from realrun.launcher import as_executed
from sim import simulate
from workbench.config import load_config
from workbench.registry import EXECUTION_SCHEMES
from workbench.run import prepare_run, strategy_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "examples" / "configs").glob("*.toml"))
GOLDEN = ROOT / "tests" / "golden" / "example_configs.json"
UPDATE = os.environ.get("GNNWB_UPDATE_GOLDEN") == "1"
# The configurations whose as-executed plan each real scheme is held to.
REAL = {
    "bulk-pipeline": "bulk-pipeline-sage-products-perlmutter",
    "model-centric": "sage-products-hopgnn",
    "naive-feature-centric": "naive-feature-centric-gcn-sbm-real",
    "neugraph-stream": "neugraph-gcn-sbm-real",
    "hopgnn": "hopgnn-sbm-real",
    "p3": "p3-sage-products-hopgnn",
    "roc-fullgraph": "roc-sbm-real",
}


def plan_digest(plan) -> str:
    text = json.dumps(plan.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def figures(config) -> dict[str, object]:
    prepared = prepare_run(config)
    plan = prepared.plan()
    result = simulate(plan, prepared.cluster)
    moved: dict[str, int] = defaultdict(int)
    for task in plan.tasks:
        if task.kind != "compute":
            moved[task.phase] += int(task.bytes)
    return {
        "plan_sha256": plan_digest(plan),
        "tasks": len(plan.tasks),
        "epoch_seconds": float(result.makespan),
        "bytes_per_phase": dict(sorted(moved.items())),
    }


def golden() -> dict[str, dict[str, object]]:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


def check(key: str, got: dict[str, object]) -> None:
    saved = golden()
    if UPDATE:
        saved[key] = got
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(dict(sorted(saved.items())), indent=1) + "\n")
        return
    assert key in saved, f"no golden figures for {key}: run with GNNWB_UPDATE_GOLDEN=1 and commit them"
    want = saved[key]
    assert got["bytes_per_phase"] == want["bytes_per_phase"]
    assert got["tasks"] == want["tasks"]
    # The simulator is deterministic; the tolerance only absorbs float summation order.
    assert got["epoch_seconds"] == pytest.approx(want["epoch_seconds"], rel=1e-9)
    assert got["plan_sha256"] == want["plan_sha256"], f"{key}: the plan changed"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_example_configuration_figures(path: Path) -> None:
    check(f"config:{path.stem}", figures(load_config(path)))


def test_every_real_executor_has_a_golden_plan() -> None:
    from realrun.schemes import REAL_EXECUTORS

    assert set(REAL) == set(REAL_EXECUTORS.names()), "name an example configuration for each real scheme"


@pytest.mark.parametrize("scheme", sorted(REAL))
def test_real_scheme_executed_plan(scheme: str) -> None:
    config = load_config(ROOT / "examples" / "configs" / f"{REAL[scheme]}.toml")
    execution = strategy_config(config, "execution")
    assert execution is not None and execution.name == scheme
    executed = as_executed(config, execution, dict(EXECUTION_SCHEMES.get(scheme).real_run_params or {}))
    check(f"executed:{scheme}", figures(executed))
