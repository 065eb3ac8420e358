"""``gnnwb sample``: placeholder until its issue lands (see COMMAND_MODULES in main.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="(not built yet)")
    p.set_defaults(handler=lambda args: print("gnnwb sample: not built yet") or 1)
