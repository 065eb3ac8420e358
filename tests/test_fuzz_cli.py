"""Property-based fuzzing of the command line: argument lists drawn from valid and invalid
values of each command's options (numbers with NaN, infinities, huge and negative ones,
empty strings, paths that are folders, files or missing, unknown names). Every one exits 0,
or exits 2 with one error line that names something the user typed; never a traceback, never
a NaN in the output. Commands that would run for minutes when valid (run, study run, realrun,
microbench, fidelity, validate, calibrate) are fuzzed at the parsing level: argparse's own usage error
(SystemExit 2) is fine, any other exception is a bug."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.cli.common import refusal
from workbench.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
PLANS = sorted(str(p) for p in (ROOT / "examples" / "plans").glob("*.json"))
CONFIG = str(ROOT / "examples" / "configs" / "roc-sbm-real.toml")
TRACE = str(ROOT / "examples" / "traces" / "shared_uplink.parquet")
TINY = "er:n=200,deg=4"

# Placeholders for paths, made real per test in a temporary folder.
FOLDER, FILE, MISSING, NEW = "<folder>", "<garbage-file>", "<missing>", "<new>"
PATHS = st.sampled_from([FOLDER, FILE, MISSING, NEW, ""])

NUMBERS = st.one_of(
    st.integers(-3, 12).map(str),
    st.sampled_from(
        ["nan", "-nan", "inf", "-inf", "1e999", "1.5", "-0.5", "0.0", "", " ", "x", "1e3", "0x10"]
    ),
    st.sampled_from([str(2**31), str(2**62), str(2**63 - 1), str(2**63), str(2**64), str(-(2**63) - 1)]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=4),
)
SMALL_NUMBERS = st.one_of(
    st.integers(0, 3).map(str), st.sampled_from(["0.5", "nan", "inf", "-1", "", str(2**64)])
)
LISTS = st.one_of(
    st.lists(st.integers(-1, 6).map(str), min_size=0, max_size=4).map(",".join),
    st.sampled_from(["15,,5", ",", "3,3,", "a,b", "nan", "2,inf", f"3,{2**63}", "1.5,2"]),
)
CAPACITIES = st.one_of(
    NUMBERS,
    st.sampled_from(["10%", "-1%", "nan%", "inf%", "101%", "%", "1KiB", "-4GiB", "1e999GiB", "nanGB", "0B"]),
)
GRAPHS = st.sampled_from([TINY, TINY, "er:n=abc", "er:", "", "no-such-preset", FOLDER, FILE, MISSING])


def options(pairs: dict[str, Any], required: tuple[str, ...] = ()) -> st.SearchStrategy[list[str]]:
    """The ``required`` options and a subset of the others, some written ``--opt=value``. A
    value in ``pairs`` is a strategy, or a pair (valid values, any values); half the time every
    value is a valid one (so the commands also run to the end), else one option gets any."""

    def split(name: str) -> tuple[st.SearchStrategy[str], st.SearchStrategy[str]]:
        value = pairs[name]
        return value if isinstance(value, tuple) else (value, value)

    @st.composite
    def draw(draw_: st.DrawFn) -> list[str]:
        optional = sorted(set(pairs) - set(required))
        names = (
            [*required, *draw_(st.lists(st.sampled_from(optional), unique=True))] if optional else [*required]
        )
        bad = draw_(st.sampled_from(names)) if names and draw_(st.booleans()) else None
        argv: list[str] = []
        for name in names:
            valid, anything = split(name)
            value = draw_(anything if name == bad else valid)
            argv += [f"{name}={value}"] if draw_(st.booleans()) else [name, value]
        return argv

    return draw()


def command(
    head: list[str], positional: list[st.SearchStrategy[str]], opts: dict, required: tuple[str, ...] = ()
) -> st.SearchStrategy[list[str]]:
    return st.tuples(st.tuples(*positional) if positional else st.just(()), options(opts, required)).map(
        lambda t: [*head, *t[0], *t[1]]
    )


def counts(low: int, high: int) -> st.SearchStrategy[str]:
    return st.integers(low, high).map(str)


GRAPH = (st.just(TINY), GRAPHS)
SEED = (counts(0, 3), NUMBERS)

# What runs for real per example (cheap on a tiny graph or a shipped plan).
RUN = {
    "strategies": st.one_of(
        st.just(["strategies", "list"]),
        st.sampled_from(
            ["partition", "placement", "sampling", "memory", "execution", "", "astrology"]
        ).flatmap(
            lambda k: st.sampled_from([["strategies", "list", k], ["strategies", "list", "--kind", k]])
        ),
    ),
    "hardware show": command(
        ["hardware", "show"],
        [st.sampled_from(["h100-1x", "hopgnn-4xa100-10gbe", "nope", FOLDER, FILE, MISSING, "", PLANS[0]])],
        {},
    ),
    "hardware export": command(
        ["hardware", "export"],
        [st.sampled_from(["h100-1x", "nope", FOLDER])],
        {"-o": (st.just(NEW + ".toml"), PATHS), "--output": PATHS},
    ),
    "datasets show": command(
        ["datasets", "show"],
        [GRAPHS],
        {"--scale": (st.sampled_from(["1", "0.5"]), NUMBERS), "--seed": SEED},
    ),
    "partition": command(
        ["partition"],
        [],
        {
            "--graph": GRAPH,
            "--strategy": (
                st.sampled_from(["random", "equal-vertex", "ldg"]),
                st.sampled_from(["random", "nope", ""]),
            ),
            "--parts": (counts(1, 4), NUMBERS),
            "--seed": SEED,
            "--scale": (st.sampled_from(["1", "0.5"]), NUMBERS),
            "--graph-seed": SEED,
            "--param": st.sampled_from(["x=1", "=", "order=nan", "gpu_memory_bytes=-1"]),
            "-o": (st.just(NEW + ".npy"), st.one_of(PATHS, st.just("owner.csv"))),
        },
        required=("--graph", "--strategy", "--parts"),
    ),
    "place": command(
        ["place"],
        [],
        {
            "--graph": GRAPH,
            "--strategy": (
                st.sampled_from(["degree", "none", "presample"]),
                st.sampled_from(["partitioned", "nope", ""]),
            ),
            "--gpus": (counts(1, 3), NUMBERS),
            "--capacity": (st.sampled_from(["10%", "50", "0", "1KiB", "100%"]), CAPACITIES),
            "--layers": (counts(1, 3), SMALL_NUMBERS),
            "--batch-size": (counts(1, 64), NUMBERS),
            "--epochs": (counts(1, 2), SMALL_NUMBERS),
            "--fanouts": (st.sampled_from(["3,3", "5"]), LISTS),
            "--sampler": (st.sampled_from(["neighbor", "full"]), st.sampled_from(["nope", ""])),
            "--hardware": (st.just("h100-1x"), st.sampled_from(["nope", FOLDER])),
            "--seed": SEED,
        },
        required=("--graph", "--strategy", "--gpus", "--capacity"),
    ),
    "sample": st.one_of(
        *(
            command(
                ["sample"],
                [],
                {
                    "--graph": GRAPH,
                    "--sampler": (st.sampled_from(samplers), st.sampled_from(["nope", "", "bulk-matrix"])),
                    size_option: (st.sampled_from(sizes), LISTS),
                    "--batch-size": (counts(1, 64), NUMBERS),
                    "--batch": (counts(1, 64), NUMBERS),
                    "--batches": (counts(1, 3), SMALL_NUMBERS),
                    "--seed": SEED,
                },
                required=("--graph", "--sampler", size_option, "--batch-size"),
            )
            for samplers, size_option, sizes in (
                (["neighbor"], "--fanouts", ["3,3", "5"]),
                (["full"], "--layers", ["1", "2", "3"]),
                (["ladies", "fastgcn"], "--layer-sizes", ["16,16", "8"]),
            )
        )
    ),
    "sim": command(
        ["sim"],
        [st.sampled_from([*PLANS, *PLANS, FOLDER, FILE, MISSING, "", TRACE])],
        {
            "--jitter": (st.sampled_from(["0", "0.1", "2"]), NUMBERS),
            "--seed": SEED,
            "--trace": (st.just(NEW + ".parquet"), PATHS),
            "--run-id": (st.just("r"), st.sampled_from(["", "x y"])),
            "--hardware": (
                st.just("neugraph-8xp100-pcie"),
                st.sampled_from(["h100-1x", "nope", FOLDER, FILE]),
            ),
            "--cost-model": st.sampled_from([FOLDER, FILE, MISSING]),
            "-o": PATHS,
        },
    ),
    "plan": command(
        ["plan"], [st.sampled_from([FOLDER, FILE, MISSING, "", PLANS[0]])], {"-o": PATHS, "--output": PATHS}
    ),
    "trace": st.one_of(
        command(["trace", "show"], [st.sampled_from([TRACE, FOLDER, FILE, MISSING, "", "<run-folder>"])], {}),
        command(
            ["trace", "export"],
            [st.sampled_from([TRACE, FOLDER, FILE, MISSING, "<run-folder>"])],
            {"--chrome": (st.just(NEW + ".json"), PATHS)},
        ),
    ),
    "report": command(["report"], [], {"--reports": st.sampled_from([FOLDER, FILE, MISSING, ""])}),
}

# Parsed only: valid ones would run for minutes.
PARSE = {
    "run": command(["run"], [], {"--jobs": NUMBERS, "--reports": PATHS, "--only": st.text(max_size=6)}),
    "study run": command(
        ["study", "run"], [st.sampled_from(["hopgnn", "nope", ""])], {"--jobs": NUMBERS, "--reports": PATHS}
    ),
    "realrun": command(
        ["realrun"],
        [st.sampled_from([CONFIG, FOLDER, FILE, MISSING])],
        {
            "--workers": NUMBERS,
            "--epochs": NUMBERS,
            "--time-limit": NUMBERS,
            "--collective-timeout": NUMBERS,
            "--port": NUMBERS,
            "-o": PATHS,
        },
    ),
    "microbench": command(
        ["microbench"],
        [],
        {
            "--repeats": NUMBERS,
            "--warmup": NUMBERS,
            "--timeout": NUMBERS,
            "--threads": NUMBERS,
            "--seed": NUMBERS,
            "-o": PATHS,
            "--device": st.sampled_from(["cpu", "tpu", ""]),
        },
    ),
    "fidelity": command(
        ["fidelity"],
        [],
        {
            "--repeats": NUMBERS,
            "--epochs": NUMBERS,
            "--iterations": NUMBERS,
            "--batch-size": NUMBERS,
            "-o": PATHS,
        },
    ),
    "validate": command(
        ["validate"], [], {"--device": st.sampled_from(["cpu", "cuda", "tpu", ""]), "-o": PATHS}
    ),
    "calibrate": command(
        ["calibrate"],
        [st.sampled_from([TRACE, FOLDER, FILE, MISSING, ""])],
        {"-o": PATHS, "--seed": NUMBERS, "--hardware": st.sampled_from(["h100-1x", "nope", FOLDER])},
    ),
}


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("fuzz")
    (base / "folder").mkdir()
    (base / "garbage").write_bytes(b"\x00not what anyone expects\xff\n")
    run = base / "run"
    run.mkdir()
    (run / "trace.parquet").write_bytes(Path(TRACE).read_bytes())
    return {
        FOLDER: str(base / "folder"),
        FILE: str(base / "garbage"),
        MISSING: str(base / "missing" / "nothing.toml"),
        NEW: str(base / "new" / "output"),
        "<run-folder>": str(run),
    }


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Graphs and sampled epochs the fuzzing generates go to a temporary cache."""
    monkeypatch.setenv("GNNWB_CACHE", str(tmp_path_factory.getbasetemp() / "fuzz-cache"))


def real(argv: list[str], paths: dict[str, str]) -> list[str]:
    out = []
    for token in argv:
        for placeholder, path in paths.items():
            token = token.replace(placeholder, path)
        out.append(token)
    return out


def check_run(argv: list[str], capsys) -> None:
    """``gnnwb argv`` exits 0, or 2 with one error line naming something typed; no NaN printed."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage error (or --help)
        code = exc.code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert code in (0, 2), (argv, code, captured.err)
    if code == 2:
        errors = [line for line in captured.err.splitlines() if ": error: " in line]
        assert len(errors) == 1, (argv, captured.err)
        assert_names_what_was_typed(argv, errors[0].split(": error: ", 1)[1])
    else:
        assert not re.search(r"\bnan\b", captured.out, re.IGNORECASE), (argv, captured.out)


def check_parse(argv: list[str], capsys) -> None:
    """Parsing ``argv`` gives arguments, a refused value's one-line message naming what was
    typed, or argparse's usage error (exit 2, one error line); never an exception."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        err = capsys.readouterr().err
        assert exc.code == 2, (argv, err)
        assert len([line for line in err.splitlines() if ": error: " in line]) == 1, (argv, err)
        return
    message = refusal(args)
    if message is not None:
        assert "\n" not in message and "{option}" not in message, (argv, message)
        assert_names_what_was_typed(argv, message)


def assert_names_what_was_typed(argv: list[str], said: str) -> None:
    typed = {s for token in argv for t in (token, *token.split("=", 1)) for s in (t, repr(t)) if s.strip()}
    empty = any(not token.strip() for token in argv)
    named = any(t in said for t in typed) or "required" in said or (empty and "empty" in said)
    assert named, (argv, said)


def check(name: str, argv: list[str], paths: dict[str, str], capsys) -> None:
    argv = real(argv, paths)
    (check_run if name in RUN else check_parse)(argv, capsys)


FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=False,
)


# report's examples take 20 s on a 2-core AVX2 EPYC (the default suite ran 15:10 there): slow, as
# the 10,000-case fuzz of every command below is.
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "report" else n for n in [*RUN, *PARSE]]
)
@settings(FUZZ, max_examples=12)
@given(data=st.data())
def test_fuzz_command_line(name, data, paths, capsys):
    argv = data.draw((RUN | PARSE)[name], label="argv")
    check(name, argv, paths, capsys)


ANY_COMMAND = st.sampled_from([*RUN, *PARSE]).flatmap(lambda n: (RUN | PARSE)[n].map(lambda a: (n, a)))


@pytest.mark.slow
@settings(FUZZ, max_examples=int(os.environ.get("GNNWB_FUZZ_EXAMPLES", "10000")))
@given(case=ANY_COMMAND)
def test_fuzz_command_line_10k(case, paths, capsys):
    check(*case, paths, capsys)
