"""``--confirm``: the predicted order judged against measured times and their spreads, and one real run."""

from __future__ import annotations

import pandas as pd

from studies.advisor.confirm import judge_order, warm_epochs
from workbench.cli.main import main


def _measured(rows: list[tuple[str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"label": label, "measured_s": t, "measured_spread": spread, "predicted_rank": i + 1, "error": ""}
            for i, (label, t, spread) in enumerate(rows)
        ]
    )


def test_a_pair_measured_apart_beyond_its_spread_must_keep_the_predicted_order() -> None:
    # b is measured 20% faster than a with spreads of 5%: a's and b's ranks are wrong; c agrees.
    judged = judge_order(_measured([("a", 1.2, 0.05), ("b", 1.0, 0.05), ("c", 2.0, 0.05)]))
    assert list(judged["measured_rank"]) == [2, 1, 3]
    assert judged["order_note"][0] == "wrong: measured slower than b"
    assert judged["order_note"][1] == "wrong: measured faster than a"
    assert judged["order_note"][2] == "agrees"


def test_a_reversed_pair_within_its_spread_is_noise() -> None:
    judged = judge_order(_measured([("a", 1.05, 0.10), ("b", 1.0, 0.02)]))
    assert list(judged["order_note"]) == ["within noise", "within noise"]


def test_warm_epochs_leave_the_first_out() -> None:
    median, spread = warm_epochs([{"epoch_s": 9.0}, {"epoch_s": 1.0}, {"epoch_s": 1.2}, {"epoch_s": 1.1}])
    assert median == 1.1 and abs(spread - 0.2 / 1.1) < 1e-12


def test_confirm_runs_the_first_choice_for_real(tmp_path, monkeypatch, capsys) -> None:
    from studies.fidelity_experiment import hardware_toml

    monkeypatch.setenv("GNNWB_CACHE", str(tmp_path / "cache"))
    hardware = tmp_path / "cpu-workers.toml"  # this machine's worker processes, as calibration models them
    hardware.write_text(hardware_toml(1))
    out = tmp_path / "advice"
    argv = [
        "advise", "--graph", "sbm:n=1500,blocks=4,deg=6,feat=16", "--hidden", "16",
        "--hardware", str(hardware), "--workers", "1",
        "--batch-sizes", "128", "--schemes", "model-centric", "--partitioners", "random",
        "--placements", "none", "--confirm", "1", "--no-progress", "-o", str(out),
    ]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    confirmed = pd.read_csv(out / "confirm.csv", keep_default_na=False)
    assert len(confirmed) == 1 and confirmed.loc[0, "measured_s"] > 0
    assert confirmed.loc[0, "order_note"] == "agrees"
    assert (out / "confirm" / "1" / "run" / "trace.parquet").exists()
    assert "Confirmed by real runs" in (out / "index.html").read_text()
