"""Bad command-line input, case by case: each is refused with one line naming the option and
the value (exit 2, no traceback) before any work starts, or works as a user would expect."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workbench.cli.common import parse_layer_sizes
from workbench.cli.main import main
from workbench.errors import ConfigError, TraceFormatError

ROOT = Path(__file__).resolve().parents[1]
PLAN = str(ROOT / "examples" / "plans" / "shared_uplink.json")
TRACE = str(ROOT / "examples" / "traces" / "shared_uplink.parquet")
CONFIG = str(ROOT / "examples" / "configs" / "roc-sbm-real.toml")
TINY = "er:n=300,deg=4"


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """``gnnwb argv`` in this process: (exit status, stdout, stderr); argparse's exit included."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(argv: list[str], capsys, *needles: str) -> str:
    """Assert ``argv`` exits 2 with one error line (argparse's usage lines aside) that holds every needle."""
    code, _, err = run_cli(argv, capsys)
    assert code == 2, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1, err
    for needle in needles:
        assert needle in errors[0], errors[0]
    if "argument " not in errors[0]:
        # A command's own error is its only error line; a graph generated before it (a check that
        # needs the graph's size) may have reported its progress, and on a fresh cache it does.
        others = [line for line in err.splitlines() if line.strip() and line != errors[0]]
        assert not any("rror" in line or "usage:" in line for line in others), err
    return errors[0]


@pytest.fixture
def a_file(tmp_path: Path) -> str:
    path = tmp_path / "a-file"
    path.write_text("not a folder\n")
    return str(path)


# --- 1. paths of the wrong kind --------------------------------------------------------------


def test_sim_refuses_a_folder_for_its_plan(tmp_path, capsys):
    refused(["sim", str(tmp_path)], capsys, "PLAN.json|CONFIG.toml", str(tmp_path), "is a folder")


def test_sim_refuses_a_folder_for_its_trace(tmp_path, capsys):
    refused(["sim", PLAN, "--trace", str(tmp_path)], capsys, "--trace", str(tmp_path), "is a folder")


def test_trace_export_refuses_a_folder_for_chrome(tmp_path, capsys):
    refused(["trace", "export", TRACE, "--chrome", str(tmp_path)], capsys, "--chrome", "is a folder")


def test_run_refuses_a_file_for_reports(a_file, capsys):
    refused(["run", "--reports", a_file], capsys, "--reports", a_file, "is a file")


def test_microbench_refuses_a_file_for_out_before_measuring(a_file, capsys):
    refused(["microbench", "--quick", "--out", a_file], capsys, "--out", a_file, "is a file")
    refused(["microbench", "--quick", "-o", a_file], capsys, "--out", a_file, "is a file")


def test_run_microbench_checks_its_folder_before_measuring(a_file):
    from realrun.microbench import MicrobenchConfig, run_microbench

    cfg = MicrobenchConfig.default("cpu", quick=True)
    with pytest.raises(ConfigError, match="is a file, expected a microbenchmark output folder"):
        run_microbench(cfg, a_file)


def test_trace_show_of_a_run_folder_reads_its_trace(tmp_path, capsys):
    (tmp_path / "trace.parquet").write_bytes(Path(TRACE).read_bytes())
    code, out, err = run_cli(["trace", "show", str(tmp_path)], capsys)
    assert code == 0, err
    assert "makespan: 2.006000 ms" in out


def test_trace_show_of_a_folder_without_a_trace_says_so(tmp_path, capsys):
    line = refused(["trace", "show", str(tmp_path)], capsys, str(tmp_path), "is a folder")
    assert "run_id" not in line


def test_read_and_write_trace_name_a_folder(tmp_path):
    from workbench.trace import read_trace, write_trace

    with pytest.raises(TraceFormatError, match="is a folder with no trace.parquet"):
        read_trace(tmp_path)
    with pytest.raises(TraceFormatError, match="is a folder, expected a trace file to write"):
        write_trace(read_trace(TRACE), tmp_path)


@pytest.mark.parametrize("kind", ["folder", "missing"])
def test_sim_cost_model_must_be_an_existing_file(kind, tmp_path, capsys):
    path = tmp_path if kind == "folder" else tmp_path / "missing.json"
    refused(["sim", PLAN, "--cost-model", str(path)], capsys, "--cost-model", str(path))


def test_plan_refuses_a_folder_for_its_output_and_its_config(tmp_path, capsys):
    refused(["plan", CONFIG, "-o", str(tmp_path)], capsys, "--out", "is a folder")
    refused(["plan", str(tmp_path), "-o", str(tmp_path / "p.json")], capsys, "CONFIG.toml", "is a folder")


def test_realrun_refuses_a_file_for_its_folder(a_file, capsys):
    refused(["realrun", CONFIG, "-o", a_file], capsys, "--out", "is a file")


def test_calibrate_refuses_missing_traces(tmp_path, capsys):
    missing = str(tmp_path / "nothing")
    refused(["calibrate", missing, "-o", str(tmp_path / "p.toml")], capsys, missing, "no such")


def test_hardware_show_refuses_a_folder(tmp_path, capsys):
    refused(["hardware", "show", str(tmp_path)], capsys, str(tmp_path), "is a folder")


# --- 2. accepted and wrong -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999", "-0.5", "3", "x"])
def test_sim_jitter_must_be_finite_and_in_range(value, capsys):
    refused(["sim", PLAN, "--jitter", value], capsys, "--jitter", value)


def test_sim_jitter_in_range_runs(capsys):
    code, out, err = run_cli(["sim", PLAN, "--jitter", "0.5", "--seed", "2"], capsys)
    assert code == 0, err
    assert "makespan" in out


def test_empty_fanout_entry_is_an_error(capsys):
    with pytest.raises(ConfigError, match="no empty entry"):
        parse_layer_sizes("15,,5", "--fanouts")
    for text in ("", ",", "15,", "5,0", "5,-1", "5,1.5", "5," + str(2**63)):
        with pytest.raises(ConfigError, match="--fanouts"):
            parse_layer_sizes(text, "--fanouts")
    assert parse_layer_sizes(" 15, 10 ,5", "--fanouts") == [15, 10, 5]
    refused(["sample", "--graph", TINY, "--sampler", "neighbor", "--fanouts", "15,,5"], capsys, "'15,,5'")


@pytest.mark.parametrize("command", [["run"], ["study", "run", "hopgnn"]])
@pytest.mark.parametrize("jobs", ["0", "-2", "1.5", "nan", str(2**64)])
def test_jobs_below_one_or_not_an_integer_is_refused(command, jobs, capsys):
    refused([*command, "--jobs", jobs], capsys, "--jobs", jobs)


def test_report_refuses_a_missing_folder(tmp_path, capsys):
    missing = str(tmp_path / "nowhere")
    refused(["report", "--reports", missing], capsys, "--reports", missing, "no such")
    assert not (tmp_path / "nowhere").exists()


def test_report_refuses_a_folder_with_nothing_to_report(tmp_path, capsys):
    refused(["report", "--reports", str(tmp_path)], capsys, "--reports", "no stored study results")
    assert not (tmp_path / "index.html").exists()


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "http", "80.5"])
def test_port_out_of_range_is_refused(port, capsys):
    refused(["realrun", CONFIG, "--port", port], capsys, "--port", port)


def test_launch_checks_the_port_before_starting_workers():
    from realrun.launcher import launch

    with pytest.raises(ConfigError, match="--port must be at most 65535, got 99999"):
        launch(None, None, CONFIG, port=99999)  # type: ignore[arg-type] - refused before they are used


def test_a_port_in_use_is_still_named():
    import socket

    from realrun.launcher import free_port

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        with pytest.raises(ConfigError, match=f"--port {taken}: in use"):
            free_port(taken)


@pytest.mark.parametrize(
    "argv, option",
    [
        (["partition", "--graph", TINY, "--strategy", "random", "--parts", "2", "--scale", "nan"], "--scale"),
        (["partition", "--graph", TINY, "--strategy", "random", "--parts", "2", "--scale", "inf"], "--scale"),
        (["partition", "--graph", TINY, "--strategy", "random", "--parts", "2", "--scale", "0"], "--scale"),
        (["sample", "--graph", TINY, "--sampler", "full", "--scale", "-inf"], "--scale"),
        (["microbench", "--timeout", "nan"], "--timeout"),
        (["realrun", CONFIG, "--time-limit", "inf"], "--time-limit"),
        (["realrun", CONFIG, "--collective-timeout", "nan"], "--collective-timeout"),
        (["partition", "--graph", TINY, "--strategy", "random", "--parts", "1.5"], "--parts"),
        (["partition", "--graph", TINY, "--strategy", "random", "--parts", "2", "--seed", "-1"], "--seed"),
        (["sim", PLAN, "--seed", str(2**63)], "--seed"),
    ],
)
def test_nan_inf_and_non_integers_are_refused(argv, option, capsys):
    refused(argv, capsys, option)


@pytest.mark.parametrize("capacity", ["nan", "inf", "nan%", "inf%", "-inf"])
def test_place_capacity_nan_or_inf_is_refused(capacity, capsys):
    argv = ["place", "--graph", TINY, "--strategy", "degree", "--gpus", "2", "--capacity", capacity]
    refused(argv, capsys, "--capacity", capacity)


def test_parts_beyond_the_graph_are_refused(capsys):
    argv = ["partition", "--graph", TINY, "--strategy", "random", "--parts", str(2**62)]
    refused(argv, capsys, str(2**62), "parts is more than the 300 vertices")


# --- 3. misleading -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["partition", "place", "sample"])
def test_the_strategies_command_in_a_help_works(command, capsys):
    run_cli([command, "--help"], capsys)
    text = " ".join(run_cli([command, "--help"], capsys)[1].split())
    kinds = re.findall(r"gnnwb strategies list (\w+)", text)
    assert kinds, text
    for kind in kinds:
        code, out, err = run_cli(["strategies", "list", kind], capsys)
        assert code == 0, err
        assert out.startswith(f"{kind}:")


def test_strategies_list_kind_positional_and_option_alike(capsys):
    positional = run_cli(["strategies", "list", "partition"], capsys)
    option = run_cli(["strategies", "list", "--kind", "partition"], capsys)
    assert positional[0] == option[0] == 0
    assert positional[1] == option[1]
    refused(["strategies", "list", "partition", "--kind", "sampling"], capsys, "two kinds")
    refused(["strategies", "list", ""], capsys, "unknown strategy kind ''")


def test_negative_capacity_is_refused_alike_with_a_space_or_an_equals_sign(capsys):
    base = ["place", "--graph", TINY, "--strategy", "degree", "--gpus", "2"]
    spaced = refused([*base, "--capacity", "-1%"], capsys, "--capacity must not be negative, got '-1%'")
    joined = refused([*base, "--capacity=-1%"], capsys)
    assert spaced == joined
    refused([*base, "--capacity", "-4GiB"], capsys, "--capacity must not be negative")
    refused([*base, "--capacity", "-200"], capsys, "--capacity must not be negative")


@pytest.mark.parametrize(
    "argv, option",
    [
        (["sim", PLAN, "--jitter", "-1e-3"], "--jitter"),
        (["sim", PLAN, "--jitter", "-.5"], "--jitter"),
        (["sample", "--graph", TINY, "--sampler", "full", "--batches", "-3"], "--batches"),
        (["place", "--graph", TINY, "--strategy", "degree", "--gpus", "-2", "--capacity", "1"], "--gpus"),
    ],
)
def test_negative_looking_values_reach_their_option(argv, option, capsys):
    line = refused(argv, capsys, option)
    assert "expected one argument" not in line


# --- 4. one vocabulary --------------------------------------------------------------------------


def test_batch_size_in_sample_and_place_and_batch_as_a_hidden_alias(capsys):
    base = ["sample", "--graph", TINY, "--sampler", "neighbor", "--fanouts", "3,3", "--batches", "2"]
    new = run_cli([*base, "--batch-size", "16"], capsys)
    old = run_cli([*base, "--batch", "16"], capsys)
    assert new[0] == old[0] == 0, new[2] + old[2]
    assert "batch 16," in new[1] and "batch 16," in old[1]
    for command in ("sample", "place", "fidelity"):
        text = run_cli([command, "--help"], capsys)[1]
        assert "--batch-size" in text and not re.search(r"--batch\b(?!-)", text), command


def test_hardware_export_says_where_it_wrote(tmp_path, capsys):
    out = tmp_path / "mine.toml"
    code, text, err = run_cli(["hardware", "export", "h100-1x", "-o", str(out)], capsys)
    assert code == 0, err
    assert out.is_file() and f"wrote {out}" in text
    code, text, err = run_cli(["hardware", "export", "h100-1x", "--output", str(out)], capsys)
    assert code == 0 and f"wrote {out}" in text  # the former spelling still works


def test_every_output_option_is_spelled_out(capsys):
    """-o is --out in every command that writes a file (datasets is another module's)."""
    for command in (
        ["plan"],
        ["sim"],
        ["partition"],
        ["calibrate"],
        ["microbench"],
        ["realrun"],
        ["fidelity"],
        ["hardware", "export"],
    ):
        text = run_cli([*command, "--help"], capsys)[1]
        assert re.search(r"-o \S+, --out", text), command
        assert "--output" not in text, command
