"""The hopgnn study runs paper 003's artifact setting: checked on its points, without simulating."""

from __future__ import annotations

import pandas as pd
import pytest

from studies.study_hopgnn import ELEMENT_CHANGE, element_table, points


@pytest.mark.parametrize(("full", "scale", "batch"), [(True, 1.0, 8000), (False, 0.1, 800)])
def test_main_products_points_use_the_artifacts_setting(full, scale, batch):
    main = [p for p in points(full) if p.label["part"] == "main" and p.label["graph"] == "products-like"]
    assert main
    for p in main:
        c = p.config
        assert c["graph"] == {"name": "products-like", "scale": scale}
        assert c["training"] == {"batch_size": batch, "seeds": "global", "epochs": 1}
        assert c["sampling"]["fanouts"] == [10, 10, 10] and c["model"]["hidden"] == 16
        assert c["partition"] == {"name": "metis"} and c["hardware"]["machines"] == 4
    execution = {p.label["scheme"]: p.config["execution"] for p in main}
    assert execution["DGL (model-centric)"]["feature_service"] is True
    assert execution["HopGNN"]["feature_service"] is True and execution["HopGNN"]["merge_to"] == "home"


def test_the_ablation_shares_its_dgl_and_all_points_with_the_main_gat_cells():
    ps = points(False)
    keys = {p.key for p in ps if p.label["part"] == "main" and p.label["model"] == "GAT"}
    ablation = {p.label["variant"]: p.key for p in ps if p.label["part"] == "ablation"}
    assert ablation["DGL"] in keys and ablation["All"] in keys  # computed once
    elements = [p for p in ps if p.label["part"] == "elements"]
    assert {p.label["element"] for p in elements} == {
        "feature service",
        "merge rule",
        "setting",
        "feature service (+MG)",
        "feature service (P3)",
        "P3 client's serial reads",
        "P3 client's padded copy",
    }


def test_the_element_table_puts_each_elements_old_figure_beside_the_current_one():
    rows = [
        # part, variant, element, graph, model, scheme, epoch_s
        ("ablation", "DGL", None, "products-like", "GAT", None, 6.0),
        ("ablation", "All", None, "products-like", "GAT", None, 3.0),  # after: 6 / 3 = 2.0
        ("elements", "baseline", "merge rule", None, None, None, 5.0),
        ("elements", "scheme", "merge rule", None, None, None, 4.0),  # before: 5 / 4 = 1.25
    ]
    results = pd.DataFrame(
        rows, columns=["part", "variant", "element", "graph", "model", "scheme", "epoch_s"]
    )
    table = element_table(results)
    assert table.to_dict("records") == [
        {
            "claim": "HopGNN / DGL",
            "element changed to the paper's": ELEMENT_CHANGE["merge rule"],
            "figure before": 1.25,
            "figure after": 2.0,
        }
    ]
