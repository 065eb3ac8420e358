"""``gnnwb strategies list``."""

from __future__ import annotations

import argparse

from workbench.cli.common import examples, set_handler


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("strategies", help="list the registered strategies by kind")
    ss = p.add_subparsers(dest="action", metavar="ACTION")
    ss.required = True
    lp = ss.add_parser(
        "list",
        help="list strategies, optionally of one kind",
        **examples("gnnwb strategies list", "gnnwb strategies list partition"),
    )
    lp.add_argument(
        "kind", nargs="?", metavar="KIND", help="partition, placement, sampling, memory or execution"
    )
    # the former spelling, still accepted
    lp.add_argument("--kind", dest="kind_option", default=None, help=argparse.SUPPRESS)
    set_handler(lp, _list)


def _list(args: argparse.Namespace) -> int:
    from workbench.errors import ConfigError
    from workbench.registry import REGISTRIES, registry_for

    if args.kind is not None and args.kind_option is not None and args.kind != args.kind_option:
        raise ConfigError(f"two kinds given: {args.kind!r} and --kind {args.kind_option!r}; give one")
    kind = args.kind if args.kind is not None else args.kind_option
    kinds = [kind] if kind is not None else list(REGISTRIES)
    for kind in kinds:
        reg = registry_for(kind)
        names = reg.names()
        print(f"{kind}:" + ("" if names else " (none yet)"))
        for name in names:
            print(f"  {name:<18} {reg.describe(name)}")
    return 0
