"""Graphs: the CSR type, generators, presets, the disk cache and loaders."""

from workbench.graph.csr import CSRGraph
from workbench.graph.generators import erdos_renyi

__all__ = ["CSRGraph", "erdos_renyi"]
