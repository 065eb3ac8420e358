"""Arguments and parsing shared by the commands that run a strategy on a graph (partition, place, sample)."""

from __future__ import annotations

import argparse
import sys
import tomllib
from typing import TYPE_CHECKING, Any

from workbench.errors import ConfigError

if TYPE_CHECKING:
    from workbench.graph.csr import CSRGraph


def add_graph_arguments(p: argparse.ArgumentParser) -> None:
    """``--graph``, ``--scale`` and ``--graph-seed``: which graph to load, as ``load_graph`` reads them."""
    p.add_argument(
        "--graph", required=True, help="dataset preset, ad-hoc spec (er:n=1000,deg=8) or graph file"
    )
    p.add_argument("--scale", type=float, default=None, help="preset size factor (default: the preset's)")
    p.add_argument("--graph-seed", type=int, default=0, help="graph generator seed (default 0)")


def load_graph(args: argparse.Namespace) -> CSRGraph:
    """The graph named by :func:`add_graph_arguments`' options; generation progress goes to stderr."""
    from workbench.graph.datasets import load_dataset

    def say(message: str) -> None:
        print(message, file=sys.stderr)

    return load_dataset(args.graph, scale=args.scale, seed=args.graph_seed, progress=say)


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; values read as TOML (numbers, booleans, quoted strings, lists), else plain strings."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--param {pair!r}: expected KEY=VALUE")
        try:
            params[key] = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            params[key] = text
    return params


def parse_layer_sizes(text: str, flag: str) -> list[int]:
    """Per-layer positive integers written ``15,10,5`` (fanouts, layer sizes), input layer first."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected integers like 15,10,5") from None
    if not sizes or any(s < 1 for s in sizes):
        raise ConfigError(f"{flag} {text!r}: need at least one layer, all >= 1")
    return sizes
