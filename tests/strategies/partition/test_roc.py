"""roc: Table 2's features and the split worked out by hand, the online fit, the fallback, bad input, properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import PARTITIONERS
from workbench.strategies.partition.base import balance
from workbench.strategies.partition.roc import (
    RangeMeasurement,
    RocPartitioner,
    balanced_boundaries,
    feature_prefix,
    vertex_features,
)

RNG = np.random.default_rng(0)


def graph_from_rows(rows: list[list[int]]) -> CSRGraph:
    """Row v lists the in-neighbors of v."""
    dst = [v for v, row in enumerate(rows) for _ in row]
    src = [u for row in rows for u in row]
    return CSRGraph.from_edges(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), len(rows))


def bounds_of(owner: np.ndarray, parts: int) -> list[int]:
    return np.searchsorted(owner, np.arange(parts + 1)).tolist()


# ---- features ------------------------------------------------------------------------------------


def test_features_of_the_papers_example() -> None:
    """Section 4.1: neighbors {3, 4, 6, 8} are three runs {3, 4}, {6}, {8}.

    WS = 32, d_in = 100:
      v0 {3,4,6,8}: x2 = 4, x3 = 3, x4 = 3 * ceil(run/32) = 3,
                    x5 = ceil(2*100/32) + ceil(100/32) + ceil(100/32) = 7 + 4 + 4 = 15
      v1 {}:        only x1 = 1
      v2 {0..39}:   one run of 40: x2 = 40, x3 = 1, x4 = ceil(40/32) = 2, x5 = ceil(4000/32) = 125
      v3 {1, 2, 9}: runs {1, 2}, {9}: x2 = 3, x3 = 2, x4 = 2, x5 = 7 + 4 = 11
    """
    rows = [[3, 4, 6, 8], [], list(range(40)), [1, 2, 9]] + [[] for _ in range(36)]
    x = vertex_features(graph_from_rows(rows), in_dim=100)
    assert x[:4].tolist() == [[1, 4, 3, 3, 15], [1, 0, 0, 0, 0], [1, 40, 1, 2, 125], [1, 3, 2, 2, 11]]
    assert x[4:].tolist() == [[1, 0, 0, 0, 0]] * 36


def test_x5_depends_on_the_layer_width() -> None:
    # One run of 3 neighbors: ceil(3 * d / 32) for d = 32, 33, 1 is 3, 4, 1 (d = 1 gives x5 = x4).
    g = graph_from_rows([[1, 2, 3], [], [], []])
    table = feature_prefix(g, [32, 33, 1])
    assert table[1].tolist() == [1, 3, 1, 1, 3, 4, 1]
    assert table[-1].tolist() == [4, 3, 1, 1, 3, 4, 1]  # the other rows add only x1
    assert table[:, 0].tolist() == [0, 1, 2, 3, 4]


def brute_features(rows: list[list[int]], d_in: int, ws: int) -> list[list[int]]:
    out = []
    for row in rows:
        nbrs = sorted(set(row))
        runs: list[int] = []
        for j, u in enumerate(nbrs):
            if j and u == nbrs[j - 1] + 1:
                runs[-1] += 1
            else:
                runs.append(1)
        out.append(
            [1, len(nbrs), len(runs), sum(-(-r // ws) for r in runs), sum(-(-r * d_in // ws) for r in runs)]
        )
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 25).flatmap(
        lambda n: st.lists(st.lists(st.integers(0, n - 1), max_size=2 * n), min_size=n, max_size=n)
    ),
    st.integers(1, 70),
    st.sampled_from([1, 4, 32]),
)
def test_features_match_a_loop(rows: list[list[int]], d_in: int, ws: int) -> None:
    x = vertex_features(graph_from_rows(rows), in_dim=d_in, warp_size=ws)
    assert x.tolist() == brute_features(rows, d_in, ws)


# ---- the split by hand ---------------------------------------------------------------------------

# In-neighbor lists of a 10-vertex graph; the hand test reads them with WS = 4 and d_in = 3,
# so that x4 and x5 differ from x3 on so small a graph.
HAND_ROWS = [
    [1, 2, 3],  # run 3:           x = (1, 3, 1, 1, ceil(9/4) = 3)
    [0],  # run 1:                 x = (1, 1, 1, 1, 1)
    [0, 1, 4, 5, 6, 7, 9],  # runs 2, 4, 1: x = (1, 7, 3, 1+1+1 = 3, 2+3+1 = 6)
    [],  #                         x = (1, 0, 0, 0, 0)
    [3],  #                        x = (1, 1, 1, 1, 1)
    [0, 2, 4, 6, 8],  # 5 runs of 1: x = (1, 5, 5, 5, 5)
    [],  #                         x = (1, 0, 0, 0, 0)
    [8, 9],  # run 2:              x = (1, 2, 1, 1, ceil(6/4) = 2)
    [],  #                         x = (1, 0, 0, 0, 0)
    [0, 1, 2, 3, 4, 5, 6, 7, 8],  # run 9: x = (1, 9, 1, ceil(9/4) = 3, ceil(27/4) = 7)
]
HAND_X = [
    [1, 3, 1, 1, 3],
    [1, 1, 1, 1, 1],
    [1, 7, 3, 3, 6],
    [1, 0, 0, 0, 0],
    [1, 1, 1, 1, 1],
    [1, 5, 5, 5, 5],
    [1, 0, 0, 0, 0],
    [1, 2, 1, 1, 2],
    [1, 0, 0, 0, 0],
    [1, 9, 1, 3, 7],
]
# Weights (1, 1, 2, 1, 0.5): vertex costs 8.5, 5.5, 20, 1, 5.5, 23.5, 1, 7, 1, 18.5 (total 91.5);
# prefix costs C(0..10) = 0, 8.5, 14, 34, 35, 40.5, 64, 65, 72, 73, 91.5.
HAND_W = [1.0, 1.0, 2.0, 1.0, 0.5]


def hand_partitioner(**kw: object) -> RocPartitioner:
    return RocPartitioner(weights=HAND_W, in_dims=3, warp_size=4, **kw)  # type: ignore[arg-type]


def test_hand_features() -> None:
    assert vertex_features(graph_from_rows(HAND_ROWS), in_dim=3, warp_size=4).tolist() == HAND_X


def test_hand_split_three_parts() -> None:
    """Targets T/3 = 30.5 and 2T/3 = 61.

    30.5: first C(p) >= 30.5 is C(3) = 34 (off by 3.5), C(2) = 14 is off by 16.5 -> p1 = 3.
    61:   first is C(6) = 64 (off by 3), C(5) = 40.5 is off by 20.5 -> p2 = 6.
    Parts [0,3) [3,6) [6,10) cost 34, 30, 27.5.
    """
    graph = graph_from_rows(HAND_ROWS)
    result = hand_partitioner().partition(graph, 3, RNG)
    assert result.owner.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    assert result.details["fallback"] is False
    assert result.details["weights"] == [HAND_W]
    assert result.details["predicted_balance"] == pytest.approx(34 / (91.5 / 3))


def test_hand_split_rounds_to_the_nearer_side() -> None:
    """Targets 22.875, 45.75, 68.625.

    22.875: first is C(3) = 34 (off 11.125), C(2) = 14 off 8.875 -> p1 = 2 (the earlier side).
    45.75:  first is C(6) = 64 (off 18.25), C(5) = 40.5 off 5.25 -> p2 = 5.
    68.625: first is C(8) = 72 (off 3.375), C(7) = 65 off 3.625 -> p3 = 8.
    Parts [0,2) [2,5) [5,8) [8,10) cost 14, 26.5, 31.5, 19.5.
    """
    result = hand_partitioner().partition(graph_from_rows(HAND_ROWS), 4, RNG)
    assert bounds_of(result.owner, 4) == [0, 2, 5, 8, 10]


def test_hand_split_keeps_parts_nonempty() -> None:
    """All edges go into vertex 9; weights (0, 1, 0, 0, 0) so C(p) = 0 for p <= 9 and C(10) = 9.

    Targets 3 and 6: both first reach at p = 10. 3 is nearer C(9) = 0 -> 9; 6 is nearer C(10) = 9 -> 10.
    Clip p1 to [1, 8] -> 8 and p2 to [2, 9] -> 9: parts [0,8) [8,9) [9,10).
    """
    graph = graph_from_rows([[] for _ in range(9)] + [list(range(9))])
    result = RocPartitioner(weights=[0, 1, 0, 0, 0]).partition(graph, 3, RNG)
    assert bounds_of(result.owner, 3) == [0, 8, 9, 10]


def test_layers_add_their_costs() -> None:
    """Two layers, d_in 3 and 1 (WS = 4): layer 1's x5 is ceil(run/4) = x4 = 1, 1, 3, 0, 1, 5, 0, 1, 0, 3.

    Layer 0 weights HAND_W (costs as above), layer 1 weights (0, 0, 0, 0, 10): combined vertex costs
    18.5, 15.5, 50, 1, 15.5, 73.5, 1, 17, 1, 48.5; C = 0, 18.5, 34, 84, 85, 100.5, 174, 175, 192, 193,
    241.5. Quarters 60.375, 120.75, 181.125:
      60.375:  C(3) = 84 (off 23.625) vs C(2) = 34 (off 26.375) -> 3   (layer 0 alone: 2)
      120.75:  C(6) = 174 (off 53.25) vs C(5) = 100.5 (off 20.25) -> 5
      181.125: C(8) = 192 (off 10.875) vs C(7) = 175 (off 6.125) -> 7  (layer 0 alone: 8)
    """
    graph = graph_from_rows(HAND_ROWS)
    roc = RocPartitioner(weights=[HAND_W, [0, 0, 0, 0, 10]], in_dims=[3, 1], warp_size=4)
    assert bounds_of(roc.partition(graph, 4, RNG).owner, 4) == [0, 3, 5, 7, 10]
    # One list of weights serves every layer.
    assert RocPartitioner(weights=HAND_W, in_dims=[3, 1]).weights[1].tolist() == HAND_W  # type: ignore[union-attr]


# ---- fallback ------------------------------------------------------------------------------------


def test_falls_back_to_equal_edge_without_a_model() -> None:
    """In-degrees 3, 1, 7, 0, 1, 5, 0, 2, 0, 9 (28 edges); prefix 0, 3, 4, 11, 11, 12, 17, 17, 19, 19, 28.

    Targets 7, 14, 21: C(3) = 11 off 4 vs C(2) = 4 off 3 -> 2; C(6) = 17 off 3 vs C(5) = 12 off 2 -> 5;
    C(10) = 28 off 7 vs C(9) = 19 off 2 -> 9. Parts [0,2) [2,5) [5,9) [9,10).
    """
    roc = RocPartitioner(in_dims=3, warp_size=4)
    result = roc.partition(graph_from_rows(HAND_ROWS), 4, RNG)
    assert bounds_of(result.owner, 4) == [0, 2, 5, 9, 10]
    assert result.details["fallback"] is True
    assert result.details["fallback_to"] == "equal-edge"
    assert "fewer than 5 measurements" in result.details["fallback_reason"]
    assert result.details["weights"] == [None]
    # Four points are still fewer than the five features: still the fallback.
    roc.observe(RangeMeasurement.from_partition(result, [1.0, 2.0, 3.0, 4.0]))
    assert roc.observation_counts() == [4]
    assert roc.partition(graph_from_rows(HAND_ROWS), 4, RNG).details["fallback"] is True


def test_edgeless_graph_falls_back_to_equal_vertex() -> None:
    graph = graph_from_rows([[] for _ in range(10)])
    result = RocPartitioner().partition(graph, 3, RNG)
    # Targets 10/3 and 20/3 on C(p) = p: nearest are 3 and 7.
    assert bounds_of(result.owner, 3) == [0, 3, 7, 10]
    assert result.details["fallback_to"] == "equal-vertex"
    # A model that predicts zero for the whole graph (only edge weights, no edges) falls back too.
    result = RocPartitioner(weights=[0, 1, 0, 0, 0]).partition(graph, 3, RNG)
    assert result.details["fallback"] is True and "zero cost" in result.details["fallback_reason"]


# ---- learning online -----------------------------------------------------------------------------

TRUE_W = np.array([2e-6, 5e-8, 3e-7, 1e-7, 4e-8])  # seconds per vertex, edge, run, load, activation load


def two_kinds_graph(n: int = 600, seed: int = 0) -> CSRGraph:
    """First half: 1-3 long runs per vertex (8-70 neighbors each); second half: 5-24 short runs (1-5).

    Per edge, the second half is ~3x as expensive under TRUE_W (a run costs more than an edge), so
    equal-edge overloads the parts there.
    """
    rng = np.random.default_rng(seed)
    short, long = np.array([1, 1, 1, 2, 3, 5]), np.array([8, 13, 33, 40, 70])
    rows: list[list[int]] = []
    for v in range(n):
        lengths, count = (long, rng.integers(1, 4)) if v < n // 2 else (short, rng.integers(5, 25))
        row: list[int] = []
        for _ in range(count):
            length = int(rng.choice(lengths))
            start = int(rng.integers(0, n - length))
            row.extend(range(start, start + length))
        rows.append(row)
    return graph_from_rows(rows)


def true_part_costs(roc: RocPartitioner, graph: CSRGraph, owner: np.ndarray, parts: int) -> np.ndarray:
    b = bounds_of(owner, parts)
    return np.array([roc.range_features(graph, b[i], b[i + 1]) @ TRUE_W for i in range(parts)])


def test_learns_online_and_rebalances() -> None:
    graph = two_kinds_graph()
    roc = RocPartitioner(in_dims=100)
    first = roc.partition(graph, 8, RNG)
    assert first.details["fallback"] is True
    times = true_part_costs(roc, graph, first.owner, 8)  # what an executor would measure
    assert balance(times) > 1.4  # equal-edge is badly off under the true costs
    roc.observe(RangeMeasurement.from_partition(first, times))
    # Eight exact points of a non-negative model: the fit is the model (to rounding).
    np.testing.assert_allclose(roc.weights[0], TRUE_W, rtol=1e-6)
    second = roc.partition(graph, 8, RNG)
    assert second.details["fallback"] is False
    assert second.details["weights"][0] == pytest.approx(TRUE_W.tolist(), rel=1e-6)
    balanced = balance(true_part_costs(roc, graph, second.owner, 8))
    assert balanced < 1.05 < 1.4 < balance(times)
    assert balanced == pytest.approx(second.details["predicted_balance"], rel=1e-6)


def random_ranges(n: int, count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    cuts = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n), count - 1, replace=False)), [n]])
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def test_recovers_weights_within_one_percent() -> None:
    graph = two_kinds_graph(seed=1)
    roc = RocPartitioner(in_dims=100)
    rng = np.random.default_rng(2)
    ranges = random_ranges(graph.num_nodes, 60, rng)
    # Times from TRUE_W with 1e-7 relative noise (timer jitter far below any real GPU's).
    roc.observe(
        RangeMeasurement(graph, a, b, float(roc.range_features(graph, a, b) @ TRUE_W) * (1 + 1e-7 * z))
        for (a, b), z in zip(ranges, rng.standard_normal(len(ranges)), strict=True)
    )
    np.testing.assert_allclose(roc.weights[0], TRUE_W, rtol=0.01)


def test_noisy_times_predict_well_even_where_weights_are_not_identifiable() -> None:
    """Table 2's features are nearly collinear (x5 ~ 3.125 x2 + x3/2 at d_in = 100; x4 = x3 for runs
    up to 32), so 0.1% timing noise moves single weights by far more than 1%; the predicted
    time of a range, which is all the split uses, stays within ~0.1%."""
    graph = two_kinds_graph(seed=1)
    roc = RocPartitioner(in_dims=100)
    rng = np.random.default_rng(3)
    roc.observe(
        RangeMeasurement(graph, a, b, float(roc.range_features(graph, a, b) @ TRUE_W) * (1 + 1e-3 * z))
        for (a, b), z in zip(random_ranges(graph.num_nodes, 60, rng), rng.standard_normal(60), strict=True)
    )
    fitted = roc.weights[0]
    assert fitted is not None and np.all(fitted >= 0)
    for a, b in random_ranges(graph.num_nodes, 20, np.random.default_rng(4)):
        x = roc.range_features(graph, a, b)
        assert x @ fitted == pytest.approx(x @ TRUE_W, rel=5e-3)


def test_nonnegative_fit_and_per_layer_measurements() -> None:
    """Layer 0 times follow TRUE_W, layer 1 times are 3x layer 0's with its own x5 (d_in = 16)."""
    graph = two_kinds_graph(seed=4)
    roc = RocPartitioner(in_dims=[100, 16])
    first = roc.partition(graph, 8, RNG)
    b = bounds_of(first.owner, 8)
    times = np.array(
        [
            [roc.range_features(graph, b[i], b[i + 1], layer) @ (TRUE_W * (1 + 2 * layer)) for i in range(8)]
            for layer in (0, 1)
        ]
    )
    roc.observe(RangeMeasurement.from_partition(first, times))
    assert roc.observation_counts() == [8, 8]
    np.testing.assert_allclose(roc.weights[0], TRUE_W, rtol=1e-6)
    np.testing.assert_allclose(roc.weights[1], 3 * TRUE_W, rtol=1e-6)
    # Times no non-negative model explains (longer ranges faster) still give non-negative weights.
    skewed = RocPartitioner(in_dims=100)
    skewed.observe(
        RangeMeasurement(graph, a, b, 1.0 / (b - a)) for a, b in random_ranges(graph.num_nodes, 10, RNG)
    )
    assert np.all(skewed.weights[0] >= 0)  # type: ignore[operator]


def test_measurements_from_another_graph_seed_the_model() -> None:
    """ROC's inference case: learned on training graphs, applied to a new one."""
    train, new = two_kinds_graph(seed=5), two_kinds_graph(seed=6)
    roc = RocPartitioner(in_dims=100)
    roc.observe(
        RangeMeasurement(train, a, b, float(roc.range_features(train, a, b) @ TRUE_W))
        for a, b in random_ranges(train.num_nodes, 12, np.random.default_rng(7))
    )
    result = roc.partition(new, 6, RNG)
    assert result.details["fallback"] is False
    assert balance(true_part_costs(roc, new, result.owner, 6)) < 1.05


def test_registry_and_command_line_strings() -> None:
    roc = PARTITIONERS.create("roc", weights="1,1,2,1,0.5", in_dims="3", warp_size=4)
    assert isinstance(roc, RocPartitioner) and roc.in_dims == (3,)
    assert bounds_of(roc.partition(graph_from_rows(HAND_ROWS), 3, RNG).owner, 3) == [0, 3, 6, 10]
    two = PARTITIONERS.create("roc", weights="1,1,1,1,1;0,0,0,0,1", in_dims="100,16")
    assert [w.tolist() for w in two.weights] == [[1, 1, 1, 1, 1], [0, 0, 0, 0, 1]]  # type: ignore[union-attr]


# ---- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weights": [1, 2, 3, 4]}, "weights need 5 numbers"),
        ({"weights": [1, 2, 3, 4, 5, 6]}, "weights need 5 numbers"),
        ({"weights": [1, -2, 3, 4, 5]}, "non-negative"),
        ({"weights": [1, float("nan"), 3, 4, 5]}, "finite"),
        ({"weights": [0, 0, 0, 0, 0]}, "at least one weight must be positive"),
        ({"weights": ["a", 1, 1, 1, 1]}, "must be numbers"),
        ({"weights": [[1, 1, 1, 1, 1]], "in_dims": [100, 16]}, "1 weight lists for 2 layers"),
        ({"in_dims": 0}, "in_dims must be positive integers"),
        ({"in_dims": [100, -1]}, "in_dims must be positive integers"),
        ({"in_dims": []}, "in_dims must be positive integers"),
        ({"warp_size": 0}, "warp_size"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RocPartitioner(**kwargs)  # type: ignore[arg-type]


def test_bad_part_counts() -> None:
    graph = graph_from_rows(HAND_ROWS)
    with pytest.raises(ConfigError, match="11 parts is more than the 10 vertices"):
        hand_partitioner().partition(graph, 11, RNG)
    with pytest.raises(ConfigError, match="at least 1"):
        hand_partitioner().partition(graph, 0, RNG)


def test_bad_measurements() -> None:
    graph = graph_from_rows(HAND_ROWS)
    roc = RocPartitioner(in_dims=3)
    with pytest.raises(ConfigError, match="not a RangeMeasurement"):
        roc.observe([(graph, 0, 5, 1.0)])
    with pytest.raises(ConfigError, match="expected RangeMeasurement records"):
        roc.observe(3.5)
    with pytest.raises(ConfigError, match="nonempty range"):
        RangeMeasurement(graph, 5, 5, 1.0)
    with pytest.raises(ConfigError, match="nonempty range"):
        RangeMeasurement(graph, 0, 11, 1.0)
    with pytest.raises(ConfigError, match="nonempty range"):
        RangeMeasurement(graph, 0.0, 3, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="non-negative"):
        RangeMeasurement(graph, 0, 3, -1.0)
    with pytest.raises(ConfigError, match="finite"):
        RangeMeasurement(graph, 0, 3, float("inf"))
    with pytest.raises(ConfigError, match="seconds must be a number"):
        RangeMeasurement(graph, 0, 3, "fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="graph must be a CSRGraph"):
        RangeMeasurement("g", 0, 3, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="layer 1, but the model has 1 layer"):
        roc.observe([RangeMeasurement(graph, 0, 3, 1.0), RangeMeasurement(graph, 3, 6, 1.0, layer=1)])
    assert roc.observation_counts() == [0]  # a bad batch adds nothing
    result = roc.partition(graph, 4, RNG)
    with pytest.raises(ConfigError, match="3 times for the 4 parts"):
        RangeMeasurement.from_partition(result, [1.0, 2.0, 3.0])
    with pytest.raises(ConfigError, match="layers, parts"):
        RangeMeasurement.from_partition(result, [[1.0] * 4], layer=0)
    result.owner = result.owner[::-1].copy()
    with pytest.raises(ConfigError, match="not contiguous ranges in part order"):
        RangeMeasurement.from_partition(result, [1.0] * 4)


# ---- properties ----------------------------------------------------------------------------------


def brute_boundaries(cost: list[float], k: int) -> list[int]:
    """The module's split rule, one vertex at a time."""
    prefix = [0.0]
    for c in cost:
        prefix.append(prefix[-1] + c)
    n, total = len(cost), prefix[-1]
    cuts = []
    for i in range(1, k):
        target = total * i / k
        q = next(p for p in range(n + 1) if prefix[p] >= target)
        p = q - 1 if q > 0 and target - prefix[q - 1] < prefix[q] - target else q
        p = min(max(p, i), n - k + i)
        cuts.append(max(p, cuts[-1] + 1) if cuts else p)
    return [0, *cuts, n]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=40), st.integers(1, 40))
def test_split_matches_the_rule_one_vertex_at_a_time(cost: list[int], k: int) -> None:
    k = min(k, len(cost))
    table = np.concatenate([[0], np.cumsum(cost)])[:, None]
    assert balanced_boundaries(table, np.ones(1), k).tolist() == brute_boundaries([float(c) for c in cost], k)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 30).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.integers(0, n - 1), max_size=n), min_size=n, max_size=n),
            st.integers(1, n),
        )
    ),
    st.one_of(st.none(), st.lists(st.floats(0, 10), min_size=5, max_size=5).filter(lambda w: any(w))),
)
def test_every_vertex_one_owner_contiguous_nonempty(
    case: tuple[list[list[int]], int], weights: list[float] | None
) -> None:
    rows, k = case
    graph = graph_from_rows(rows)
    result = RocPartitioner(weights=weights, in_dims=7).partition(graph, k, RNG)
    owner = result.owner
    assert owner.shape == (graph.num_nodes,)
    assert owner[0] == 0 and owner[-1] == k - 1
    assert np.all(np.diff(owner) >= 0) and np.all(np.diff(owner) <= 1)  # contiguous, in order
    assert np.all(result.vertex_counts >= 1)
