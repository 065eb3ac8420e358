"""``roc-fullgraph``'s schedule: what every part does in one iteration, decided once.

The plan builder (:mod:`workbench.strategies.execution.roc_fullgraph`) turns an
:class:`IterationSchedule` into tasks and costs; the real executor
(:mod:`realrun.schemes.roc_fullgraph`) carries out the same schedule (its halo exchanges)
and times each step under the task id the schedule names. A halo, a peer, a phase or a
task id exists here and nowhere else, so the two sides cannot drift apart.

Per part ``p`` (on worker ``p``): its vertices (:class:`PartLayout`), its halo (for each
other part ``q``, the in-neighbours of ``p``'s vertices that ``q`` owns: the same rows for
every layer, ``in_dim`` floats wide at layer ``l``), the rows it sends to each reader, and,
under a memory policy, the policy's swaps (:class:`~workbench.strategies.memory.base.MemorySchedule`).
Per iteration: every halo copy (:class:`HaloTransfer`) with its bytes, its phase, the task
that waits for it and what it waits for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from workbench.grouping import positions_by_key
from workbench.model import DTYPE_BYTES
from workbench.strategies.execution import task_ids
from workbench.strategies.memory import emit
from workbench.strategies.memory.base import MemorySchedule, OperatorGraph

if TYPE_CHECKING:
    from workbench.graph.csr import CSRGraph
    from workbench.strategies.execution.base import SchemeInputs

FORWARD = "forward"  # a halo's rows, owner -> reader
BACKWARD = "backward"  # their gradients, reader -> owner


class RocTaskIds:
    """The one namer of roc-fullgraph's own steps (the rest come from :mod:`task_ids`)."""

    @staticmethod
    def features(prefix: str) -> str:
        """A resident part's input features, host -> its GPU."""
        return f"{prefix}.features"

    @staticmethod
    def input_tensor(prefix: str, layer: int) -> str:
        """Layer ``layer``'s input activations of a part (``h0``: its input features)."""
        return f"{prefix}.h{layer}"

    @staticmethod
    def training_state(worker: int) -> str:
        return f"w{worker}.training-state"

    @staticmethod
    def halo(prefix: str, layer: int, owner: int) -> str:
        """A part's layer-``layer`` halo rows from part ``owner`` (resident: GPU to GPU)."""
        return f"{prefix}.halo{layer}.from{owner}"

    @staticmethod
    def halo_gradient(prefix: str, layer: int, owner: int) -> str:
        """The gradients of a part's layer-``layer`` halo rows, back to part ``owner``."""
        return f"{prefix}.halograd{layer}.to{owner}"

    @staticmethod
    def host_copy(prefix: str, tensor: str, sender: int) -> str:
        """Under a memory policy: ``tensor`` (``halo{l}``, ``grad_halo{l}``) host to host from
        part ``sender``'s machine."""
        return f"{prefix}.{tensor}.from{sender}"

    # The ids schedule_to_plan (workbench.strategies.memory.emit) gives a policy's steps, named
    # by its namer: the plan builder hands it the part's prefix with its separator.
    @staticmethod
    def operator(prefix: str, op: str) -> str:
        return emit.operator_task(f"{prefix}.", op)

    @staticmethod
    def load(prefix: str, op: str, tensor: str) -> str:
        return emit.load_task(RocTaskIds.operator(prefix, op), tensor)

    @staticmethod
    def write_back(prefix: str, op: str, tensor: str) -> str:
        return emit.write_back_task(RocTaskIds.operator(prefix, op), tensor)


def transfer_phase(src: str, dst: str) -> str:
    """``gather_remote`` across machines; within one, ``d2d`` between GPUs, ``h2d`` / ``d2h`` with host."""
    if src.split(".", 1)[0] != dst.split(".", 1)[0]:
        return "gather_remote"
    if ".gpu" in src and ".gpu" in dst:
        return "d2d"
    return "h2d" if ".gpu" in dst else "d2h"


@dataclass(frozen=True, eq=False)
class PartLayout:
    """One part's vertices, its in-edges and its halo, for one partition (every layer reads the
    same halo rows)."""

    vertices: np.ndarray  # the part's vertex ids, sorted
    edges: int  # in-edges of the part's vertices (what its aggregation reads)
    halo_rows: Mapping[int, np.ndarray]  # owner q -> the in-neighbours of the part's vertices q owns, sorted
    send_rows: Mapping[int, np.ndarray]  # reader q -> positions in ``vertices`` of the rows q's halo takes

    @property
    def halo(self) -> dict[int, int]:
        """Owner q -> how many distinct in-neighbours of the part it owns."""
        return {q: int(rows.shape[0]) for q, rows in self.halo_rows.items()}

    @property
    def num_vertices(self) -> int:
        return int(self.vertices.shape[0])

    @property
    def halo_vertices(self) -> int:
        return sum(self.halo.values())

    @property
    def num_sent(self) -> int:
        """Rows of the part that other parts' halos hold, once per reader."""
        return sum(int(rows.shape[0]) for rows in self.send_rows.values())

    @property
    def label(self) -> str:
        """``[start, end)`` for a contiguous part (what ROC's partitioner makes), else a count."""
        v = self.vertices
        if v.size and v[-1] - v[0] + 1 == v.size:
            return f"vertices [{int(v[0])}, {int(v[-1]) + 1})"
        return f"{v.size} vertices"


def part_layouts(graph: CSRGraph, owner: np.ndarray, num_parts: int) -> list[PartLayout]:
    """Each part's vertices, in-edge count, halo rows and the rows it sends, from the CSR rows
    (in-neighbour lists)."""
    dst = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    src = graph.indices.astype(np.int64, copy=False)
    dst_part = owner[dst]
    edges = np.bincount(dst_part, minlength=num_parts)
    crossing = dst_part != owner[src]
    # Distinct (reading part, halo vertex) pairs: a vertex read by several of p's vertices moves once.
    pairs = np.unique(dst_part[crossing] * graph.num_nodes + src[crossing])
    readers, halo_vertex = np.divmod(pairs, graph.num_nodes)
    vertices = [np.flatnonzero(owner == p) for p in range(num_parts)]
    halos = [_split_by_owner(halo_vertex[readers == p], owner) for p in range(num_parts)]
    sends: list[dict[int, np.ndarray]] = [{} for _ in range(num_parts)]
    for reader, halo in enumerate(halos):
        for q, rows in halo.items():
            sends[q][reader] = np.searchsorted(vertices[q], rows)
    return [PartLayout(vertices[p], int(edges[p]), halos[p], sends[p]) for p in range(num_parts)]


def _split_by_owner(rows: np.ndarray, owner: np.ndarray) -> dict[int, np.ndarray]:
    """Sorted vertex ids ``rows`` grouped by their owning part (each group stays sorted)."""
    return {q: rows[at] for q, at in positions_by_key(owner[rows]).items()}


@dataclass(frozen=True)
class HaloTransfer:
    """One halo exchange between two parts at one layer, as the plan times it and the real run
    does it: the reader's halo rows from their owner (forward) or their gradients back (backward)."""

    task: str | None  # the copy's plan task; None: no copy (one host's DRAM holds both sides)
    direction: str  # FORWARD or BACKWARD
    layer: int
    reader: int  # the part whose halo it is
    owner: int  # the part that owns the rows
    worker: int  # the worker whose task the copy is
    rows: int
    nbytes: int
    src: str  # memory node the bytes leave
    dst: str  # memory node they arrive at
    phase: str
    carries: str
    after: tuple[str, ...]  # the tasks whose output it copies
    feeds: str  # the task that waits for it

    @property
    def sender(self) -> int:
        return self.owner if self.direction == FORWARD else self.reader

    @property
    def host_read(self) -> bool:
        """The reader copies the rows from its own machine's host memory (layer 0's input features
        within one machine, ``h2d``): the owner's GPU takes no part and sends nothing."""
        return self.phase == "h2d"

    @property
    def receiver(self) -> int:
        return self.reader if self.direction == FORWARD else self.owner


@dataclass(frozen=True, eq=False)
class PartSchedule:
    """What part ``part`` (on worker ``part``) holds and does in one iteration."""

    part: int
    prefix: str  # its task ids' prefix (task_ids.worker_prefix)
    gpu: str
    host: str
    layout: PartLayout
    feature_bytes: int  # its input features
    memory: MemorySchedule | None  # the memory policy's swaps (None: everything stays resident)


@dataclass(frozen=True)
class IterationSchedule:
    """One iteration of roc-fullgraph: every part and every halo exchange, in plan order."""

    iteration: int
    training: bool
    parts: tuple[PartSchedule, ...]
    halo: tuple[HaloTransfer, ...]

    def exchanges(self, direction: str, layer: int) -> list[HaloTransfer]:
        """The halo exchanges of one direction at one layer, reader by reader, owner by owner."""
        return [t for t in self.halo if t.direction == direction and t.layer == layer]

    def roc_tasks(self) -> list[str]:
        """Every task id of roc-fullgraph's own steps this schedule names (features loads, halo copies)."""
        features = [RocTaskIds.features(part.prefix) for part in self.parts if part.memory is None]
        return features + [t.task for t in self.halo if t.task is not None]


def resident_halo(
    inputs: SchemeInputs,
    layouts: list[PartLayout],
    it: int,
    training: bool,
) -> list[HaloTransfer]:
    """Parts resident on their GPUs: each layer's halo rows from the owner's GPU (layer 0: the
    input features, from the owner's host memory) and, when training, for layers above 0 their
    gradients back to the owner's GPU."""
    out = []
    layers = inputs.model.layers
    for layer, spec in enumerate(layers):
        for p, lay in enumerate(layouts):
            prefix = task_ids.worker_prefix(it, p)
            for q, count in lay.halo.items():
                owner = task_ids.worker_prefix(it, q)
                src = inputs.host_of_worker(q) if layer == 0 else inputs.workers[q]
                after = () if layer == 0 else (task_ids.forward_task(owner, layer - 1),)
                carries = "features" if layer == 0 else "activations"
                out.append(
                    HaloTransfer(
                        RocTaskIds.halo(prefix, layer, q), FORWARD, layer, p, q, p, count,
                        count * spec.in_dim * DTYPE_BYTES, src, inputs.workers[p],
                        transfer_phase(src, inputs.workers[p]), carries, after,
                        task_ids.forward_task(prefix, layer),
                    )
                )  # fmt: skip
    if training:
        out += _resident_gradients(inputs, layouts, it)
    return out


def _resident_gradients(
    inputs: SchemeInputs,
    layouts: list[PartLayout],
    it: int,
) -> list[HaloTransfer]:
    """The halo gradients of layers above 0, reader's GPU -> owner's GPU, top layer first."""
    out = []
    for layer in reversed(range(1, inputs.model.num_layers)):
        width = inputs.model.layers[layer].in_dim * DTYPE_BYTES
        for p, lay in enumerate(layouts):
            prefix = task_ids.worker_prefix(it, p)
            for q, count in lay.halo.items():
                src, dst = inputs.workers[p], inputs.workers[q]
                out.append(
                    HaloTransfer(
                        RocTaskIds.halo_gradient(prefix, layer, q), BACKWARD, layer, p, q, p, count,
                        count * width, src, dst, transfer_phase(src, dst), "gradients",
                        (task_ids.backward_task(prefix, layer),),
                        task_ids.backward_task(task_ids.worker_prefix(it, q), layer - 1),
                    )
                )  # fmt: skip
    return out


def policy_halo(
    inputs: SchemeInputs,
    parts: list[PartSchedule],
    it: int,
    training: bool,
) -> list[HaloTransfer]:
    """Parts streamed through host memory by a memory policy: a reader's load of a halo tensor
    waits for the owners' write-backs (layer 0: the input features, there from the start), and an
    owner's load of the halo gradients of its rows (``grad_readers{l}``, which its ``halo_grad{l}``
    adds into its own) for the readers' write-backs of them. Between machines the rows also cross
    the network host to host; within one, the write-back is the exchange (no copy). Reader by
    reader, owner by owner: forward layers, then gradients."""
    out: list[HaloTransfer] = []
    emitted = [_emitted_ids(part) for part in parts]
    for part in parts:
        for q in part.layout.halo:
            out += _policy_forward(inputs, part, parts[q], emitted[part.part])
            if training:
                out += _policy_gradients(inputs, part, parts[q], emitted)
    return out


def _policy_forward(
    inputs: SchemeInputs, reader: PartSchedule, owner: PartSchedule, emitted: set[str]
) -> list[HaloTransfer]:
    """The reader's halo loads (features, ``halo{l}``), each after the owner's write-back of ``h{l}``."""
    out = []
    graph = reader.memory.graph  # type: ignore[union-attr]
    writer = {y: op.name for op in owner.memory.graph.operators for y in op.writes}  # type: ignore[union-attr]
    count = reader.layout.halo[owner.part]
    for layer, spec in enumerate(inputs.model.layers):
        tensor = "features" if layer == 0 else f"halo{layer}"
        load = RocTaskIds.load(reader.prefix, _reader_of(graph, tensor), tensor)
        if load not in emitted:
            continue
        after = () if layer == 0 else (RocTaskIds.write_back(owner.prefix, writer[f"h{layer}"], f"h{layer}"),)
        task = RocTaskIds.host_copy(reader.prefix, f"halo{layer}", owner.part)
        carries = "activations" if layer else "features"
        out.append(
            _host_copy(
                inputs, task, FORWARD, layer, reader, owner, reader, count, spec.in_dim, carries, after, load
            )
        )
    return out


def _policy_gradients(
    inputs: SchemeInputs, reader: PartSchedule, owner: PartSchedule, emitted: list[set[str]]
) -> list[HaloTransfer]:
    """The halo gradients of layers above 0: the reader's write-back of ``grad_halo{l}``, read by the
    owner's load of ``grad_readers{l}`` (the gradients of its rows every reader wrote back)."""
    out = []
    graph = reader.memory.graph  # type: ignore[union-attr]
    writer = {y: op.name for op in graph.operators for y in op.writes}
    count = reader.layout.halo[owner.part]
    for layer in range(1, inputs.model.num_layers):
        tensor, arriving = f"grad_halo{layer}", f"grad_readers{layer}"
        wb = RocTaskIds.write_back(reader.prefix, writer.get(tensor, ""), tensor)
        consumer = RocTaskIds.load(owner.prefix, _reader_of(owner.memory.graph, arriving), arriving)  # type: ignore[union-attr]
        if wb not in emitted[reader.part] or consumer not in emitted[owner.part]:
            continue
        task = RocTaskIds.host_copy(owner.prefix, tensor, reader.part)
        width = inputs.model.layers[layer].in_dim
        copy = _host_copy(
            inputs, task, BACKWARD, layer, reader, owner, owner, count, width, "gradients", (wb,), consumer
        )
        out.append(copy)
    return out


def _host_copy(
    inputs: SchemeInputs,
    task: str,
    direction: str,
    layer: int,
    reader: PartSchedule,
    owner: PartSchedule,
    worker: PartSchedule,
    count: int,
    width: int,
    carries: str,
    after: tuple[str, ...],
    feeds: str,
) -> HaloTransfer:
    """A halo exchange through host memory: a network copy between two machines' hosts, none
    within one machine."""
    sender, receiver = (owner, reader) if direction == FORWARD else (reader, owner)
    remote = inputs.worker_machine[sender.part] != inputs.worker_machine[receiver.part]
    return HaloTransfer(
        task if remote else None, direction, layer, reader.part, owner.part, worker.part, count,
        count * width * DTYPE_BYTES, sender.host, receiver.host, "gather_remote", carries, after, feeds,
    )  # fmt: skip


def _reader_of(graph: OperatorGraph, tensor: str) -> str:
    """The first operator of ``graph`` that reads ``tensor`` ('' when none does)."""
    return next((op.name for op in graph.operators if tensor in op.reads), "")


def _emitted_ids(part: PartSchedule) -> set[str]:
    """The task ids schedule_to_plan gives part ``part``'s memory schedule: operators, loads, write-backs."""
    ids = set()
    for step in part.memory.steps:  # type: ignore[union-attr]
        ids.add(RocTaskIds.operator(part.prefix, step.operator))
        ids.update(RocTaskIds.load(part.prefix, step.operator, x) for x in step.load)
        ids.update(RocTaskIds.write_back(part.prefix, step.operator, y) for y in step.write_back)
    return ids
