"""README.md's "A quick tour of the command line" runs as written, in order, in a temporary
folder holding a copy of examples/ (what a fresh clone has). The lines that take minutes
(``gnnwb run``, a study's full grid, and ``gnnwb report``, which needs their results) are in
the slow run; the default run does the rest."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from workbench.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## A quick tour of the command line"
# Minutes each, or (report) nothing to do without them.
SLOW_LINES = ("run", "study run", "report")


def tour_lines() -> list[list[str]]:
    """The argument lists of the tour's ``gnnwb`` lines, in order, comments dropped."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(SECTION) :]
    block = section[
        section.index("```bash") + len("```bash") : section.index("```", section.index("```bash") + 7)
    ]
    return [shlex.split(line, comments=True)[1:] for line in block.splitlines() if line.startswith("gnnwb ")]


def is_slow(argv: list[str]) -> bool:
    return " ".join(argv).startswith(SLOW_LINES)


def run_tour(lines: list[list[str]], folder: Path, monkeypatch, capsys) -> None:
    shutil.copytree(ROOT / "examples", folder / "examples")
    monkeypatch.chdir(folder)
    for argv in lines:
        try:
            code = main(argv)
        except SystemExit as exc:  # --help
            code = exc.code
        err = capsys.readouterr().err
        assert code == 0, f"gnnwb {shlex.join(argv)}: exit {code}: {err}"


def test_the_tour_has_the_lines_it_promises():
    lines = tour_lines()
    commands = [argv[0] for argv in lines]
    assert commands[0] == "--help" and "run" in commands and "trace" in commands
    assert sum(not is_slow(argv) for argv in lines) >= 15
    # the trace it exports was written by an earlier line
    export = next(i for i, argv in enumerate(lines) if argv[:2] == ["trace", "export"])
    written = {argv[argv.index("--trace") + 1] for argv in lines[:export] if "--trace" in argv}
    assert lines[export][2] in written


def test_readme_tour_runs_in_order(tmp_path, monkeypatch, capsys):
    run_tour([argv for argv in tour_lines() if not is_slow(argv)], tmp_path, monkeypatch, capsys)
    assert (tmp_path / "out.json").is_file() and (tmp_path / "mine.toml").is_file()


@pytest.mark.slow
def test_readme_tour_runs_in_order_with_the_long_lines(tmp_path, monkeypatch, capsys):
    run_tour(tour_lines(), tmp_path, monkeypatch, capsys)
    assert (tmp_path / "reports" / "index.html").is_file()
