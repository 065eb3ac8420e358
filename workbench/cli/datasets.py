"""``gnnwb datasets list|show|generate``."""

from __future__ import annotations

import argparse
import sys

from workbench.cli.common import (
    accept_negative_values,
    add_out_argument,
    examples,
    number_arg,
    seed_arg,
    set_handler,
)
from workbench.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "datasets",
        help="list, describe and generate graphs (presets, ad-hoc generators, files)",
        description="Graphs: presets shaped like the papers' graphs, ad-hoc generator specs "
        "(rmat:n=100000,m=2000000 | sbm:n=...,blocks=...,deg=... | er:n=...,deg=...), graphs that "
        "installed packages ship, and graph files (.npz, DGL .bin, OGB folders).",
    )
    ds = p.add_subparsers(dest="action", metavar="ACTION")
    ds.required = True
    lp = ds.add_parser("list", help="list the presets with their real-graph sizes and default scale")
    lp.set_defaults(handler=_list)
    for action, text, example in (
        (
            "show",
            "print a graph's size, degree statistics, features, classes and splits",
            "show er:n=1000,deg=8",
        ),
        ("generate", "generate a graph into the cache (or a file)", "generate er:n=1000,deg=8 -o er.npz"),
    ):
        sp = ds.add_parser(action, help=text, description=text, **examples(f"gnnwb datasets {example}"))
        accept_negative_values(sp)
        sp.add_argument("name", help="preset, ad-hoc spec (rmat:n=...,m=...), shipped graph or path")
        sp.add_argument(
            "--scale",
            type=number_arg(positive=True),
            default=None,
            help="fraction of the real graph's vertices (default: the preset's)",
        )
        sp.add_argument(
            "--degree-scale",
            type=number_arg(positive=True),
            default=None,
            help="fraction of the real average degree to keep (default: the preset's)",
        )
        # --graph-seed, as in every command that loads a graph; --seed, its former name here, still works.
        seed = sp.add_mutually_exclusive_group()
        seed.add_argument("--graph-seed", type=seed_arg(), default=0, help="generator seed (default 0)")
        seed.add_argument("--seed", dest="graph_seed", type=seed_arg(), help=argparse.SUPPRESS)
        sp.add_argument("--no-cache", action="store_true", help="neither read nor write the graph cache")
        if action == "generate":
            add_out_argument(sp, "graph file", help="also write the graph to this .npz file")
            set_handler(sp, _generate)
        else:
            set_handler(sp, _show)


def _list(args: argparse.Namespace) -> int:
    from workbench.graph.datasets import DATASETS
    from workbench.graph.loaders import REAL_GRAPHS

    print(
        f"{'preset':<15} {'imitates':<20} {'nodes':>12} {'edges':>15} {'feat':>5} {'cls':>4}  "
        f"{'default scale':>13} {'degree scale':>12} {'default nodes':>14} {'gen':>5}"
    )
    for preset in DATASETS.values():
        full = preset.full
        nodes, _ = preset.size_at(preset.default_scale)
        print(
            f"{preset.name:<15} {full.source:<20} {full.nodes:>12,} {full.edges:>15,} {full.feat_dim:>5} "
            f"{full.classes:>4}  {preset.default_scale:>13g} {preset.degree_scale:>12.3g} {nodes:>14,} "
            f"{preset.generator:>5}"
        )
    print()
    print("shipped real graphs: " + ", ".join(f"{name} ({what})" for name, what in REAL_GRAPHS.items()))
    print(
        "ad-hoc: rmat:n=N,m=M[,a=,b=,c=,communities=,p_in=,connect=1]  sbm:n=N,blocks=B,deg=D[,p_in=,exponent=,concentration=]"
    )
    print("        er:n=N,deg=D   (all take classes=,feat=,train=,val=,test=,noise=)")
    print('        or a .toml file with generator = "rmat" and the same keys (examples/datasets/)')
    print("files:  a .npz saved by gnnwb, a DGL save_graphs .bin, an OGB node-property folder")
    return 0


def _load(args: argparse.Namespace, progress):
    from workbench.graph.datasets import load_dataset

    return load_dataset(
        args.name,
        scale=args.scale,
        seed=args.graph_seed,
        cache=not args.no_cache,
        degree_scale=args.degree_scale,
        progress=progress,
        seed_name="--graph-seed",
    )


def _show(args: argparse.Namespace) -> int:
    graph = _load(args, progress=lambda msg: print(f"[datasets] {msg}", file=sys.stderr, flush=True))
    print(describe(graph))
    return 0


def _generate(args: argparse.Namespace) -> int:
    import time

    from workbench.graph import io

    start = time.perf_counter()
    with _Progress(args.name) as progress:
        graph = _load(args, progress)
    took = time.perf_counter() - start
    print(f"{graph.name}: {graph.num_nodes:,} vertices, {graph.num_edges:,} edges in {took:.1f} s")
    if graph.meta.get("cache_path"):
        print(f"cache: {graph.meta['cache_path']}")
    if args.out:  # checked for kind and writability as it was parsed, before generating
        try:
            written = io.save_graph(graph, args.out)
        except OSError as exc:  # the folder vanished or the disk filled since the check
            raise ConfigError(f"{args.out}: could not write the graph file (-o) ({exc.strerror})") from None
        print(f"wrote {written.resolve()}")
    return 0


class _Progress:
    """A tqdm bar over load_dataset's stages on a terminal, plain lines otherwise.

    The bar opens at the first stage only, so an error before any work (a bad name)
    stays a single line on stderr.
    """

    STAGES = 3  # structure, node data, cache write; a cache hit reports none

    def __init__(self, name: str) -> None:
        self.name = name
        self.bar = None

    def __call__(self, message: str) -> None:
        if not sys.stderr.isatty():
            print(f"[datasets] {message}", file=sys.stderr, flush=True)
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=self.STAGES, desc=self.name, unit="stage", file=sys.stderr, leave=False)
        self.bar.set_postfix_str(message[:60])
        self.bar.update(1)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def describe(graph) -> str:
    """The multi-line report of ``gnnwb datasets show``."""
    from workbench.graph.stats import degree_stats

    s = degree_stats(graph)
    meta = graph.meta
    lines = [f"{graph.name}" + (f"  ({meta['description']})" if meta.get("description") else "")]

    def row(label: str, value: str) -> None:
        lines.append(f"  {label:<14} {value}")

    row("nodes", f"{graph.num_nodes:,}")
    row("edges", f"{graph.num_edges:,} stored (directed; a symmetric graph stores both directions)")
    row(
        "degree",
        f"mean {s.mean:.2f}, median {s.median:g}, p99 {s.p99:g}, max {s.max:,}, isolated {s.isolated:,}",
    )
    hist = "  ".join(f"{lo}:{c:,}" if lo == hi else f"{lo}-{hi}:{c:,}" for lo, hi, c in s.histogram)
    row("degree bins", hist)
    if s.tail_exponent is not None:
        row(
            "tail", f"power-law exponent ~{s.tail_exponent:.2f} (Hill estimate over degrees >= {s.tail_from})"
        )
    features = "explicit" if graph.explicit_features is not None else "generated from labels"
    row("features", f"{graph.feat_dim} dims ({features})")
    row("classes", f"{graph.num_classes}")
    if graph.train_mask is not None:
        sizes = [
            int(m.sum()) if m is not None else 0 for m in (graph.train_mask, graph.val_mask, graph.test_mask)
        ]
        row("split", f"train {sizes[0]:,} / val {sizes[1]:,} / test {sizes[2]:,}")
    if graph.communities is not None:
        share = meta.get("intra_community_share")
        extra = f", {share:.1%} of edges inside" if share is not None else ""
        row("communities", f"{int(graph.communities.max()) + 1}{extra}")
    full = meta.get("full_size")
    if full:
        row(
            "full size",
            f"{full['source']}: {full['nodes']:,} nodes, {full['edges']:,} edges "
            f"({full['stored_edges']:,} stored), {full['feat_dim']} features, {full['classes']} classes",
        )
        row("scaled", f"vertices x {meta['scale']:g}, average degree x {meta['degree_scale']:.3g}")
    if meta.get("source"):
        row("source", str(meta["source"]))
    row("cache", meta.get("cache_path", "(not cached)"))
    return "\n".join(lines)
