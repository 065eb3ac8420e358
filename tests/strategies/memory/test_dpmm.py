"""``dpmm`` on cases worked out by hand: ROC's Fig. 3 / Table 3 GIN, a 2-layer GCN, the equal-size
exchange, an order that matters; against an integer program on deep GCNs; its bounds and errors."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.model import build_model
from workbench.registry import MEMORY_POLICIES
from workbench.strategies.memory.base import Operator, OperatorGraph, Tensor
from workbench.strategies.memory.graphs import operator_graph
from workbench.strategies.memory.interval_program import interval_program_loads

REDDIT = {"num_vertices": 232_965, "num_edges": 114_848_857}  # paper 000, Table 4


def loads(name: str, graph: OperatorGraph, capacity: int, **params: object) -> int:
    return MEMORY_POLICIES.create(name, **params).schedule(graph, capacity).h2d_bytes


# ---- ROC's Fig. 3 / Table 3 ---------------------------------------------------------------------
def test_active_tensors_of_the_valid_states_are_table_3(gin_fig3: OperatorGraph) -> None:
    # The GIN step is a chain, so its valid states are the prefixes {1}, {1,2}, ... (Table 3).
    table_3 = [
        {"g", "a"},
        {"g", "a", "b", "w1"},
        {"g", "a", "b", "h1", "w1", "w2"},
        {"g", "a", "b", "w1", "w2", "grad_h1"},
        {"g", "a", "b", "w1", "grad_b"},
        {"g", "a", "grad_a"},
        set(),
    ]
    for k, expected in enumerate(table_3, start=1):
        assert set(gin_fig3.names(gin_fig3.active((1 << k) - 1))) == expected


def test_gin_fig3_optimum_worked_by_hand(gin_fig3: OperatorGraph) -> None:
    # Sizes (conftest): g 8; h0, a, b, h1, grad_h1, grad_b, grad_a, grad_h0 2; w1, w2, grad_w* 1.
    # Each operator's inputs + outputs: (1) h0 g a = 12, (2) a w1 b = 5, (3) b w2 h1 = 5,
    # (4) h1 grad_h1 = 4, (5) grad_h1 w2 b grad_b grad_w2 = 8, (6) grad_b w1 a b grad_a grad_w1 = 10,
    # (7) grad_a g a grad_h0 = 14. With a capacity of 18, the room for cached tensors at step k
    # is 18 - that: 6, 13, 13, 14, 10, 8, 4.
    # Loads no policy avoids: h0, g, w1, w2 the first time = 2 + 8 + 1 + 1 = 12.
    # Tensors that can be kept across steps (between two uses with steps in between):
    #   g  from 1 to 7, across 2-6 (8 bytes)    a  from 2 to 6, across 3-5 (2)
    #   w1 from 2 to 6, across 3-5 (1)          b  from 3 to 5, across 4 (2)    w2 from 3 to 5, across 4 (1)
    # (the other reuses are between consecutive steps: free). Keeping all needs, at step 5,
    # g + a + w1 = 11 > 10; at step 4, 14 <= 14; at 6, g = 8 <= 8; at 2-3, at most 11 <= 13.
    # So exactly one of g (8), a (2), w1 (1) goes at step 5: dropping w1 costs the least.
    # Optimum = 12 + 1 = 13: w1 is released after step 2 and loaded again by step 6.
    capacity = 18
    schedule = MEMORY_POLICIES.create("dpmm").schedule(gin_fig3, capacity)
    assert schedule.h2d_bytes == 13
    assert schedule.exact
    steps = {s.operator: s for s in schedule.steps}
    assert steps["2 linear+relu"].evict == ("w1",)
    assert steps["6 linear+relu.bwd"].load == ("w1",)
    assert steps["7 gather.bwd"].load == () and "g" in steps["7 gather.bwd"].reuse
    assert schedule.peak_bytes == 18  # step 5: its 8 + g, a (kept) = 18; step 6: 10 + g = 18
    # LRU evicts g at step 5 (least recently used: step 1) and loads it again at 7: 12 + 8 = 20.
    assert loads("lru", gin_fig3, capacity) == 20
    # Streaming loads every input of every step: 10 + 3 + 3 + 2 + 5 + 7 + 12 = 42.
    assert loads("streaming", gin_fig3, capacity) == 42
    # Every output is written back once: a b h1 grad_h1 grad_b grad_w2 grad_a grad_w1 grad_h0 = 16.
    assert schedule.d2h_bytes == 16
    # With room for everything (20 at step 5), only the unavoidable 12 are loaded.
    assert loads("dpmm", gin_fig3, 20) == 12


def test_a_capacity_below_one_operator_is_a_one_line_error_with_numbers(gin_fig3: OperatorGraph) -> None:
    for name in MEMORY_POLICIES.names():
        with pytest.raises(ConfigError) as err:
            MEMORY_POLICIES.create(name).schedule(gin_fig3, 13)
        message = str(err.value)
        assert "\n" not in message
        assert "'7 gather.bwd'" in message and "14 bytes" in message and "13 bytes" in message
        assert "reads 12 bytes, writes 2 bytes" in message


@pytest.mark.parametrize("capacity", [-1, 18.0, True, "18"])
def test_a_capacity_that_is_not_a_byte_count_is_an_error(gin_fig3: OperatorGraph, capacity: object) -> None:
    with pytest.raises(ConfigError, match="GPU capacity must be"):
        MEMORY_POLICIES.create("dpmm").schedule(gin_fig3, capacity)  # type: ignore[arg-type]


# ---- a 2-layer GCN ------------------------------------------------------------------------------
def test_two_layer_gcn_between_nothing_fits_and_everything_fits() -> None:
    # Reddit-sized partition (the whole graph on one GPU, as in ROC's Fig. 10), hidden 256.
    graph = operator_graph(build_model("gcn", 602, 41, hidden=256), **REDDIT)
    nothing = max(graph.working_set_bytes(k) for k in range(len(graph.operators)))  # gather1: 2.04 GB
    everything = graph.total_bytes
    capacity = 2_100_000_000
    assert nothing < capacity < everything
    by = {name: loads(name, graph, capacity) for name in ("dpmm", "lru", "streaming")}
    assert by["dpmm"] < by["lru"] < by["streaming"]
    # Unavoidable: graph + features + weights + labels, each loaded once.
    unavoidable = sum(t.bytes for t in graph.tensors if t.name in graph.host_tensors)
    assert by["dpmm"] > unavoidable  # the capacity does cost something
    assert loads("dpmm", graph, everything) == unavoidable == loads("lru", graph, everything)
    assert MEMORY_POLICIES.create("dpmm").schedule(graph, capacity).exact


# ---- equal sizes: the one needed last goes --------------------------------------------------------
def test_among_equal_sizes_the_tensor_needed_last_is_dropped() -> None:
    # A 3-layer chain f1 f2 f3 loss b3 b2 b1 (f_l reads a_{l-1}, W_l; b_l reads the gradient,
    # W_l, a_l). Sizes: W1 = a1 = 3, everything else 1; capacity 10.
    # Kept across steps: W1 (f1->b1) 3, a1 (f2->b1) 3, W2 (f2->b2) 1, a2 (f3->b2) 1, W3 (f3->b3) 1.
    # At the loss (room 10 - 2 = 8) all five need 9: one byte must go. At b3 (room 10 - 4 = 6)
    # W1, a1, W2, a2 need 8: two more bytes. Dropping W2 and a2 (needed at b2, after b3)
    # serves both steps: cost 2. Dropping W3 at the loss (the equal-sized tensor needed
    # soonest) would still leave b3 two bytes over: cost 3.
    ops, tensors = [], [Tensor("x", 1), Tensor("g", 1)]
    for l in (1, 2, 3):  # noqa: E741
        tensors += [
            Tensor(f"W{l}", 3 if l == 1 else 1),
            Tensor(f"a{l}", 3 if l == 1 else 1),
            Tensor(f"g{l}", 1),
        ]
        ops.append(Operator(f"f{l}", ("x" if l == 1 else f"a{l - 1}", f"W{l}"), (f"a{l}",)))
    ops.append(Operator("loss", ("a3",), ("g",)))
    for l, grad in ((3, "g"), (2, "g3"), (1, "g2")):  # noqa: E741
        ops.append(Operator(f"b{l}", (grad, f"W{l}", f"a{l}"), (f"g{l}",), "backward"))
    graph = OperatorGraph(tuple(ops), tuple(tensors), "equal-sizes")
    unavoidable = 1 + 3 + 1 + 1  # x, W1, W2, W3
    schedule = MEMORY_POLICIES.create("dpmm").schedule(graph, 10)
    assert schedule.h2d_bytes == unavoidable + 2
    assert {s.operator: set(s.load) for s in schedule.steps}["b2"] == {"W2", "a2"}
    # LRU drops W1 at the loss (least recently used, at f1) and loads its 3 bytes again at b1.
    assert loads("lru", graph, 10) == unavoidable + 3


# ---- an order that matters ------------------------------------------------------------------------
def test_dpmm_searches_every_valid_order() -> None:
    # A reads the big X, B reads Y, C reads X and B's output. In the given order A, B, C,
    # X must stay on the GPU across B (X + B's 4 bytes = 9 > 8) or be loaded twice;
    # in the order B, A, C it is read by A and C back to back.
    graph = OperatorGraph(
        (
            Operator("A", ("X",), ("a",)),
            Operator("B", ("Y",), ("b",)),
            Operator("C", ("X", "b"), ("c",)),
        ),
        (Tensor("X", 5), Tensor("Y", 2), Tensor("a", 1), Tensor("b", 2), Tensor("c", 1)),
    )
    capacity = 8
    schedule = MEMORY_POLICIES.create("dpmm").schedule(graph, capacity)
    assert schedule.order == ("B", "A", "C")
    assert schedule.h2d_bytes == 5 + 2  # X and Y once
    assert loads("lru", graph, capacity) == 5 + 2 + 5
    assert schedule.stats["orders"] == "all" and schedule.exact
    # Restricted to the graph's own order (more valid states than max_states): X twice.
    restricted = MEMORY_POLICIES.create("dpmm", max_states=2).schedule(graph, capacity)
    assert restricted.order == ("A", "B", "C") and restricted.h2d_bytes == 12
    assert restricted.stats["orders"] == "given" and not restricted.exact


# ---- deep models: the integer program over keep decisions gives the optimum ---------------------
@pytest.mark.parametrize(
    ("family", "layers"), [("resgcn", 16), ("gin", 3), ("sage", 4), ("commnet", 3), ("gcn", 2)]
)
def test_dpmm_equals_the_integer_program_on_deep_chains(family: str, layers: int) -> None:
    graph = operator_graph(
        build_model(family, 602, 41, hidden=256, num_layers=layers), **REDDIT, num_src=300_000
    )
    low = max(graph.working_set_bytes(k) for k in range(len(graph.operators)))
    policy = MEMORY_POLICIES.create("dpmm")
    for capacity in np.linspace(low, graph.total_bytes, 12).astype(int).tolist():
        schedule = policy.schedule(graph, capacity)
        assert schedule.h2d_bytes == interval_program_loads(graph, capacity), capacity
        assert schedule.exact
        assert schedule.h2d_bytes <= loads("lru", graph, capacity)


# ---- the bound ----------------------------------------------------------------------------------
def test_a_binding_beam_says_so_and_never_loses_to_lru() -> None:
    # Six independent operators each read X or Y and write a private output; then one reads
    # all outputs. Many orders, many cached sets per state: a beam of one cuts them.
    ops = [Operator(f"p{k}", ("X" if k % 2 else "Y", "Z"), (f"o{k}",)) for k in range(6)]
    ops.append(Operator("join", tuple(f"o{k}" for k in range(6)), ("out",)))
    tensors = [Tensor("X", 3), Tensor("Y", 3), Tensor("Z", 2), Tensor("out", 1)]
    tensors += [Tensor(f"o{k}", 1 + k % 2) for k in range(6)]
    graph = OperatorGraph(tuple(ops), tuple(tensors))
    capacity = 12
    exact = MEMORY_POLICIES.create("dpmm", beam=None).schedule(graph, capacity)
    bounded = MEMORY_POLICIES.create("dpmm", beam=1).schedule(graph, capacity)
    assert exact.exact and not bounded.exact
    assert bounded.stats["beam_cuts"] > 0
    assert exact.h2d_bytes <= bounded.h2d_bytes <= loads("lru", graph, capacity)


@pytest.mark.parametrize(("params", "field"), [({"beam": 0}, "beam"), ({"max_states": 0}, "max_states")])
def test_bad_parameters_are_one_line_errors(params: dict[str, int], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        MEMORY_POLICIES.create("dpmm", **params)


def test_the_three_policies_are_registered() -> None:
    assert MEMORY_POLICIES.names() == ["dpmm", "lru", "streaming"]
