"""Imports run one way: command line -> studies -> sim and realrun -> strategies -> core.

Importing every module of ``workbench`` (the core vocabulary, the strategies and the
command line, whose commands import the executors only when they run) must load no
executor, no study and no DGL. Checked in a fresh interpreter, so that modules other
tests imported do not hide an import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WALK = """
import importlib, json, pkgutil, sys
import workbench
names = sorted(m.name for m in pkgutil.walk_packages(workbench.__path__, "workbench."))
for name in names:
    importlib.import_module(name)
loaded = sorted(
    m for m in sys.modules
    if m.split(".")[0] in ("sim", "realrun", "studies", "dgl")
)
print(json.dumps({"modules": names, "loaded": loaded}))
"""


def test_importing_workbench_loads_no_executor_study_or_dgl() -> None:
    r = subprocess.run([sys.executable, "-c", WALK], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout.strip().splitlines()[-1])
    # The walk did reach the modules that matter (the graph loaders, the DGL loader, the strategies, the CLI).
    assert {
        "workbench.graph.loaders",
        "workbench.dgl_loader",
        "workbench.strategies.sampling.bulk_matrix",
        "workbench.cli.main",
    } <= set(found["modules"])
    assert found["loaded"] == []
