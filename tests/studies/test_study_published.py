"""The published study's page from stored results: a verdict per held-out ratio, none for fitted figures."""

from __future__ import annotations

import pandas as pd

from studies.study_published import analyze, points
from studies.verdict import Verdict


def _row(id_: str, role: str, quantity: str, low: float, high: float, workbench: float) -> dict:
    return {
        "id": id_,
        "role": role,
        "source": "Fig. 1",
        "quantity": quantity,
        "setting": "a vs b",
        "paper": f"{low:g}",
        "low": low,
        "high": high,
        "workbench": workbench,
        "ratio": workbench / (low * high) ** 0.5,
        "outside_range": 0.0,
        "residual": 0.0,
    }


def test_the_page_judges_held_out_ratios_only(tmp_path):
    fitted = {
        "paper": "900_test",
        "title": "a test paper",
        "hardware": "h100-1x",
        "parameters": ["link.pcie.bandwidth"],
        "fitted": True,
        "status": "ok",
        "start": {"link.pcie.bandwidth": 1e10},
        "values": {"link.pcie.bandwidth": 2e10},
        "evaluations": 7,
        "seconds": 1.0,
        "notes": [],
        "profile": 'format = "gnnwb-profile/1"\n',
        "rows": [
            _row("share", "fitted", "share (h2d)", 0.5, 0.5, 0.5),
            # 2.0 against the paper's 2.2: an effect of log 2 / log 2.2 = 0.88, within 1.5x.
            _row("speedup", "headline", "speedup", 2.2, 2.2, 2.0),
            # Below 1 where the paper has 3: the direction fails.
            _row("gather", "held out", "phase_ratio (gather_remote)", 3.0, 3.0, 0.8),
            _row("epoch", "held out", "epoch_s", 1.0, 1.0, 1.2),  # no direction: no verdict
        ],
    }
    unfitted = {
        "paper": "901_none",
        "title": "nothing to fit",
        "hardware": "h100-1x",
        "parameters": [],
        "fitted": False,
        "status": "not fitted: no figure the workbench can compute",
        "notes": [],
        "rows": [{"id": "x", "role": "not used", "source": "Fig. 2", "paper": "1", "reason": "lost"}],
    }
    page = analyze(pd.DataFrame([fitted, unfitted]), tmp_path)
    verdicts = {j.claim.statement.split(": ")[1].split(" ")[0]: j.verdict for j in page.judgements()}
    assert verdicts == {"speedup": Verdict.REPRODUCED, "gather": Verdict.CONTRADICTED}
    assert (tmp_path / "900_test.profile.toml").is_file() and (tmp_path / "ratios.png").is_file()
    assert not (tmp_path / "901_none.profile.toml").exists()


def test_one_point_per_papers_file_in_both_modes():
    quick, full = points(False), points(True)
    assert [p.label["paper"] for p in quick] == [
        "000_roc",
        "001_neugraph",
        "002_song_jiang",
        "003_hopgnn",
        "004_bulk_sampling",
    ]
    assert [p.key for p in quick] == [p.key for p in full]  # the fits are the files', not the grid's
