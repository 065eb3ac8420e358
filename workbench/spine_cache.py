"""What the points of a sweep share, computed once: partitions, access-probability estimates, placements.

A sweep over placements, hardware files or schemes repeats the spine's early stages
(``workbench.run.prepare_run``) with inputs that often do not change between points:
the same graph cut by the same partitioner with the same seed, the same analytic
access estimate, the same placement on the same partition and hardware. Each is
cached under a hash of exactly what determines it, the way the sample cache
(``workbench.epoch``) keys an epoch: the graph's fingerprint (``graph_fingerprint``),
the strategy's name and parameters, the sizes, the seed, and fingerprints of the
arrays it takes (a partition's owners) and of the hardware it reads.

Two levels: in memory for the process (the last few entries of each kind; results are
shared, never modified by the schemes) and on disk beside the sample cache
(``<cache>/spine/<kind>/<hash>.npz``: plain arrays, never pickles; a file that cannot be
read is computed again, never trusted). Only what is a function of its key is cached:
partitioners that learn online (``observe``) and dynamic placements are not, and an
estimate only when it is deterministic (the analytic ``fanout`` or ``exact`` one; the
pre-sampled one draws from the placement's generator).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from workbench.atomic import write_npz_atomically
from workbench.cache_root import cache_root
from workbench.epoch import graph_fingerprint
from workbench.graph.csr import CSRGraph
from workbench.strategies.partition.base import Partitioner, PartitionResult
from workbench.strategies.placement.base import (
    AccessModel,
    Placement,
    PlacementRequest,
    PlacementResult,
    distinct_arrays,
)
from workbench.strategies.placement.probability import request_probability, resolve_estimator

CACHE_VERSION = 2  # bump when a key or a file layout changes, or a cached strategy's decisions do
MEMORY_ENTRIES = 6  # per kind: enough for a sweep's hardware x placement points in flight

T = TypeVar("T")
Arrays = dict[str, np.ndarray]

_MEMORY: dict[str, OrderedDict[str, Any]] = {}
_GRAPH_FINGERPRINTS: list[tuple[CSRGraph, str]] = []  # the last graphs fingerprinted (hashing costs ~10 ms)


def spine_cache_dir(cache_dir: str | os.PathLike | None) -> Path:
    """``<cache_dir>/spine`` when a run names its sample cache folder, else ``$GNNWB_CACHE/spine``."""
    return (Path(cache_dir) if cache_dir is not None else cache_root()) / "spine"


def graph_key(graph: CSRGraph) -> str:
    """``graph_fingerprint(graph)`` and a hash of its training vertices (what a training-balanced
    partitioner and the access estimate's seeds read besides the structure), remembered for
    the last two graph objects of the process."""
    for known, key in _GRAPH_FINGERPRINTS:
        if known is graph:
            return key
    key = f"{graph_fingerprint(graph)}-{array_key(graph.train_nids())}"
    _GRAPH_FINGERPRINTS.insert(0, (graph, key))
    del _GRAPH_FINGERPRINTS[2:]
    return key


def array_key(array: np.ndarray) -> str:
    a = np.ascontiguousarray(array)
    return hashlib.sha256(f"{a.dtype}|{a.shape}".encode() + a.tobytes()).hexdigest()[:24]


def entry_path(kind: str, parts: dict[str, Any], cache_dir: str | os.PathLike | None) -> Path:
    """Where the entry of ``kind`` keyed by ``parts`` lives (its name is the hash of the key)."""
    text = json.dumps({"v": CACHE_VERSION, "kind": kind, **parts}, sort_keys=True, default=str)
    return spine_cache_dir(cache_dir) / kind / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.npz"


def cached(
    kind: str,
    path: Path,
    compute: Callable[[], T],
    to_arrays: Callable[[T], Arrays | None],
    from_arrays: Callable[[Arrays], T],
) -> T:
    """The entry at ``path``: from memory, else from disk, else ``compute()`` (then kept in both).

    ``to_arrays`` may answer None for a result that plain arrays cannot hold: it is then
    kept in memory only.
    """
    memory = _MEMORY.setdefault(kind, OrderedDict())
    key = str(path)
    if key in memory:
        memory.move_to_end(key)
        return memory[key]
    value = _read(path, from_arrays)
    if value is None:
        value = compute()
        arrays = to_arrays(value)
        if arrays is not None:
            _write(path, arrays)
    memory[key] = value
    while len(memory) > MEMORY_ENTRIES:
        memory.popitem(last=False)
    return value


def forget_memory() -> None:
    """Drop the in-memory entries (tests: show that the disk alone gives the same results)."""
    _MEMORY.clear()


def _read(path: Path, from_arrays: Callable[[Arrays], T]) -> T | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            return from_arrays({name: data[name] for name in data.files})
    except Exception:  # noqa: BLE001 - a damaged or foreign file: computed again, never trusted
        return None


def _write(path: Path, arrays: Arrays) -> None:
    """Through a temporary file of its own in the same folder, so parallel writers and readers never
    see half a file; a cache that cannot be written is not fatal (the result is in memory)."""
    try:
        write_npz_atomically(path, arrays)
    except OSError as exc:
        print(f"spine cache: could not write {path} ({exc.strerror}); continuing without it", file=sys.stderr)


# ---- the spine's stages ----------------------------------------------------------------
class SpineStages:
    """The partition and placement stages of ``prepare_run``, through the cache when ``enabled``."""

    def __init__(self, cache_dir: str | os.PathLike | None, enabled: bool = True) -> None:
        self.cache_dir = cache_dir
        self.enabled = enabled

    def partition(
        self,
        partitioner: Partitioner,
        name: str,
        params: dict[str, Any],
        graph: CSRGraph,
        num_parts: int,
        seed: int,
    ) -> PartitionResult:
        """``partitioner.partition(graph, num_parts, default_rng(seed))``, cached unless it learns online."""

        def compute() -> PartitionResult:
            return partitioner.partition(graph, num_parts, np.random.default_rng(seed))

        if not self.enabled or type(partitioner).observe is not Partitioner.observe:
            return compute()
        key = {"graph": graph_key(graph), "name": name, "params": params, "parts": num_parts, "seed": seed}
        path = entry_path("partition", key, self.cache_dir)
        result = cached("partition", path, compute, _partition_arrays, lambda a: _partition_from(a, graph))
        # The same structure may come as another graph object (loaded again): answer with this one.
        return result if result.graph is graph else replace(result, graph=graph)

    def placement(
        self,
        strategy: Placement,
        name: str,
        params: dict[str, Any],
        request: PlacementRequest,
        sampling: Any,
        seed: int,
    ) -> PlacementResult:
        """``strategy.place(request)``, cached unless the cache is dynamic; an estimate it needs is cached apart.

        ``sampling``: the run's ``[sampling]`` table (the access model's sampler, by name and
        parameters, for the keys); ``seed``: the run's seed, which ``request.rng`` comes from.
        """

        def compute() -> PlacementResult:
            given = request
            if self.enabled and strategy.uses_access_probability and request.access_probability is None:
                estimate = self.estimate(request, sampling)
                if estimate is not None:
                    given = replace(request, access_probability=estimate)
            return strategy.place(given)

        if not self.enabled or strategy.dynamic:
            return compute()
        key = {
            "graph": graph_key(request.graph),
            "name": name,
            "params": params,
            "gpus": request.num_gpus,
            "capacity": request.capacity,
            "owner": None if request.owner is None else array_key(request.owner),
            "probability": None
            if request.access_probability is None
            else array_key(request.access_probability),
            "cluster": None if request.cluster is None else _cluster_key(request.cluster),
            "access": _access_key(request.access, sampling),
            "seed": seed,
        }
        return cached(
            "placement",
            entry_path("placement", key, self.cache_dir),
            compute,
            _placement_arrays,
            _placement_from,
        )

    def estimate(self, request: PlacementRequest, sampling: Any) -> np.ndarray | None:
        """The request's access probabilities when its estimator is deterministic (cached), else None."""
        access = request.access
        how = resolve_estimator(access.sampler, access.estimator)
        if how not in ("fanout", "exact"):
            return None  # pre-sampling draws from request.rng: left to the placement
        key = {"graph": graph_key(request.graph), "how": how, "access": _access_key(access, sampling)}
        return cached(
            "estimate",
            entry_path("estimate", key, self.cache_dir),
            lambda: request_probability(request),
            lambda p: {"p": p},
            lambda a: a["p"],
        )


def _access_key(access: AccessModel, sampling: Any) -> dict[str, Any]:
    sampler = None if sampling is None else {"name": sampling.name, "params": sampling.params}
    if access.sampler is None:
        sampler = None
    return {
        "sampler": sampler,
        "layers": access.num_layers,
        "batch": access.batch_size,
        "epochs": access.epochs,
        "estimator": access.estimator,
    }


def _cluster_key(cluster: Any) -> str:
    """Every field of the hardware spec (a dataclass: its repr lists them all, floats exactly)."""
    return hashlib.sha256(repr(cluster).encode()).hexdigest()[:24]


def _partition_arrays(result: PartitionResult) -> Arrays | None:
    """A partition as arrays; None (memory only) when it carries more than owners and JSON details."""
    if result.chunk_grid is not None:
        return None
    try:
        details = json.dumps(result.details, sort_keys=True)
    except (TypeError, ValueError):
        return None
    if json.loads(details) != result.details:
        return None  # tuples, numpy scalars: JSON would not give them back as they are
    return {
        "owner": result.owner,
        "num_parts": np.array([result.num_parts], dtype=np.int64),
        "strategy": np.array(result.strategy),
        "details": np.array(details),
    }


def _partition_from(arrays: Arrays, graph: CSRGraph) -> PartitionResult:
    return PartitionResult(
        graph=graph,
        owner=arrays["owner"].astype(np.int64, copy=False),
        num_parts=int(arrays["num_parts"][0]),
        strategy=str(arrays["strategy"]),
        details=json.loads(str(arrays["details"])),
    )


def _placement_arrays(result: PlacementResult) -> Arrays:
    """A placement's arrays, an array that GPUs share (a replicated cache) written once:
    ``set_of[g]`` is GPU ``g``'s array among the distinct ones."""
    groups = result.peer_groups
    arrays, set_of = distinct_arrays(result.gpu_vertices)
    return {
        "vertices": np.concatenate(arrays) if arrays else np.zeros(0, np.int64),
        "lengths": np.array([v.shape[0] for v in arrays], dtype=np.int64),
        "set_of": np.array(set_of, dtype=np.int64),
        "home": result.home,
        "has_groups": np.array([groups is not None]),
        "groups": np.array([g for grp in groups or () for g in grp], dtype=np.int64),
        "group_lengths": np.array([len(grp) for grp in groups or ()], dtype=np.int64),
    }


def _placement_from(arrays: Arrays) -> PlacementResult:
    cuts = np.cumsum(arrays["lengths"])[:-1]
    distinct = [v.astype(np.int64, copy=True) for v in np.split(arrays["vertices"], cuts)]
    for verts in distinct:
        verts.setflags(write=False)  # shared by the GPUs whose set_of names it
    vertices = [distinct[k] for k in arrays["set_of"].tolist()]
    groups = None
    if bool(arrays["has_groups"][0]):
        flat = arrays["groups"].tolist()
        bounds = np.concatenate([[0], np.cumsum(arrays["group_lengths"])]).tolist()
        groups = tuple(tuple(flat[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True))
    return PlacementResult(gpu_vertices=vertices, home=arrays["home"].astype(np.int64), peer_groups=groups)
