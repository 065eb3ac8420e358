"""What a streamed sub-chunk costs, and the order NeuGraph streams them in (paper 001, section 3.2).

* :class:`StreamItem`: one streamed sub-chunk, as the reordering sees it;
* :func:`edge_features` and :func:`vertex_features`: the cost features of an edge
  sub-chunk's Scatter-ApplyEdge-Gather and of a chunk's ApplyVertex;
* :class:`SubChunkSchedule`: the order to stream one column's (row's) items in, natural or
  reordered by swaps on their profiled times (NG-swap), chosen once and reused.

No plan building here: ``neugraph_stream`` and its passes call these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.hardware.spec import GPUSpec
from workbench.model import BACKWARD_FLOP_RATIO, DTYPE_BYTES, INDEX_BYTES, LayerSpec
from workbench.strategies.execution._neugraph import reorder_by_swaps

# Estimated profile: what sparse GNN kernels achieve of a GPU's peak (the simulator's default
# cost model assumes the same; restated because strategies do not import the simulator).
ACHIEVED_FLOPS = 0.5
ACHIEVED_BANDWIDTH = 0.7
KERNEL_LAUNCH_S = 5e-6


@dataclass(frozen=True)
class StreamItem:
    """One streamed sub-chunk of one column (row in backward), as the reordering sees it.

    Tuples have one entry per GPU of the chain (one entry without a chain).
    """

    layer: int
    backward: bool
    inner_chunk: int
    sub: int
    edges: tuple[int, ...]
    load_bytes: tuple[int, ...]  # bytes copied into each GPU (vertex rows, edges, partials)
    copies: int  # copies into the busiest GPU
    select_bytes: int  # bytes the CPU filter copies (0: not filtered)
    features: tuple[dict[str, float], ...]  # each GPU's compute cost features ({} if it has no edges)


Profile = Callable[[StreamItem], tuple[float, float]]


def edge_features(spec: LayerSpec, rows: int, edges: int, backward: bool) -> dict[str, float]:
    """Scatter-ApplyEdge-Gather over ``edges`` edges reading ``rows`` streamed vertex rows.

    FLOPs: the layer's per-edge part (``forward_flops`` with no vertices); bytes: the rows
    read, and per edge its index and the row it gathers."""
    width = spec.in_dim
    flops = spec.forward_flops(0, 0, edges)
    moved = rows * width * DTYPE_BYTES + edges * (INDEX_BYTES + width * DTYPE_BYTES)
    scale = BACKWARD_FLOP_RATIO if backward else 1.0
    return {
        "vertices": 0.0,
        "src_vertices": float(rows),
        "edges": float(edges),
        "in_dim": float(width),
        "out_dim": float(width),
        "flops": flops * scale,
        "bytes": moved * scale,
    }


def vertex_features(spec: LayerSpec, vertices: int, backward: bool) -> dict[str, float]:
    """ApplyVertex on a chunk of ``vertices``: the layer's per-vertex part (with NeuGraph's
    dataflow optimisation, source-only transforms run here too), its reads and writes and
    the weights."""
    flops = spec.forward_flops(vertices, vertices, 0)
    moved = vertices * (spec.in_dim + spec.output_width) * DTYPE_BYTES + spec.param_count() * DTYPE_BYTES
    scale = BACKWARD_FLOP_RATIO if backward else 1.0
    return {
        "vertices": float(vertices),
        "src_vertices": float(vertices),
        "edges": 0.0,
        "in_dim": float(spec.in_dim),
        "out_dim": float(spec.output_width),
        "flops": flops * scale,
        "bytes": moved * scale,
    }


@dataclass
class SubChunkSchedule:
    """The order each column (row) streams its sub-chunks in.

    With ``reorder`` on, a column's order is searched by swaps (``reorder_by_swaps``) on the
    items' profiled ``(copy, compute)`` seconds: ``profile(item)`` when given, else an
    estimate from the item's bytes over ``t_trans`` (its filter's over ``t_copy``) and its
    FLOPs and bytes over ``gpu``'s peak. The order is searched once per column and reused
    every iteration, as NeuGraph reuses its refined plan.
    """

    reorder: bool  # the scheme's reorder and pipeline both on (one buffer overlaps nothing)
    window: int  # streaming buffers per GPU
    rounds: int  # at most this many swaps per column
    profile: Profile | None  # measured times; None: estimate them
    t_trans: float  # host-to-GPU bytes/s
    t_copy: float  # the CPU filter's copy bytes/s
    copy_latency: float  # seconds a copy pays before its first byte (the path's latency)
    gpu: GPUSpec  # the GPU the estimates assume
    chosen: dict[tuple[Any, ...], list[int]] = field(default_factory=dict)  # column key -> its order

    def order(self, key: tuple[Any, ...], items: list[StreamItem]) -> list[int]:
        """The order to stream ``items`` in, as indices into them (``key`` names the column)."""
        if not self.reorder or len(items) < 2:
            return list(range(len(items)))
        if key not in self.chosen:
            times = [self.profiled(item) for item in items]
            self.chosen[key] = reorder_by_swaps(
                [t[0] for t in times],
                [t[1] for t in times],
                self.window,
                self.rounds,
                [item.inner_chunk for item in items],
            )
        return self.chosen[key]

    def profiled(self, item: StreamItem) -> tuple[float, float]:
        """(copy seconds, compute seconds) of ``item`` on its busiest GPU."""
        if self.profile is not None:
            return self.profile(item)
        copy = (
            item.copies * self.copy_latency
            + max(item.load_bytes) / self.t_trans
            + item.select_bytes / self.t_copy
        )
        return copy, max(self.estimate(f) for f in item.features)

    def estimate(self, features: dict[str, float]) -> float:
        """A compute's seconds from its cost features (0 for a GPU of the chain with no edges)."""
        if not features:
            return 0.0
        return (
            KERNEL_LAUNCH_S
            + features["flops"] / (ACHIEVED_FLOPS * self.gpu.flops)
            + features["bytes"] / (ACHIEVED_BANDWIDTH * self.gpu.memory_bandwidth)
        )
