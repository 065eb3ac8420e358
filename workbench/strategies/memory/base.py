"""The memory-policy interface: which tensors of a training step stay on the GPU, step by step.

ROC (paper 000, section 5) keeps every tensor of a training step in host DRAM and uses
the GPU as a cache. A memory policy gets the :class:`OperatorGraph` of one training
step on one partition (operators in a topological execution order, each with the
tensors it reads and writes and their sizes) and a GPU capacity, and returns a
:class:`MemorySchedule`: per step, the operator it runs, the tensors it loads from
host, the inputs it finds on the GPU, what it writes back, and what stays cached.

The model every policy shares (the paper's, made explicit):

* An operator runs with all its inputs and outputs on the GPU, plus whatever the
  policy keeps cached through it; their total must fit in the capacity.
* Every output is written back to host once, when it is produced: ROC "writes the
  output tensors of each operator back to CPU DRAM" (section 7.2) so other
  partitions can read them. The write-back volume is therefore the same for every
  policy (it is reported, in ``d2h_bytes``), and what a policy decides is the load
  volume (``h2d_bytes``): Algorithm 1's ``xfer`` counts only loads. Because the host
  always holds a copy, evicting a tensor costs nothing; reading it again costs its
  size.
* Only *active* tensors can be cached: ROC's ``A(S)``, the tensors an executed
  operator read or wrote that a not-yet-executed operator will read (Table 3 lists
  them for Fig. 3's GIN). A tensor nobody reads again is released; a host tensor no
  operator has read yet is not prefetched (prefetching moves the same bytes).

A schedule is kept in a normal form that :func:`schedule_to_plan` relies on: what an
operator releases (inputs and outputs it does not keep) is released right after it
runs, so the cached set after step ``k`` holds only tensors that step ``k + 1`` reads
or keeps. Policies build schedules through :func:`assemble_schedule`, which puts the
cached sets in that form, checks them and computes the volumes.

:func:`check_capacity` is the shared first check: a negative capacity, or one smaller
than some operator's own inputs plus outputs, is a :class:`ConfigError` with the numbers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from workbench.errors import ConfigError
from workbench.plan import CARRIES, PHASES

GiB = 2**30


def describe_bytes(n: int) -> str:
    """``1,500,000,000 bytes (1.4 GiB)``: exact for checking, readable for people."""
    if n >= GiB:
        readable = f"{n / GiB:.3g} GiB"
    elif n >= 2**20:
        readable = f"{n / 2**20:.3g} MiB"
    elif n >= 2**10:
        readable = f"{n / 2**10:.3g} KiB"
    else:
        return f"{n:,} bytes"
    return f"{n:,} bytes ({readable})"


@dataclass(frozen=True)
class Tensor:
    """One tensor of a training step: its name, its size, and what a transfer of it carries."""

    name: str
    bytes: int
    carries: str = "activations"  # one of workbench.plan.CARRIES


@dataclass(frozen=True)
class Operator:
    """One operator: the tensors it reads and writes, and how a plan times it."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    phase: str = "forward"  # forward or backward (workbench.plan.PHASES)
    layer: int | None = None  # the GNN layer it belongs to (0 = input layer), None for the loss
    features: dict[str, float] = field(default_factory=dict, compare=False)  # compute-task cost features


@dataclass(frozen=True, eq=False)
class OperatorGraph:
    """The operators of one training step in a topological execution order, and their tensors.

    A tensor is written by at most one operator; one nobody writes lives in host memory
    before the step (input features, the graph, weights, labels). An operator reads
    only host tensors and tensors an earlier operator wrote, so the list order is a
    valid execution order; dependencies follow from the tensors (an operator depends on
    the writers of what it reads). Construction checks all of this and says what is wrong.
    """

    operators: tuple[Operator, ...]
    tensors: tuple[Tensor, ...]
    name: str = "step"

    def __post_init__(self) -> None:
        where = f"operator graph {self.name!r}"
        if not self.operators:
            raise ConfigError(f"{where}: has no operators")
        sizes: dict[str, int] = {}
        for t in self.tensors:
            if t.name in sizes:
                raise ConfigError(f"{where}: tensor {t.name!r} declared twice")
            if isinstance(t.bytes, bool) or not isinstance(t.bytes, int) or t.bytes < 0:
                raise ConfigError(
                    f"{where}: tensor {t.name!r} size must be a whole number >= 0, got {t.bytes!r}"
                )
            if t.carries not in CARRIES:
                raise ConfigError(
                    f"{where}: tensor {t.name!r} carries {t.carries!r}; allowed: {', '.join(CARRIES)}"
                )
            sizes[t.name] = t.bytes
        writer: dict[str, str] = {}
        seen_ops: set[str] = set()
        for op in self.operators:
            if op.name in seen_ops:
                raise ConfigError(f"{where}: operator {op.name!r} appears twice")
            seen_ops.add(op.name)
            if op.phase not in PHASES:
                raise ConfigError(
                    f"{where}: operator {op.name!r} has phase {op.phase!r}; allowed: {', '.join(PHASES)}"
                )
            for name in (*op.reads, *op.writes):
                if name not in sizes:
                    raise ConfigError(f"{where}: operator {op.name!r} uses undeclared tensor {name!r}")
            if len(set(op.reads)) != len(op.reads) or len(set(op.writes)) != len(op.writes):
                raise ConfigError(f"{where}: operator {op.name!r} names a tensor twice")
            both = set(op.reads) & set(op.writes)
            if both:
                raise ConfigError(f"{where}: operator {op.name!r} reads and writes {sorted(both)[0]!r}")
            for name in op.writes:
                if name in writer:
                    raise ConfigError(
                        f"{where}: tensor {name!r} is written by {writer[name]!r} and again by {op.name!r}"
                    )
                writer[name] = op.name
        later_writer = dict(writer)
        done: set[str] = set()
        for op in self.operators:
            for name in op.reads:
                if name in later_writer and name not in done:
                    raise ConfigError(
                        f"{where}: operator {op.name!r} reads {name!r} before {later_writer[name]!r} writes it "
                        "(list the operators in an execution order)"
                    )
            done.update(op.writes)

    # ---- indexed views (bitmasks over tensors and operators) for the policies ----
    @cached_property
    def tensor_index(self) -> dict[str, int]:
        return {t.name: i for i, t in enumerate(self.tensors)}

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        return tuple(t.bytes for t in self.tensors)

    @cached_property
    def read_masks(self) -> tuple[int, ...]:
        """Per operator, the bitmask of the tensors it reads."""
        idx = self.tensor_index
        return tuple(_mask(idx[n] for n in op.reads) for op in self.operators)

    @cached_property
    def write_masks(self) -> tuple[int, ...]:
        idx = self.tensor_index
        return tuple(_mask(idx[n] for n in op.writes) for op in self.operators)

    @cached_property
    def pred_masks(self) -> tuple[int, ...]:
        """Per operator, the bitmask of the operators it depends on (writers of what it reads)."""
        writer_of: dict[int, int] = {}
        for k, w in enumerate(self.write_masks):
            for i in bits(w):
                writer_of[i] = k
        return tuple(_mask(writer_of[i] for i in bits(r) if i in writer_of) for r in self.read_masks)

    @cached_property
    def host_tensors(self) -> frozenset[str]:
        """Tensors no operator writes: in host memory before the step."""
        written = {n for op in self.operators for n in op.writes}
        return frozenset(t.name for t in self.tensors if t.name not in written)

    def mask_bytes(self, mask: int) -> int:
        sizes = self.sizes
        return sum(sizes[i] for i in bits(mask))

    def names(self, mask: int) -> tuple[str, ...]:
        """Tensor names of a bitmask, in declaration order."""
        return tuple(self.tensors[i].name for i in bits(mask))

    def mask_of(self, names: Sequence[str]) -> int:
        idx = self.tensor_index
        return _mask(idx[n] for n in names)

    def active(self, done_ops: int) -> int:
        """ROC's A(S) for the executed operators ``done_ops`` (a bitmask over operators):
        tensors they read or wrote that an operator outside it reads."""
        touched = later = 0
        for k in range(len(self.operators)):
            if done_ops >> k & 1:
                touched |= self.read_masks[k] | self.write_masks[k]
            else:
                later |= self.read_masks[k]
        return touched & later

    def working_set_bytes(self, k: int) -> int:
        """Bytes operator ``k`` needs on the GPU by itself: its inputs and outputs."""
        return self.mask_bytes(self.read_masks[k] | self.write_masks[k])

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes)


def bits(mask: int):
    """Indices of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _mask(indices) -> int:
    m = 0
    for i in indices:
        m |= 1 << i
    return m


def check_capacity(graph: OperatorGraph, capacity_bytes: int, policy: str) -> int:
    """``capacity_bytes`` as an int; a :class:`ConfigError` if it is negative, not a whole
    number, or smaller than some operator's own inputs plus outputs (the largest named)."""
    where = f"memory policy {policy!r}"
    if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int):
        raise ConfigError(f"{where}: GPU capacity must be a whole number of bytes, got {capacity_bytes!r}")
    if capacity_bytes < 0:
        raise ConfigError(f"{where}: GPU capacity must be >= 0 bytes, got {capacity_bytes:,}")
    need = [graph.working_set_bytes(k) for k in range(len(graph.operators))]
    worst = max(range(len(need)), key=need.__getitem__)
    if need[worst] > capacity_bytes:
        op = graph.operators[worst]
        reads = graph.mask_bytes(graph.read_masks[worst])
        writes = need[worst] - reads
        raise ConfigError(
            f"{where}: operator {op.name!r} of {graph.name!r} needs {describe_bytes(need[worst])} on the GPU "
            f"(reads {describe_bytes(reads)}, writes {describe_bytes(writes)}) but the GPU capacity is "
            f"{describe_bytes(capacity_bytes)}; a smaller partition or a larger GPU is needed"
        )
    return capacity_bytes


@dataclass(frozen=True)
class ScheduleStep:
    """One operator's step. The GPU holds ``reuse`` (and any other cached tensors it keeps)
    before the operator runs; ``load`` is copied in from host first; the outputs are written
    back (``write_back``) after it; then ``keep`` stays cached and everything else of its
    inputs and outputs is released: ``evict`` (read again later, reloaded then) and the
    tensors nobody reads again."""

    operator: str
    load: tuple[str, ...]  # inputs copied host -> GPU before the operator
    reuse: tuple[str, ...]  # inputs already on the GPU (kept from an earlier step)
    write_back: tuple[str, ...]  # outputs copied GPU -> host after it (every output)
    keep: tuple[str, ...]  # everything cached on the GPU after the step
    evict: tuple[str, ...]  # released after the step although a later operator reads them
    peak_bytes: int  # GPU bytes while the operator runs: its inputs, outputs and the cache kept through it


@dataclass(frozen=True, eq=False)
class MemorySchedule:
    """A policy's answer for one graph and capacity. ``exact`` says whether the load volume
    is proven minimal (dpmm without a binding bound); ``stats`` holds search figures."""

    policy: str
    graph: OperatorGraph
    capacity_bytes: int
    steps: tuple[ScheduleStep, ...]
    exact: bool = False
    stats: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def h2d_bytes(self) -> int:
        """Bytes loaded host -> GPU: what the policy minimizes (Algorithm 1's cost)."""
        idx, sizes = self.graph.tensor_index, self.graph.sizes
        return sum(sizes[idx[n]] for s in self.steps for n in s.load)

    @cached_property
    def d2h_bytes(self) -> int:
        """Bytes written back GPU -> host: every output once, the same for every policy."""
        idx, sizes = self.graph.tensor_index, self.graph.sizes
        return sum(sizes[idx[n]] for s in self.steps for n in s.write_back)

    @property
    def volume_bytes(self) -> int:
        """All CPU-GPU traffic of the step: loads plus write-backs."""
        return self.h2d_bytes + self.d2h_bytes

    @property
    def peak_bytes(self) -> int:
        return max((s.peak_bytes for s in self.steps), default=0)

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(s.operator for s in self.steps)

    def summary(self) -> str:
        return (
            f"{self.policy}: loads {describe_bytes(self.h2d_bytes)}, write-backs {describe_bytes(self.d2h_bytes)}, "
            f"peak {describe_bytes(self.peak_bytes)} of {describe_bytes(self.capacity_bytes)}"
        )


def normalize_cached(graph: OperatorGraph, order: Sequence[int], cached: Sequence[int]) -> list[int]:
    """The cached sets with every release moved to right after the operator that last used
    the tensor: ``cached[k]`` keeps only what step ``k + 1`` reads or itself keeps. The loads
    are unchanged (a step loads what it reads and does not find cached) and no step's peak grows."""
    out = list(cached)
    for k in range(len(order) - 2, -1, -1):
        out[k] &= out[k + 1] | graph.read_masks[order[k + 1]]
    if out:
        out[-1] = 0
    return out


def assemble_schedule(
    graph: OperatorGraph,
    capacity_bytes: int,
    order: Sequence[int],
    cached: Sequence[int],
    policy: str,
    exact: bool = False,
    stats: dict[str, Any] | None = None,
) -> MemorySchedule:
    """A :class:`MemorySchedule` from an execution order (operator indices) and the cached set
    after each step (tensor bitmasks). Checks the decisions against the model; a violation is
    a bug in the policy, reported as such (``AssertionError`` naming the step)."""
    n = len(graph.operators)
    if sorted(order) != list(range(n)) or len(cached) != n:
        raise AssertionError(
            f"{policy}: an order must list every operator once, with one cached set per step"
        )
    cached = normalize_cached(graph, order, cached)
    steps = []
    before = 0
    done = 0
    for k, (op_index, after) in enumerate(zip(order, cached, strict=True)):
        op = graph.operators[op_index]
        if graph.pred_masks[op_index] & ~done:
            raise AssertionError(f"{policy}: step {k} runs {op.name!r} before an operator it depends on")
        reads, writes = graph.read_masks[op_index], graph.write_masks[op_index]
        done |= 1 << op_index
        io = reads | writes
        if after & ~graph.active(done):
            raise AssertionError(f"{policy}: step {k} ({op.name!r}) caches a tensor no later operator reads")
        if after & ~(before | io):
            raise AssertionError(f"{policy}: step {k} ({op.name!r}) caches a tensor it neither had nor used")
        peak = graph.mask_bytes(before | io)  # normal form: the cache before it is kept through it
        if peak > capacity_bytes:
            raise AssertionError(
                f"{policy}: step {k} ({op.name!r}) needs {peak:,} of {capacity_bytes:,} bytes"
            )
        steps.append(
            ScheduleStep(
                operator=op.name,
                load=graph.names(reads & ~before),
                reuse=graph.names(reads & before),
                write_back=graph.names(writes),
                keep=graph.names(after),
                evict=graph.names(io & ~after & graph.active(done)),
                peak_bytes=peak,
            )
        )
        before = after
    return MemorySchedule(policy, graph, capacity_bytes, tuple(steps), exact, dict(stats or {}))


class MemoryPolicy(ABC):
    """Decides which tensors of a training step stay on the GPU. Pure: no devices, no time."""

    registered_name: ClassVar[str] = ""

    @abstractmethod
    def schedule(self, graph: OperatorGraph, capacity_bytes: int) -> MemorySchedule:
        """The steps of ``graph`` within ``capacity_bytes`` of GPU memory.

        Raises :class:`ConfigError` (via :func:`check_capacity`) when the capacity is negative
        or some operator's inputs and outputs alone do not fit.
        """
