"""``gnnwb hardware list|show|export|generate``."""

from __future__ import annotations

import argparse

from workbench.cli.common import (
    add_out_argument,
    examples,
    integer_arg,
    number_arg,
    preset_or_file_arg,
    set_handler,
)


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
    _register_generate(hs)


def _register_generate(hs: argparse._SubParsersAction) -> None:
    from workbench.hardware.generate import MAX_MACHINES

    gp = hs.add_parser(
        "generate",
        help="build a large cluster of DGX-like machines on a fat-tree or rail network",
        description=(
            "Write a cluster of DGX-like machines (GPUs on an NVSwitch, one PCIe switch and one NIC"
            " per GPU, GPUDirect RDMA) on a two-level fat-tree or a rail-optimised network, as the"
            " TOML that gnnwb hardware export writes."
        ),
        **examples(
            "gnnwb hardware generate --machines 64 --gpus 8 --network fat-tree -o big.toml",
            "gnnwb hardware generate --machines 32 --gpus 8 --network rail --gpu h100 -o rail.toml",
        ),
    )
    gp.add_argument(
        "--machines",
        type=integer_arg(minimum=1, maximum=MAX_MACHINES),
        required=True,
        help="number of machines",
    )
    gp.add_argument("--gpus", type=integer_arg(), required=True, help="GPUs per machine: 2, 4 or 8")
    gp.add_argument("--network", required=True, metavar="fat-tree|rail", help="the network between machines")
    gp.add_argument("--gpu", default="a100", metavar="a100|h100", help="the machine model (default a100)")
    gp.add_argument(
        "--leaf-radix",
        type=integer_arg(minimum=2),
        default=64,
        help="fat-tree: ports per leaf switch (default 64)",
    )
    gp.add_argument(
        "--oversubscription",
        type=number_arg(positive=True),
        default=1.0,
        help="down to up bandwidth at each leaf or rail (default 1: full bisection)",
    )
    gp.add_argument("--name", default=None, help="the cluster's name (default dgx-GPU-MxG-NETWORK)")
    add_out_argument(
        gp, "hardware file", metavar="FILE.toml", help="file to write (default: standard output)"
    )
    set_handler(gp, _generate)


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
    from workbench.hardware import load_hardware

    return _write(load_hardware(args.name).to_toml(), args.out)


def _generate(args: argparse.Namespace) -> int:
    from workbench.hardware.generate import generate_cluster

    spec = generate_cluster(
        args.machines,
        args.gpus,
        args.network,
        args.gpu,
        leaf_radix=args.leaf_radix,
        oversubscription=args.oversubscription,
        name=args.name,
    )
    return _write(spec.to_toml(), args.out)


def _write(text: str, out: str | None) -> int:
    from pathlib import Path

    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)  # checked writable as it was parsed
        path.write_text(text)
        print(f"wrote {out}")
    else:
        print(text, end="")
    return 0
