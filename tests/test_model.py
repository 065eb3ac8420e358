"""Model specs: shapes, parameter counts and cost features worked out by hand."""

from __future__ import annotations

import pytest

from workbench.errors import ConfigError, UnknownNameError
from workbench.model import MODEL_FAMILIES, LayerSpec, build_model


def test_gcn_layer_by_hand() -> None:
    layer = LayerSpec("gcn", 4, 3)
    # W is 4x3 plus a bias of 3.
    assert layer.param_count() == 15
    # 10 edges aggregate 4-wide rows (40) + 2 * 5 dst * 4 * 3 (120).
    f = layer.cost_features(num_src=8, num_dst=5, num_edges=10)
    assert f["flops"] == 160
    # bytes: src 8*4*4=128, edges 10*(8+16)=240, out 5*3*4=60, params 15*4=60.
    assert f["bytes"] == 128 + 240 + 60 + 60
    assert (f["vertices"], f["src_vertices"], f["edges"]) == (5, 8, 10)


def test_residual_projection_adds_a_linear_layer() -> None:
    plain = LayerSpec("gcn", 4, 3)
    res = LayerSpec("gcn", 4, 3, residual=True)
    assert res.param_count() - plain.param_count() == 12
    assert res.forward_flops(8, 5, 10) - plain.forward_flops(8, 5, 10) == 2 * 5 * 4 * 3
    same = LayerSpec("gcn", 3, 3, residual=True)
    assert same.forward_flops(8, 5, 10) - LayerSpec("gcn", 3, 3).forward_flops(8, 5, 10) == 5 * 3


def test_gat_heads_concatenate() -> None:
    m = build_model("gat", 100, 47, hidden=64, num_layers=3, heads=4)
    assert [(layer.in_dim, layer.output_width) for layer in m.layers] == [(100, 256), (256, 256), (256, 47)]


@pytest.mark.parametrize("name", list(MODEL_FAMILIES))
def test_every_family_builds_and_costs(name: str) -> None:
    m = build_model(name, 100, 47, hidden=64, num_layers=3, heads=2, fanouts=[15, 10, 5])
    assert m.in_dim == 100 and m.out_dim == 47
    costs = m.layer_costs([(1000, 200, 3000), (200, 50, 600), (50, 10, 100)])
    assert all(c["flops"] > 0 and c["bytes"] > 0 for c in costs)
    assert m.param_bytes() == 4 * m.param_count()


def test_deep_residual_gcn_has_residuals() -> None:
    m = build_model("resgcn", 602, 41, hidden=128, num_layers=8)
    assert m.num_layers == 8 and all(layer.residual for layer in m.layers)


def test_bad_models() -> None:
    with pytest.raises(UnknownNameError, match="valid: gcn"):
        build_model("mlp", 10, 2)
    with pytest.raises(ConfigError, match="3 fanouts for 2 layers"):
        build_model("sage", 10, 2, num_layers=2, fanouts=[1, 2, 3])
    with pytest.raises(ConfigError, match="outputs 8 but the next expects 9"):
        from workbench.model import ModelSpec

        ModelSpec("x", (LayerSpec("gcn", 4, 8), LayerSpec("gcn", 9, 2)))


def test_bytes_a_scheme_needs_by_hand() -> None:
    layer = LayerSpec("sage", 4, 3)
    # SAGE keeps the aggregated neighbours and the vertex's own row (2 * 5 dst * 4) and its
    # output (5 * 3): 55 floats, 220 bytes.
    assert layer.saved_for_backward_bytes(num_src=8, num_dst=5, num_edges=10) == 220
    gat = LayerSpec("gat", 4, 3, heads=2)
    # projected sources 8 * 2 * 3 = 48, logits and weights per edge and head 2 * 10 * 2 = 40,
    # outputs 5 * 2 * 3 = 30: 118 floats.
    assert gat.saved_for_backward_bytes(8, 5, 10) == 118 * 4
    back = layer.backward_cost_features(8, 5, 10)
    fwd = layer.cost_features(8, 5, 10)
    assert back["flops"] == 2 * fwd["flops"] and back["bytes"] == 2 * fwd["bytes"]
    assert back["edges"] == fwd["edges"]
    model = build_model("sage", 4, 3, hidden=8, num_layers=2)
    # sage 4->8: 2*4*8 + 8 = 72; 8->3: 2*8*3 + 3 = 51; 123 parameters, 492 bytes each copy.
    assert model.param_bytes() == model.gradient_bytes() == 492
    assert model.optimizer_state_bytes("adam") == 2 * 492 and model.optimizer_state_bytes("sgd") == 0
    assert model.training_state_bytes("adam") == 4 * 492
    assert model.training_state_bytes("momentum") == 3 * 492
    with pytest.raises(ConfigError, match="unknown optimizer 'lamb'; allowed: sgd, momentum, adam"):
        model.optimizer_state_bytes("lamb")
