"""``gnnwb partition``: run one partitioner on a graph; print its quality and the time it took.

The quality statistics are :meth:`PartitionResult.summary` (edge cut, vertex /
edge / training-vertex balance, and what the strategy adds), then one row per part.
``--out`` writes the owner array: ``.npy`` (one int64 per vertex) or ``.parquet``
(columns ``vertex``, ``owner``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from workbench.cli.common import (
    accept_negative_values,
    add_graph_arguments,
    add_out_argument,
    examples,
    integer_arg,
    load_graph,
    parse_params,
    seed_arg,
    set_handler,
)
from workbench.errors import ConfigError

OUT_SUFFIXES = (".npy", ".parquet")
MAX_PART_ROWS = 64


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "partition",
        help="partition a graph with a partitioner; print edge cut, balance and time",
        description="Run a partitioner (gnnwb strategies list partition) on a graph and print its edge "
        "cut, its vertex, edge and training-vertex balance (largest part over the mean part), the "
        "vertices, edges and training vertices of every part, and the time it took.",
        **examples(
            "gnnwb partition --graph er:n=2000,deg=8 --strategy metis --parts 4",
            "gnnwb partition --graph er:n=2000,deg=8 --strategy ldg --parts 2 --seed 1 -o owner.npy",
        ),
    )
    accept_negative_values(p)
    add_graph_arguments(p)
    p.add_argument(
        "--strategy",
        required=True,
        help="partitioner name: random, equal-vertex, equal-edge, metis, ldg, fennel, pagraph, chunk2d, ...",
    )
    p.add_argument(
        "--parts",
        type=integer_arg(minimum=1),
        required=True,
        help="number of parts (GPUs or machines, >= 1)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="strategy parameter, repeatable (balance_train=true, order=natural, gpu_memory_bytes=16GiB)",
    )
    p.add_argument("--seed", type=seed_arg(), default=0, help="seed of every random decision (default 0)")
    add_out_argument(
        p, "owner array file", metavar="OWNER.npy", help="write the owner array to a .npy or .parquet file"
    )
    set_handler(p, _partition)


def write_owner(owner: Any, path: Path) -> None:
    import numpy as np

    if path.suffix == ".npy":
        np.save(path, np.asarray(owner, dtype=np.int64))
    else:
        import pandas as pd

        pd.DataFrame({"vertex": np.arange(len(owner), dtype=np.int64), "owner": owner}).to_parquet(
            path, index=False
        )


def _partition(args: argparse.Namespace) -> int:
    import numpy as np

    from workbench.registry import PARTITIONERS

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix not in OUT_SUFFIXES:
        raise ConfigError(f"--out {args.out!r}: the file name must end in {' or '.join(OUT_SUFFIXES)}")
    # Build the strategy first: a bad name or parameter fails before a graph is generated.
    partitioner = PARTITIONERS.create(args.strategy, **parse_params(args.param))

    graph = load_graph(args)
    started = time.perf_counter()
    result = partitioner.partition(graph, args.parts, np.random.default_rng(args.seed))
    seconds = time.perf_counter() - started

    print(f"graph {graph.name}: {graph.num_nodes:,} vertices, {graph.num_edges:,} edges")
    print(f"strategy {args.strategy}: {result.num_parts} parts in {seconds:.3f} s")
    for key, value in result.summary().items():
        if key not in ("strategy", "parts", "vertices", "edges"):
            print(f"  {key}: {value}")
    if result.num_parts <= MAX_PART_ROWS:
        print(f"{'part':>5} {'vertices':>12} {'edges':>14} {'train':>10}")
        for i in range(result.num_parts):
            print(
                f"{i:>5} {result.vertex_counts[i]:>12,} {result.edge_counts[i]:>14,} "
                f"{result.train_counts[i]:>10,}"
            )
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            write_owner(result.owner, out)
        except OSError as exc:
            raise ConfigError(f"--out {args.out!r}: cannot write ({exc.strerror or exc})") from None
        print(f"owner array written to {out}")
    return 0
