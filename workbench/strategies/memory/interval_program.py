"""The exact minimum of host-to-GPU loads for a chain in its given order, by integer programming.

Not a policy: the reference that ``dpmm`` is checked and benchmarked against. For a
chain, each tensor's life splits into gaps between two uses with steps in between;
a gap is either kept on the GPU across those steps or loaded again, and each step's
memory bounds what is kept across it. One 0/1 variable per gap; maximize the bytes
kept. Host tensors (inputs, weights) are loaded at least once whatever is kept.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from workbench.strategies.memory.base import OperatorGraph, bits


def interval_program_loads(graph: OperatorGraph, capacity: int) -> int:
    """Bytes loaded from the host by the best keep-or-reload choice over ``graph``'s order."""
    n = len(graph.operators)
    uses: dict[int, list[int]] = {}
    for k in range(n):
        for i in bits(graph.read_masks[k] | graph.write_masks[k]):
            uses.setdefault(i, []).append(k)
    host = graph.mask_of(sorted(graph.host_tensors))
    unavoidable = sum(graph.sizes[i] for i in uses if host >> i & 1)
    gaps = [(i, a, b) for i, u in uses.items() for a, b in zip(u, u[1:], strict=False) if b > a + 1]
    if not gaps:
        return unavoidable
    size = np.array([graph.sizes[i] for i, _, _ in gaps], dtype=float)
    across = np.array([[a < k < b for _, a, b in gaps] for k in range(n)], dtype=float) * size
    room = np.array([capacity - graph.working_set_bytes(k) for k in range(n)], dtype=float)
    mib = 2.0**20  # HiGHS prefers numbers near one
    result = milp(
        -size / mib,
        constraints=LinearConstraint(across / mib, -np.inf, room / mib),
        integrality=np.ones(len(gaps)),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0},
    )
    keep = np.round(result.x)
    # Rounding a solver's near-integers must not break a step's memory bound.
    assert (across @ keep <= room).all()
    return unavoidable + int(size @ (1 - keep))
