"""``gnnwb calibrate TRACE_OR_FOLDER... -o profile.toml [--hardware PRESET_OR_TOML]``: fit the simulator.

Reads traces (files, or every ``trace.parquet`` under a folder: run folders, microbenchmark
folders), fits link latency and bandwidth per link kind and direction and compute cost
coefficients per device model and phase (``sim.calibrate``), and writes a profile that
``gnnwb sim --hardware profile.toml`` and a configuration's ``[hardware] profile`` accept.
Prints what it fitted and how well. Traces measured on different hardware are refused
unless ``--mixed-hardware`` says to fit them together. Traces taken under different machine
load (``load.json`` beside a run's trace) are fitted, with one warning line on stderr.

``gnnwb calibrate --published FIGURES.toml [-o profile.toml]`` fits a testbed to figures a
paper reported instead of traces (``sim.calibrate.published``): the named parameters are
fitted to the non-headline figures by simulating each figure's setting, and the headline
figures, never fitted, are simulated with the result and their errors printed.
"""

from __future__ import annotations

import argparse

from workbench.cli.common import (
    accept_negative_values,
    add_out_argument,
    examples,
    existing_path_arg,
    integer_arg,
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
        nargs="*",
        type=existing_path_arg("trace file or folder"),
        metavar="TRACE_OR_FOLDER",
        help="trace files, or folders of trace.parquet files",
    )
    add_out_argument(
        p,
        "profile file",
        metavar="PROFILE.toml",
        help="where to write the profile (required with traces; with --published, leave it out to only print the fit)",
    )
    p.add_argument(
        "--published",
        metavar="FIGURES.toml",
        type=existing_path_arg("published-figures file"),
        default=None,
        help="fit the testbed to a paper's reported figures (studies/published/*.toml) instead of traces: "
        "non-headline figures are fitted, headline figures held out and their errors reported",
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
        "--skip-epochs",
        metavar="N",
        type=integer_arg(minimum=0),
        default=None,
        help="leave out each trace's first N epochs (default: 1 for a real run's trace, whose first epoch "
        "is cold; 0 for a simulated one)",
    )
    p.add_argument(
        "--seed", type=seed_arg(), default=0, help="seed of the held-out folds and the trees (default 0)"
    )
    set_handler(p, run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    import sys

    from sim.calibrate import calibrate, read_sources
    from sim.calibrate.sources import skip_epochs
    from workbench.hardware import load_hardware

    if args.out is not None and not args.out.endswith(".toml"):
        raise ConfigError(f"-o {args.out!r}: a profile is a .toml file")
    if args.published is not None:
        if args.traces:
            raise ConfigError("--published fits to a paper's figures: give it no traces as well")
        return run_published(args.published, args.out)
    if not args.traces:
        raise ConfigError("give traces (files or folders of trace.parquet) or --published FIGURES.toml")
    if args.out is None:
        raise ConfigError("-o/--out PROFILE.toml is required when calibrating from traces")
    sources = []
    for source in read_sources(args.traces):
        kept, line = skip_epochs(source, args.skip_epochs)
        print(line)
        sources.append(kept)
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
    for warning in profile.warnings:  # stderr, as the CLI's errors: stdout stays the fit's report
        print(f"gnnwb calibrate: warning: {warning}", file=sys.stderr)
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


def run_published(path: str, out: str | None) -> int:
    """``--published``: fit, print every figure beside the workbench's, write the profile when ``-o``."""
    import sys

    from sim.calibrate.published import load_published
    from sim.calibrate.published_fit import fit_published, published_profile

    published = load_published(path)
    result = fit_published(published, progress=lambda text: print(text, file=sys.stderr, flush=True))
    print(
        f"fitted {len(published.parameters)} parameter(s) of {published.hardware} to "
        f"{len(published.fitted())} figure(s) of {path} in {result.evaluations} simulation round(s), "
        f"{result.seconds:.1f} s ({result.status})"
    )
    for name, value in result.values.items():
        print(f"  {name:<40} {result.start[name]:>12.4g} -> {value:.4g}")
    print(f"{'figure':<28} {'role':<9} {'paper':>14} {'workbench':>12} {'ratio':>8}  source")
    for row in result.rows:
        simulated = f"{row['workbench']:.4g}" if "workbench" in row else "-"
        ratio = f"{row['ratio']:.3g}x" if "ratio" in row else "-"
        print(
            f"{row['id']:<28} {row['role']:<9} {row['paper']:>14} {simulated:>12} {ratio:>8}  {row['source']}"
        )
    for note in result.notes:
        print(f"note: {note}")
    if out is not None:
        command = "gnnwb " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("gnnwb") else None
        print(f"wrote {published_profile(result, command).write(out)}")
    return 0
