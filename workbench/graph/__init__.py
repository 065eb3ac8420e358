"""Graphs: the CSR type, generators, presets, the disk cache and loaders."""

from workbench.graph.csr import CSRGraph
from workbench.graph.datasets import DATASETS, load_dataset
from workbench.graph.generators import erdos_renyi, rmat, sbm
from workbench.graph.signal import attach_node_data

__all__ = ["CSRGraph", "DATASETS", "attach_node_data", "erdos_renyi", "load_dataset", "rmat", "sbm"]
