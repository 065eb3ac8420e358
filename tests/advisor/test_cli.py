"""``gnnwb advise`` from the command line: what it writes, and bad input as one line (exit 2)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from workbench.cli.main import main
from workbench.hardware import load_hardware

GRAPH = "rmat:n=3000,m=30000,feat=32"
SMALL = ["--graph", GRAPH, "--hardware", "hopgnn-4xa100-10gbe", "--hidden", "32", "--batch-sizes", "64"]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GNNWB_CACHE", str(tmp_path / "cache"))


def test_advise_writes_the_ranking_and_names_the_first_choice(tmp_path, capsys) -> None:
    out = tmp_path / "advice"
    argv = ["advise", *SMALL, "--schemes", "model-centric,p3", "--partitioners", "random,metis"]
    code, stdout, _ = run([*argv, "--placements", "none", "--no-progress", "-o", str(out)], capsys)
    assert code == 0
    table = pd.read_csv(out / "advice.csv", keep_default_na=False)
    assert len(table) == 4 and list(table["rank"]) == [1, 2, 3, 4]
    assert (table["train_s"].astype(float).diff().dropna() >= 0).all()
    assert f"first choice: {table.loc[0, 'label']}" in stdout
    assert "intervals: none: no calibrated profile given" in stdout


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--schemes", "model-centric,bogus"], "--schemes: unknown 'bogus'; allowed: "),
        (["--partitioners", "roc"], "'roc' is not searched"),
        (["--schemes", "model-centric,"], "--schemes 'model-centric,': expected names separated by commas"),
        (["--budget", "ten minutes"], "--budget 'ten minutes': expected a positive duration"),
        (["--budget", "0s"], "--budget '0s': expected a positive duration"),
        (["--budget", "0.001s", "--schemes", "model-centric"], "is less than one candidate needs: preparing"),
        (["--batch-sizes", "64,,32"], "--batch-sizes '64,,32'"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, extra: list[str], needle: str) -> None:
    code, _, err = run(["advise", *SMALL, *extra, "--no-progress", "-o", str(tmp_path / "o")], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_a_cluster_nothing_fits_on_names_the_smallest_requirement(tmp_path, capsys) -> None:
    text = load_hardware("hopgnn-4xa100-10gbe").to_toml()
    tiny = tmp_path / "tiny.toml"
    tiny.write_text(re.sub(r'memory = "40 GiB"', 'memory = "64 KiB"', text))
    argv = ["advise", "--graph", GRAPH, "--hardware", str(tiny), "--hidden", "32", "--batch-sizes", "64"]
    code, _, err = run(
        [*argv, "--schemes", "model-centric,p3", "--no-progress", "-o", str(tmp_path / "o")], capsys
    )
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert re.search(
        r"nothing fits on .*tiny\.toml: the smallest requirement is .+, which needs .+ on a GPU of 64 KiB",
        line,
    ), line


def test_advice_out_of_budget_is_written_with_a_warning(tmp_path, capsys, monkeypatch) -> None:
    import studies.advisor.run as run_module
    from studies.advisor.search import BudgetExceeded, Outcome

    def out_of_budget(evaluator, cands, *args, **kwargs):
        first = Outcome(cands[0])
        evaluator.simulate(first, 4, 0)
        raise BudgetExceeded(0, {c: first if c == cands[0] else Outcome(c) for c in cands})

    monkeypatch.setattr(run_module, "successive_halving", out_of_budget)
    out = tmp_path / "advice"
    argv = [
        "advise",
        *SMALL,
        "--schemes",
        "model-centric,p3",
        "--partitioners",
        "random",
        "--placements",
        "none",
    ]
    code, stdout, _ = run([*argv, "--no-progress", "-o", str(out)], capsys)
    assert code == 0
    assert (
        "warning: the budget (600 s) ran out during rung 1; ranked from the estimates made so far" in stdout
    )
    table = pd.read_csv(out / "advice.csv", keep_default_na=False)
    assert list(table["rank"]) == [1, 0] and table.loc[1, "skipped"] == "not simulated"
