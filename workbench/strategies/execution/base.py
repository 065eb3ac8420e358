"""The execution-scheme interface: everything a run decided, turned into one iteration plan.

An execution scheme gets a :class:`SchemeInputs` (the graph, the cluster, the model,
the partition, the placement, and an epoch of sampled minibatches, one per worker and
iteration) and returns a :class:`~workbench.plan.Plan`: which bytes move where and
which kernels run where, with exact byte counts from the sampled vertex sets. It
decides only; the simulator or the real executor runs the plan.

Conventions every scheme shares:

* Worker ``w`` drives GPU ``inputs.workers[w]`` (the cluster's GPUs in order) and
  trains on the minibatches ``epoch[i][w]``; the partition has one part per worker,
  and the placement's GPU ``g`` is worker ``g``'s GPU.
* A vertex's input features live in the host memory of the machine of the worker
  that owns it (DGL's distributed graph store: each machine serves its partitions);
  a GPU cache holds what the placement says.
* Task ids are ``i{iteration}.w{worker}.{step}``; per-layer compute carries ``layer``;
  transfers carry what they move (``carries``).
* Byte counts come from :mod:`workbench.model`: features are ``feature_bytes`` per
  vertex, gradients ``ModelSpec.gradient_bytes``, resident training state
  ``ModelSpec.training_state_bytes`` (weights, gradients, optimizer state), and each
  layer's forward allocates what it saves for backward, freed by its backward.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.hardware.spec import ClusterSpec
from workbench.model import ModelSpec
from workbench.plan import Plan, Task
from workbench.strategies.execution import _kernels, task_ids
from workbench.strategies.partition.base import PartitionResult
from workbench.strategies.placement.base import PlacementResult
from workbench.strategies.sampling.base import Minibatch


@dataclass
class SchemeInputs:
    """What a scheme builds its plan from (see the module docstring for the conventions)."""

    graph: CSRGraph
    cluster: ClusterSpec
    model: ModelSpec
    workers: list[str]  # worker w drives GPU workers[w]
    partition: PartitionResult  # one part per worker
    epoch: list[list[Minibatch]]  # epoch[i][w]: worker w's minibatch of iteration i
    feature_bytes: int  # input feature bytes per vertex
    placement: PlacementResult | None = None  # None: no GPU cache
    optimizer: str = "adam"
    name: str = "run"
    meta: dict[str, object] = field(default_factory=dict)
    iterations: int = 0  # full-graph schemes: how many iterations to plan (minibatch: len(epoch))
    # Called with the number of iterations planned so far, after each one (a progress bar).
    on_iteration: Callable[[int], None] | None = None

    def planned(self, iteration: int) -> None:
        """Schemes call this after planning each iteration."""
        if self.on_iteration is not None:
            self.on_iteration(iteration + 1)

    def __post_init__(self) -> None:
        gpus = self.cluster.gpu_nodes()
        if not self.workers:
            raise ConfigError("a run needs at least one worker")
        unknown = [w for w in self.workers if w not in gpus]
        if unknown:
            raise ConfigError(
                f"cluster {self.cluster.name!r} has no GPU {unknown[0]!r}; GPUs: {', '.join(gpus)}"
            )
        if self.partition.num_parts != len(self.workers):
            raise ConfigError(
                f"the partition has {self.partition.num_parts} parts for {len(self.workers)} workers"
            )
        if self.placement is not None and self.placement.num_gpus != len(self.workers):
            raise ConfigError(
                f"the placement covers {self.placement.num_gpus} GPUs for {len(self.workers)} workers"
            )
        width = getattr(self.epoch, "width", None)  # a streamed epoch: known without sampling it
        widths = [width] if width is not None else [len(row) for row in self.epoch]
        if any(w != len(self.workers) for w in widths):
            raise ConfigError(f"every iteration needs one minibatch per worker ({len(self.workers)})")

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    @property
    def num_iterations(self) -> int:
        return len(self.epoch) if self.epoch else self.iterations

    @cached_property
    def worker_machine(self) -> np.ndarray:
        """Machine index of each worker."""
        index = {m.name: k for k, m in enumerate(self.cluster.machines)}
        return np.array([index[w.split(".", 1)[0]] for w in self.workers], dtype=np.int64)

    @cached_property
    def partition_digest(self) -> str:
        """A digest of which worker owns each vertex: equal for equal partitions made apart (a
        sweep's points), so what a scheme derives from the epoch and the partition alone can be
        kept with the epoch and reused."""
        owner = np.ascontiguousarray(self.partition.owner, dtype=np.int64)
        return hashlib.blake2b(owner.tobytes(), digest_size=16).hexdigest()

    @cached_property
    def vertex_machine(self) -> np.ndarray:
        """Machine index whose host memory holds each vertex's features (its owner worker's), int16
        below 32,768 machines (papers100M's 111M vertices: 0.2 GB instead of 0.9)."""
        narrow = np.int16 if len(self.cluster.machines) < 2**15 else np.int64
        return self.worker_machine.astype(narrow)[self.partition.owner]

    def host_of_machine(self, machine: int) -> str:
        return self.cluster.machines[machine].host_node

    def host_of_worker(self, w: int) -> str:
        return self.host_of_machine(int(self.worker_machine[w]))

    @cached_property
    def read_sources(self) -> list[ReadSources]:
        """Per worker ``w``: where it reads each vertex's features, as a code per vertex (see
        :class:`ReadSources`), and the ``(kind, source node)`` of each code, in
        :func:`feature_reads`' order."""
        machines = len(self.cluster.machines)
        vertex_machine = self.vertex_machine
        holding = np.bincount(vertex_machine, minlength=machines)
        only_machine = int(np.flatnonzero(holding)[0]) if np.count_nonzero(holding) == 1 else None
        home_counts = None
        if self.placement is not None:
            home_counts = np.bincount(self.placement.home + 1, minlength=self.num_workers + 1)
        out = []
        for w in range(self.num_workers):
            mine = int(self.worker_machine[w])
            peers: list[int] = []
            if self.placement is not None:
                group = next(g for g in self.placement.groups() if w in g)
                peers = [p for p in group if p != w]
            sources = [("local", self.workers[w])] + [("peer", self.workers[p]) for p in peers]
            sources += [("host" if m == mine else "remote", self.host_of_machine(m)) for m in range(machines)]
            peer_code = np.full(self.num_workers + 1, -1, dtype=np.int16)  # indexed by home + 1
            for rank, p in enumerate(peers):
                peer_code[p + 1] = 1 + rank
            only = None
            cached = 0 if self.placement is None else int(self.placement.gpu_vertices[w].shape[0])
            if self.graph.num_nodes and cached == self.graph.num_nodes:
                only = 0
            elif cached == 0 and only_machine is not None:
                if home_counts is None or not any(home_counts[p + 1] for p in peers):
                    only = len(peers) + 1 + only_machine
            out.append(ReadSources(self, w, len(peers) + 1, peer_code, sources, only))
        return out


# codes() without a placement: no cache bits, no homes, no peers.
NO_HOME = np.zeros(0, dtype=np.int64)
NO_PEERS = np.zeros(0, dtype=np.int16)
NO_BITS = np.zeros(0, dtype=np.uint8)
# The most the workers' code tables may take together (int16 per vertex and worker): products-like's
# 4 workers take 10 MB; papers-like's 128 would take 28 GB at full scale and look codes up per request.
CODE_TABLE_BYTES = 256 << 20


class ReadSources:
    """Where worker ``w`` reads vertices' features from, as a code per vertex.

    A vertex in ``w``'s GPU cache is local (code 0); else one a GPU of ``w``'s peer group
    caches (the placement's ``home`` names which) comes from that peer (codes 1..P, the
    group's order); else from the host memory of the machine that owns it (code P + 1 + m).
    Where every worker's codes fit in :data:`CODE_TABLE_BYTES`, each worker's are worked out once
    for the whole graph on its first request and looked up after (a plan asks for 300,000 codes a
    minibatch on products-like: one gather from the table instead of three scattered reads of the
    machine, home and cache arrays, 0.3 ms instead of 1.5); otherwise for the vertices a request
    reads, by the same kernel: one table per worker would take 28 GB for 128 workers on papers100M.
    """

    def __init__(
        self,
        inputs: SchemeInputs,
        w: int,
        host_base: int,
        peer_code: np.ndarray,
        sources: list[tuple[str, str]],
        only: int | None,
    ) -> None:
        # What codes() reads, not the inputs themselves: the inputs keep these objects (their
        # read_sources), and a reference back would make a cycle that keeps the sampled epoch
        # alive until the next collection (the next epoch of a sweep then sampled into fresh
        # pages instead of the output pool's, at 2-3 s of page faults on products-like).
        self.vertex_machine = inputs.vertex_machine
        self.placement = inputs.placement
        self.worker = w
        self.host_base = host_base
        self.peer_code = peer_code
        self.sources = sources
        self.only = only  # the one code of every vertex, when there is only one
        num_nodes = int(inputs.vertex_machine.shape[0])
        self.tabled = 2 * num_nodes * inputs.num_workers <= CODE_TABLE_BYTES
        self._table: np.ndarray | None = None

    def codes(self, vertices: np.ndarray) -> np.ndarray:
        """The code (int16) of each of ``vertices`` (int64 ids), aligned with them: 0 where ``w``'s cache
        holds the vertex, else its home's peer code where a peer of the group is its home, else its
        machine's host code."""
        if not self.tabled:
            return self.worked_out(vertices)
        if self._table is None:
            self._table = self.worked_out(np.arange(self.vertex_machine.shape[0], dtype=np.int64))
        return np.take(self._table, vertices)

    def worked_out(self, vertices: np.ndarray) -> np.ndarray:
        """:meth:`codes` from the machine, home and cache arrays, in one compiled pass
        (:func:`_kernels.read_codes`): with numpy, the three gathers and their temporaries took 5 ms
        a minibatch on products-like, most of a plan."""
        p = self.placement
        home, peers, bits = (
            (NO_HOME, NO_PEERS, NO_BITS)
            if p is None
            else (p.narrow_home, self.peer_code, p.membership.bits(self.worker))
        )
        return _kernels.read_codes(vertices, self.vertex_machine, self.host_base, home, peers, bits)


@dataclass(frozen=True)
class ReadCount:
    """How many input vertices' features a worker reads from one source.

    ``kind``: ``local`` (its own GPU cache), ``peer`` (another GPU's cache in its peer
    group), ``host`` (its machine's host memory) or ``remote`` (another machine's host).
    """

    kind: str
    source: str  # the memory node the features come from
    count: int


@dataclass(frozen=True)
class FeatureRead(ReadCount):
    """A :class:`ReadCount` with the vertices themselves, in the request's order."""

    vertices: np.ndarray


def feature_reads(inputs: SchemeInputs, w: int, vertices: np.ndarray) -> list[FeatureRead]:
    """Split ``vertices`` that worker ``w`` needs by where it reads them, sources in a fixed order.

    A vertex in ``w``'s GPU cache is local; else one a GPU of ``w``'s peer group caches
    (the placement's ``home`` names which) comes from that peer; else it comes from the
    host memory of the machine that owns it.
    """
    vertices = np.asarray(vertices, dtype=np.int64)
    where = inputs.read_sources[w]
    sources = where.sources
    if where.only is not None:  # every vertex has one source (one machine, no cache): nothing to split
        kind, node = sources[where.only]
        return [FeatureRead(kind, node, int(vertices.shape[0]), vertices)] if vertices.size else []
    # A stable counting sort by code splits the request in two passes, in its own order
    # within each source (a mask per source costs several).
    grouped, counts = _kernels.split_by_code(vertices, where.codes(vertices), len(sources))
    parts = np.split(grouped, np.cumsum(counts)[:-1])
    return [
        FeatureRead(kind, node, int(n), part)
        for (kind, node), part, n in zip(sources, parts, counts, strict=True)
        if n
    ]


def read_counts(inputs: SchemeInputs, w: int, vertices: np.ndarray) -> list[ReadCount]:
    """:func:`feature_reads` without the vertices, for a plan that prices reads by their size: the
    codes counted, not sorted (on products-like the split took as long as the codes)."""
    vertices = np.asarray(vertices, dtype=np.int64)
    where = inputs.read_sources[w]
    sources = where.sources
    if where.only is not None:
        kind, node = sources[where.only]
        return [ReadCount(kind, node, int(vertices.shape[0]))] if vertices.size else []
    counts = _kernels.count_codes(where.codes(vertices), len(sources))
    return [ReadCount(kind, node, int(n)) for (kind, node), n in zip(sources, counts, strict=True) if n]


READ_PHASE = {"local": "gather_local", "peer": "d2d", "host": "h2d", "remote": "gather_remote"}
# Without overlap, reads run in stages as the real feature store does them: cache and host
# reads inline, then one exchange with the peers, then one with the other machines.
SERIAL_READ_STAGE = {"local": 0, "host": 0, "peer": 1, "remote": 2}


class Exchange:
    """One collective exchange of remote reads among all workers, as the real feature store makes
    them (:mod:`realrun.feature_store`): every worker takes part, with or without reads of its
    own (it serves the others), and the exchange begins once every worker has arrived (the
    request counts go round in an ``all_gather``). So a worker's remote reads wait for every
    worker's arrival, not only for its own reads before them: without that coupling a plan lets
    a worker fetch from a peer that is still busy, and under-predicts the wait.

    Each worker joins with its remote read tasks and the tasks after which it arrives; then
    :meth:`couple` makes every remote read depend on every worker's arrival.
    """

    def __init__(self) -> None:
        self.reads: list[Task] = []
        self.arrivals: list[str] = []

    def join(self, reads: Sequence[Task], arrival: Sequence[str]) -> None:
        self.reads.extend(reads)
        self.arrivals.extend(a for a in arrival if a not in self.arrivals)

    def couple(self) -> None:
        for task in self.reads:
            task.deps.extend(a for a in self.arrivals if a not in task.deps)


def add_feature_reads(
    plan: Plan,
    inputs: SchemeInputs,
    w: int,
    iteration: int,
    vertices: np.ndarray,
    deps: list[str],
    prefix: str,
    overlap: bool = True,
    exchange: Exchange | None = None,
) -> tuple[list[str], list[str]]:
    """Plan worker ``w``'s reads of ``vertices``' input features onto its GPU: :func:`add_reads`
    of their :func:`read_counts`."""
    reads = read_counts(inputs, w, vertices)
    return add_reads(plan, inputs, w, iteration, reads, deps, prefix, overlap, exchange)


def add_reads(
    plan: Plan,
    inputs: SchemeInputs,
    w: int,
    iteration: int,
    reads: Sequence[ReadCount],
    deps: list[str],
    prefix: str,
    overlap: bool = True,
    exchange: Exchange | None = None,
) -> tuple[list[str], list[str]]:
    """Plan worker ``w``'s ``reads`` (split by :func:`feature_reads`) onto its GPU.

    Returns the task ids, and the named tensors they allocate (for the reader to free).
    ``overlap``: the reads from different sources run at once (DGL's KV store pulls the
    remote rows while it gathers the local ones); otherwise in the real feature store's
    order (:mod:`realrun.feature_store`): cache and host reads one after the other, then
    the reads from peers together (one exchange), then those from other machines together,
    joining ``exchange`` (the iteration's, shared by its workers; see :class:`Exchange`).

    A local cache hit is a gather kernel on the GPU (``gather_local``: read and write
    each row, into a tensor ``{prefix}.cached-features``); every other source is a copy into the GPU
    (``d2d`` from a peer, ``h2d`` from its host, ``gather_remote`` from another
    machine's host) that lands in a buffer freed once its readers end.
    """
    gpu = inputs.workers[w]
    fb = inputs.feature_bytes
    ids: list[str] = []
    tensors: list[str] = []
    if not overlap:
        reads = sorted(reads, key=lambda r: SERIAL_READ_STAGE[r.kind])  # stable: list order within a kind
    first = list(deps)
    stage: int | None = None
    previous: list[str] = []  # the reads of the stage before the current one
    current: list[str] = []  # the current stage's reads so far
    remote: list[Task] = []
    arrival: list[str] | None = None  # after what this worker reaches the remote exchange
    for read in reads:
        tid = task_ids.read_task(prefix, read.kind, read.source)
        if not overlap:
            if SERIAL_READ_STAGE[read.kind] != stage:
                stage, previous, current = SERIAL_READ_STAGE[read.kind], current or previous, []
            # Cache and host reads follow each other; an exchange's reads wait for the stage before.
            deps = (current[-1:] or previous or first) if stage == 0 else (previous or first)
            current.append(tid)
            if read.kind == "remote" and arrival is None:
                arrival = list(deps)
        if read.kind == "local":
            plan.compute(
                tid,
                gpu,
                "gather_local",
                deps,
                worker=w,
                iteration=iteration,
                items=read.count,
                features={"vertices": float(read.count), "bytes": 2.0 * read.count * fb},
                allocate={f"{prefix}.cached-features": read.count * fb},
            )
            tensors.append(f"{prefix}.cached-features")
        else:
            task = plan.transfer(
                tid,
                read.source,
                gpu,
                read.count * fb,
                READ_PHASE[read.kind],
                deps,
                worker=w,
                iteration=iteration,
                items=read.count,
                carries="features",
            )
            if read.kind == "remote":
                remote.append(task)
        ids.append(tid)
    if exchange is not None and not overlap:
        exchange.join(remote, arrival if arrival is not None else (current or previous or first))
    return ids, tensors


FEATURE_SERVICE_HELP = (
    "host and remote rows come through a feature service, as paper 003's artifact fetches them: the "
    "worker's own server looks each row up and copies it (a host task per row), asks the other servers "
    "one after another (each looks its rows up and copies them, sends them, and the asking server copies "
    "them into the reply), then the whole reply goes to the GPU in one host-to-device copy; "
    "false: remote rows land on the GPU straight from the network"
)


def service_fetch(
    plan: Plan,
    inputs: SchemeInputs,
    w: int,
    iteration: int,
    reads: Sequence[ReadCount],
    deps: list[str],
    prefix: str,
) -> tuple[str | None, int]:
    """Worker ``w``'s request of ``reads``' host and remote rows to its machine's feature service,
    into its host memory. Returns the last task (None: no such row) and the rows it returns.

    Each row costs its server a lookup and a copy (a host task with ``vertices`` and the bytes it
    reads and writes, priced by the CPU cost model); the other servers are asked one after
    another in the artifact's order (the next machine first, wrapping round), each answer
    copied row by row into the reply (static_cache.go's Get)."""
    fb = inputs.feature_bytes
    host = inputs.host_of_worker(w)
    served = [r for r in reads if r.kind in ("host", "remote")]
    if not served:
        return None, 0
    machines = len(inputs.cluster.machines)
    mine = int(inputs.worker_machine[w])
    order = {inputs.host_of_machine((mine + k) % machines): k for k in range(machines)}
    last = list(deps)
    for read in sorted(served, key=lambda r: order[r.source]):
        rows = float(read.count)
        work = {"vertices": rows, "bytes": 2.0 * rows * fb}
        kw = {"worker": w, "iteration": iteration, "items": read.count}
        if read.kind == "host":
            tid = f"{prefix}.serve.local"
            plan.compute(tid, host, "gather_local", last, features=work, **kw)
            last = [tid]
            continue
        tid = f"{prefix}.serve.{read.source}"
        plan.compute(f"{tid}.lookup", read.source, "gather_remote", last, features=work, **kw)
        plan.transfer(
            tid,
            read.source,
            host,
            read.count * fb,
            "gather_remote",
            [f"{tid}.lookup"],
            carries="features",
            **kw,
        )
        plan.compute(f"{tid}.copy", host, "gather_remote", [tid], features=work, **kw)
        last = [f"{tid}.copy"]
    return last[0], sum(r.count for r in served)


def add_service_reads(
    plan: Plan,
    inputs: SchemeInputs,
    w: int,
    iteration: int,
    vertices: np.ndarray,
    deps: list[str],
    prefix: str,
) -> tuple[list[str], list[str]]:
    """:func:`add_feature_reads` through the feature service (``feature_service``): GPU cache and
    peer reads as before, host and remote rows by :func:`service_fetch`, then one host-to-device
    copy of the reply (the artifact's pageable ``.cuda()``)."""
    reads = read_counts(inputs, w, vertices)
    near = [r for r in reads if r.kind in ("local", "peer")]
    ids, tensors = add_reads(plan, inputs, w, iteration, near, deps, prefix)
    last, rows = service_fetch(plan, inputs, w, iteration, reads, deps, prefix)
    if last is not None:
        tid = f"{prefix}.serve.h2d"
        plan.transfer(
            tid,
            inputs.host_of_worker(w),
            inputs.workers[w],
            rows * inputs.feature_bytes,
            "h2d",
            [last],
            worker=w,
            iteration=iteration,
            items=rows,
            carries="features",
        )
        ids.append(tid)
    return ids, tensors


class ExecutionScheme(ABC):
    """Turns a run's decisions into an iteration plan. Pure: no device, no time, no randomness.

    A minibatch scheme plans ``inputs.epoch``'s sampled minibatches. A full-graph scheme
    (``full_graph = True``: ROC, NeuGraph) trains on the whole graph each iteration; the
    spine samples nothing for it (``inputs.epoch`` is empty) and ``inputs.iterations``
    says how many training iterations (epochs over the full graph) to plan.
    """

    registered_name: ClassVar[str]
    # What the scheme can do, declared rather than guessed from its methods:
    full_graph: ClassVar[bool] = False  # trains on the whole graph (no sampled epoch)
    # Plans one iteration at a time (:meth:`plan_iteration`), so a run can re-plan between
    # iterations (ROC's partitioner learns from each iteration's measured times).
    plans_per_iteration: ClassVar[bool] = False
    # The scheme parameters its real executor (realrun.schemes) runs with, imposed on a real
    # run's plan so the plan says what the workers do; None: simulated only.
    real_run_params: ClassVar[Mapping[str, object] | None] = None
    # Reads features through a [placement] GPU cache; False: the scheme places features itself
    # and refuses a placement (bulk-pipeline's process rows hold their blocks).
    uses_placement: ClassVar[bool] = True

    def plan_iteration(self, inputs: SchemeInputs, iteration: int) -> Plan:
        """The plan of iteration ``iteration`` alone (schemes with ``plans_per_iteration``)."""
        raise NotImplementedError(f"{self.registered_name} plans whole epochs, not single iterations")

    def empty_plan(self, inputs: SchemeInputs, **details: object) -> Plan:
        """A plan named after the run, its ``meta`` saying what built it: the scheme, the hardware,
        the model, the workers, the iterations, the scheme's ``details`` and the run's own meta."""
        return Plan(
            inputs.name,
            meta={
                "scheme": self.registered_name,
                "hardware": inputs.cluster.name,
                "model": inputs.model.name,
                "workers": inputs.num_workers,
                "iterations": inputs.num_iterations,
                **details,
                **inputs.meta,
            },
        )

    @abstractmethod
    def build(self, inputs: SchemeInputs) -> Plan:
        """The plan of one epoch (``inputs.epoch``'s iterations) of training."""


class IterationPlanner(ABC):
    """One iteration of a :class:`MinibatchScheme`, planned as its workers' minibatches are sampled.

    The template plans worker ``w``'s sampling, then calls :meth:`sampled` (a scheme that plans a
    worker's whole step on its own, model-centric, does it there; one whose workers' steps
    interleave collects the samples and plans everything in :meth:`finish`)."""

    def sample_work(self, w: int) -> tuple[int, int]:
        """(edges, vertices) of graphs worker ``w``'s sampling step builds from sampled ones
        (HopGNN's micrographs; :func:`add_sampling`'s ``built``)."""
        return (0, 0)

    @abstractmethod
    def sampled(self, w: int, minibatch: Minibatch, sample: str) -> None:
        """Worker ``w``'s minibatch has been sampled by task ``sample``."""

    @abstractmethod
    def finish(self) -> list[str]:
        """The rest of the iteration; returns each worker's optimizer step (what its next
        iteration's work, and its sampling ``prefetch`` iterations on, waits for)."""


class MinibatchScheme(ExecutionScheme):
    """A scheme that trains on sampled minibatches. It owns the epoch loop every such scheme
    shares, once: the resident training state, each worker's sampling bounded by how far it
    runs ahead (``prefetch``), the scheme's iteration (:meth:`iteration_planner`) and the
    planning progress."""

    prefetch: int

    def plan_details(self, inputs: SchemeInputs) -> dict[str, object]:
        """What the plan's meta records of the scheme's parameters (in this order)."""
        return {"prefetch": self.prefetch}

    def check_inputs(self, inputs: SchemeInputs) -> None:
        """Refuse inputs the scheme cannot plan (before any planning)."""

    def keep_resident(self, plan: Plan, inputs: SchemeInputs) -> None:
        """What each GPU keeps for the whole epoch (default: the model's training state and the
        feature cache, :func:`add_resident_state`)."""
        add_resident_state(plan, inputs)

    @abstractmethod
    def iteration_planner(
        self, plan: Plan, inputs: SchemeInputs, iteration: int, previous_steps: list[str]
    ) -> IterationPlanner:
        """The planner of ``iteration``; ``previous_steps``: each worker's optimizer step of the
        iteration before (empty in the first)."""

    def build(self, inputs: SchemeInputs) -> Plan:
        self.check_inputs(inputs)
        plan = self.empty_plan(inputs, **self.plan_details(inputs))
        self.keep_resident(plan, inputs)
        ahead = Prefetch(self.prefetch)
        steps: list[str] = []
        for it, row in enumerate(inputs.epoch):
            planner = self.iteration_planner(plan, inputs, it, steps)
            for w, mb in enumerate(row):
                prefix = task_ids.worker_prefix(it, w)
                sample = add_sampling(plan, inputs, w, it, mb, prefix, ahead, planner.sample_work(w))
                planner.sampled(w, mb, sample)
            steps = planner.finish()
            ahead.record(steps)
            inputs.planned(it)
        return plan


# ---- the parts of a training step every data-parallel scheme shares -------------------------
def add_resident_state(plan: Plan, inputs: SchemeInputs) -> None:
    """Each worker's GPU keeps the training state (weights, gradients, optimizer state) and its
    feature cache for the whole epoch."""
    state = inputs.model.training_state_bytes(inputs.optimizer)
    for w, gpu in enumerate(inputs.workers):
        plan.keep(f"w{w}.training-state", gpu, state)
        if inputs.placement is not None:
            cached = int(inputs.placement.gpu_vertices[w].shape[0])
            if cached:
                plan.keep(f"w{w}.feature-cache", gpu, cached * inputs.feature_bytes)


class Prefetch:
    """How far a worker's sampling (and so its feature gathering) runs ahead of its training.

    With depth ``k`` the sampling of iteration ``i`` waits for the worker's optimizer step of
    iteration ``i - 1 - k``: ``k`` minibatches are sampled while one trains (DGL's data loader
    keeps one in flight, ``k = 1``); ``k = 0`` samples an iteration only after the previous
    one's step, as a loop without a loader process does. Without a bound, every sampling and
    feature copy of the epoch would be issued at its start and contend with training.
    """

    def __init__(self, depth: int = 1) -> None:
        self.depth = depth
        self.steps: list[list[str]] = []

    def record(self, steps: Sequence[str]) -> None:
        """The step task of each worker in the next iteration (in order of iterations)."""
        self.steps.append(list(steps))

    def after(self, iteration: int, w: int) -> list[str]:
        """What worker ``w``'s sampling of ``iteration`` waits for besides its previous sampling."""
        j = iteration - 1 - self.depth
        return [self.steps[j][w]] if 0 <= j < len(self.steps) and w < len(self.steps[j]) else []


PREFETCH_HELP = (
    "minibatches a worker samples (and gathers) ahead of the one it trains "
    "(1: DGL's data loader; 0: one after another, as the real executor runs them)"
)


def check_prefetch(prefetch: int, scheme: str) -> int:
    """``prefetch`` of a scheme's table, checked: minibatches sampled ahead cannot be negative."""
    if prefetch < 0:
        raise ConfigError(f"execution strategy {scheme!r}: prefetch must be >= 0, got {prefetch}")
    return prefetch


def add_sampling(
    plan: Plan,
    inputs: SchemeInputs,
    w: int,
    iteration: int,
    mb: Minibatch,
    prefix: str,
    prefetch: Prefetch | None = None,
    built: tuple[int, int] = (0, 0),
) -> str:
    """Worker ``w`` samples its minibatch on its host's CPU, after its previous one and as far ahead
    of training as ``prefetch`` lets it (default: unbounded).

    ``built``: (edges, vertices) of graphs the step builds from sampled ones (HopGNN's
    micrographs). Building one is a pass over sampled edge lists that writes new ones, not
    sampling: it is counted as the ``bytes`` it reads and writes (two ids per edge, one per
    vertex), which the default cost model prices at the host's memory bandwidth and
    calibration fits on its own (only such steps have bytes)."""
    edges = sum(b.num_edges for b in mb.blocks)
    build_bytes = 8.0 * (2 * built[0] + built[1])
    tid = task_ids.sample_task(prefix)
    previous = [task_ids.sample_task(task_ids.worker_prefix(iteration - 1, w))] if iteration else []
    if prefetch is not None:
        previous += prefetch.after(iteration, w)
    plan.compute(
        tid,
        inputs.host_of_worker(w),
        "sample",
        previous,
        worker=w,
        iteration=iteration,
        items=edges,
        features={
            "edges": float(edges),
            "vertices": float(mb.input_nodes.shape[0]),
            **({"bytes": build_bytes} if build_bytes else {}),
        },
    )
    return tid


def block_sizes(mb: Minibatch) -> list[tuple[int, int, int]]:
    return [(b.num_src, b.num_dst, b.num_edges) for b in mb.blocks]


def add_forward_backward(
    plan: Plan,
    inputs: SchemeInputs,
    w: int,
    iteration: int,
    sizes: list[tuple[int, int, int]],
    deps: list[str],
    prefix: str,
    layers: range | None = None,
    frees: tuple[str, ...] | list[str] = (),
) -> str:
    """Forward then backward over ``layers`` (default: all) of blocks of ``sizes`` on worker ``w``'s GPU.

    Each forward layer allocates what it saves for backward (``act{l}``), freed by that
    layer's backward; a backward layer holds the gradient of its input while it runs.
    The first forward layer frees ``frees`` (the input tensors it consumes, such as the
    gathered cache hits of :func:`add_feature_reads`). Returns the id of the last backward task.
    """
    last = add_forward(plan, inputs, w, iteration, sizes, deps, prefix, layers, frees)
    return add_backward(plan, inputs, w, iteration, sizes, [last], prefix, layers)


def add_forward(
    plan: Plan,
    inputs: SchemeInputs,
    w: int,
    iteration: int,
    sizes: list[tuple[int, int, int]],
    deps: list[str],
    prefix: str,
    layers: range | None = None,
    frees: tuple[str, ...] | list[str] = (),
) -> str:
    """The forward half of :func:`add_forward_backward`; returns the id of the last forward task."""
    gpu = inputs.workers[w]
    model = inputs.model
    layers = range(model.num_layers) if layers is None else layers
    last = list(deps)
    consumed = list(frees)
    for layer in layers:
        spec = model.layers[layer]
        src, dst, edges = sizes[layer]
        tid = task_ids.forward_task(prefix, layer)
        plan.compute(
            tid,
            gpu,
            "forward",
            last,
            worker=w,
            iteration=iteration,
            layer=layer,
            items=edges,
            features=spec.cost_features(src, dst, edges),
            allocate={
                task_ids.activation_tensor(prefix, layer): spec.saved_for_backward_bytes(src, dst, edges)
            },
            free=consumed,
        )
        consumed = []
        last = [tid]
    return last[0]


def add_backward(
    plan: Plan,
    inputs: SchemeInputs,
    w: int,
    iteration: int,
    sizes: list[tuple[int, int, int]],
    deps: list[str],
    prefix: str,
    layers: range | None = None,
) -> str:
    """The backward half of :func:`add_forward_backward`, last layer first: layer ``l`` frees
    ``{prefix}.act{l}`` (which need not have been allocated on this GPU: a scheme that moves
    the saved tensors names them so). Returns the id of the last backward task."""
    gpu = inputs.workers[w]
    model = inputs.model
    layers = range(model.num_layers) if layers is None else layers
    last = list(deps)
    for layer in reversed(layers):
        spec = model.layers[layer]
        src, dst, edges = sizes[layer]
        tid = task_ids.backward_task(prefix, layer)
        plan.compute(
            tid,
            gpu,
            "backward",
            last,
            worker=w,
            iteration=iteration,
            layer=layer,
            items=edges,
            features=spec.backward_cost_features(src, dst, edges),
            memory=src * spec.in_dim * 4,
            free=[task_ids.activation_tensor(prefix, layer)],
        )
        last = [tid]
    return last[0]


def add_gradient_sync(plan: Plan, inputs: SchemeInputs, iteration: int, deps: list[str]) -> list[str]:
    """All-reduce of the gradients among the workers, then each worker's optimizer step.

    Returns the step task of each worker (what its next iteration's forward waits for).
    """
    sync = task_ids.allreduce_task(iteration)
    plan.collective(
        sync,
        "allreduce",
        inputs.workers,
        inputs.model.gradient_bytes(),
        "allreduce",
        deps,
        iteration=iteration,
        carries="gradients",
    )
    state = inputs.model.training_state_bytes(inputs.optimizer)
    steps = []
    for w, gpu in enumerate(inputs.workers):
        tid = task_ids.update_task(iteration, w)
        # The step reads weights, gradients and optimizer state and writes weights and state.
        plan.compute(
            tid,
            gpu,
            "update",
            [sync],
            worker=w,
            iteration=iteration,
            features={"bytes": 2.0 * state, "flops": 4.0 * inputs.model.param_count()},
        )
        steps.append(tid)
    return steps
