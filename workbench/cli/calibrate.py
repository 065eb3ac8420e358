"""``gnnwb calibrate TRACE_OR_FOLDER... -o profile.toml [--hardware PRESET_OR_TOML]``: fit the simulator.

Reads traces (files, or every ``trace.parquet`` under a folder: run folders, microbenchmark
folders), fits link latency and bandwidth per link kind and direction and compute cost
coefficients per device model and phase (``sim.calibrate``), and writes a profile that
``gnnwb sim --hardware profile.toml`` and a configuration's ``[hardware] profile`` accept.
Prints what it fitted and how well. Traces measured on different hardware are refused
unless ``--mixed-hardware`` says to fit them together.
"""

from __future__ import annotations

import argparse

from workbench.cli.common import (
    accept_negative_values,
    add_out_argument,
    examples,
    existing_path_arg,
    preset_or_file_arg,
    seed_arg,
    set_handler,
)
from workbench.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit link bandwidths, latencies and compute costs to measured traces: a hardware profile",
        description="Fit the simulator to traces: link latency and bandwidth per link kind and direction "
        "(bytes against time over each transfer's route), compute cost coefficients per device model and "
        "phase (ROC's linear model; gradient-boosted trees only where clearly better on held-out rows). "
        "Writes a profile TOML with the calibrated cluster, the cost model, fit quality and provenance.",
        **examples(
            "gnnwb microbench --quick --only h2d,gather -o bench",
            "gnnwb calibrate bench --hardware h100-1x -o profile.toml",
        ),
    )
    accept_negative_values(p)
    p.add_argument(
        "traces",
        nargs="+",
        type=existing_path_arg("trace file or folder"),
        metavar="TRACE_OR_FOLDER",
        help="trace files, or folders of trace.parquet files",
    )
    add_out_argument(
        p, "profile file", metavar="PROFILE.toml", required=True, help="where to write the profile"
    )
    p.add_argument(
        "--hardware",
        metavar="PRESET_OR_TOML",
        type=preset_or_file_arg("hardware file"),
        default=None,
        help="the hardware the traces' node names refer to (default: the [hardware] of the config.toml "
        "beside the traces)",
    )
    p.add_argument(
        "--mixed-hardware",
        action="store_true",
        help="fit traces measured on different hardware together (refused without this flag)",
    )
    p.add_argument(
        "--keep-overlapping",
        action="store_true",
        help="also fit transfers that overlapped another on a shared link (their time includes sharing)",
    )
    p.add_argument(
        "--attribute-gaps",
        action="store_true",
        help="count the idle gap before each activity of a worker as part of it (the host's overhead "
        "per task in a real run whose workers do one thing at a time)",
    )
    p.add_argument(
        "--seed", type=seed_arg(), default=0, help="seed of the held-out folds and the trees (default 0)"
    )
    set_handler(p, run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    import sys

    from sim.calibrate import calibrate, read_sources
    from workbench.hardware import load_hardware

    if not args.out.endswith(".toml"):
        raise ConfigError(f"-o {args.out!r}: a profile is a .toml file")
    sources = read_sources(args.traces)
    hardware = args.hardware
    if hardware is None:
        named = {(s.hardware_name, s.hardware_machines) for s in sources if s.hardware_name}
        if len(named) != 1:
            what = (
                "names none" if not named else f"name several ({', '.join(sorted(str(n[0]) for n in named))})"
            )
            raise ConfigError(f"no --hardware given and the traces' configurations {what}: pass --hardware")
        hardware, machines = named.pop()
        cluster = load_hardware(hardware, machines=machines)
    else:
        cluster = load_hardware(hardware)
    profile = calibrate(
        sources,
        cluster,
        allow_mixed=args.mixed_hardware,
        keep_overlapping=args.keep_overlapping,
        gaps=args.attribute_gaps,
        seed=args.seed,
        command="gnnwb " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("gnnwb") else None,
    )
    _print(profile, len(sources))
    out = profile.write(args.out)
    print(f"wrote {out}")
    return 0


def _print(profile, n_sources: int) -> None:  # noqa: ANN001 - a sim.calibrate.Profile
    data = profile.data
    print(f"calibrated {data['hardware']} from {n_sources} trace(s)")
    print(f"{'link kind':<14} {'bandwidth':>14} {'latency':>12}  fitted from")
    for kind, e in sorted(data["links"].items()):
        bw = (
            f"{e['bandwidth'] / 1e9:.4g} GB/s"
            if "bandwidth" in e
            else (f"x{e['bandwidth_scale']:.4g}" if e["bandwidth_fitted"] else "given")
        )
        lat = f"{e['latency'] * 1e6:.4g} us" if e.get("latency_fitted") else "given"
        print(f"{kind:<14} {bw:>14} {lat:>12}  {', '.join(e.get('from', [])) or '-'}")
    print(f"{'phase':<14} {'model':<10} {'rows':>6} {'R^2':>8} {'median |err|':>13}  regressor")
    for phase, models in sorted(data["fit"]["compute"].items()):
        for model, q in sorted(models.items()):
            print(
                f"{phase:<14} {model:<10} {q['rows']:>6} {q['r2']:>8.4f} {q['residual_median_abs'] * 100:>12.2f}%  "
                f"{q['model']}"
            )
    for model, s in sorted(data["sampling"].items()):
        print(
            f"sampling on {model}: {s['per_minibatch'] * 1e6:.4g} us per minibatch, "
            f"{s['per_edge'] * 1e9:.4g} ns per sampled edge"
        )
    for note in data["fit"]["notes"]:
        print(f"note: {note}")
