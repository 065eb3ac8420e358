"""``streaming``: no reuse. Every operator loads all its inputs and writes back all its outputs.

NeuGraph's stream processing as ROC's section 7.7 compares against it ("streams input
data along with computation (i.e., no caching optimization)"), at operator
granularity: nothing stays on the GPU from one operator to the next, so the GPU holds
one operator's inputs and outputs at a time, and the load volume is the sum of every
operator's inputs. It is the upper end of the three policies: ``lru`` never loads more
(it loads only what it does not find cached) and ``dpmm`` never more than ``lru``.
"""

from __future__ import annotations

from workbench.registry import MEMORY_POLICIES
from workbench.strategies.memory.base import (
    MemoryPolicy,
    MemorySchedule,
    OperatorGraph,
    assemble_schedule,
    check_capacity,
)


@MEMORY_POLICIES.register("streaming")
class StreamingPolicy(MemoryPolicy):
    """No reuse (NeuGraph style): every input loaded, every output written back, nothing cached."""

    def schedule(self, graph: OperatorGraph, capacity_bytes: int) -> MemorySchedule:
        cap = check_capacity(graph, capacity_bytes, "streaming")
        n = len(graph.operators)
        return assemble_schedule(graph, cap, range(n), [0] * n, "streaming")
