"""The verdict rule on cases worked out by hand."""

from __future__ import annotations

import math

import pytest

from studies.verdict import Claim, Verdict, count, judge

SPEEDUP = Claim("HopGNN is faster than DGL", "Figs. 11-12", "HopGNN / DGL", paper=(1.3, 3.1))


def test_speedups_inside_the_widened_range_are_reproduced() -> None:
    # Effect bounds: log(1.3)/1.5 = 0.1749 (1.191x) to 1.5 log(3.1) = 1.697 (5.46x).
    assert judge(SPEEDUP, [1.2, 2.0, 5.4]).verdict is Verdict.REPRODUCED


def test_a_small_speedup_is_direction_only_although_plainly_within_1_5x() -> None:
    # 1.3 / 1.08 = 1.2 < 1.5, but the effect log(1.08) = 0.077 is below 0.1749.
    j = judge(SPEEDUP, {"products": 1.02, "sbm": 1.08})
    assert j.verdict is Verdict.DIRECTION_ONLY
    assert "2 of 2" in j.reason


def test_one_point_against_the_direction_contradicts() -> None:
    j = judge(SPEEDUP, {"products/SAGE": 2.0, "products/GAT": 0.95})
    assert j.verdict is Verdict.CONTRADICTED
    assert "products/GAT" in j.reason and "1 of 2" in j.reason


def test_no_finite_figure_is_not_comparable_with_the_reason() -> None:
    j = judge(SPEEDUP, {"GAT": math.nan}, unavailable="P3 splits GCN and SAGE first layers only")
    assert j.verdict is Verdict.NOT_COMPARABLE
    assert j.reason == "P3 splits GCN and SAGE first layers only"


def test_nan_points_are_left_out_of_a_judgement_that_has_others() -> None:
    assert judge(SPEEDUP, {"SAGE": 2.0, "GAT": math.nan}).verdict is Verdict.REPRODUCED


def test_up_to_claims_are_sized_on_the_largest_figure() -> None:
    claim = Claim(
        "up to 1.4x", "Fig. 8", "roc / equal-vertex", direction="at_least", paper=(1.4, 1.4), up_to=True
    )
    # Largest 1.3: effect 0.262 within [0.224, 0.505]; the 1.0 tie holds "at least".
    assert judge(claim, [1.0, 1.3]).verdict is Verdict.REPRODUCED
    # Largest 1.1: effect 0.095 < 0.224.
    assert judge(claim, [1.0, 1.1]).verdict is Verdict.DIRECTION_ONLY
    assert judge(claim, [0.68, 1.3]).verdict is Verdict.CONTRADICTED


def test_a_direction_only_claim_is_reproduced_by_its_direction() -> None:
    claim = Claim("no faster than 1 GPU", "Fig. 17", "2-GPU speedup", direction="at_most")
    assert judge(claim, [0.98, 1.0]).verdict is Verdict.REPRODUCED
    assert judge(claim, [1.20]).verdict is Verdict.CONTRADICTED


def test_a_zero_threshold_claim() -> None:
    claim = Claim(
        "replicated sampling sends nothing", "section 5", "bytes sent", direction="at_most", threshold=0
    )
    assert judge(claim, [0.0, 0.0]).verdict is Verdict.REPRODUCED
    assert judge(claim, [0.0, 12.0]).verdict is Verdict.CONTRADICTED


@pytest.mark.parametrize(
    ("figure", "expected"),
    [(1.48, Verdict.REPRODUCED), (1.2, Verdict.DIRECTION_ONLY), (1.0, Verdict.CONTRADICTED)],
)
def test_a_single_paper_value(figure: float, expected: Verdict) -> None:
    # Paper 1.69x: effect 0.525; widened to [0.350, 0.787], i.e. 1.419x to 2.197x.
    claim = Claim("+MG", "Fig. 13", "+MG / DGL", paper=(1.69, 1.69))
    assert judge(claim, [figure]).verdict is expected


def test_count_lists_every_verdict_in_order() -> None:
    js = [judge(SPEEDUP, [2.0]), judge(SPEEDUP, [0.5]), judge(SPEEDUP, [2.5])]
    assert count(js) == {"reproduced": 2, "direction only": 0, "contradicted": 1, "not comparable": 0}


def test_pages_show_each_verdict_and_the_index_counts_them(tmp_path) -> None:
    from studies.report import ReportPage, register_page, update_index

    page = ReportPage("Tiny", "a tiny study")
    page.add("Faster", judgement=judge(SPEEDUP, {"a": 2.0}))
    over_p3 = Claim("HopGNN is faster than P3", "Figs. 11-12", "P3 / HopGNN", paper=(1.2, 4.2))
    page.add("Slower", judgement=judge(over_p3, {"a": 0.9}))
    page.add("Files", "no claim here")
    folder = tmp_path / "studies" / "tiny"
    page.write(folder)
    register_page(folder, "Tiny", "a tiny study", page.judgements())
    html = (folder / "index.html").read_text()
    assert "Verdict: reproduced (paper 1.3-3.1x, Figs. 11-12; workbench 2x" in html
    assert "Verdict: contradicted" in html and html.count("Verdict:") == 2
    index = update_index(tmp_path).read_text()
    assert "1 reproduced, 1 contradicted" in index
    assert "Claims over all studies: 1 reproduced, 1 contradicted" in index


def test_a_claim_judged_in_several_sections_counts_once_by_its_first() -> None:
    from studies.report import ReportPage

    page = ReportPage("Tiny", "a tiny study")
    page.add("All interconnects", judgement=judge(SPEEDUP, {"a": 2.0, "b": 1.05}))
    page.add("NVSwitch only", judgement=judge(SPEEDUP, {"b": 1.05}))
    assert [j.verdict for j in page.judgements()] == [Verdict.DIRECTION_ONLY]


def test_a_tie_shows_no_effect_whichever_side_its_last_digits_fall() -> None:
    # 1.0001 and 0.9988 are both within 0.5% of 1: the same tie, the same verdict.
    assert judge(SPEEDUP, {"a": 2.0, "b": 1.0001}).verdict is Verdict.CONTRADICTED
    assert judge(SPEEDUP, {"a": 2.0, "b": 0.9988}).verdict is Verdict.CONTRADICTED
    at_least = Claim("never worse", "Fig. 8", "roc / equal-edge", direction="at_least")
    assert judge(at_least, [1.0001, 0.9988, 1.2]).verdict is Verdict.REPRODUCED
    assert judge(at_least, [0.99]).verdict is Verdict.CONTRADICTED
