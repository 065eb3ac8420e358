"""Intervals, ties and the Pareto front of the advice table, by hand."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from studies.advisor.advice import advice_table, fidelity_error, pareto_front
from studies.advisor.estimate import Estimate
from studies.advisor.search import BIAS, Outcome, SearchResult
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
    # a prefix of 4: the epoch lies within [0.97 / (1 + 0.20), 1.03 / (1 - 0.15)] of the estimate
    # (variation 3%, bias range -15%..+20%): up 21.18%, down 1.20 / 0.97 - 1 = 23.71%; each then
    # combined with the fidelity error in quadrature
    assert BIAS[4] == (-0.15, 0.20)  # the figures here are worked out for it
    up, down = 1.03 / 0.85 - 1, 1.20 / 0.97 - 1
    assert second["prefix_up"] == pytest.approx(up) and second["prefix_down"] == pytest.approx(down)
    assert second["train_low_s"] == pytest.approx(1.0 + 10 / (1 + math.hypot(down, 0.04)))
    assert second["epoch_high_s"] == pytest.approx(1.0 * (1 + math.hypot(up, 0.04)))
    assert list(table["tied_with_first"]) == [False, True, False, False]
    assert list(table["rank"]) == [1, 2, 3, 0] and table.iloc[3]["skipped"].startswith("does not fit")


def test_a_one_block_prefix_without_a_profile_still_has_the_search_bias_range_as_its_interval() -> None:
    # One block of middle increments has no spread (NaN half-width) and no profile gives a fidelity
    # error: the search still judged it with its bias range, so the table must show that width,
    # not an empty interval that would call it apart from a candidate the search found tied.
    a = Candidate("model-centric", "metis", "none", "-", "-", 256)
    b = Candidate("p3", "metis", "none", "-", "-", 256)
    outcomes = [Outcome(a, Estimate(1.0, math.nan, 4, 18)), Outcome(b, Estimate(1.05, 0.0, 18, 18))]
    table = advice_table(_result(*outcomes), {a: 0.0, b: 0.0}, fidelity_error(None, None), epochs=1)
    prefix = table.set_index("label").loc[a.label]
    assert prefix["epoch_low_s"] == pytest.approx(1 / 1.20)  # 0.83: it may be 20% high
    assert prefix["epoch_high_s"] == pytest.approx(1 / 0.85)  # 1.18: or 15% low
    exact = table.set_index("label").loc[b.label]
    assert exact["epoch_low_s"] == exact["epoch_high_s"] == pytest.approx(1.05)
    assert list(table["tied_with_first"]) == [False, True]  # 1.05 lies below 1.18


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
