"""``gnnwb partition``: placeholder until its issue lands (see COMMAND_MODULES in main.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("partition", help="(not built yet)")
    p.set_defaults(handler=lambda args: print("gnnwb partition: not built yet") or 1)
