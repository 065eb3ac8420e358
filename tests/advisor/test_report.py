"""The advise page: every file written, the first choice and its ties named, the skipped ones
explained, no NaN anywhere, and the real-run section only when there were real runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from studies.advisor.report import duration, num, phase_columns, write_report

FIRST = "model-centric / metis / song-jiang 20% / batch 256"
TIED = "p3 / metis / none / batch 256"
SLOWER = "hopgnn / random / none / batch 256"
SKIPPED = "roc-fullgraph / metis / memory resident"


def _row(rank: int, label: str, train: float, half: float, **extra: object) -> dict:
    epoch = train / 10
    return {
        "rank": rank,
        "label": label,
        "scheme": label.split(" / ")[0],
        "partition": "metis",
        "placement": "none",
        "capacity": "-",
        "memory": "-",
        "batch_size": 256,
        "skipped": "",
        "epoch_s": epoch,
        "epoch_low_s": epoch * (1 - half),
        "epoch_high_s": epoch * (1 + half),
        "preprocess_s": 0.002,
        "train_s": train,
        "train_low_s": train * (1 - half),
        "train_high_s": train * (1 + half),
        "variation": 0.05,
        "fidelity_error": 0.1,
        "iterations_simulated": 4,
        "epoch_iterations": 12,
        "exact": False,
        "rung": 1,
        "peak_gpu_bytes": 2**20 * (30 - 5 * rank),
        "network_bytes": 1e8 * rank,
        "sample_s": 0.01,
        "forward_s": 0.02,
        "backward_s": 0.03,
        "allreduce_s": 0.005,
        "tied_with_first": False,
        "pareto": True,
        **extra,
    }


@pytest.fixture
def table() -> pd.DataFrame:
    rows = [
        _row(1, FIRST, 1.0, 0.1),
        _row(2, TIED, 1.05, 0.1, tied_with_first=True),
        _row(3, SLOWER, 2.0, 0.1, pareto=False, allreduce_s=np.nan),
        # A skipped candidate: no estimate, so every figure is missing.
        {
            "rank": 0,
            "label": SKIPPED,
            "scheme": "roc-fullgraph",
            "skipped": "does not fit: needs 90 GiB of 80 GiB",
        },
    ]
    return pd.DataFrame(rows)


@pytest.fixture
def trace() -> pd.DataFrame:
    rows = []
    for worker in range(2):
        t = 0.0
        for iteration in range(4):
            for phase, engine, length in (("sample", "cpu", 0.002), ("forward", "compute", 0.003)):
                rows.append(
                    {
                        "run_id": "sim",
                        "worker": worker,
                        "device": f"m{worker}.gpu0",
                        "iteration": iteration,
                        "phase": phase,
                        "ready": t,
                        "start": t,
                        "end": t + length,
                        "bytes": 0,
                        "items": 1,
                        "engine": engine,
                    }
                )
                t += length
    return pd.DataFrame(rows)


META = {
    "graph": "products-like 0.01",
    "hardware": "2x A100",
    "model": "GraphSAGE",
    "epochs": 10,
    "fidelity_source": "summary.json",
    "search": "Successive halving over 4 candidates.",
    "not_searched": ["Fanouts are the model's."],
    "command": "gnnwb advise --graph products-like:0.01",
}


def _confirm() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "label": [FIRST, TIED],
            "predicted_s": [1.0, 1.05],
            "predicted_low_s": [0.9, 0.95],
            "predicted_high_s": [1.1, 1.15],
            "measured_s": [1.2, 1.1],
            "measured_spread": [0.02, np.nan],
            "predicted_rank": [1, 2],
            "measured_rank": [2, 1],
            "order_note": ["agrees", "wrong: measured faster than the first choice"],
        }
    )


def _no_nan(text: str) -> bool:
    return re.search(r"\bnan\b", text, flags=re.IGNORECASE) is None


def test_the_page_names_the_first_choice_its_tie_and_why_one_was_skipped(
    tmp_path: Path, table: pd.DataFrame, trace: pd.DataFrame
) -> None:
    page = write_report(table, trace, META, tmp_path / "advice")
    text = page.read_text()
    assert page == tmp_path / "advice" / "index.html"
    for name in ("pareto.png", "breakdown.png", "timeline.png", "winner.perfetto.json"):
        assert (page.parent / name).stat().st_size > 0, name
    assert not (page.parent / "confirm.png").exists()
    assert "gnnwb advise: products-like 0.01 on 2x A100" in text
    assert f"First choice: {FIRST}" in text
    assert "tied" in text and TIED in text
    assert "does not fit: needs 90 GiB of 80 GiB" in text and SKIPPED in text
    assert "Confirmed by real runs" not in text
    assert "href='winner.perfetto.json'" in text and "ui.perfetto.dev" in text
    assert "4 of 12" in text
    assert _no_nan(text)
    events = json.loads((page.parent / "winner.perfetto.json").read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == len(trace)


def test_real_runs_add_their_section_and_mark_a_wrong_order(
    tmp_path: Path, table: pd.DataFrame, trace: pd.DataFrame
) -> None:
    page = write_report(table, trace, META, tmp_path, confirm=_confirm())
    text = page.read_text()
    assert "Confirmed by real runs" in text and (tmp_path / "confirm.png").exists()
    assert "wrong: measured faster than the first choice" in text
    assert _no_nan(text)


def test_without_a_tie_the_lead_is_a_percentage_and_missing_inputs_say_so(
    tmp_path: Path, table: pd.DataFrame
) -> None:
    table.loc[1, "tied_with_first"] = False
    text = write_report(table.iloc[[0, 1, 3]], None, {}, tmp_path).read_text()
    assert "No candidate is tied with it" in text and "by 5%" in text
    assert "not given" in text and "No trace of the first choice" in text
    assert not (tmp_path / "timeline.png").exists()
    assert _no_nan(text)


def test_a_search_that_simulated_nothing_still_writes_a_page(tmp_path: Path, table: pd.DataFrame) -> None:
    text = write_report(table.iloc[[3]], None, META, tmp_path).read_text()
    assert "No candidate was simulated" in text and "does not fit" in text
    assert _no_nan(text)


def test_numbers_read_without_exponents_or_nan() -> None:
    assert num(0.000502) == "0.000502" and num(1140.4) == "1,140" and num(float("nan")) == "—"
    assert duration(0.2377) == "238 ms" and duration(float("nan")) == "not known"


def test_phase_columns_are_the_time_columns_that_are_not_totals(table: pd.DataFrame) -> None:
    assert phase_columns(table) == ["sample_s", "forward_s", "backward_s", "allreduce_s"]
