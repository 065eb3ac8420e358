"""The placement study's LAS cause: loading time by source, and the sentence that reads it."""

from __future__ import annotations

import pandas as pd
import pytest

from studies import study_placement as sp


def _row(local_ms: float, peer_ms: float, host_ms: float, peer_mb: float, host_mb: float, **label) -> dict:
    # 2 workers x 5 iterations: per iteration and GPU, busy seconds and bytes are divided by 10.
    return {
        "workers": 2,
        "iterations": 5,
        "gather_local_busy_s": local_ms / 100,
        "d2d_busy_s": peer_ms / 100,
        "h2d_busy_s": host_ms / 100,
        "gather_remote_busy_s": 0.0,
        "d2d_bytes": peer_mb * 1e7,
        "h2d_bytes": host_mb * 1e7,
        **label,
    }


def test_loading_sources_by_hand() -> None:
    out = sp.loading_sources(pd.DataFrame([_row(1.0, 2.0, 5.0, 3.0, 4.0)])).iloc[0]
    assert out["own GPU ms"] == pytest.approx(1.0)
    assert out["peer GPUs ms"] == pytest.approx(2.0)
    assert out["host ms"] == pytest.approx(5.0)
    assert (out["peer GPUs MB"], out["host MB"]) == (pytest.approx(3.0), pytest.approx(4.0))
    assert out["loading ms"] == pytest.approx(8.0)


def test_las_table_and_finding_by_hand() -> None:
    rows = [
        _row(0.0, 2.0, 6.0, 4.0, 6.0, part="grid", interconnect="NVSwitch", gpus=8, placement="random"),
        _row(0.0, 2.0, 6.0, 4.0, 6.0, part="las", factor=1.0),
        _row(1.0, 1.0, 2.0, 2.0, 3.0, part="las", factor=4.0),
    ]
    sources = sp.las_sources_table(pd.DataFrame(rows))
    assert list(sources["run"]) == [
        "random, plain sampling",
        "song-jiang, plain sampling",
        "song-jiang, LAS factor 4",
    ]
    assert list(sources["random / this"]) == [1.0, 1.0, 2.0]
    ablation = pd.DataFrame(
        [
            {
                "element": "cache size (LAS)",
                "interconnect": "NVSwitch",
                "figure before": 2.0,
                "figure after": 3.0,
            },
            {
                "element": "slides' LAS setting",
                "interconnect": "NVSwitch",
                "figure before": 2.0,
                "figure after": 5.0,
            },
        ]
    )
    text = sp.las_finding(sources, ablation)
    assert "75% of its loading time on host reads, 25% on peer reads" in text
    assert (
        "cuts its host bytes by 50% and its peer bytes by 50%: loading 8.00 -> 4.00 ms, figure 2.00x" in text
    )
    assert (
        "(LAS with cache 20%, 3.00x) stays below the slides' 4.4x; all together give 5.00x, above it" in text
    )


def test_las_elements_change_the_slides_setting() -> None:
    el = {
        (p.label["element"], p.label["variant"]): p.config
        for p in sp.points(False)
        if p.label["part"] == "elements"
    }
    slides = el[("slides' LAS setting", "scheme")]
    assert slides["graph"] == sp.REDDIT and slides["training"]["workers"] == 2
    assert slides["cache"] == {"capacity": sp.PAPER_CACHE} and slides["sampling"]["factor"] == sp.LAS_MAXIMUM
    assert el[("slides' setting, LAS factor 4", "scheme")]["sampling"]["factor"] == 4.0
    assert el[("slides' setting, no LAS", "scheme")]["sampling"]["name"] == "neighbor"
    assert el[("GPUs (LAS)", "baseline")]["training"]["workers"] == 2
