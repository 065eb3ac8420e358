"""``gnnwb place``: run one placement strategy on a graph and print per-GPU cache sizes and hit rates.

Static placements report the *expected* hit rate under the per-minibatch access
probabilities (exact for full-neighborhood sampling, analytic for samplers with
fanouts, pre-sampled for others); a dynamic cache (``fifo``) is instead fed ``--epochs`` epochs of
sampled minibatches, spread over the GPUs, and reports the hit rate it achieved.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any

from workbench import validate
from workbench.cli.common import (
    MAX_EPOCHS,
    MAX_LAYERS,
    OPTION,
    accept_negative_values,
    add_graph_arguments,
    check_at_most_vertices,
    checked_arg,
    examples,
    integer_arg,
    load_graph,
    parse_layer_sizes,
    parse_params,
    preset_or_file_arg,
    seed_arg,
    set_handler,
)
from workbench.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "place",
        help="place vertex features on GPUs with a placement strategy; print cache sizes and hit rates",
        description="Run a placement strategy (gnnwb strategies list placement) on a graph and print, for "
        "every GPU, how many vertices it caches and what share of its feature reads it expects to serve "
        "locally, from a peer GPU, and from host memory.",
        **examples(
            "gnnwb place --graph er:n=2000,deg=8 --strategy degree --gpus 2 --capacity 10%",
            "gnnwb place --graph er:n=2000,deg=8 --strategy fifo --gpus 2 --capacity 200 --fanouts 5,5 "
            "--batch-size 64",
        ),
    )
    accept_negative_values(p)  # --capacity -1% is a (refused) value, not an option
    add_graph_arguments(p)
    p.add_argument(
        "--strategy", required=True, help="placement name: none, degree, presample, partitioned, ..."
    )
    p.add_argument(
        "--gpus",
        type=integer_arg(minimum=1),
        required=True,
        help="number of GPUs (>= 1, at most the graph's vertices)",
    )
    p.add_argument(
        "--capacity",
        required=True,
        type=checked_arg(capacity_form),
        help="per-GPU cache: vertices (200000), a share of the graph (20%%), or bytes of GPU memory "
        "(4GiB, converted with the graph's feature dimension and 4-byte floats)",
    )
    p.add_argument(
        "--hardware",
        type=preset_or_file_arg("hardware file"),
        default=None,
        help="cluster preset or TOML file (song-jiang reads its links)",
    )
    p.add_argument(
        "--sampler",
        default=None,
        help="sampler name; without one, exact full-neighborhood probabilities over --layers hops",
    )
    p.add_argument(
        "--fanouts", default=None, help="sampler fanouts, input layer first: 15,10,5 (implies neighbor)"
    )
    p.add_argument(
        "--layers",
        type=integer_arg(minimum=1, maximum=MAX_LAYERS),
        default=2,
        help="layers for full-neighborhood sampling (default 2)",
    )
    p.add_argument(
        "--batch-size",
        type=integer_arg(minimum=1),
        default=1024,
        help="seed vertices per minibatch (default 1024)",
    )
    p.add_argument(
        "--epochs",
        type=integer_arg(minimum=1, maximum=MAX_EPOCHS),
        default=1,
        help="epochs to pre-sample (or to replay through a dynamic cache)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="strategy parameter, repeatable (alpha=0.3, mode=algorithm1, partitioner=metis)",
    )
    p.add_argument("--seed", type=seed_arg(), default=0, help="seed of every random decision (default 0)")
    set_handler(p, _place)


@dataclass(frozen=True)
class CacheCapacity:
    """A per-GPU cache as written: vertices, a share of the graph, or bytes of GPU memory.

    Its form is checked as the option is parsed, so ``--capacity nan`` is refused before a
    graph is generated; what it is in vertices needs the graph (its size, its feature width).
    """

    text: str
    vertices: int | None = None
    share: float | None = None
    nbytes: int | None = None

    def in_vertices(self, num_nodes: int, feat_dim: int) -> int:
        from workbench.strategies.placement.base import capacity_in_vertices

        if self.vertices is not None:
            return self.vertices
        if self.share is not None:
            return int(self.share * num_nodes)
        if feat_dim < 1:
            raise ConfigError(
                f"--capacity {self.text!r} is a size, but the graph has no feature dimension; give vertices"
            )
        assert self.nbytes is not None
        return capacity_in_vertices(self.nbytes, feat_dim)


def capacity_form(text: str) -> CacheCapacity:
    """``200000`` (vertices), ``20%`` (of the graph) or a size with a unit (``4GiB``); errors name
    the option as :data:`OPTION`."""
    from workbench.hardware.units import parse_size

    t = text.strip()
    if t.startswith("-"):  # -1, -1% and -4GiB alike
        raise ConfigError(f"{OPTION} must not be negative, got {text!r}")
    if t.endswith("%"):
        try:
            share = float(t[:-1]) / 100
        except ValueError:
            raise ConfigError(f"{OPTION} {text!r}: not a percentage") from None
        if not 0 <= share <= 1:  # NaN fails this too
            raise ConfigError(f"{OPTION} {text!r}: a share of the graph must lie in 0%..100%")
        return CacheCapacity(text, share=share)
    if t.isascii() and t.isdigit():
        return CacheCapacity(text, vertices=validate.integer(int(t), f"{OPTION} (vertices)", minimum=0))
    return CacheCapacity(text, nbytes=parse_size(t, OPTION))


def parse_capacity(text: str, num_nodes: int, feat_dim: int) -> int:
    """Vertices from ``200000``, ``20%`` (of the graph) or a size with a unit (``4GiB``)."""
    try:
        form = capacity_form(text)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace(OPTION, "--capacity")) from None
    return form.in_vertices(num_nodes, feat_dim)


def _place(args: argparse.Namespace) -> int:
    import numpy as np

    from workbench.hardware import load_hardware
    from workbench.registry import PLACEMENTS
    from workbench.strategies.placement.base import AccessModel, PlacementRequest

    # Build the strategy first: a bad name or parameter fails before a graph is generated.
    placement = PLACEMENTS.create(args.strategy, **parse_params(args.param))
    fanouts = parse_layer_sizes(args.fanouts, "--fanouts") if args.fanouts else None
    sampler_name = args.sampler or ("neighbor" if fanouts else None)
    sampler = _sampler(sampler_name, fanouts)
    cluster = load_hardware(args.hardware) if args.hardware else None

    graph = load_graph(args)
    check_at_most_vertices("--gpus", args.gpus, graph)
    capacity = args.capacity.in_vertices(graph.num_nodes, graph.feat_dim)
    num_layers = len(fanouts) if fanouts else args.layers
    access = AccessModel(
        sampler=sampler, num_layers=num_layers, batch_size=args.batch_size, epochs=args.epochs
    )
    rng = np.random.default_rng(args.seed)
    # A request without probabilities first, only for its checks: they fail before the estimate,
    # which can take a while.
    PlacementRequest(
        graph=graph, num_gpus=args.gpus, capacity=capacity, cluster=cluster, access=access, rng=rng
    )
    prob = _access_probability(graph, sampler, sampler_name, fanouts, num_layers, args)
    request = PlacementRequest(
        graph=graph,
        num_gpus=args.gpus,
        capacity=capacity,
        access_probability=prob,
        cluster=cluster,
        access=access,
        rng=rng,
    )
    started = time.perf_counter()
    result = placement.place(request)
    place_seconds = time.perf_counter() - started

    print(
        f"graph {graph.name}: {graph.num_nodes:,} vertices, {graph.num_edges:,} edges; "
        f"{args.gpus} GPU(s), capacity {capacity:,} vertices each"
    )
    print(f"strategy {args.strategy}: placed in {place_seconds:.3f} s")
    _print_groups(placement, request, result, args.gpus)
    if placement.dynamic:
        return _replay(placement, request, sampler, args)
    _print_hit_rates(result, prob)
    return 0


def _sampler(name: str | None, fanouts: list[int] | None) -> Any:
    """The sampler the access estimate follows (None: full neighbourhoods, no sampler named)."""
    from workbench.registry import SAMPLERS

    if name is None:
        return None
    return SAMPLERS.create(name, **({"fanouts": fanouts} if fanouts else {}))


def _access_probability(
    graph: Any,
    sampler: Any,
    sampler_name: str | None,
    fanouts: list[int] | None,
    num_layers: int,
    args: argparse.Namespace,
) -> Any:
    """Each vertex's probability of being read, timed; says on stderr how it was estimated."""
    import numpy as np

    from workbench.strategies.placement.probability import estimate_access_probability, resolve_estimator

    started = time.perf_counter()
    # Full-neighborhood sampling has an exact probability; samplers with fanouts an analytic
    # estimate; others are pre-sampled (resolve_estimator says which).
    exact = sampler is None or sampler_name == "full"
    prob = estimate_access_probability(
        graph,
        sampler=None if exact else sampler,
        num_layers=num_layers,
        batch_size=args.batch_size,
        epochs=args.epochs,
        rng=np.random.default_rng(args.seed),
    )
    how = {
        "exact": f"exact, full neighborhood, {num_layers} layers",
        "fanout": f"analytic, fanouts {fanouts}",
        "presample": f"pre-sampled, {args.epochs} epoch(s)",
    }[resolve_estimator(None if exact else sampler)]
    print(f"access probabilities ({how}): {time.perf_counter() - started:.2f} s", file=sys.stderr)
    return prob


def _print_groups(placement: Any, request: Any, result: Any, gpus: int) -> None:
    """song-jiang's rule per GPU group, and the peer groups where the GPUs do not all read each other."""
    from workbench.strategies.placement.song_jiang import SongJiangPlacement

    if isinstance(placement, SongJiangPlacement):
        for members, alpha in placement.plan_groups(request):
            case = "Rule 1 (replicate)" if alpha is None else f"Algorithm 1, alpha {alpha:.3g}"
            print(f"  GPUs {members}: {case}")
    groups = result.groups()
    if len(groups) < gpus:
        print("peer groups (GPUs that read each other's cache): " + " ".join(str(list(g)) for g in groups))


def _print_hit_rates(result: Any, prob: Any) -> None:
    """A static placement's expected reads and, per GPU, its cache size and where its reads go."""
    rates = result.expected_hit_rate(prob)
    print(f"expected feature reads per minibatch: {float(rates.expected_reads[0]):,.1f} vertices")
    print(f"{'gpu':>4} {'cached':>12} {'local':>8} {'peer':>8} {'host':>8}")
    for g, size in enumerate(result.cache_sizes()):
        print(f"{g:>4} {size:>12,} {rates.local[g]:>8.1%} {rates.peer[g]:>8.1%} {rates.host[g]:>8.1%}")
    print(
        f"{'all':>4} {sum(result.cache_sizes()):>12,} {rates.local.mean():>8.1%} {rates.peer.mean():>8.1%} "
        f"{rates.host.mean():>8.1%}"
    )


def _replay(placement: Any, request: Any, sampler: Any, args: argparse.Namespace) -> int:
    """Feed a dynamic cache ``--epochs`` epochs of minibatches, round-robin over the GPUs; print what it hit."""
    import numpy as np

    if sampler is None:
        raise ConfigError(
            f"{args.strategy} is a dynamic cache: give --sampler to replay minibatches through it"
        )
    graph, rng = request.graph, np.random.default_rng(args.seed + 1)
    hits = np.zeros(args.gpus, dtype=np.int64)
    reads = np.zeros(args.gpus, dtype=np.int64)
    step = 0
    for _ in range(args.epochs):
        order = rng.permutation(graph.train_nids())
        for start in range(0, order.shape[0], args.batch_size):
            gpu = step % args.gpus
            mb = sampler.sample(graph, order[start : start + args.batch_size], rng)
            stats = placement.update(mb.input_nodes, gpu=gpu)
            hits[gpu] += stats.hits
            reads[gpu] += stats.hits + stats.misses
            step += 1
    sizes = placement.state().cache_sizes()
    print(f"replayed {step} minibatches ({args.epochs} epoch(s), round-robin over GPUs)")
    print(f"{'gpu':>4} {'cached':>12} {'hit':>8} {'host':>8}")
    for g in range(args.gpus):
        rate = hits[g] / reads[g] if reads[g] else 0.0
        print(f"{g:>4} {sizes[g]:>12,} {rate:>8.1%} {1 - rate if reads[g] else 0.0:>8.1%}")
    total = hits.sum() / reads.sum() if reads.sum() else 0.0
    print(f"{'all':>4} {sum(sizes):>12,} {total:>8.1%} {1 - total if reads.sum() else 0.0:>8.1%}")
    return 0
