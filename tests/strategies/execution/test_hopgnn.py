"""HopGNN (paper 003, sections 4-5): the running example counted by hand, merging, byte conservation.

The running example is drawn only in the paper's figures 8 and 9; the graph below is built
from the text of sections 3.2, 4, 5.1 and 5.2 (derivation in :func:`running_example`).
Byte counts on sampled runs are recomputed here with plain Python sets walked over the
sampled blocks, without the scheme's helpers, and compared with the plans.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import simulate
from workbench.config import config_from_dict, load_config
from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.hardware.presets import hopgnn_4xa100_10gbe
from workbench.model import build_model
from workbench.registry import EXECUTION_SCHEMES
from workbench.run import prepare_run, results_row
from workbench.strategies.execution.base import SchemeInputs
from workbench.strategies.execution.micrographs import adaptive_merge_count, merge_time_steps
from workbench.strategies.partition.base import PartitionResult
from workbench.strategies.sampling.base import Block, Minibatch, check_block_invariants

# ---- the running example -----------------------------------------------------------------------
SERVER1 = (0, 1, 2, 3)  # "red represents server 0, blue server 1": 4-7 on server 0, 0-3 on server 1
OWNER = np.array([1, 1, 1, 1, 0, 0, 0, 0])
# Sampled in-edges (dst, src), fanout 2, per minibatch: the top block (roots) and the input block.
SUBGRAPH0 = {  # minibatch {6, 3}, model 0 on server 0
    "seeds": [3, 6],
    "top": [(3, 2), (3, 4), (6, 5), (6, 7)],
    "input": [(3, 2), (3, 4), (6, 5), (6, 7), (2, 3), (2, 0), (4, 5), (4, 3), (5, 1), (5, 7), (7, 6), (7, 5)],
}
SUBGRAPH1 = {  # minibatch {5, 0}, model 1 on server 1
    "seeds": [0, 5],
    "top": [(0, 2), (0, 3), (5, 6), (5, 1)],
    "input": [(0, 2), (0, 3), (5, 6), (5, 1), (2, 0), (2, 3), (3, 2), (3, 4), (6, 7), (6, 5), (1, 0), (1, 5)],
}


def _block(dst: list[int], edges: list[tuple[int, int]], before: list[int]) -> Block:
    src = list(dict.fromkeys([*dst, *before, *(u for _, u in edges)]))
    at_src = {v: k for k, v in enumerate(src)}
    at_dst = {v: k for k, v in enumerate(dst)}
    return Block(
        np.array(src),
        np.array(dst),
        np.array([at_src[u] for _, u in edges]),
        np.array([at_dst[v] for v, _ in edges]),
    )


def _minibatch(sub: dict) -> Minibatch:
    top = _block(sub["seeds"], sub["top"], [])
    bottom = _block(top.src_nodes.tolist(), sub["input"], [])
    mb = Minibatch(np.array(sub["seeds"]), [bottom, top])
    check_block_invariants(mb)
    return mb


def running_example() -> SchemeInputs:
    """HopGNN's running example: 8 vertices on 2 servers, minibatches {6, 3} and {5, 0}, fanout 2, 2 layers.

    What the text fixes, and how the graph meets it:

    * Section 3.2: layer 1 of subgraph 0 (minibatch {6, 3}) reads vertices 4, 5, 6, 7 on
      server 0 and 0, 1, 2, 3 on server 1: server 0 owns 4-7, server 1 owns 0-3, and
      subgraph 0's input layer is all 8 vertices.
    * Section 4: micrograph 6 reads 6, 5, 7 from server 0, 3 of its 4 features
      (6 <- {5, 7}; 5 <- {1, 7}; 7 <- {6, 5}: {6, 5, 7, 1}); micrograph 3 reads 3 of its 5
      from server 1 (3 <- {2, 4}; 2 <- {3, 0}; 4 <- {5, 3}: {3, 2, 4, 0, 5}); "the same
      locality" holds for micrographs 5 and 0.
    * Section 5.2: micrograph 6 (server 0, step 0) needs vertex 1 from server 1, and
      micrograph 5 (server 0, step 1) needs vertices 1 and 0: 5 <- {6, 1}; 6 <- {7, 5};
      1 <- {0, 5}: {5, 6, 1, 7, 0}, 3 of 5 local.
    * Section 5.1: model-centric training moves 8 features, micrographs 6. Subgraph 1's
      input layer must then hold all of 4-7 (4 remote for model 1 on server 1), and
      micrograph 0 one remote vertex: 0 <- {2, 3}; 2 <- {0, 3}; 3 <- {2, 4}:
      {0, 2, 3, 4}, 3 of 4 local.

    Hand counts of remote feature transfers (no GPU cache):

    * model-centric: model 0 on server 0 reads subgraph 0's inputs {0..7}: 0, 1, 2, 3
      remote (4); model 1 on server 1 reads subgraph 1's {0..7}: 4, 5, 6, 7 remote (4).
      Total 8.
    * micrographs: redistribution gives server 0 roots {6, 5}, server 1 roots {0, 3}.
      Step 0: model 0 on server 0 trains micrograph 6 (remote {1}: 1), model 1 on
      server 1 trains micrograph 0 (remote {4}: 1). Step 1: model 0 on server 1 trains
      micrograph 3 (remote {4, 5}: 2), model 1 on server 0 trains micrograph 5 (remote
      {1, 0}: 2). Total 6, and two model migrations.
    * pre-gathering: server 0 fetches {1} and {1, 0} once: {0, 1} (2); server 1 fetches
      {4} and {4, 5} once: {4, 5} (2). Total 4: vertex 1 (and, symmetrically, 4) is
      fetched once though two time steps need it.
    """
    mbs = [_minibatch(SUBGRAPH0), _minibatch(SUBGRAPH1)]
    pairs = {(u, v) for sub in (SUBGRAPH0, SUBGRAPH1) for v, u in sub["top"] + sub["input"]}
    pairs |= {(v, u) for u, v in pairs}
    src, dst = np.array(sorted(pairs)).T
    graph = CSRGraph.from_edges(src, dst, 8, name="hopgnn-running-example", feat_dim=4, num_classes=2)
    cluster = hopgnn_4xa100_10gbe(machines=2)  # 2 servers x 1 A100
    model = build_model("sage", 4, 2, hidden=4, num_layers=2)
    return SchemeInputs(
        graph=graph,
        cluster=cluster,
        model=model,
        workers=cluster.gpu_nodes(),
        partition=PartitionResult(graph, OWNER, 2),
        epoch=[mbs],
        feature_bytes=16,
    )


def tree(mb: Minibatch, roots: list[int]) -> list[set[int]]:
    """The vertices of each layer of the roots' trees, input layer first, walked with sets."""
    layers = [set(roots)]
    for block in reversed(mb.blocks):
        below = set(layers[0])
        for s, d in zip(block.edge_src.tolist(), block.edge_dst.tolist(), strict=True):
            if int(block.dst_nodes[d]) in layers[0]:
                below.add(int(block.src_nodes[s]))
        layers.insert(0, below)
    return layers


def items(plan, phase: str) -> int:
    return sum(t.items for t in plan.tasks if t.phase == phase)


def build(name: str, inputs: SchemeInputs, **params):
    return EXECUTION_SCHEMES.create(name, **params).build(inputs)


MG = {"pregather": False, "merge": False}
PG = {"merge": False}


def test_the_running_example_graph_matches_the_text():
    inputs = running_example()
    graph = inputs.graph
    for mb in inputs.epoch[0]:
        for block in mb.blocks:  # every sampled edge is an edge, at most 2 per destination
            for s, d in zip(block.src_nodes[block.edge_src], block.dst_nodes[block.edge_dst], strict=True):
                assert s in graph.in_neighbors(int(d))
            assert np.bincount(block.edge_dst).max() <= 2
    mb0, mb1 = inputs.epoch[0]
    on_server0 = {4, 5, 6, 7}
    local = {6: (3, 4), 3: (3, 5), 5: (3, 5), 0: (3, 4)}  # micrograph: (features on its home, all)
    for root, mb in ((6, mb0), (3, mb0), (5, mb1), (0, mb1)):
        vertices = tree(mb, [root])[0]
        home = on_server0 if root in on_server0 else set(SERVER1)
        assert (len(vertices & home), len(vertices)) == local[root]
    assert tree(mb0, [6])[0] == {6, 5, 7, 1} and tree(mb1, [5])[0] - on_server0 == {0, 1}
    assert set(mb0.input_nodes.tolist()) == set(range(8)) == set(mb1.input_nodes.tolist())


def test_micrographs_move_fewer_features_than_model_centric_in_the_running_example():
    inputs = running_example()
    model_centric = build("model-centric", inputs)
    micro = build("hopgnn", inputs, minibatches="as-sampled", **MG)
    assert items(model_centric, "gather_remote") == 8
    assert items(micro, "gather_remote") == 6
    per_cell = {t.id: t.items for t in micro.tasks if t.phase == "gather_remote"}
    assert per_cell == {
        "i0.w0.t0.remote.m1.host": 1,  # micrograph 6 on server 0 reads vertex 1
        "i0.w1.t0.remote.m0.host": 1,  # micrograph 0 on server 1 reads vertex 4
        "i0.w0.t1.remote.m1.host": 2,  # micrograph 5 (model 1) on server 0 reads 1 and 0
        "i0.w1.t1.remote.m0.host": 2,  # micrograph 3 (model 0) on server 1 reads 4 and 5
    }
    # Each model migrates once, with its parameters and accumulated gradients.
    moves = [t for t in micro.tasks if t.phase == "migrate"]
    model = inputs.model
    assert sorted((t.src, t.dst, t.carries, t.bytes) for t in moves) == sorted(
        [
            ("m0.gpu0", "m1.gpu0", "model", model.param_bytes()),
            ("m0.gpu0", "m1.gpu0", "gradients", model.gradient_bytes()),
            ("m1.gpu0", "m0.gpu0", "model", model.param_bytes()),
            ("m1.gpu0", "m0.gpu0", "gradients", model.gradient_bytes()),
        ]
    )
    # Gradients are synchronised once, at the end of the iteration.
    assert [t.op for t in micro.tasks if t.kind == "collective"] == ["allreduce"]
    for plan in (model_centric, micro):
        simulate(plan, inputs.cluster)


def test_pregathering_fetches_a_vertex_two_time_steps_need_once():
    inputs = running_example()
    plan = build("hopgnn", inputs, minibatches="as-sampled", **PG)
    fetches = {t.id: t.items for t in plan.tasks if t.phase == "gather_remote"}
    assert fetches == {"i0.w0.pregather.m1.host": 2, "i0.w1.pregather.m0.host": 2}  # {0, 1} and {4, 5}
    for t in plan.tasks:
        if t.phase == "gather_remote":
            assert (t.src, t.dst) in (("m1.host", "m0.host"), ("m0.host", "m1.host"))
    # Each cell then copies its pre-gathered share from its own host: 1 + 1 + 2 + 2 rows.
    assert items(plan, "h2d") == items(build("hopgnn", inputs, minibatches="as-sampled", **MG), "h2d") + 6
    simulate(plan, inputs.cluster)


@pytest.mark.parametrize("switches", [MG, PG, {}], ids=["MG", "MG+PG", "All"])
def test_the_real_executors_order_changes_dependencies_not_bytes(switches):
    """prefetch 0 and staged reads (what the real executor runs) move the same bytes; sampling then
    waits for the previous step, and a cell's pre-gathered share waits for its near reads."""
    example = running_example()
    inputs = dataclasses.replace(example, epoch=example.epoch * 2)  # the example's iteration, twice
    loose = build("hopgnn", inputs, minibatches="as-sampled", **switches)
    strict = build("hopgnn", inputs, minibatches="as-sampled", prefetch=0, overlap_reads=False, **switches)
    assert {t.id: (t.phase, t.bytes) for t in strict.tasks} == {t.id: (t.phase, t.bytes) for t in loose.tasks}
    loose_deps = {t.id: set(t.deps) for t in loose.tasks}
    deps = {t.id: set(t.deps) for t in strict.tasks}
    for w in range(2):
        assert f"i0.w{w}.update" in deps[f"i1.w{w}.sample"]
        assert f"i0.w{w}.update" not in loose_deps[f"i1.w{w}.sample"]
    shares = [tid for tid in deps if tid.endswith(".pregathered")]
    assert bool(shares) == ("pregather" not in switches)
    staged = 0
    for tid in shares:
        cell = tid.removesuffix(".pregathered")
        near = {i for i in deps if i.startswith(cell + ".") and (".local." in i or ".host." in i)}
        assert near <= deps[tid]  # staged: after the cell's cache and host reads
        assert not near & loose_deps[tid]  # overlapped: beside them
        staged += len(near)
    assert staged or not shares
    # The real worker makes its pre-gathering exchange (its own fetch, and serving the other's)
    # before any cell's reads: staged, every near read waits for both fetches of its iteration.
    fetches = {tid for tid in deps if ".pregather." in tid}
    assert bool(fetches) == ("pregather" not in switches)
    for tid in deps:
        if ".local." in tid or ".host." in tid:
            it = tid.split(".")[0]
            assert {f for f in fetches if f.startswith(it + ".")} <= deps[tid]
            assert not fetches & loose_deps[tid]
    # Without pre-gathering each kept step's remote reads are one exchange: staged, a worker's remote
    # read also waits for the other worker to arrive (a task of its own in that iteration, beyond
    # the micrograph's samples that the overlapped plan waits for too).
    reads = [tid for tid in deps if ".remote." in tid]
    assert bool(reads) == ("pregather" in switches)
    for tid in reads:
        it, me = tid.split(".")[:2]
        other = f"{it}.w{1 - int(me[1:])}."
        assert any(d.startswith(other) for d in deps[tid] - loose_deps[tid])


def test_naive_feature_centric_carries_the_model_and_partials_instead_of_features():
    inputs = running_example()
    plan = build("naive-feature-centric", inputs, minibatches="as-sampled")
    assert items(plan, "gather_remote") == 0 and items(plan, "h2d") == 16  # every feature read where it lives
    model = inputs.model
    # Model 0 (subgraph 0): server 0 (reads 4-7), server 1 (reads 0-3), back to server 0: two hops;
    # model 1 likewise from server 1. Per subgraph: layer 1 (roots) 6 sources, 2 destinations,
    # 4 edges; layer 0 (input) 8 sources, 6 destinations, 12 edges.
    sizes = [(8, 6, 12), (6, 2, 4)]
    adjacency = 8 * (8 + 2 * 12 + 6 + 2 * 4)
    partials = 6 * 4 * 4  # 6 layer-0 destinations x in_dim 4 x 4 bytes
    saved = sum(layer.saved_for_backward_bytes(*s) for layer, s in zip(model.layers, sizes, strict=True))
    moved: dict[str, int] = {}
    for t in plan.tasks:
        if t.phase == "migrate":
            moved[t.carries] = moved.get(t.carries, 0) + t.bytes
    assert moved == {
        "model": 2 * 2 * model.param_bytes(),
        "partials": 2 * partials,
        "activations": 2 * saved,
        "adjacency": 2 * 2 * adjacency,
    }
    hops = [(t.src, t.dst) for t in plan.tasks if t.phase == "migrate" and t.carries == "model"]
    assert hops == [
        ("m0.gpu0", "m1.gpu0"),
        ("m1.gpu0", "m0.gpu0"),
        ("m1.gpu0", "m0.gpu0"),
        ("m0.gpu0", "m1.gpu0"),
    ]
    simulate(plan, inputs.cluster)


# ---- merging --------------------------------------------------------------------------------------
def test_merging_spreads_the_lightest_time_step_as_in_figure_10():
    # Figure 10(b): model m1 has 4, 2 and 2 roots in steps t0, t1, t2; t1 has the fewest over all
    # models, and m1's two roots there go one each to t0 and t2 (5 and 3).
    counts = [[3, 1, 4], [4, 2, 2], [2, 1, 3]]  # models x steps; step totals 9, 4, 9
    cells = [
        [np.arange(c).reshape(-1, 1) + 10 * (3 * d + t) for t, c in enumerate(row)]
        for d, row in enumerate(counts)
    ]
    steps, merged = merge_time_steps(cells, 1)
    assert steps == [0, 2]
    assert [[c.shape[0] for c in model] for model in merged] == [[4, 4], [5, 3], [3, 3]]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.lists(st.integers(0, 7), min_size=n, max_size=n), min_size=n, max_size=n),
            st.integers(0, n - 1),
        )
    )
)
def test_merging_never_changes_the_roots_a_model_trains_on(case):
    n, counts, merges = case
    cells = [
        [np.arange(c).reshape(-1, 1) + 100 * (n * d + t) for t, c in enumerate(row)]
        for d, row in enumerate(counts)
    ]
    steps, merged = merge_time_steps(cells, merges)
    assert len(steps) == n - merges == len(merged[0]) and steps == sorted(steps)
    for before, after in zip(cells, merged, strict=True):
        assert sorted(np.concatenate(before).ravel()) == sorted(np.concatenate(after).ravel())
    # The kept steps still put every model on a different server.
    for t in steps:
        assert len({(d + t) % n for d in range(n)}) == n


def test_merging_home_deals_the_lightest_step_to_the_models_at_each_server():
    # The counts of Figure 10; t1 is dropped. Model d's t1 cell is on server (d + 1) mod 3. On
    # server 1 the kept cells are model 1's t0 (4 roots) and model 2's t2 (3): 8 in all, each
    # topped up to 8 // 2 + 1 = 5 in step order, so model 0's one root goes to model 1's t0.
    # Server 2: model 2's t0 (2) and model 0's t2 (4) take model 1's two roots: t0 gets both.
    # Server 0: model 0's t0 (3) and model 1's t2 (2) take model 2's one root: t0 gets it.
    counts = [[3, 1, 4], [4, 2, 2], [2, 1, 3]]
    cells = [
        [np.arange(c).reshape(-1, 1) + 10 * (3 * d + t) for t, c in enumerate(row)]
        for d, row in enumerate(counts)
    ]
    steps, merged = merge_time_steps(cells, 1, "home")
    assert steps == [0, 2]
    assert [[c.shape[0] for c in model] for model in merged] == [[4, 4], [5, 2], [4, 3]]
    assert 10 * (3 * 0 + 1) in merged[1][0]  # model 0's t1 root, now model 1's at server 1


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 6).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.lists(st.integers(0, 7), min_size=n, max_size=n), min_size=n, max_size=n),
            st.integers(0, n - 1),
        )
    )
)
def test_merging_home_never_moves_a_root_off_its_server(case):
    n, counts, merges = case
    cells = [
        [np.arange(c).reshape(-1, 1) + 100 * (n * d + t) for t, c in enumerate(row)]
        for d, row in enumerate(counts)
    ]
    home = {int(r): (d + t) % n for d in range(n) for t in range(n) for r in cells[d][t].ravel()}
    steps, merged = merge_time_steps(cells, merges, "home")
    seen = {int(r): (d + t) % n for d in range(n) for k, t in enumerate(steps) for r in merged[d][k].ravel()}
    assert seen == home


def test_merge_to_is_checked():
    with pytest.raises(ConfigError, match="merge_to 'away'"):
        EXECUTION_SCHEMES.create("hopgnn", merge_to="away")


def test_adaptive_merge_count_stops_when_the_epoch_stops_getting_faster():
    # Figure 17: four steps, then three (faster), then two (slower): HopGNN keeps three (1 merge).
    assert adaptive_merge_count(lambda m: [10.0, 8.0, 9.0, 7.0][m], 3) == 1
    assert adaptive_merge_count(lambda m: [10.0, 9.0, 8.0, 7.0][m], 3) == 3
    assert adaptive_merge_count(lambda m: [10.0, 10.0][m], 1) == 0
    seen = []
    adaptive_merge_count(lambda m: seen.append(m) or 5.0 - m, 2)
    assert seen == [0, 1, 2]


def test_switches_are_checked():
    with pytest.raises(ConfigError, match="pregather and merge work on micrographs"):
        EXECUTION_SCHEMES.create("hopgnn", micrographs=False)
    with pytest.raises(ConfigError, match="merges must be >= 1"):
        EXECUTION_SCHEMES.create("hopgnn", merges=0)
    with pytest.raises(ConfigError, match="minibatches 'local'; allowed: global, as-sampled"):
        EXECUTION_SCHEMES.create("hopgnn", minibatches="local")
    with pytest.raises(ConfigError, match="merges=2, but 2 workers train in 2 time steps"):
        build("hopgnn", running_example(), merges=2)
    with pytest.raises(ConfigError, match="unknown parameter"):
        EXECUTION_SCHEMES.create("naive-feature-centric", merges=1)


def test_without_micrographs_hopgnn_is_the_model_centric_plan():
    inputs = running_example()
    plain = build("hopgnn", inputs, micrographs=False, pregather=False, merge=False)
    baseline = build("model-centric", inputs)
    assert [t.to_dict() for t in plain.tasks] == [t.to_dict() for t in baseline.tasks]
    assert plain.meta["scheme"] == "hopgnn" and plain.meta["micrographs"] is False


# ---- byte conservation on a sampled run -----------------------------------------------------------
def config(**tables):
    data = {
        "name": "hop",
        "seed": 5,
        "graph": {"name": "er:n=600,deg=6"},
        "hardware": {"name": "hopgnn-4xa100-10gbe"},
        "model": {"name": "sage", "hidden": 16, "num_layers": 2},
        "training": {"batch_size": 24, "iterations": 3},
        "partition": {"name": "metis"},
        "placement": {"name": "degree"},
        "cache": {"capacity": "10%"},
        "sampling": {"name": "neighbor", "fanouts": [4, 3]},
    }
    data.update(tables)
    return config_from_dict(data, "hop.toml")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    return prepare_run(config(), cache_dir=str(tmp_path_factory.mktemp("samples")))


def cached_mask(inputs) -> np.ndarray:
    """The degree placement replicates the top 10% by in-degree on every GPU (one GPU per machine)."""
    n = inputs.graph.num_nodes
    mask = np.zeros(n, dtype=bool)
    mask[np.argsort(-inputs.graph.in_degrees(), kind="stable")[: int(0.1 * n)]] = True
    return mask


def model_cells(inputs, row, minibatches: str) -> list[list[list[tuple[int, int]]]]:
    """cells[d][t]: model d's roots (worker, vertex) trained at server (d + t) mod N, dealt by hand."""
    n = inputs.num_workers
    owner = inputs.partition.owner
    roots = sorted((int(v), w) for w, mb in enumerate(row) for v in mb.seeds)
    cells = [[[] for _ in range(n)] for _ in range(n)]
    for s in range(n):
        group = [(w, v) for v, w in roots if owner[v] == s]
        for k, (w, v) in enumerate(group):
            d = w if minibatches == "as-sampled" else (k + s) % n
            cells[d][(s - d) % n].append((w, v))
    return cells


def merge_by_hand(cells, merges):
    """Section 5.3's rule written again with lists: drop the lightest step, spread it evenly."""
    n = len(cells)
    steps = list(range(n))
    cells = [[list(c) for c in model] for model in cells]
    for _ in range(merges):
        totals = [sum(len(model[j]) for model in cells) for j in range(len(steps))]
        j = totals.index(min(totals))
        for model in cells:
            moving = model.pop(j)
            k = len(model)
            sizes = [len(moving) // k + (1 if i < len(moving) % k else 0) for i in range(k)]
            start = 0
            for i, size in enumerate(sizes):
                model[i].extend(moving[start : start + size])
                start += size
        steps.pop(j)
    return steps, cells


def classify(inputs, server: int, vertices: set[int], cached: np.ndarray) -> dict[str, set[int]]:
    owner = inputs.partition.owner
    out = {"gather_local": set(), "h2d": set(), "remote": set()}
    for v in vertices:
        key = "gather_local" if cached[v] else "h2d" if owner[v] == server else "remote"
        out[key].add(v)
    return out


@pytest.mark.parametrize(
    "params",
    [
        {"pregather": False, "merge": False},
        {"merge": False},
        {"merges": 1},
        {"merges": 3},
        {"pregather": False, "merges": 2, "minibatches": "as-sampled"},
    ],
    ids=["MG", "PG", "All-1", "All-3", "MG-merge2-as-sampled"],
)
def test_hopgnn_bytes_by_phase_equal_an_independent_count(prepared, params):
    inputs = prepared.inputs
    plan = build("hopgnn", inputs, **params)
    n, fb = inputs.num_workers, inputs.feature_bytes
    cached = cached_mask(inputs)
    pregather = params.get("pregather", True)
    merges = params.get("merges", 1) if params.get("merge", True) else 0
    expected = {"gather_local": 0, "h2d": 0, "gather_remote": 0, "migrate": 0}
    for row in inputs.epoch:
        steps, cells = merge_by_hand(model_cells(inputs, row, params.get("minibatches", "global")), merges)
        fetched: dict[int, set[int]] = {s: set() for s in range(n)}
        for d in range(n):
            at = (d + steps[0]) % n  # model d starts on the copy at its first step's server
            for j, t in enumerate(steps):
                s = (d + t) % n
                roots = cells[d][j]
                if not roots:
                    continue
                vertices: set[int] = set()
                for w in {w for w, _ in roots}:
                    vertices |= tree(row[w], [v for x, v in roots if x == w])[0]
                reads = classify(inputs, s, vertices, cached)
                expected["gather_local"] += len(reads["gather_local"])
                expected["h2d"] += len(reads["h2d"]) + (len(reads["remote"]) if pregather else 0)
                if pregather:
                    fetched[s] |= reads["remote"]
                else:
                    expected["gather_remote"] += len(reads["remote"])
                if s != at:
                    expected["migrate"] += inputs.model.param_bytes() + inputs.model.gradient_bytes()
                    at = s
        expected["gather_remote"] += sum(len(f) for f in fetched.values())
    got = {p: items(plan, p) for p in ("gather_local", "h2d", "gather_remote")}
    got["migrate"] = sum(t.bytes for t in plan.tasks if t.phase == "migrate")
    assert got == expected
    assert sum(t.bytes for t in plan.tasks if t.phase == "gather_remote") == expected["gather_remote"] * fb
    assert {t.carries for t in plan.tasks if t.phase == "migrate"} <= {"model", "gradients"}
    collectives = [t for t in plan.tasks if t.kind == "collective"]
    assert len(collectives) == len(inputs.epoch)
    assert all(t.bytes == inputs.model.gradient_bytes() for t in collectives)
    # The simulator moves the same bytes.
    result = simulate(plan, prepared.cluster)
    by_phase = result.trace.groupby("phase")["bytes"].sum()
    assert by_phase.get("migrate", 0) == expected["migrate"]
    assert by_phase.get("gather_remote", 0) == expected["gather_remote"] * fb


def test_as_sampled_per_partition_minibatches_leave_nothing_to_migrate(prepared):
    # The spine's seeds are each worker's own training vertices, so every root is home already:
    # micrograph training read for read is model-centric training, without a migration.
    inputs = prepared.inputs
    plan = build("hopgnn", inputs, minibatches="as-sampled", **MG)
    baseline = build("model-centric", inputs)
    assert not [t for t in plan.tasks if t.phase == "migrate"]
    for phase in ("gather_local", "h2d", "gather_remote"):
        assert items(plan, phase) == items(baseline, phase)


def test_merging_keeps_each_models_roots_in_every_iteration(prepared):
    inputs = prepared.inputs
    for merges in range(inputs.num_workers):
        scheme = EXECUTION_SCHEMES.create("hopgnn", merges=max(merges, 1), merge=merges > 0)
        unmerged = EXECUTION_SCHEMES.create("hopgnn", merge=False)
        for it in range(len(inputs.epoch)):
            cells = scheme.schedule(inputs, it).cells
            plain = unmerged.schedule(inputs, it).cells
            for mine, theirs in zip(cells, plain, strict=True):
                assert sorted(np.concatenate([c.micrographs.roots for c in mine])) == sorted(
                    np.concatenate([c.micrographs.roots for c in theirs])
                )


@pytest.mark.parametrize("minibatches", ["global", "as-sampled"])
def test_naive_bytes_by_phase_equal_an_independent_count(prepared, minibatches):
    inputs = prepared.inputs
    plan = build("naive-feature-centric", inputs, minibatches=minibatches)
    n = inputs.num_workers
    model = inputs.model
    cached = cached_mask(inputs)
    owner = inputs.partition.owner
    expected = {"gather_local": 0, "h2d": 0, "gather_remote": 0}
    moved = {"model": 0, "partials": 0, "activations": 0, "adjacency": 0}
    for row in inputs.epoch:
        cells = model_cells(inputs, row, minibatches)
        for d in range(n):
            roots = [r for cell in cells[d] for r in cell]
            sizes = [[0, 0, 0] for _ in range(model.num_layers)]
            vertices: set[int] = set()
            for w in {w for w, _ in roots}:
                mb = row[w]
                layers = tree(mb, [v for x, v in roots if x == w])
                vertices |= layers[0]
                for layer, block in enumerate(mb.blocks):
                    dst = layers[layer + 1]
                    edges = sum(int(block.dst_nodes[e]) in dst for e in block.edge_dst.tolist())
                    sizes[layer][0] += len(layers[layer])
                    sizes[layer][1] += len(dst)
                    sizes[layer][2] += edges
            # Stops: home, then servers in rotation order that hold something not read yet.
            unread, stops = set(vertices), 0
            for k in range(n):
                s = (d + k) % n
                here = {v for v in unread if cached[v] or owner[v] == s}
                expected["gather_local"] += sum(bool(cached[v]) for v in here)
                expected["h2d"] += sum(not cached[v] for v in here)
                if here and k:
                    stops += 1
                unread -= here
            # Hops: home to each feature stop in turn (with the partial sums), then back home.
            hops = stops + 1 if stops else 0
            adjacency = 8 * sum(src + 2 * e for src, _, e in sizes)
            moved["model"] += model.param_bytes() * hops
            moved["partials"] += stops * sizes[0][1] * model.layers[0].in_dim * 4
            moved["adjacency"] += adjacency * hops
            if stops:
                moved["activations"] += sum(
                    layer.saved_for_backward_bytes(*size)
                    for layer, size in zip(model.layers, sizes, strict=True)
                )
    assert {p: items(plan, p) for p in expected} == expected
    got = dict.fromkeys(moved, 0)
    for t in plan.tasks:
        if t.phase == "migrate":
            got[t.carries] += t.bytes
    assert got == moved
    simulate(plan, prepared.cluster)


def test_the_adaptive_search_runs_over_simulated_epochs(prepared):
    inputs = prepared.inputs
    n = inputs.num_workers

    def simulated(merges: int) -> float:
        scheme = EXECUTION_SCHEMES.create("hopgnn", merge=merges > 0, merges=max(merges, 1))
        return simulate(scheme.build(inputs), prepared.cluster).makespan

    # Every choice simulated up front: the search keeps adding merges while each one helps, so its
    # answer is the end of the run of strictly falling epoch times that starts at no merge.
    every = [simulated(m) for m in range(n)]
    expected = 0
    while expected + 1 < n and every[expected + 1] < every[expected]:
        expected += 1
    tried: list[int] = []

    def epoch_time(merges: int) -> float:
        tried.append(merges)
        return every[merges]

    assert adaptive_merge_count(epoch_time, n - 1) == expected
    assert tried == list(range(min(expected + 2, n)))  # one more merge per epoch, one past the best


EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "configs"


@pytest.mark.parametrize(
    "name",
    [
        "naive-feature-centric-sage-products",
        "hopgnn-mg-sage-products",
        "hopgnn-pg-sage-products",
        "hopgnn-all-sage-products",
    ],
)
def test_the_example_configs_simulate(name, tmp_path_factory):
    cfg = load_config(EXAMPLES / f"{name}.toml")
    prepared = prepare_run(cfg, cache_dir=str(tmp_path_factory.getbasetemp() / "example-samples"))
    assert prepared.cluster.name == "hopgnn-4xa100-10gbe"
    plan = prepared.plan()
    result = simulate(plan, prepared.cluster)
    row = results_row(prepared, result.trace)
    assert row["scheme"] == cfg.strategy("execution").name and row["epoch_s"] > 0
    # The naive scheme moves no feature; All merges 3 of 4 time steps away (no migration left).
    assert (row["gather_remote_bytes"] == 0) == name.startswith("naive")
    assert (row["migrate_bytes"] == 0) == name.startswith("hopgnn-all")


def test_the_schedule_kept_with_the_epoch_is_reused_only_for_the_same_partition_and_switches(prepared):
    """A sweep's points share the sampled epoch: the cut trees are kept with it, keyed by what they
    depend on. Each plan equals the plan built on new minibatch objects (nothing kept with them)."""
    inputs = prepared.inputs
    rng = np.random.default_rng(0)
    moved = PartitionResult(inputs.graph, rng.permutation(inputs.partition.owner), inputs.num_workers)
    cases = [
        (inputs, {}),
        (dataclasses.replace(inputs, placement=None), {}),  # another placement: same cuts
        (dataclasses.replace(inputs, partition=moved), {}),  # another partition: cut again
        (inputs, {"merges": 2}),  # another merge count: cut again
    ]
    for case, params in cases:
        scheme = EXECUTION_SCHEMES.create("hopgnn", **params)
        kept = scheme.build(case)
        unkept = [[Minibatch(mb.seeds, mb.blocks) for mb in row] for row in case.epoch]
        fresh = scheme.build(dataclasses.replace(case, epoch=unkept))
        assert kept.to_dict() == fresh.to_dict()
