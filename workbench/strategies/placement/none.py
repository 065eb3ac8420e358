"""``none``: no GPU cache; every feature is read from host memory.

The baseline of every placement study (Song & Jiang, paper 002, "Motivation":
loading features from host memory is the bottleneck the placements attack).
"""

from __future__ import annotations

import numpy as np

from workbench.registry import PLACEMENTS
from workbench.strategies.placement.base import Placement, PlacementRequest, PlacementResult


@PLACEMENTS.register("none")
class HostOnlyPlacement(Placement):
    """Host memory only: no GPU holds any vertex (paper 002's uncached baseline)."""

    def place(self, request: PlacementRequest) -> PlacementResult:
        return PlacementResult(
            gpu_vertices=[np.empty(0, dtype=np.int64) for _ in range(request.num_gpus)],
            home=np.full(request.num_nodes, -1, dtype=np.int64),
        )
