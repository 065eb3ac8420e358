"""The crossover page says why its HopGNN cell differs from the hopgnn study's, with its own figure."""

from __future__ import annotations

import pandas as pd

from studies.study_crossover import _against_hopgnn


def test_the_note_gives_the_cells_model_centric_over_hopgnn_ratio():
    rows = [
        # (cluster, scheme, partition, placement, epoch_s): only the 10 GbE / METIS / no-cache cell counts.
        ("10 GbE (4x A100)", "model-centric", "metis", "none", 1.0),
        ("10 GbE (4x A100)", "hopgnn", "metis", "none", 2.0),
        ("10 GbE (4x A100)", "model-centric", "metis", "none", 3.0),  # a second graph: mean 2.0
        ("10 GbE (4x A100)", "hopgnn", "metis", "none", 2.0),
        ("10 GbE (4x A100)", "hopgnn", "random", "none", 9.0),
        ("NVSwitch (8x V100)", "hopgnn", "metis", "none", 0.1),
    ]
    results = pd.DataFrame(rows, columns=["cluster", "scheme", "partition", "placement", "epoch_s"])
    text = _against_hopgnn(results)
    assert "model-centric / HopGNN on that cell is 1.00x" in text
    assert "seeds drawn from its own part" in text


def test_the_note_has_no_figure_without_both_schemes():
    results = pd.DataFrame(
        [("10 GbE (4x A100)", "model-centric", "metis", "none", 1.0)],
        columns=["cluster", "scheme", "partition", "placement", "epoch_s"],
    )
    assert "that cell is" not in _against_hopgnn(results)
