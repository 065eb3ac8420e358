"""The command line: every subcommand's --help, and one-line errors without tracebacks."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli.main import build_parser, main


def _subcommand_paths() -> list[list[str]]:
    """Every subcommand path, e.g. ["hardware", "show"], found from the parser itself."""
    paths: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    paths.append(prefix + [name])
                    walk(sub, prefix + [name])

    walk(build_parser(), [])
    return paths


@pytest.mark.parametrize("path", [[]] + _subcommand_paths(), ids=lambda p: " ".join(p) or "gnnwb")
def test_help(path: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*path, "--help"])
    assert exc.value.code == 0
    assert "usage: gnnwb" in capsys.readouterr().out


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench.cli.main", *args], capture_output=True, text=True)


def test_hardware_show_prints_machines_and_links() -> None:
    r = _run("hardware", "show", "hopgnn-4xa100-10gbe")
    assert r.returncode == 0, r.stderr
    assert "m3: 1 x A100-40GB" in r.stdout
    assert "network" in r.stdout and "1.25 GB/s" in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["hardware", "show", "no-such-cluster"], "unknown hardware preset 'no-such-cluster'"),
        (["strategies", "list", "--kind", "astrology"], "unknown strategy kind 'astrology'"),
    ],
)
def test_user_errors_are_one_line(args: list[str], message: str) -> None:
    r = _run(*args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_bad_hardware_toml_is_one_line(tmp_path) -> None:
    from workbench.hardware import load_hardware

    text = load_hardware("h100-1x").to_toml().replace('bandwidth = "48 GB/s"', 'bandwidth = "-48 GB/s"')
    (tmp_path / "neg.toml").write_text(text)
    r = _run("hardware", "show", str(tmp_path / "neg.toml"))
    assert r.returncode == 2 and "bandwidth must be positive" in r.stderr and "Traceback" not in r.stderr


def test_a_machine_without_torch_gets_one_line_naming_the_extra(monkeypatch, capsys, tmp_path) -> None:
    """Installed without the extra "cpu" (a GPU machine keeping its own torch), a real run says
    what is missing instead of a traceback."""
    import realrun.launcher

    def no_torch(*_args, **_kwargs):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(realrun.launcher, "prepare_real_run", no_torch)
    config = Path(__file__).resolve().parents[1] / "examples" / "configs" / "roc-sbm-real.toml"
    assert main(["realrun", str(config), "--workers", "2", "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "gnnwb realrun: error: torch is not installed; install the project's CPU build with "
        "pip install -e '.[cpu]', or a CUDA build of torch"
    ]


def test_sim_shows_a_bar_while_a_large_plan_is_simulated(monkeypatch, capsys, tmp_path) -> None:
    """Over ``PROGRESS_TASKS`` tasks the simulation advances a bar on stderr; the epoch is the same."""
    from workbench.cli import sim as sim_cli

    config = Path(__file__).resolve().parents[1] / "examples" / "configs" / "sage-products-hopgnn.toml"
    assert main(["sim", str(config), "-o", str(tmp_path / "quiet")]) == 0
    quiet = capsys.readouterr()
    assert "simulating" not in quiet.err
    monkeypatch.setattr(sim_cli, "PROGRESS_TASKS", 1)
    assert main(["sim", str(config), "-o", str(tmp_path / "bar")]) == 0
    shown = capsys.readouterr()
    assert "simulating" in shown.err and "task" in shown.err
    epoch = [line for line in quiet.out.splitlines() if line.startswith("epoch time")]
    assert epoch and epoch == [line for line in shown.out.splitlines() if line.startswith("epoch time")]
