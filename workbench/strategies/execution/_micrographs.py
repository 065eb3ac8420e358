"""The micrographs' names other modules import from their former private home: the module is now
the public :mod:`workbench.strategies.execution.micrographs`."""

from workbench.strategies.execution.micrographs import (
    MERGE_TO,
    MERGE_TO_HELP,
    MINIBATCHES,
    MINIBATCHES_HELP,
    Micrographs,
    Tree,
    adaptive_merge_count,
    check_minibatches,
    cut_subtree,
    cut_trees,
    distinct,
    merge_time_steps,
    micrographs,
    micrographs_of,
    model_roots,
)

__all__ = [
    "MERGE_TO",
    "MERGE_TO_HELP",
    "MINIBATCHES",
    "MINIBATCHES_HELP",
    "Micrographs",
    "Tree",
    "adaptive_merge_count",
    "check_minibatches",
    "cut_subtree",
    "cut_trees",
    "distinct",
    "merge_time_steps",
    "micrographs",
    "micrographs_of",
    "model_roots",
]
