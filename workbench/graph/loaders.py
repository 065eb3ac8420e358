"""Loaders for graphs on disk and graphs installed packages ship (filled in below)."""

from __future__ import annotations

from pathlib import Path

from workbench.errors import GraphFormatError
from workbench.graph import io
from workbench.graph.csr import CSRGraph

REAL_GRAPHS: dict[str, str] = {}


def load_real_graph(name: str, seed: int = 0) -> CSRGraph:
    raise GraphFormatError(f"{name}: not available")


def load_graph_file(path: Path) -> CSRGraph:
    return io.load_graph(path)
