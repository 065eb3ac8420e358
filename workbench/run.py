"""A run configuration turned into an execution scheme's inputs, and then into a plan.

This is the spine every run goes through (``gnnwb plan``, ``gnnwb sim CONFIG``, the
studies, and the real executor next)::

    config -> graph, cluster, model
           -> partition (one part per worker)  -> placement (each GPU's feature cache)
           -> seed batches per worker           -> sampled epoch (cached on disk)
           -> execution scheme                  -> plan

Defaults where a table is missing: ``[partition]`` METIS (DGL's default), no
``[placement]`` (no GPU cache), ``[execution]`` model-centric. ``[sampling]`` is
required: its fanouts are the model's.
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.config import GraphConfig, RunConfig, StrategyConfig
from workbench.epoch import sample_epoch, worker_seed_batches
from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.hardware.spec import ClusterSpec
from workbench.model import DTYPE_BYTES, build_model
from workbench.plan import Plan
from workbench.spine_cache import SpineStages
from workbench.strategies.execution.base import ExecutionScheme, SchemeInputs

DEFAULT_STRATEGIES = {"partition": "metis", "execution": "model-centric"}


@dataclass
class PreparedRun:
    """Everything a run decided before its plan: the scheme and its inputs, and how long each stage took."""

    config: RunConfig
    cluster: ClusterSpec
    scheme: ExecutionScheme
    inputs: SchemeInputs
    partitioner: Any = None  # the partitioner instance (online ones learn across iterations)
    seconds: dict[str, float] = field(default_factory=dict)  # per preparation stage
    # The [cost_model] table of the configuration's calibrated profile ([hardware] profile), None
    # without one: plain data, since the core imports no simulator; sim.calibrate.prepared_cost_model
    # turns it into the cost model whoever simulates passes to simulate().
    cost_model: dict[str, Any] | None = None

    def plan(self, progress: bool = False) -> Plan:
        """The scheme's plan of the epoch; ``progress`` shows a bar over its iterations on stderr."""
        t0 = time.perf_counter()
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(
                total=self.inputs.num_iterations,
                desc="planning",
                unit="iteration",
                file=sys.stderr,
                leave=False,
            )
            self.inputs.on_iteration = lambda done: bar.update(done - bar.n)
        try:
            plan = self.scheme.build(self.inputs)
        finally:
            self.inputs.on_iteration = None
            if bar is not None:
                bar.close()
        self.seconds["plan"] = time.perf_counter() - t0
        return plan


def strategy_config(config: RunConfig, kind: str) -> StrategyConfig | None:
    chosen = config.strategy(kind)
    if chosen is None and kind in DEFAULT_STRATEGIES:
        chosen = StrategyConfig(kind, DEFAULT_STRATEGIES[kind], {})
    return chosen


def load_graph(table: GraphConfig) -> CSRGraph:
    """The graph a ``[graph]`` table names, numbered as its ``order`` says."""
    from workbench.graph.datasets import load_dataset

    graph = load_dataset(
        table.name, scale=table.scale, seed=table.seed, seed_name="graph.seed", scale_name="graph.scale"
    )
    if table.order == "degree":
        # Highest in-degree first (ties by id).
        graph = graph.relabel(_rank(-graph.in_degrees()))
    elif table.order == "metis":
        graph = graph.relabel(_rank(metis_order_parts(graph, table.seed)))
    return graph


def _rank(keys: np.ndarray) -> np.ndarray:
    """The new id of each vertex: its rank by ``keys``, ties by id."""
    rank = np.empty(keys.shape[0], dtype=np.int64)
    rank[np.argsort(keys, kind="stable")] = np.arange(keys.shape[0])
    return rank


# Parts of the METIS order: enough that any chunking of a few to a few dozen vertex intervals
# cuts along part boundaries; recursive bisection numbers the parts along its bisection tree
# (METIS gives the first half of a split the lower part ids), so neighbouring ids stay close at
# every level and any interval of consecutive parts is itself a low-cut region.
METIS_ORDER_PARTS = 64


def metis_order_parts(graph: CSRGraph, seed: int) -> np.ndarray:
    """Each vertex's part in METIS' recursive bisection of ``graph`` into ``METIS_ORDER_PARTS``."""
    from workbench.registry import PARTITIONERS

    parts = min(METIS_ORDER_PARTS, graph.num_nodes)
    metis = PARTITIONERS.get("metis")(recursive=True)
    return np.asarray(metis.partition(graph, parts, np.random.default_rng(seed)).owner, dtype=np.int64)


def prepare_run(
    config: RunConfig,
    *,
    graph: CSRGraph | None = None,
    progress: bool = False,
    sample_cache: bool = True,
    cache_dir: str | None = None,
    spine_cache: bool | None = None,
) -> PreparedRun:
    """Load, partition, place and sample as ``config`` says; ``graph`` skips loading it again.

    ``sample_cache``: keep the sampled epoch on disk (under ``cache_dir``). ``spine_cache``
    (default: as ``sample_cache``): keep partitions, access estimates and placements too
    (``workbench.spine_cache``), so a sweep computes what its points share once.
    """
    from workbench.hardware import load_hardware
    from workbench.registry import EXECUTION_SCHEMES, SAMPLERS

    clock = _StageClock(config.name, progress)
    # Partitions, estimates and placements a sweep's points share, cached with the samples.
    spine = SpineStages(cache_dir, enabled=sample_cache if spine_cache is None else spine_cache)
    cluster = load_hardware(config.hardware.name, machines=config.hardware.machines)
    cost_model = None
    if config.hardware.profile is not None:
        cluster, cost_model = apply_profile(cluster, config.hardware.profile, config.name)
    if graph is None:
        graph = load_graph(config.graph)
    clock.stage("graph")
    num_workers = _num_workers(config, cluster)
    model = _model(config, graph)
    scheme_cfg = strategy_config(config, "execution")
    scheme = EXECUTION_SCHEMES.create(scheme_cfg.name, **scheme_cfg.params)  # type: ignore[union-attr]
    sampling_cfg = config.strategy("sampling")
    if sampling_cfg is None and not scheme.full_graph:
        raise ConfigError(
            f"{config.name}: minibatch training needs a [sampling] table (a sampler and its fanouts)"
        )
    sampler = SAMPLERS.create(sampling_cfg.name, **sampling_cfg.params) if sampling_cfg else None
    partition_cfg, partitioner, partition = _partition(config, spine, graph, model, num_workers)
    clock.stage("partition")
    placement_cfg = config.strategy("placement")
    placement = None
    if placement_cfg is not None:
        placement = _placement(config, spine, graph, cluster, partition, sampler, num_workers)
    clock.stage("placement")
    epoch: list[Any] = []
    if not scheme.full_graph:
        epoch = _sampled_epoch(
            config, graph, partition, sampler, placement, num_workers,
            sample_cache=sample_cache, cache_dir=cache_dir, progress=progress,
        )  # fmt: skip
    clock.stage("sample")
    inputs = SchemeInputs(
        graph=graph,
        cluster=cluster,
        model=model,
        workers=cluster.gpu_nodes()[:num_workers],
        partition=partition,
        epoch=epoch,
        feature_bytes=graph.feat_dim * DTYPE_BYTES,
        placement=placement,
        optimizer=config.training.optimizer,
        name=config.name,
        iterations=(config.training.iterations or config.training.epochs) if scheme.full_graph else 0,
        meta={
            "graph": graph.name,
            "partition": partition_cfg.name,
            "placement": placement_cfg.name if placement_cfg else "none",
            "sampling": sampling_cfg.name if sampling_cfg else "none",
        },
    )
    return PreparedRun(config, cluster, scheme, inputs, partitioner, clock.seconds, cost_model)


class _StageClock:
    """Seconds per preparation stage, each from the end of the one before; ``progress`` prints each."""

    def __init__(self, run: str, progress: bool) -> None:
        self.run = run
        self.progress = progress
        self.seconds: dict[str, float] = {}
        self.clock = time.perf_counter()

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = now - self.clock
        self.clock = now
        if self.progress:
            print(f"[{self.run}] {name}: {self.seconds[name]:.2f} s", file=sys.stderr, flush=True)


def _num_workers(config: RunConfig, cluster: ClusterSpec) -> int:
    """``[training] workers``, default every GPU: one worker per GPU, never more than the cluster has."""
    num_workers = config.training.workers or cluster.num_gpus
    if num_workers > cluster.num_gpus:
        raise ConfigError(
            f"{config.name}: {num_workers} workers but cluster {cluster.name!r} has {cluster.num_gpus} GPUs "
            "(one worker per GPU)"
        )
    return num_workers


def _model(config: RunConfig, graph: CSRGraph) -> Any:
    return build_model(
        config.model.name,
        graph.feat_dim,
        max(graph.num_classes, 2),
        hidden=config.model.hidden,
        num_layers=config.model.num_layers,
        heads=config.model.heads,
    )


def _partition(
    config: RunConfig, spine: SpineStages, graph: CSRGraph, model: Any, num_workers: int
) -> tuple[StrategyConfig, Any, Any]:
    """The ``[partition]`` table (default METIS), its partitioner, and the graph's partition into
    one part per worker."""
    from workbench.registry import PARTITIONERS

    partition_cfg = strategy_config(config, "partition")
    assert partition_cfg is not None  # partition has a default strategy
    partition_params = dict(partition_cfg.params)
    declared = {p.name for p in PARTITIONERS.parameters(partition_cfg.name)}
    if "in_dims" in declared and "in_dims" not in partition_params:
        # A partitioner with per-layer cost models (roc) models the run's layers.
        partition_params["in_dims"] = [layer.in_dim for layer in model.layers]
    partitioner = PARTITIONERS.create(partition_cfg.name, **partition_params)
    partition = spine.partition(
        partitioner, partition_cfg.name, partition_params, graph, num_workers, config.seed
    )
    return partition_cfg, partitioner, partition


def _placement(
    config: RunConfig,
    spine: SpineStages,
    graph: CSRGraph,
    cluster: ClusterSpec,
    partition: Any,
    sampler: Any,
    num_workers: int,
) -> Any:
    """The ``[placement]`` strategy's choice of each GPU's cached vertices, within ``[cache]`` capacity."""
    from workbench.registry import PLACEMENTS
    from workbench.strategies.placement.base import AccessModel, PlacementRequest

    placement_cfg = config.strategy("placement")
    assert placement_cfg is not None  # the caller places only when the configuration says how
    feature_bytes = graph.feat_dim * DTYPE_BYTES
    capacity = config.cache.vertices(graph.num_nodes, feature_bytes, f"{config.name}: cache")
    if capacity > graph.num_nodes:
        raise ConfigError(
            f"{config.name}: cache capacity {capacity:,} vertices is more than graph {graph.name!r} has "
            f"({graph.num_nodes:,})"
        )
    request = PlacementRequest(
        graph=graph,
        num_gpus=num_workers,
        capacity=capacity,
        owner=partition.owner,
        cluster=cluster,
        access=AccessModel(
            sampler=sampler, num_layers=config.model.num_layers, batch_size=config.training.batch_size
        ),
        rng=np.random.default_rng([config.seed, 2]),
    )
    strategy = PLACEMENTS.create(placement_cfg.name, **placement_cfg.params)
    return spine.placement(
        strategy, placement_cfg.name, placement_cfg.params, request, config.strategy("sampling"), config.seed
    )


def _sampled_epoch(
    config: RunConfig,
    graph: CSRGraph,
    partition: Any,
    sampler: Any,
    placement: Any,
    num_workers: int,
    *,
    sample_cache: bool,
    cache_dir: str | None,
    progress: bool,
) -> list[Any]:
    """Each worker's seed batches sampled by its sampler: the epoch a minibatch scheme plans."""
    from workbench.registry import SAMPLERS

    sampling_cfg = config.strategy("sampling")
    assert sampling_cfg is not None  # prepare_run refuses minibatch training without one
    samplers = _worker_samplers(sampling_cfg, sampler, placement, num_workers, SAMPLERS)
    batches = worker_seed_batches(
        graph,
        partition.owner,
        num_workers,
        config.training.batch_size,
        config.seed,
        config.training.iterations,
        config.training.seeds,
    )
    describe: dict[str, Any] = {"name": sampling_cfg.name, "params": sampling_cfg.params}
    if samplers[0] is not sampler:  # per-worker samplers (locality-aware): their caches are part of the key
        describe["caches"] = [hashlib.sha256(v.tobytes()).hexdigest()[:16] for v in placement.gpu_vertices]
    return sample_epoch(
        graph,
        samplers,
        batches,
        config.seed,
        describe=describe if sample_cache else None,
        cache_dir=cache_dir,
        progress=progress,
    )


def apply_profile(cluster: ClusterSpec, path: str, where: str) -> tuple[ClusterSpec, dict[str, Any]]:
    """``cluster`` with a calibrated profile's fitted link parameters, and the profile's cost model table.

    The profile (``gnnwb calibrate``; layout in ``sim.calibrate.profile``) fits links per kind:
    each link of a kind it fitted gets the fitted latency, and the fitted bandwidth (its
    ``bandwidth`` when it has one, else this link's own times its ``bandwidth_scale``); other
    links keep their values.
    """
    from dataclasses import replace

    from workbench.tomlfile import read_toml

    data = read_toml(path, "calibrated profile")
    if not str(data.get("format", "")).startswith("gnnwb-profile") or not isinstance(
        data.get("cost_model"), dict
    ):
        raise ConfigError(
            f"{where}: [hardware] profile {path!r} is not a calibrated profile (gnnwb calibrate writes them)"
        )
    kinds = data.get("links", {})
    links = []
    for link in cluster.links:
        fit = kinds.get(link.kind, {})
        bandwidth, latency = link.bandwidth, link.latency
        if fit.get("bandwidth_fitted"):
            bandwidth = (
                float(fit["bandwidth"])
                if "bandwidth" in fit
                else link.bandwidth * float(fit["bandwidth_scale"])
            )
        if fit.get("latency_fitted"):
            latency = float(fit["latency"])
        links.append(replace(link, bandwidth=bandwidth, latency=latency))
    return replace(cluster, links=tuple(links)), data["cost_model"]


def _worker_samplers(
    sampling_cfg: StrategyConfig, sampler: Any, placement: Any, num_workers: int, registry: Any
) -> list[Any]:
    """One sampler per worker. A sampler that takes a GPU cache (``cached``: locality-aware sampling)
    and was not given one gets its worker's cache from the placement; the same instance otherwise."""
    takes_cache = any(p.name == "cached" for p in registry.parameters(sampling_cfg.name))
    if not takes_cache or "cached" in sampling_cfg.params:
        return [sampler] * num_workers
    if placement is None:
        raise ConfigError(
            f"sampler {sampling_cfg.name!r} favours each GPU's cached vertices: give the run a [placement] "
            "(and a [cache] capacity) so it knows what each GPU caches"
        )
    return [
        registry.create(sampling_cfg.name, **sampling_cfg.params, cached=placement.cached_mask(w))
        for w in range(num_workers)
    ]


# Phases a results row always has, in the order the issue lists them; others follow if present.
ROW_PHASES = (
    "sample",
    "gather_local",
    "gather_remote",
    "h2d",
    "d2d",
    "forward",
    "backward",
    "allreduce",
    "migrate",
)


def results_row(prepared: PreparedRun, trace: Any, executor: str = "sim") -> dict[str, Any]:
    """One row of a results table: what ran, the epoch time and, per phase, busy seconds and bytes.

    ``trace``: the run's trace table (``workbench.trace`` schema). Busy seconds are summed
    over workers (a phase's total work), so they can exceed the epoch time.
    """
    from workbench.trace import makespan, phase_summary

    cfg = prepared.config
    inputs = prepared.inputs
    row: dict[str, Any] = {
        "run": cfg.name,
        "executor": executor,
        "graph": inputs.graph.name,
        "hardware": prepared.cluster.name,
        "model": inputs.model.name,
        "scheme": prepared.scheme.registered_name,
        "partition": inputs.meta.get("partition"),
        "placement": inputs.meta.get("placement"),
        "sampling": inputs.meta.get("sampling"),
        "workers": inputs.num_workers,
        "iterations": inputs.num_iterations,
        "batch_size": cfg.training.batch_size,
        "seed": cfg.seed,
        "epoch_s": makespan(trace),
    }
    summary = phase_summary(trace).set_index("phase")
    phases = list(ROW_PHASES) + [p for p in summary.index if p not in ROW_PHASES]
    for phase in phases:
        row[f"{phase}_busy_s"] = float(summary.loc[phase, "busy_s"]) if phase in summary.index else 0.0
        row[f"{phase}_bytes"] = int(summary.loc[phase, "bytes"]) if phase in summary.index else 0
    return row
