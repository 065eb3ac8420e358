"""``random``: every vertex gets a part at random; the locality-free baseline.

Paper 002 (Song & Jiang, "Evaluation", baselines) compares against "random
partitioning"; P3 and HopGNN's P3 baseline (paper 003, section 1) use random hash
partitioning. Three ways, chosen by ``method``:

- ``deal`` (default): a random permutation of the vertices dealt round robin, so part
  sizes differ by at most one (``owner[perm[i]] = i mod k``);
- ``uniform``: an independent uniform draw per vertex (sizes vary binomially);
- ``hash``: a fixed multiplicative hash of the vertex id (Knuth's 2654435761, taken
  mod ``2**32``, then mod ``k``); ignores ``rng``, as a hash partitioner would.
"""

from __future__ import annotations

import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS
from workbench.strategies.partition.base import Partitioner, PartitionResult, check_num_parts

METHODS = ("deal", "uniform", "hash")


@PARTITIONERS.register("random")
class RandomPartitioner(Partitioner):
    """Random owners: a shuffled round-robin deal (balanced), uniform draws, or a vertex-id hash."""

    def __init__(self, method: str = "deal") -> None:
        if method not in METHODS:
            raise ConfigError(f"partitioner 'random': method {method!r}; allowed: {', '.join(METHODS)}")
        self.method = method

    def partition(self, graph: CSRGraph, num_parts: int, rng: np.random.Generator) -> PartitionResult:
        k = check_num_parts(graph, num_parts, "random")
        n = graph.num_nodes
        if self.method == "deal":
            owner = np.empty(n, dtype=np.int64)
            owner[rng.permutation(n)] = np.arange(n, dtype=np.int64) % k
        elif self.method == "uniform":
            owner = rng.integers(0, k, size=n, dtype=np.int64)
        else:
            ids = np.arange(n, dtype=np.uint64)
            owner = ((ids * np.uint64(2654435761)) % np.uint64(2**32) % np.uint64(k)).astype(np.int64)
        return PartitionResult(graph, owner, k, strategy="random", details={"method": self.method})
