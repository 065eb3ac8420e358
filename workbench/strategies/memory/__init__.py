"""GPU memory policies: which tensors of a training step stay on the GPU (one file per policy).

Registered names (``MEMORY_POLICIES``): dpmm (ROC's dynamic programming), lru, streaming.
The interface and the schedule are in :mod:`.base`; :mod:`.graphs` builds the operator
graph of a GNN training step; :mod:`.emit` turns a schedule into plan tasks;
:mod:`.interval_program` is the exact optimum of a chain that dpmm is checked against.
"""

from workbench.strategies.memory.base import (
    MemoryPolicy,
    MemorySchedule,
    Operator,
    OperatorGraph,
    ScheduleStep,
    Tensor,
    check_capacity,
)
from workbench.strategies.memory.emit import schedule_to_plan
from workbench.strategies.memory.graphs import operator_graph

__all__ = [
    "MemoryPolicy",
    "MemorySchedule",
    "Operator",
    "OperatorGraph",
    "ScheduleStep",
    "Tensor",
    "check_capacity",
    "operator_graph",
    "schedule_to_plan",
]
