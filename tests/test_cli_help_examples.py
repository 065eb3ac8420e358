"""Every example line in every ``--help`` (a line that starts with ``gnnwb `` or ``$ gnnwb ``)
runs as written and exits 0: a help's examples in order, in a temporary folder holding a copy
of examples/. Examples that run for minutes (real training, whole studies) are in the slow run."""

from __future__ import annotations

import argparse
import shlex
import shutil
from pathlib import Path

import pytest

from workbench.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
# Commands whose examples train for real or run a study's grid: minutes each.
SLOW_COMMANDS = ("realrun", "run", "study run", "report", "fidelity", "validate")


def help_texts() -> list[tuple[str, str]]:
    """(command path, its --help text) for gnnwb and every command and subcommand."""
    texts: list[tuple[str, str]] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        texts.append((path, parser.format_help()))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}".strip())

    walk(build_parser(), "")
    return texts


def example_lines(text: str) -> list[list[str]]:
    """The argument lists of the help's example lines, ``gnnwb`` left off."""
    lines = []
    for line in text.splitlines():
        line = line.strip().removeprefix("$ ")
        if line.startswith("gnnwb "):
            lines.append(shlex.split(line, comments=True)[1:])
    return lines


def _cases() -> list:
    cases = []
    for path, text in help_texts():
        lines = example_lines(text)
        if not lines:
            continue
        slow = any(" ".join(argv).startswith(SLOW_COMMANDS) for argv in lines)
        marks = [pytest.mark.slow] if slow else []
        cases.append(pytest.param(lines, id=path or "gnnwb", marks=marks))
    return cases


def test_the_commands_that_write_or_compute_have_examples():
    with_examples = {path for path, text in help_texts() if example_lines(text)}
    for path in ("partition", "place", "sample", "plan", "sim", "trace show", "trace export", "calibrate"):
        assert path in with_examples, path


def test_an_example_line_is_found_as_written():
    text = "usage: ...\n\nexamples:\n  $ gnnwb sim plan.json --trace 'a b.parquet'  # a comment\n  gnnwb x\n"
    assert example_lines(text) == [["sim", "plan.json", "--trace", "a b.parquet"], ["x"]]


@pytest.mark.parametrize("lines", _cases())
def test_help_examples_run_as_written(lines, tmp_path, monkeypatch, capsys):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for argv in lines:
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 0, f"gnnwb {shlex.join(argv)}: exit {code}: {err}"
