"""Feature placement strategies: which GPU holds which vertex features (one file per strategy).

Registered names (``PLACEMENTS``): none, degree, presample, partitioned, song-jiang, fifo.
The interface is :mod:`.base`; access probabilities come from :mod:`.probability`.
"""

from workbench.strategies.placement.base import (
    AccessModel,
    CacheStats,
    DynamicPlacement,
    HitRates,
    Placement,
    PlacementRequest,
    PlacementResult,
    capacity_in_vertices,
)

__all__ = [
    "AccessModel",
    "CacheStats",
    "DynamicPlacement",
    "HitRates",
    "Placement",
    "PlacementRequest",
    "PlacementResult",
    "capacity_in_vertices",
]
