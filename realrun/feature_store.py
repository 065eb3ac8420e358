"""The real feature store: input features partitioned across worker processes, and each GPU's cache.

What each worker process holds, as the plan's conventions say
(:mod:`workbench.strategies.execution.base`):

* **host memory**: the input features of every vertex whose owner (the partition's
  ``owner`` array) is a worker on this worker's machine: DGL's distributed graph
  store, where each machine serves its partitions. With one GPU per machine (HopGNN's
  cluster) that is exactly the worker's own part. Kept on the CPU (pinned when the
  device is a GPU, so host-to-device copies are real DMA).
* **GPU cache**: the features of ``placement.gpu_vertices[w]`` on the worker's device
  (on CPU, simply another tensor: the copy from it is the same gather).

A request for a minibatch's input vertices is split by :func:`feature_reads`, the very
function the plan uses, so the real executor reads each vertex from the source the
plan says: its own cache (``gather_local``: an ``index_select`` on the device), a peer
GPU's cache in its peer group (``d2d``: point-to-point from the peer process), its own
host memory (``h2d``: gather on the CPU, then a copy to the device), or another
machine's host memory (``gather_remote``: point-to-point with the owner process over
the gloo group, then a copy to the device).

Remote reads are a per-iteration exchange every worker takes part in (a worker that
needs nothing from anyone still serves the others): the request counts go round in one
``all_gather``, the vertex ids to each owner point-to-point, and the owners answer with
the rows, point-to-point (``batch_isend_irecv``). Requests are deduplicated (a vertex
is asked for once per request, from one owner).

Every transfer is counted in a :class:`ByteCounter`: the feature payload by the plan's
phase (the numbers the plan's byte counts must equal), and the protocol's own traffic
(the request ids and counts) under ``d2d_index`` and ``gather_remote_index``, which
the plan does not model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from realrun import p2p
from realrun.host_rows import HostRows, host_features
from workbench.strategies.execution.base import FeatureRead, SchemeInputs, feature_reads
from workbench.strategies.execution.task_ids import read_task

# Request ids and counts of the d2d and gather_remote exchanges are counted under
# "{phase}_index": real traffic that the plan does not model.


@dataclass
class ByteCounter:
    """Bytes actually moved, by phase."""

    bytes: dict[str, int] = field(default_factory=dict)

    def add(self, phase: str, nbytes: int) -> None:
        self.bytes[phase] = self.bytes.get(phase, 0) + int(nbytes)

    def take(self) -> dict[str, int]:
        """The counts so far, and start again from zero."""
        out, self.bytes = self.bytes, {}
        return out


@dataclass
class ReadTiming:
    """One plan read task as it really ran: its plan id, when it started and ended, the bytes it moved."""

    task: str
    phase: str
    start: float
    end: float
    nbytes: int


def tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _index_of(vertices: np.ndarray, num_nodes: int) -> np.ndarray:
    """Global vertex id -> row in a tensor holding ``vertices`` (-1 for absent)."""
    index = np.full(num_nodes, -1, dtype=np.int64)
    index[vertices] = np.arange(vertices.shape[0], dtype=np.int64)
    return index


def peer_reads_possible(inputs: SchemeInputs) -> bool:
    """Whether some worker may read a vertex from a peer GPU's cache: its home is another GPU of
    the worker's peer group and the worker does not cache it. The same answer on every worker,
    so they all take part in the peer exchange, or none does."""
    placement = inputs.placement
    if placement is None:
        return False
    for group in placement.groups():
        for w in group:
            others = [g for g in group if g != w]
            if others and (np.isin(placement.home, others) & ~placement.cached_mask(w)).any():
                return True
    return False


def _is_whole_request(reads: list[FeatureRead], vertices: np.ndarray) -> bool:
    """One local or host read of every vertex in the request's order (no cache, one machine):
    its rows are the output as they are, with no buffer to scatter them into."""
    return (
        len(reads) == 1
        and reads[0].kind in ("local", "host")
        # The one-source split hands the request back as it is: skip the comparison then.
        and (reads[0].vertices is vertices or np.array_equal(reads[0].vertices, vertices))
    )


class _GatherOutput:
    """The rows of one :meth:`FeatureStore.gather` request, in the request's order, and where
    each read's rows go in them."""

    def __init__(
        self, vertices: np.ndarray, whole: bool, slot: np.ndarray, dim: int, device: torch.device
    ) -> None:
        self.vertices = vertices
        self.whole = whole
        self.rows = (
            torch.empty(0)
            if whole
            else torch.empty((vertices.shape[0], dim), dtype=torch.float32, device=device)
        )
        self.device = device
        # Each vertex's row in ``rows`` (the vertices are unique), by a scatter into a
        # vertex-indexed array kept across calls: a sort and a sorted search per minibatch cost
        # as much as the host read itself (benchmarks/bench_realrun.py).
        self._slot = slot
        self._filled = False

    def positions(self, chosen: np.ndarray) -> torch.Tensor:
        """The rows of ``chosen`` (some of the request's vertices), as a device index."""
        if not self._filled:
            self._slot[self.vertices] = np.arange(self.vertices.shape[0], dtype=np.int64)
            self._filled = True
        return torch.from_numpy(self._slot[chosen]).to(self.device)

    def place(self, chosen: np.ndarray, rows: torch.Tensor) -> None:
        if self.whole:
            self.rows = rows
        else:
            self.rows[self.positions(chosen)] = rows


class FeatureStore:
    """Worker ``rank``'s host features and GPU cache, and its reads of a minibatch's input features.

    ``features``: a callable returning the float32 features of given vertices (the graph's,
    generated deterministically); the store keeps only the rows it owns.
    ``clock``: the worker's clock (seconds since its run start; it synchronises the device).
    ``on_comm``: called with True before and False after each communication call (the
    launcher's hang watchdog tells a worker waiting for a peer from one that hangs).
    """

    def __init__(
        self,
        inputs: SchemeInputs,
        rank: int,
        device: torch.device,
        features: Callable[[np.ndarray], np.ndarray],
        counter: ByteCounter,
        clock: Callable[[], float],
        *,
        remote_group: dist.ProcessGroup | None = None,
        peer_group: dist.ProcessGroup | None = None,
        on_comm: Callable[[bool], None] | None = None,
    ) -> None:
        self.inputs = inputs
        self.rank = rank
        self.world = inputs.num_workers
        self.device = device
        self.counter = counter
        self.clock = clock
        self.remote_group = remote_group
        self.peer_group = peer_group
        self.on_comm = on_comm or (lambda _busy: None)
        n = inputs.graph.num_nodes
        self.dim = inputs.graph.feat_dim
        machine = int(inputs.worker_machine[rank])
        self.host_vertices = np.flatnonzero(inputs.vertex_machine == machine).astype(np.int64)
        self.host_index = _index_of(self.host_vertices, n)
        # One machine holds every vertex: a vertex's host row is its id (no lookup per read).
        self.host_is_all = self.host_vertices.shape[0] == n
        self.host = host_features(features(self.host_vertices), device)
        self.host_rows = HostRows(device)
        if inputs.placement is not None:
            self.cache_vertices = np.asarray(inputs.placement.gpu_vertices[rank], dtype=np.int64)
        else:
            self.cache_vertices = np.zeros(0, dtype=np.int64)
        self.cache_index = _index_of(self.cache_vertices, n)
        self.cache = torch.from_numpy(
            np.ascontiguousarray(features(self.cache_vertices), dtype=np.float32).reshape(-1, self.dim)
        ).to(device)
        self.has_peers = peer_reads_possible(inputs)
        self.has_remote = len(set(inputs.worker_machine.tolist())) > 1
        self.owner = inputs.partition.owner
        self.gpu_worker = {gpu: w for w, gpu in enumerate(inputs.workers)}
        self._slot = np.zeros(n, dtype=np.int64)  # gather(): each requested vertex's row in its output

    # ---- one minibatch's input features ---------------------------------------------------------
    def gather(
        self, vertices: np.ndarray, prefix: str, *, remote: bool = True, leave_remote: bool = False
    ) -> tuple[torch.Tensor, list[ReadTiming]]:
        """The features of ``vertices`` (unique ids) on the device, in their order, and each read's timing.

        ``prefix``: the plan's task prefix (``i{iteration}.w{worker}``); read ``k`` from
        ``source`` is plan task ``{prefix}.{k}.{source}``. ``remote=False``: no worker takes
        part in a remote exchange in this call (``hopgnn`` pre-gathered its remote features
        with :meth:`fetch_remote`), so ``vertices`` must all be on this machine, unless
        ``leave_remote``: then their rows are left for the caller to fill (uninitialised), and
        the other reads go straight to their places in the output (no second copy).
        """
        vertices = np.asarray(vertices, dtype=np.int64)
        reads = feature_reads(self.inputs, self.rank, vertices)
        out = _GatherOutput(vertices, _is_whole_request(reads, vertices), self._slot, self.dim, self.device)
        timings: list[ReadTiming] = []
        peer_requests: dict[int, np.ndarray] = {}
        peer_tasks: dict[int, str] = {}
        remote_requests: dict[int, list[np.ndarray]] = {}
        remote_task_of: dict[int, str] = {}
        for read in reads:
            task = read_task(prefix, read.kind, read.source)
            if read.kind == "local":
                timings.append(self._read_cache(read.vertices, task, out))
            elif read.kind == "host":
                timings.append(self._read_host(read.vertices, task, out))
            elif read.kind == "peer":
                peer = self.gpu_worker[read.source]
                peer_requests[peer] = read.vertices
                peer_tasks[peer] = task
            elif not remote and leave_remote:
                continue
            elif not remote:
                raise RuntimeError(
                    f"worker {self.rank}: {read.count} vertices of {prefix} live on {read.source}, "
                    "but this read makes no remote exchange (they should have been pre-gathered)"
                )
            else:  # remote: from each owner process on that machine
                owners = self.owner[read.vertices]
                for w in np.unique(owners).tolist():
                    remote_requests.setdefault(w, []).append(read.vertices[owners == w])
                    remote_task_of[w] = task
        # The exchanges are collective: every worker takes part, with or without requests.
        if self.has_peers:
            timings += self._fetch(
                "d2d", peer_requests, peer_tasks, self.cache, self.cache_index, self.peer_group,
                out.rows, out.positions,
            )  # fmt: skip
        if self.has_remote and remote:
            merged = {w: np.unique(np.concatenate(parts)) for w, parts in remote_requests.items()}
            timings += self._fetch(
                "gather_remote", merged, remote_task_of, self.host, self.host_index, self.remote_group,
                out.rows, out.positions,
            )  # fmt: skip
        return out.rows, timings

    def _read_cache(self, vertices: np.ndarray, task: str, out: _GatherOutput) -> ReadTiming:
        """Read ``vertices`` from this GPU's cache (``gather_local``) into their places in ``out``."""
        start = self.clock()
        rows = self.cache.index_select(0, torch.from_numpy(self.cache_index[vertices]).to(self.device))
        out.place(vertices, rows)
        end = self.clock()
        nbytes = tensor_bytes(rows)
        self.counter.add("gather_local", nbytes)
        return ReadTiming(task, "gather_local", start, end, nbytes)

    def _read_host(self, vertices: np.ndarray, task: str, out: _GatherOutput) -> ReadTiming:
        """Read ``vertices`` from this machine's host memory (``h2d``) into their places in ``out``."""
        start = self.clock()
        index = torch.from_numpy(vertices if self.host_is_all else self.host_index[vertices])
        rows = self.host_rows.gather(self.host, index)  # on CUDA: pinned staging, one DMA copy
        out.place(vertices, rows)
        end = self.clock()
        nbytes = tensor_bytes(rows)
        self.counter.add("h2d", nbytes)
        return ReadTiming(task, "h2d", start, end, nbytes)

    def fetch_remote(
        self, vertices: np.ndarray, task_of: Callable[[str], str]
    ) -> tuple[np.ndarray, torch.Tensor, list[ReadTiming]]:
        """Pre-gathering (``hopgnn``): one deduplicated fetch of the features of ``vertices`` that
        live on other machines (the reads :func:`feature_reads` calls remote) into this worker's
        host memory, as HopGNN stores them (paper 003, section 5.2).

        Collective like :meth:`gather`'s remote exchange: every worker calls it, with or without
        vertices. Returns the fetched vertices (sorted), their rows on the CPU in that order (pinned
        on a GPU run: they go on to the device), and one timing per source machine, plan task
        ``task_of(source host)`` (phase ``gather_remote``): the scheme names its tasks.
        """
        vertices = np.asarray(vertices, dtype=np.int64)
        reads = [r for r in feature_reads(self.inputs, self.rank, vertices) if r.kind == "remote"]
        fetched = np.sort(np.concatenate([r.vertices for r in reads])) if reads else np.zeros(0, np.int64)
        rows = torch.empty(
            (fetched.shape[0], self.dim), dtype=torch.float32, pin_memory=self.device.type == "cuda"
        )
        requests: dict[int, np.ndarray] = {}
        tasks: dict[int, str] = {}
        for read in reads:  # a worker's features live on one machine: one read per owner
            owners = self.owner[read.vertices]
            for w in np.unique(owners).tolist():
                requests[w] = read.vertices[owners == w]
                tasks[w] = task_of(read.source)
        if not self.has_remote:
            return fetched, rows, []

        def positions(chosen: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.searchsorted(fetched, chosen))

        timings = self._fetch(
            "gather_remote", requests, tasks, self.host, self.host_index, self.remote_group, rows, positions
        )
        return fetched, rows, timings

    def _fetch(
        self,
        phase: str,
        requests: dict[int, np.ndarray],
        tasks: dict[int, str],
        store: torch.Tensor,
        index: np.ndarray,
        group: dist.ProcessGroup | None,
        out: torch.Tensor,
        positions: Callable[[np.ndarray], torch.Tensor],
    ) -> list[ReadTiming]:
        """One exchange among all workers: each asks the others for rows of their ``store``.

        Collective: every worker calls it in the same iteration, with or without requests.
        Tensors live where the group's back end needs them: CPU for gloo, the GPU for NCCL.
        A read's start is when the request counts have gone round (every worker has arrived at
        the exchange): the time before is waiting for the slowest worker, which the trace shows
        as queueing (ready to start), not as transfer.
        """
        comm_device = self._comm_device(group)
        matrix = self._exchange_counts(phase, requests, group, comm_device)
        start = self.clock()
        asked = self._exchange_ids(phase, requests, matrix, group, comm_device)
        incoming, arrived = self._exchange_rows(
            phase, requests, matrix, asked, store, index, group, comm_device, out, positions
        )
        # One timing per plan task: a task whose rows came from several owners ends with the last.
        per_task: dict[str, ReadTiming] = {}
        for w, task in tasks.items():
            if w not in arrived:
                continue
            nbytes = tensor_bytes(incoming[w])
            t = per_task.get(task)
            if t is None:
                per_task[task] = ReadTiming(task, phase, start, arrived[w], nbytes)
            else:
                t.end = max(t.end, arrived[w])
                t.nbytes += nbytes
        return list(per_task.values())

    def _exchange_counts(
        self,
        phase: str,
        requests: dict[int, np.ndarray],
        group: dist.ProcessGroup | None,
        comm_device: torch.device,
    ) -> torch.Tensor:
        """Every worker's request counts, gathered by all: ``matrix[a, b]`` rows ``a`` asks of ``b``."""
        world = self.world
        counts = torch.zeros(world, dtype=torch.int64)
        for w, ids in requests.items():
            counts[w] = int(ids.shape[0])
        gathered = [torch.zeros(world, dtype=torch.int64, device=comm_device) for _ in range(world)]
        self.on_comm(True)
        dist.all_gather(gathered, counts.to(comm_device), group=group)
        self.on_comm(False)
        self.counter.add(f"{phase}_index", tensor_bytes(counts) * (world - 1))
        return torch.stack([g.cpu() for g in gathered])

    def _exchange_ids(
        self,
        phase: str,
        requests: dict[int, np.ndarray],
        matrix: torch.Tensor,
        group: dist.ProcessGroup | None,
        comm_device: torch.device,
    ) -> dict[int, torch.Tensor]:
        """Send my requested ids to each owner, receive the others' ids asked of me (by asker)."""
        me = self.rank
        ops = []
        asked: dict[int, torch.Tensor] = {}
        for w in range(self.world):
            if w == me:
                continue
            if matrix[me, w] > 0:
                ids = torch.from_numpy(requests[w]).to(comm_device)
                ops.append(dist.P2POp(dist.isend, ids, w, group=group))
                self.counter.add(f"{phase}_index", tensor_bytes(ids))
            if matrix[w, me] > 0:
                asked[w] = torch.empty(int(matrix[w, me]), dtype=torch.int64, device=comm_device)
                ops.append(dist.P2POp(dist.irecv, asked[w], w, group=group))
        self._wait(ops)
        return asked

    def _exchange_rows(
        self,
        phase: str,
        requests: dict[int, np.ndarray],
        matrix: torch.Tensor,
        asked: dict[int, torch.Tensor],
        store: torch.Tensor,
        index: np.ndarray,
        group: dist.ProcessGroup | None,
        comm_device: torch.device,
        out: torch.Tensor,
        positions: Callable[[np.ndarray], torch.Tensor],
    ) -> tuple[dict[int, torch.Tensor], dict[int, float]]:
        """Answer what each asked from my ``store``; receive the rows I asked for into their places
        in ``out``. Returns the rows received and when they arrived, by owner."""
        world, me = self.world, self.rank
        ops = []
        incoming: dict[int, torch.Tensor] = {}
        for w, ids in asked.items():
            rows = store.index_select(0, torch.from_numpy(index[ids.cpu().numpy()]).to(store.device))
            ops.append(dist.P2POp(dist.isend, rows.to(comm_device), w, group=group))
        for w in range(world):
            if w != me and matrix[me, w] > 0:
                incoming[w] = torch.empty(
                    (int(matrix[me, w]), self.dim), dtype=torch.float32, device=comm_device
                )
                ops.append(dist.P2POp(dist.irecv, incoming[w], w, group=group))
        works = p2p.start(ops)
        self.on_comm(True)
        # Wait for sends and receives; note when each owner's rows arrived (waited in owner order;
        # all at once where the batch has one work, NCCL).
        arrived: dict[int, float] = {}
        receives = [w for w in range(world) if w != me and matrix[me, w] > 0]
        sends = len(ops) - len(receives)
        for k in p2p.completions(works, len(ops)):
            if k < sends:
                continue
            w = receives[k - sends]
            rows = incoming[w].to(out.device, non_blocking=True)  # the device, or host memory (fetch_remote)
            out[positions(requests[w])] = rows
            arrived[w] = self.clock()
            self.counter.add(phase, tensor_bytes(incoming[w]))
        self.on_comm(False)
        return incoming, arrived

    def _wait(self, ops: list) -> None:
        if not ops:
            return
        self.on_comm(True)
        p2p.wait_all(ops)
        self.on_comm(False)

    def _comm_device(self, group: dist.ProcessGroup | None) -> torch.device:
        backend = dist.get_backend(group)
        return self.device if backend == "nccl" else torch.device("cpu")
