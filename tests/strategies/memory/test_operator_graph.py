"""The operator graph of a training step: sizes worked by hand, the chain property, validation."""

from __future__ import annotations

import pytest

from workbench.errors import ConfigError
from workbench.model import build_model
from workbench.strategies.memory.base import Operator, OperatorGraph, Tensor
from workbench.strategies.memory.dpmm import count_valid_states
from workbench.strategies.memory.graphs import operator_graph


def test_two_layer_gcn_by_hand() -> None:
    # 10 vertices, 30 in-edges, 8 input features, hidden 4, 3 classes; fp32 values, int64 indices.
    graph = operator_graph(build_model("gcn", 8, 3, hidden=4), 10, 30)
    sizes = {t.name: t.bytes for t in graph.tensors}
    assert sizes == {
        "graph": (10 + 1 + 30) * 8,
        "features": 10 * 8 * 4,
        "agg1": 10 * 8 * 4,
        "W1": (8 * 4 + 4) * 4,
        "h1": 10 * 4 * 4,
        "agg2": 10 * 4 * 4,
        "W2": (4 * 3 + 3) * 4,
        "h2": 10 * 3 * 4,
        "labels": 10 * 8,
        "grad_h2": 10 * 3 * 4,
        "grad_agg2": 10 * 4 * 4,
        "grad_W2": (4 * 3 + 3) * 4,
        "grad_h1": 10 * 4 * 4,
        "grad_W1": (8 * 4 + 4) * 4,
    }
    assert [(op.name, op.reads, op.writes) for op in graph.operators] == [
        ("gather1", ("graph", "features"), ("agg1",)),
        ("update1", ("agg1", "W1"), ("h1",)),
        ("gather2", ("graph", "h1"), ("agg2",)),
        ("update2", ("agg2", "W2"), ("h2",)),
        ("loss", ("h2", "labels"), ("grad_h2",)),
        ("update2.bwd", ("grad_h2", "agg2", "W2"), ("grad_agg2", "grad_W2")),  # no activation on the logits
        ("gather2.bwd", ("graph", "grad_agg2"), ("grad_h1",)),
        ("update1.bwd", ("grad_h1", "agg1", "W1", "h1"), ("grad_W1",)),  # h1: ReLU's mask
    ]
    assert graph.host_tensors == {"graph", "features", "W1", "W2", "labels"}
    first = graph.operators[0]
    assert (first.layer, first.phase, first.features["edges"], first.features["flops"]) == (
        0,
        "forward",
        30,
        30 * 8,
    )
    assert graph.operators[1].features["flops"] == 2 * 10 * 8 * 4
    assert graph.operators[4].layer is None and graph.operators[7].phase == "backward"


def test_halo_vertices_add_host_activations_and_gradients_sent_back() -> None:
    # 15 source vertices: 10 own, 5 halo.
    graph = operator_graph(build_model("gcn", 8, 3, hidden=4), 10, 30, num_src=15)
    sizes = {t.name: t.bytes for t in graph.tensors}
    assert sizes["features"] == 15 * 8 * 4
    assert sizes["halo1"] == 5 * 4 * 4 and sizes["grad_halo1"] == 5 * 4 * 4
    ops = {op.name: op for op in graph.operators}
    assert ops["gather2"].reads == ("graph", "h1", "halo1")
    assert ops["gather2.bwd"].writes == ("grad_h1", "grad_halo1")
    assert "halo1" in graph.host_tensors


def test_rows_other_parts_read_bring_their_gradients_back_to_be_added() -> None:
    # 10 own vertices, 6 of whose rows sit in other parts' halos (counted once per reader).
    graph = operator_graph(build_model("gcn", 8, 3, hidden=4), 10, 30, num_src=15, num_sent=6)
    sizes = {t.name: t.bytes for t in graph.tensors}
    assert sizes["sent_rows"] == 6 * 8 and sizes["grad_readers1"] == 6 * 4 * 4
    assert sizes["grad_local1"] == sizes["grad_h1"] == 10 * 4 * 4
    ops = [(op.name, op.reads, op.writes) for op in graph.operators]
    assert ops[-3:] == [
        ("gather2.bwd", ("graph", "grad_agg2"), ("grad_local1", "grad_halo1")),
        ("halo_grad1", ("grad_local1", "sent_rows", "grad_readers1"), ("grad_h1",)),
        ("update1.bwd", ("grad_h1", "agg1", "W1", "h1"), ("grad_W1",)),
    ]
    assert {"sent_rows", "grad_readers1"} <= graph.host_tensors
    assert count_valid_states(graph.pred_masks, 10**6) == len(graph.operators) + 1  # still a chain


@pytest.mark.parametrize(
    ("family", "layers"), [("gcn", 3), ("resgcn", 16), ("gin", 2), ("sage", 3), ("commnet", 2), ("gcn", 1)]
)
def test_every_family_gives_a_chain(family: str, layers: int) -> None:
    graph = operator_graph(build_model(family, 16, 4, hidden=8, num_layers=layers), 100, 500, num_src=120)
    n = len(graph.operators)
    assert count_valid_states(graph.pred_masks, 10**6) == n + 1  # one execution order
    written = {t for op in graph.operators for t in op.writes}
    # Every weight gets its gradient; nothing reads a gradient of a weight.
    weights = sorted(t.name for t in graph.tensors if t.carries == "model")
    assert all(f"grad_{w}" in written for w in weights)


def test_residual_layers_read_their_input_and_pass_the_skip_gradient() -> None:
    graph = operator_graph(build_model("resgcn", 16, 4, hidden=8, num_layers=3), 100, 500)
    ops = {op.name: op for op in graph.operators}
    assert ops["update2"].reads == ("agg2", "W2", "h1")  # h2 = relu(agg2 W2) + h1
    assert "grad_h3" in ops["gather3.bwd"].reads  # the skip path's gradient adds in
    assert "W3" in ops["gather3.bwd"].reads  # 8 -> 4 classes: a projection on the skip path
    assert "h2" in ops["update3.bwd"].reads  # the projection's weight gradient reads its input


def test_gin_has_two_linears_per_layer() -> None:
    graph = operator_graph(build_model("gin", 16, 4, hidden=8, num_layers=1), 100, 500)
    assert [op.name for op in graph.operators] == [
        "gather1",
        "mlp1a",
        "mlp1b",
        "loss",
        "mlp1b.bwd",
        "mlp1a.bwd",
    ]
    sizes = {t.name: t.bytes for t in graph.tensors}
    assert sizes["W1a"] + sizes["W1b"] == build_model("gin", 16, 4, hidden=8, num_layers=1).param_count() * 4


def test_unmodelled_layers_and_bad_sizes_are_errors() -> None:
    with pytest.raises(ConfigError, match="gat layers are not modelled; supported: gcn, gin, sage, commnet"):
        operator_graph(build_model("gat", 16, 4), 100, 500)
    with pytest.raises(ConfigError, match="num_edges must be a whole number"):
        operator_graph(build_model("gcn", 16, 4), 100, -1)
    with pytest.raises(ConfigError, match="num_src"):
        operator_graph(build_model("gcn", 16, 4), 100, 500, num_src=50)
    with pytest.raises(ConfigError, match="at least one vertex"):
        operator_graph(build_model("gcn", 16, 4), 0, 0)


@pytest.mark.parametrize(
    ("operators", "tensors", "message"),
    [
        ((Operator("a", ("x",), ("y",)),), (Tensor("y", 1),), "uses undeclared tensor 'x'"),
        (
            (Operator("a", ("y",), ()), Operator("b", (), ("y",))),
            (Tensor("y", 1),),
            "reads 'y' before 'b' writes it",
        ),
        (
            (Operator("a", (), ("y",)), Operator("b", (), ("y",))),
            (Tensor("y", 1),),
            "written by 'a' and again by 'b'",
        ),
        ((Operator("a", ("y",), ("y",)),), (Tensor("y", 1),), "reads and writes 'y'"),
        ((Operator("a", (), ("y",)),), (Tensor("y", -1),), "size must be a whole number"),
        ((Operator("a", (), ("y",)), Operator("a", (), ())), (Tensor("y", 1),), "operator 'a' appears twice"),
        ((), (), "has no operators"),
    ],
)
def test_malformed_operator_graphs_are_one_line_errors(operators, tensors, message) -> None:
    with pytest.raises(ConfigError, match=message):
        OperatorGraph(operators, tensors, "bad")
