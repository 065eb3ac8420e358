"""``gnnwb sample``: run one sampler on a graph; print per-layer sizes and minibatches per second.

    gnnwb sample --graph products-like --sampler neighbor --fanouts 15,10,5 --batch-size 1024 --batches 32
    gnnwb sample --graph products-like --sampler bulk-matrix --fanouts 15,10,5 --batches 64
    gnnwb sample --graph er:n=5000,deg=10 --sampler ladies --layer-sizes 512,512 --batch-size 256

Seed batches come from a seeded shuffle of the graph's training vertices. Timing
starts after one warm-up minibatch (compilation of the kernels on first use, caches)
and covers ``--batches`` minibatches through ``Sampler.sample_many`` (bulk samplers
take them ``bulk`` at a time).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from workbench.cli.common import (
    MAX_BATCHES,
    MAX_LAYERS,
    accept_negative_values,
    add_graph_arguments,
    examples,
    integer_arg,
    load_graph,
    parse_layer_sizes,
    parse_params,
    seed_arg,
    set_handler,
)
from workbench.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sample",
        help="sample minibatches with a sampler; print per-layer sizes and minibatches/s",
        description="Run a sampler (gnnwb strategies list sampling) on a graph: per-layer mean sizes of the "
        "sampled blocks (input layer first) and the sampling rate.",
        **examples(
            "gnnwb sample --graph er:n=5000,deg=10 --sampler neighbor --fanouts 10,5 --batch-size 256",
            "gnnwb sample --graph er:n=5000,deg=10 --sampler ladies --layer-sizes 512,512 --batch-size 256",
        ),
    )
    accept_negative_values(p)
    add_graph_arguments(p)
    p.add_argument(
        "--sampler", required=True, help="full, neighbor, ladies, fastgcn, locality-aware, bulk-matrix"
    )
    p.add_argument("--fanouts", default=None, help="per-layer fanouts, input layer first: 15,10,5")
    p.add_argument("--layer-sizes", default=None, help="LADIES/FastGCN vertices per layer, input layer first")
    p.add_argument(
        "--layers",
        type=integer_arg(minimum=1, maximum=MAX_LAYERS),
        default=None,
        help="layers of the full sampler (default 2)",
    )
    p.add_argument(
        "--batch-size",
        type=integer_arg(minimum=1),
        default=1024,
        help="seed vertices per minibatch (default 1024)",
    )
    # the former spelling, still accepted
    p.add_argument("--batch", dest="batch_size", type=integer_arg(minimum=1), help=argparse.SUPPRESS)
    p.add_argument(
        "--batches",
        type=integer_arg(minimum=1, maximum=MAX_BATCHES),
        default=16,
        help="minibatches to sample and time (default 16)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='sampler parameter, repeatable (bulk=32, spgemm="torch", torch_device="cuda", algorithm="ladies", factor=3.0)',
    )
    p.add_argument(
        "--seed", type=seed_arg(), default=0, help="seed of the batches and of the sampler (default 0)"
    )
    set_handler(p, _sample)


def sampler_params(args: argparse.Namespace) -> dict[str, Any]:
    params = parse_params(args.param)
    if args.fanouts is not None:
        params["fanouts"] = parse_layer_sizes(args.fanouts, "--fanouts")
    if args.layer_sizes is not None:
        params["layer_sizes"] = parse_layer_sizes(args.layer_sizes, "--layer-sizes")
    if args.layers is not None:
        params["num_layers"] = args.layers
    return params


def _sample(args: argparse.Namespace) -> int:
    import numpy as np

    from workbench.registry import SAMPLERS

    # Build the sampler first: a bad name or parameter fails before a graph is generated.
    sampler = SAMPLERS.create(args.sampler, **sampler_params(args))

    graph = load_graph(args)
    train = graph.train_nids()
    if train.shape[0] < args.batch_size:
        raise ConfigError(
            f"--batch-size {args.batch_size} exceeds the graph's {train.shape[0]} training vertices"
        )
    rng = np.random.default_rng(args.seed)
    batches: list[np.ndarray] = []
    while len(batches) < args.batches:
        order = rng.permutation(train)
        usable = order.shape[0] - order.shape[0] % args.batch_size
        batches.extend(order[i : i + args.batch_size] for i in range(0, usable, args.batch_size))
    batches = batches[: args.batches]

    sampler.sample_many(graph, batches[:1], rng)  # warm-up: kernels compile on first use
    start = time.perf_counter()
    minibatches = sampler.sample_many(graph, batches, rng)
    elapsed = time.perf_counter() - start

    layers = len(minibatches[0].blocks)
    sums = np.zeros((layers, 3))
    for mb in minibatches:
        for layer, b in enumerate(mb.blocks):
            sums[layer] += (b.num_src, b.num_dst, b.num_edges)
    mean = sums / len(minibatches)
    print(f"graph {graph.name}: {graph.num_nodes:,} vertices, {graph.num_edges:,} edges")
    print(f"sampler {sampler!r}, batch {args.batch_size}, {len(minibatches)} minibatches, seed {args.seed}")
    print(
        f"{'layer':<6} {'src vertices':>14} {'dst vertices':>14} {'edges':>14}   (mean per minibatch, input layer first)"
    )
    for layer in range(layers):
        src, dst, edges = mean[layer]
        print(f"{layer:<6} {src:>14,.1f} {dst:>14,.1f} {edges:>14,.1f}")
    rate = len(minibatches) / elapsed if elapsed > 0 else float("inf")
    print(f"{len(minibatches)} minibatches in {elapsed:.3f} s: {rate:,.1f} minibatches/s")
    return 0
