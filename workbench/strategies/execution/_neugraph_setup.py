"""What NeuGraph's chunk streaming fixes before it plans a task: the grid, the GPUs, the switches.

:func:`stream_setup` checks that the run is one ``neugraph-stream`` can plan (a ``chunk2d``
grid over the GPUs of one server, split evenly, owned as the grid says) and resolves the
scheme's switches into a :class:`StreamSetup`: sub-chunks per edge chunk, streaming
buffers, the chains of GPUs, the selective threshold and the sub-chunk schedule. Both
processing orders (``_neugraph_read``, ``_neugraph_partial``) read it; none writes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from workbench.errors import ConfigError
from workbench.model import ModelSpec
from workbench.strategies.execution._neugraph import GridStats, chain_groups, host_to_gpu_path
from workbench.strategies.execution._neugraph_profile import SubChunkSchedule
from workbench.strategies.execution.base import SchemeInputs

if TYPE_CHECKING:  # the scheme's module imports this one
    from workbench.strategies.execution.neugraph_stream import NeuGraphStreamScheme

WHERE = "execution scheme 'neugraph-stream'"
WINDOW = 2  # streaming buffers per GPU with the pipeline on (double buffering)


@dataclass(frozen=True)
class StreamSetup:
    """The chunk grid over the GPUs and the resolved switches (read-only while planning)."""

    model: ModelSpec
    workers: list[str]  # worker w drives GPU workers[w]
    host: str  # the one server's host memory, where every chunk lives
    bounds: np.ndarray  # P + 1 vertex boundaries of the chunks
    sizes: np.ndarray  # vertices per chunk
    owned: list[list[int]]  # owned[w]: the destination chunks GPU w owns, in order
    k: int  # sub-chunks per edge chunk (1 without the pipeline)
    window: int  # streaming buffers per GPU
    groups: list[list[int]]  # virtual GPUs: the chains (one GPU each without the chain switch)
    selective: bool
    threshold: float  # filter an edge chunk's vertex chunk when its theta is below this
    index_bytes: int  # bytes per vertex index in an edge chunk
    schedule: SubChunkSchedule
    # Each edge's (vertex chunk of its destination, source, destination), for the grid stats.
    edges_by_chunk: tuple[np.ndarray, np.ndarray, np.ndarray] = field(repr=False)
    _stats: dict[str, GridStats] = field(default_factory=dict, repr=False)

    @property
    def num_chunks(self) -> int:
        return self.bounds.size - 1

    @property
    def per_gpu(self) -> int:
        """Chunks each GPU owns."""
        return len(self.owned[0])

    def gpu(self, w: int) -> str:
        return self.workers[w]

    def stats(self, outer: str) -> GridStats:
        """``outer="dst"``: destination chunks outer, source vertices streamed (forward columns);
        ``"src"``: source chunks outer, destination vertices streamed (backward rows)."""
        if outer not in self._stats:
            chunk, src, dst = self.edges_by_chunk
            if outer == "dst":
                self._stats[outer] = GridStats(chunk[dst], src, self.bounds, self.k)
            else:
                self._stats[outer] = GridStats(chunk[src], dst, self.bounds, self.k)
        return self._stats[outer]

    def adjacency_bytes(self, edges: int, outer: int) -> int:
        """An edge (sub-)chunk in CSC (forward) / CSR (backward): an index per edge and
        ``n_outer + 1`` pointers over the outer chunk's vertices."""
        return self.index_bytes * (edges + int(self.sizes[outer]) + 1)

    def saved_bytes(self, layer: int, chunk: int) -> int:
        """What a chunk's ApplyVertex keeps for backward (its input accumulation and output:
        the next layer reads the output from the same host copy)."""
        n = int(self.sizes[chunk])
        return self.model.layers[layer].saved_for_backward_bytes(n, n, 0)


def checked_bounds(inputs: SchemeInputs) -> np.ndarray:
    """The chunk grid's vertex boundaries, after checking that the run streams it from one
    server and that its chunks split evenly over the GPUs as the partition's owners."""
    grid = inputs.partition.chunk_grid
    if grid is None:
        raise ConfigError(
            f"{WHERE} streams NeuGraph's 2D chunk grid, and partition {inputs.partition.strategy!r} has "
            'none: use [partition] name = "chunk2d"'
        )
    machines = sorted({int(m) for m in inputs.worker_machine})
    if len(machines) > 1:
        names = ", ".join(inputs.cluster.machines[m].name for m in machines)
        raise ConfigError(
            f"{WHERE} streams from one server's host memory (NeuGraph is single-server), but the workers "
            f"span machines {names}; set [training] workers to the GPUs of one machine"
        )
    bounds = np.asarray(grid.boundaries, dtype=np.int64)
    k_workers = len(inputs.workers)
    p = grid.num_chunks
    if p % k_workers:
        raise ConfigError(f"{WHERE}: {p} chunks do not split evenly over {k_workers} GPUs")
    chunk_owner = np.repeat(np.arange(p) // (p // k_workers), np.diff(bounds))
    if not np.array_equal(chunk_owner, inputs.partition.owner):
        raise ConfigError(f"{WHERE}: the partition's owners are not the chunk grid's (chunk // (P / GPUs))")
    return bounds


def stream_setup(scheme: NeuGraphStreamScheme, inputs: SchemeInputs) -> StreamSetup:
    """The setup of ``scheme`` on ``inputs`` (a :class:`ConfigError` when it cannot plan them)."""
    bounds = checked_bounds(inputs)
    k_workers = len(inputs.workers)
    p = bounds.size - 1
    per_gpu = p // k_workers
    window = WINDOW if scheme.pipeline else 1
    paths = [host_to_gpu_path(inputs.cluster, g) for g in inputs.workers]
    t_trans = scheme.transfer_throughput or min(width for width, _ in paths)
    t_copy = scheme.copy_throughput or inputs.cluster.machine_of(inputs.workers[0]).host_memory_bandwidth / 2
    schedule = SubChunkSchedule(
        reorder=scheme.reorder and scheme.pipeline,
        window=window,
        rounds=scheme.reorder_rounds,
        profile=scheme.profile,
        t_trans=t_trans,
        t_copy=t_copy,
        copy_latency=max(latency for _, latency in paths),
        gpu=inputs.cluster.gpu(inputs.workers[0]),  # the estimated profile's GPU
    )
    graph = inputs.graph
    vertex_chunk = np.repeat(np.arange(p, dtype=np.int64), np.diff(bounds))
    return StreamSetup(
        model=inputs.model,
        workers=inputs.workers,
        host=inputs.host_of_worker(0),
        bounds=bounds,
        sizes=np.diff(bounds),
        owned=[list(range(w * per_gpu, (w + 1) * per_gpu)) for w in range(k_workers)],
        k=scheme.sub_chunks if scheme.pipeline else 1,
        window=window,
        groups=chain_groups(inputs.cluster, inputs.workers)
        if scheme.chain
        else [[w] for w in range(k_workers)],
        selective=scheme.selective,
        threshold=t_copy / (t_copy + t_trans),
        index_bytes=scheme.index_bytes,
        schedule=schedule,
        edges_by_chunk=(vertex_chunk, graph.indices, graph.edge_dst()),
    )
