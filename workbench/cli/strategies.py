"""``gnnwb strategies list``."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("strategies", help="list the registered strategies by kind")
    ss = p.add_subparsers(dest="action", metavar="ACTION")
    ss.required = True
    lp = ss.add_parser("list", help="list strategies, optionally of one kind")
    lp.add_argument("--kind", help="partition, placement, sampling, memory or execution")
    lp.set_defaults(handler=_list)


def _list(args: argparse.Namespace) -> int:
    from workbench.registry import REGISTRIES, registry_for

    kinds = [args.kind] if args.kind else list(REGISTRIES)
    for kind in kinds:
        reg = registry_for(kind)
        names = reg.names()
        print(f"{kind}:" + ("" if names else " (none yet)"))
        for name in names:
            print(f"  {name:<18} {reg.describe(name)}")
    return 0
