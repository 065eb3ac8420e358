"""The one place that imports DGL.

It lives in the core (``workbench``), not in an executor, because both the graph
loaders (:func:`workbench.graph.loaders.load_dgl_graph` reads ``dgl.save_graphs``
files) and the real executor need DGL, and imports run one way: executors import
the core, never the core an executor.

DGL 2.1.0 is the newest wheel on PyPI. Its core (graphs, sampling, ``dgl.nn``,
METIS) works on newer torch, but ``import dgl`` fails for two reasons that have
nothing to do with that core:

1. ``dgl.graphbolt`` loads a native library built only for torch 2.0-2.2 and
   imports ``torchdata.datapipes``, which torchdata 0.10+ removed. DGL imports
   graphbolt eagerly from ``dgl.distributed`` only to name two of its types.
   We register an empty stand-in module so the import succeeds; graphbolt
   itself is unusable, and anything that touches it raises a clear error.
2. ``dgl.utils`` falls back to ``setuptools.extern.packaging`` when the
   ``packaging`` distribution is missing; new setuptools no longer has
   ``setuptools.extern``. We alias it to ``packaging``.

Everything else in the project calls :func:`load_dgl` and never ``import dgl``.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from workbench.graph.csr import CSRGraph


class DGLUnavailableError(ImportError):
    """DGL could not be loaded even with the workarounds."""


class _GraphboltStandIn(types.ModuleType):
    """Stand-in for ``dgl.graphbolt``: importable, every attribute a dummy type."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def _unavailable(*_args: Any, **_kwargs: Any) -> Any:
            raise DGLUnavailableError(
                f"dgl.graphbolt.{name} is unavailable: graphbolt has no build for "
                "this torch (see workbench/dgl_loader.py)"
            )

        # A class, so ``isinstance(x, gb.FusedCSCSamplingGraph)`` is simply False.
        stand_in = type(name, (), {"__init__": _unavailable})
        setattr(self, name, stand_in)
        return stand_in


def _install_setuptools_extern_alias() -> None:
    try:
        importlib.import_module("setuptools.extern.packaging")
        return
    except ImportError:
        pass
    import packaging
    import packaging.version

    extern = types.ModuleType("setuptools.extern")
    extern.packaging = packaging  # type: ignore[attr-defined]
    sys.modules["setuptools.extern"] = extern
    sys.modules["setuptools.extern.packaging"] = packaging
    sys.modules["setuptools.extern.packaging.version"] = packaging.version


@lru_cache(maxsize=1)
def load_dgl() -> types.ModuleType:
    """Import DGL with the two workarounds above and return the module."""
    if "dgl" in sys.modules and "dgl.graphbolt" in sys.modules:
        return sys.modules["dgl"]
    # DGL otherwise writes a config file under ~/.dgl and may print backend notes.
    os.environ.setdefault("DGLBACKEND", "pytorch")
    _install_setuptools_extern_alias()
    sys.modules.setdefault("dgl.graphbolt", _GraphboltStandIn("dgl.graphbolt"))
    try:
        return importlib.import_module("dgl")
    except Exception as exc:  # noqa: BLE001 - report any import failure in one line
        raise DGLUnavailableError(f"cannot import DGL: {type(exc).__name__}: {exc}") from exc


def dgl_available() -> bool:
    try:
        load_dgl()
    except DGLUnavailableError:
        return False
    return True


def dgl_graph_from_csr(graph: CSRGraph) -> Any:
    """A DGL graph with the same edges as ``graph``, sharing its row offsets.

    Our CSR rows list in-neighbors, which is exactly DGL's CSC (indexed by
    destination), so no edge is reordered. DGL wants one id type for offsets and ids
    and the workbench's ids are int64 everywhere else, so int32 column ids are widened.
    """
    import torch

    dgl = load_dgl()
    return dgl.graph(
        (
            "csc",
            (
                torch.from_numpy(graph.indptr),
                torch.from_numpy(graph.indices.astype(np.int64, copy=False)),
                torch.empty(0, dtype=torch.int64),
            ),
        ),
        num_nodes=graph.num_nodes,
    )
