"""Intervals, ties and the Pareto front of the advice table, by hand."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from studies.advisor.advice import advice_table, fidelity_error, pareto_front
from studies.advisor.estimate import Estimate
from studies.advisor.search import Outcome, SearchResult
from studies.advisor.space import Candidate
from workbench.errors import ConfigError


def _result(*outcomes: Outcome) -> SearchResult:
    return SearchResult(list(outcomes), [4], 0.0, 0.0, len(outcomes), "successive halving")


def test_interval_is_a_factor_of_variation_and_fidelity_in_quadrature_and_marks_ties() -> None:
    a = Candidate("model-centric", "metis", "none", "-", "-", 256)
    b = Candidate("p3", "metis", "none", "-", "-", 256)
    c = Candidate("hopgnn", "metis", "none", "-", "-", 256)
    outcomes = [
        Outcome(a, Estimate(1.0, 0.03, 4, 40)),  # variation 3%
        Outcome(b, Estimate(1.05, 0.0, 40, 40)),  # exact
        Outcome(c, Estimate(2.0, 0.0, 40, 40)),
        Outcome(Candidate("p3", "random"), skipped="does not fit: m0.gpu0 holds 2 GiB of 1 GiB"),
    ]
    fid = fidelity_error(None, 0.04)
    table = advice_table(_result(*outcomes), {a: 1.0, b: 0.4, c: 0.0}, fid, epochs=10)
    assert list(table["label"])[:3] == [b.label, a.label, c.label]  # 0.4 + 10.5 < 1 + 10 < 20
    first = table.iloc[0]
    assert first["train_s"] == pytest.approx(10.9)
    assert first["train_high_s"] == pytest.approx(10.9 + 10.5 * 0.04)  # exact: fidelity alone
    second = table.iloc[1]
    assert second["train_low_s"] == pytest.approx(1.0 + 10 / (1 + math.hypot(0.03, 0.04)))
    assert second["epoch_high_s"] == pytest.approx(1.0 * (1 + math.hypot(0.03, 0.04)))
    assert list(table["tied_with_first"]) == [False, True, False, False]
    assert list(table["rank"]) == [1, 2, 3, 0] and table.iloc[3]["skipped"].startswith("does not fit")


def test_fidelity_error_is_read_from_the_summary_beside_the_profile(tmp_path) -> None:
    (tmp_path / "profile.toml").write_text("")
    summary = {"fidelity": {"epoch_median_abs_error": 0.2, "schemes": {"p3": {"median_abs_error": 0.5}}}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    fid = fidelity_error(str(tmp_path / "profile.toml"), None)
    assert fid.of("p3") == 0.5 and fid.of("hopgnn") == 0.2
    assert fidelity_error(str(tmp_path / "profile.toml"), 0.1).of("p3") == 0.1  # the option wins
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a fidelity summary"):
        fidelity_error(str(tmp_path / "profile.toml"), None)


def test_pareto_front_by_hand() -> None:
    table = pd.DataFrame(
        {
            "skipped": ["", "", "", "", "no"],
            "train_s": [1.0, 2.0, 2.0, 3.0, math.nan],
            "peak_gpu_bytes": [10, 5, 6, 1, 0],
            "network_bytes": [0, 0, 0, 0, 0],
        }
    )
    # (2, 6) is dominated by (2, 5); the others trade time for memory
    assert list(pareto_front(table)) == [True, True, False, True, False]
