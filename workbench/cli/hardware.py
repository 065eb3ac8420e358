"""``gnnwb hardware list|show|export``."""

from __future__ import annotations

import argparse

from workbench.cli.common import add_out_argument, examples, preset_or_file_arg, set_handler


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hardware", help="list and show cluster presets or TOML files")
    hs = p.add_subparsers(dest="action", metavar="ACTION")
    hs.required = True
    lp = hs.add_parser("list", help="list the cluster presets")
    set_handler(lp, _list)
    sp = hs.add_parser(
        "show",
        help="print a cluster's machines, GPUs and links",
        **examples(
            "gnnwb hardware show hopgnn-4xa100-10gbe",
            "gnnwb hardware show examples/hardware/ring4-nvswitch-nolatency.toml",
        ),
    )
    sp.add_argument(
        "name", type=preset_or_file_arg("hardware file"), help="preset name or path to a hardware TOML file"
    )
    set_handler(sp, _show)
    ep = hs.add_parser(
        "export",
        help="write a preset as an editable TOML file",
        description="Write a cluster as the TOML that gnnwb hardware show and --hardware read.",
        **examples("gnnwb hardware export h100-1x -o mine.toml", "gnnwb hardware show mine.toml"),
    )
    ep.add_argument(
        "name", type=preset_or_file_arg("hardware file"), help="preset name or path to a hardware TOML file"
    )
    add_out_argument(
        ep, "hardware file", metavar="FILE.toml", help="file to write (default: standard output)"
    )
    set_handler(ep, _export)


def _list(args: argparse.Namespace) -> int:
    from workbench.hardware import PRESETS

    for name, build in PRESETS.items():
        spec = build()
        print(f"{name:<30} {spec.num_gpus:>3} GPUs  {spec.description}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from workbench.hardware import load_hardware

    print(load_hardware(args.name).describe())
    return 0


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.hardware import load_hardware

    text = load_hardware(args.name).to_toml()
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)  # checked writable as it was parsed
        out.write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0
