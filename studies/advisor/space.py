"""The advisor's search space: every combination of registered strategies a run can be given.

A candidate is one choice per dimension: execution scheme, partitioner, feature placement and
its cache capacity, GPU memory policy and batch size. Dimensions that do not apply to a scheme
collapse (a full-graph scheme has no placement, cache or batch; only ``roc-fullgraph`` has a
memory policy; ``neugraph-stream`` partitions with its own 2D grid), so the space is a union of
per-scheme products rather than one product with meaningless cells.

What is not searched, and why (said by ``gnnwb advise --help`` too):

* the ``roc`` partitioner learns its split online while training, which an epoch-time search
  cannot rank against fixed partitions;
* the ``fifo`` placement is a dynamic cache advanced by each batch, not a placement decided once;
* placements for a scheme that places features itself (``uses_placement = False``: bulk-pipeline);
* samplers other than the scheme's own (``bulk-pipeline`` samples with ``bulk-matrix``; every
  other minibatch scheme with ``neighbor`` at the given fanouts): a sampler changes what is
  trained, not only how fast, so the user names one with ``--sampler``.

Restrictions are the user's lists per dimension; an unknown name in one is an error naming the
dimension and the names it allows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import ConfigError

NOT_SEARCHED = {
    "partition": {"roc": "learns its split online while training"},
    "placement": {"fifo": "a dynamic cache advanced per batch, not a placement decided once"},
}
FULL_GRAPH_PARTITIONERS = ("equal-vertex", "equal-edge", "metis")  # roc-fullgraph's parts
NEUGRAPH_PARTITIONER = "chunk2d"
DEFAULT_CAPACITIES = ("5%", "20%")
DIMENSIONS = ("scheme", "partition", "placement", "capacity", "memory", "batch_size")


@dataclass(frozen=True)
class Candidate:
    """One combination; ``"-"`` where a dimension does not apply to the scheme."""

    scheme: str
    partition: str
    placement: str = "none"
    capacity: str = "-"
    memory: str = "-"
    batch_size: int = 0  # 0: full-graph training (one iteration per epoch)

    @property
    def label(self) -> str:
        parts = [self.scheme, self.partition]
        if self.placement != "-":
            parts.append(self.placement if self.capacity == "-" else f"{self.placement} {self.capacity}")
        if self.memory != "-":
            parts.append(f"memory {self.memory}")
        if self.batch_size:
            parts.append(f"batch {self.batch_size}")
        return " / ".join(parts)

    def as_row(self) -> dict[str, Any]:
        return {d: getattr(self, d) for d in DIMENSIONS}


@dataclass(frozen=True)
class Base:
    """What the user fixed: the graph, the cluster, the model, the sampler and its fanouts."""

    graph: str
    hardware: str
    model: str = "sage"
    hidden: int = 256
    fanouts: tuple[int, ...] = (10, 5)
    sampler: str = "neighbor"
    profile: str | None = None
    seed: int = 0
    workers: int | None = None  # default every GPU of the cluster
    # Configure each scheme as its real executor runs it (its declared real_run_params: no
    # prefetching, reads not overlapped), so what is searched is what --confirm runs.
    as_real: bool = False
    graph_params: dict[str, Any] = field(default_factory=dict)  # e.g. scale for a preset

    def config(self, c: Candidate, iterations: int | None = None) -> dict[str, Any]:
        """The run configuration of candidate ``c`` (``iterations`` caps a minibatch epoch)."""
        hardware: dict[str, Any] = {"name": self.hardware}
        if self.profile is not None:
            hardware["profile"] = self.profile
        training: dict[str, Any] = {} if self.workers is None else {"workers": self.workers}
        if c.batch_size:
            training["batch_size"] = c.batch_size
            if iterations is not None:
                training["iterations"] = iterations
        else:
            training["iterations"] = 1
        cfg: dict[str, Any] = {
            "name": "advise",
            "seed": self.seed,
            "graph": {"name": self.graph, **self.graph_params},
            "hardware": hardware,
            "model": {"name": self.model, "hidden": self.hidden, "num_layers": len(self.fanouts)},
            "training": training,
            "partition": {"name": c.partition},
            "execution": {"name": c.scheme},
        }
        if c.batch_size:
            sampler = "bulk-matrix" if c.scheme == "bulk-pipeline" else self.sampler
            cfg["sampling"] = {"name": sampler, "fanouts": list(self.fanouts)}
        if c.placement not in ("-", "none"):
            cfg["placement"] = {"name": c.placement}
            cfg["cache"] = {"capacity": c.capacity}
        if c.memory != "-":
            cfg["execution"]["memory_policy"] = c.memory
        if self.as_real:
            from workbench.registry import EXECUTION_SCHEMES

            cfg["execution"].update(EXECUTION_SCHEMES.get(c.scheme).real_run_params or {})
        return cfg


@dataclass(frozen=True)
class Restrictions:
    """The user's lists per dimension; ``None`` searches every registered choice."""

    schemes: tuple[str, ...] | None = None
    partitioners: tuple[str, ...] | None = None
    placements: tuple[str, ...] | None = None
    capacities: tuple[str, ...] | None = None
    memory_policies: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] = (1024,)


def _chosen(flag: str, given: Sequence[str] | None, allowed: Sequence[str]) -> list[str]:
    if given is None:
        return list(allowed)
    unknown = [g for g in given if g not in allowed]
    if unknown:
        raise ConfigError(f"{flag}: unknown {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}")
    return list(dict.fromkeys(given))


def _not_searched(flag: str, kind: str, given: Sequence[str] | None) -> None:
    for name in given or ():
        if name in NOT_SEARCHED[kind]:
            raise ConfigError(f"{flag}: {name!r} is not searched: {NOT_SEARCHED[kind][name]}")


def _searchable(kind: str, names: Iterable[str]) -> list[str]:
    return [n for n in names if n not in NOT_SEARCHED.get(kind, {})]


def candidates(r: Restrictions) -> list[Candidate]:
    """Every candidate the restrictions allow, minibatch schemes first, in a stable order."""
    from workbench.registry import EXECUTION_SCHEMES, PARTITIONERS, PLACEMENTS
    from workbench.registry import MEMORY_POLICIES as MEMORY

    schemes = _chosen("--schemes", r.schemes, EXECUTION_SCHEMES.names())
    all_parts = PARTITIONERS.names()
    _not_searched("--partitioners", "partition", r.partitioners)
    _not_searched("--placements", "placement", r.placements)
    parts = _chosen("--partitioners", r.partitioners, _searchable("partition", all_parts))
    placements = _chosen("--placements", r.placements, _searchable("placement", PLACEMENTS.names()))
    capacities = list(r.capacities or DEFAULT_CAPACITIES)
    memory = _chosen("--memory-policies", r.memory_policies, ["resident", *MEMORY.names()])
    out: list[Candidate] = []
    for scheme in schemes:
        if EXECUTION_SCHEMES.get(scheme).full_graph:
            out.extend(_full_graph(scheme, parts, memory))
            continue
        minibatch_parts = [p for p in parts if p != NEUGRAPH_PARTITIONER]
        # A scheme that places features itself is searched without a cache.
        scheme_placements = placements if EXECUTION_SCHEMES.get(scheme).uses_placement else ["none"]
        for batch in r.batch_sizes:
            for part in minibatch_parts:
                for placement in scheme_placements:
                    caps = ["-"] if placement == "none" else capacities
                    out.extend(Candidate(scheme, part, placement, cap, "-", batch) for cap in caps)
    if not out:
        raise ConfigError("the restrictions leave no candidate: widen --schemes or --partitioners")
    return out


def _full_graph(scheme: str, parts: list[str], memory: list[str]) -> list[Candidate]:
    if scheme == "neugraph-stream":
        return [Candidate(scheme, NEUGRAPH_PARTITIONER, "-")] if NEUGRAPH_PARTITIONER in parts else []
    chosen = [p for p in parts if p in FULL_GRAPH_PARTITIONERS]
    if scheme == "roc-fullgraph":
        return [Candidate(scheme, p, "-", "-", m) for p in chosen for m in memory]
    return [Candidate(scheme, p, "-") for p in chosen]
