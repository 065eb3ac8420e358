"""NeuGraph's chunk streaming (paper 001): selective scheduling's threshold, the chain's PCIe
traffic and the pipeline's overlap worked out by hand; byte conservation against an
independent count; the memory timeline on the papers' presets; the errors.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import simulate
from workbench.config import config_from_dict
from workbench.errors import ConfigError, InfeasiblePlanError
from workbench.graph.csr import CSRGraph
from workbench.hardware import load_hardware
from workbench.model import build_model
from workbench.registry import EXECUTION_SCHEMES
from workbench.run import prepare_run
from workbench.strategies.execution._neugraph import (
    GridStats,
    chain_groups,
    double_buffered_makespan,
    host_to_gpu_path,
    pipeline_makespan,
    reorder_by_swaps,
    sub_boundaries,
)
from workbench.strategies.execution.base import SchemeInputs
from workbench.strategies.partition.base import ChunkGrid, PartitionResult

SCHEME = "neugraph-stream"


def config(
    graph="er:n=1600,deg=40", workers=None, partition=None, hardware="neugraph-8xp100-pcie", **execution
):
    data = {
        "name": "ng",
        "seed": 0,
        "graph": {"name": graph},
        "hardware": {"name": hardware},
        "model": {"name": "gcn", "hidden": 32, "num_layers": 2},
        "training": {"iterations": 1, **({"workers": workers} if workers else {})},
        "partition": partition or {"name": "chunk2d"},
        "execution": {"name": SCHEME, **execution},
    }
    return config_from_dict(data, "ng.toml")


def h2d_rows(plan, gpu):
    """Bytes of streamed vertex rows copied from host into ``gpu`` (task ids end in ``.rows``)."""
    return sum(t.bytes for t in plan.tasks if t.phase == "h2d" and t.dst == gpu and t.id.endswith(".rows"))


# ---- selective scheduling ------------------------------------------------------------
def hand_graph() -> CSRGraph:
    """8 vertices in two chunks {0..3} and {4..7}; for each edge chunk E_ij (sources in i,
    destinations in j) the useful sources and destinations are, by construction:

    ======  ======================  ==================  ==================
    chunk   edges                   useful sources      useful destinations
    ======  ======================  ==================  ==================
    E_00    0->1 1->2 2->3 3->0     {0,1,2,3}: 4/4=1    {0,1,2,3}: 1
    E_01    0->4 0->5               {0}: 1/4            {4,5}: 2/4
    E_10    4->0 5->1               {4,5}: 2/4          {0,1}: 2/4
    E_11    4->6 5->7 6->4          {4,5,6}: 3/4        {4,6,7}: 3/4
    ======  ======================  ==================  ==================
    """
    src = np.array([0, 1, 2, 3, 0, 0, 4, 5, 4, 5, 6])
    dst = np.array([1, 2, 3, 0, 4, 5, 0, 1, 6, 7, 4])
    return CSRGraph.from_edges(src, dst, 8, name="hand8", feat_dim=4, num_classes=2)


def hand_inputs(graph: CSRGraph) -> SchemeInputs:
    counts = np.array([[4, 2], [2, 3]])  # E_00, E_01 / E_10, E_11 from the table
    partition = PartitionResult(
        graph,
        np.zeros(8, dtype=np.int64),
        1,
        strategy="chunk2d",
        chunk_grid=ChunkGrid(boundaries=np.array([0, 4, 8]), edge_counts=counts),
    )
    return SchemeInputs(
        graph=graph,
        cluster=load_hardware("neugraph-8xp100-pcie"),
        model=build_model("gcn", 4, 2, hidden=2, num_layers=2),  # widths: layer 0 reads 4, layer 1 reads 2
        workers=["m0.gpu0"],
        partition=partition,
        epoch=[],
        feature_bytes=16,
        iterations=1,
    )


@pytest.mark.parametrize(
    ("copy_over_trans", "threshold", "forward_rows", "backward_rows"),
    [
        # Tcopy = Ttrans: theta* = 1 / (1 + 1) = 1/2. Forward (column j streams source chunk i):
        # E_01 (1/4) is filtered to its 1 useful row; E_10 at exactly 1/2 is not (strict <).
        # Backward (row i streams the destination gradient of chunk j): no fraction is below 1/2.
        (
            1.0,
            0.5,
            {(0, 0): 4, (0, 1): 4, (1, 0): 1, (1, 1): 4},
            {(0, 0): 4, (0, 1): 4, (1, 0): 4, (1, 1): 4},
        ),
        # Tcopy = 3 Ttrans: theta* = 3 / (3 + 1) = 3/4. Forward: E_01 -> 1 row, E_10 -> 2 rows,
        # E_11 at exactly 3/4 stays whole. Backward: E_01 -> 2 rows ({4,5}), E_10 -> 2 rows ({0,1}).
        (
            3.0,
            0.75,
            {(0, 0): 4, (0, 1): 2, (1, 0): 1, (1, 1): 4},
            {(0, 0): 4, (0, 1): 2, (1, 0): 2, (1, 1): 4},
        ),
    ],
)
def test_selective_threshold_by_hand(copy_over_trans, threshold, forward_rows, backward_rows):
    t_trans = 10e9
    scheme = EXECUTION_SCHEMES.create(
        SCHEME,
        pipeline=False,
        chain=False,
        copy_throughput=copy_over_trans * t_trans,
        transfer_throughput=t_trans,
    )
    plan = scheme.build(hand_inputs(hand_graph()))
    assert plan.meta["selective_threshold"] == pytest.approx(threshold)
    loads = {t.id: t for t in plan.tasks if t.id.endswith(".rows")}
    # Forward layer l, column o (outer, destination), source chunk x: rows of 4 * in_dim bytes.
    for layer, width in ((0, 4 * 4), (1, 2 * 4)):
        for (outer, inner), rows in forward_rows.items():
            t = loads[f"i0.f{layer}.w0.o{outer}.x{inner}.rows"]
            assert (t.items, t.bytes) == (rows, rows * width), (layer, outer, inner)
    # Backward of layer 1, row o (outer, source), destination chunk x: dA rows of 2 * 4 bytes.
    for (outer, inner), rows in backward_rows.items():
        t = loads[f"i0.b1.w0.o{outer}.x{inner}.rows"]
        assert (t.items, t.bytes) == (rows, rows * 8), (outer, inner)
    # A CPU filter task precedes exactly the filtered loads and copies their bytes (read + write).
    filtered = sum(rows < 4 for rows in forward_rows.values()) * 2 + sum(
        rows < 4 for rows in backward_rows.values()
    )
    selects = [t for t in plan.tasks if t.label == "select"]
    assert len(selects) == filtered == plan.meta["filtered_edge_chunks"]
    for s in selects:
        load = next(t for t in plan.tasks if s.id in t.deps)
        assert load.id.endswith(".rows") and s.features["bytes"] == 2 * load.bytes and s.device == "m0.host"
    simulate(plan, hand_inputs(hand_graph()).cluster)  # and it runs


def test_default_threshold_comes_from_the_hardware():
    # neugraph-8xp100-pcie: host memory 50 GB/s, so Tcopy = 25 GB/s (a copy reads and writes
    # each byte); host -> root complex (50 GB/s, 0 us) -> level-1 switch -> level-2 switch -> GPU
    # crosses three 12 GB/s PCIe links of 2 us: Ttrans = 12 GB/s. theta* = 25 / (25 + 12) = 0.6757.
    cluster = load_hardware("neugraph-8xp100-pcie")
    assert host_to_gpu_path(cluster, "m0.gpu5") == (12e9, pytest.approx(6e-6))
    plan = EXECUTION_SCHEMES.create(SCHEME).build(hand_inputs(hand_graph()))
    assert plan.meta["selective_threshold"] == pytest.approx(25 / 37)


def test_selective_moves_fewer_bytes_on_a_sparse_graph_and_none_on_a_dense_one():
    sparse = prepare_run(config("er:n=4000,deg=3", chain=False)).plan()
    whole = prepare_run(config("er:n=4000,deg=3", chain=False, selective=False)).plan()
    assert sparse.meta["filtered_edge_chunks"] > 0
    assert h2d_rows(sparse, "m0.gpu0") < h2d_rows(whole, "m0.gpu0")
    dense = prepare_run(config("er:n=1600,deg=40", chain=False)).plan()
    assert dense.meta["filtered_edge_chunks"] == 0  # every chunk's sources almost all useful


# ---- the chain on the PCIe tree -----------------------------------------------------------
def test_chain_groups_are_the_gpus_under_each_level2_switch():
    cluster = load_hardware("neugraph-8xp100-pcie")
    assert chain_groups(cluster, cluster.gpu_nodes()) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert chain_groups(cluster, cluster.gpu_nodes()[:3]) == [[0, 1], [2]]


def test_chain_halves_the_host_to_gpu_vertex_bytes_under_one_switch():
    # er:n=1600 (64 features), 8 GPUs: chunk2d picks P = 8 chunks of 200 vertices, one column
    # per GPU. With selective off, every GPU streams every source chunk (every sub-chunk holds
    # edges into every column: checked below), so per GPU and iteration the vertex rows are
    # forward layer 0: 1600 x 64 x 4 + forward layer 1: 1600 x 32 x 4 + backward layer 1 (dA):
    # 1600 x 32 x 4 = 819,200 bytes. GPUs 0 and 1 share switch m0.pcie00: without the chain
    # each reads its 819,200 from host (1,638,400 through the switch's uplink); with it GPU 0
    # reads them once and forwards them to GPU 1 under the switch.
    runs = {}
    for chain in (False, True):
        prepared = prepare_run(config(selective=False, chain=chain, sub_chunks=2))
        runs[chain] = (prepared, prepared.plan())
    prepared, plan = runs[False]
    grid = prepared.inputs.partition.chunk_grid
    assert grid.num_chunks == 8 and (grid.edge_counts > 0).all()
    per_gpu = 1600 * (64 + 32 + 32) * 4
    assert per_gpu == 819_200
    assert h2d_rows(plan, "m0.gpu0") == h2d_rows(plan, "m0.gpu1") == per_gpu
    _, chained = runs[True]
    assert h2d_rows(chained, "m0.gpu0") == per_gpu and h2d_rows(chained, "m0.gpu1") == 0
    forwarded = [t for t in chained.tasks if t.phase == "d2d"]
    assert {(t.src, t.dst) for t in forwarded} == {(f"m0.gpu{2 * s}", f"m0.gpu{2 * s + 1}") for s in range(4)}
    assert sum(t.bytes for t in forwarded if t.dst == "m0.gpu1") == per_gpu
    # Edge chunks and swap-ins are each GPU's own: the host-to-GPU bytes under the switch drop by
    # exactly the second GPU's vertex rows, the vertex-row part of them halves.
    under = {
        chain: sum(t.bytes for t in p.tasks if t.phase == "h2d" and t.dst in ("m0.gpu0", "m0.gpu1"))
        for chain, (_, p) in runs.items()
    }
    assert under[False] - under[True] == per_gpu
    # In the simulated trace the same bytes cross into the two GPUs, and the chain is faster
    # (the pair no longer halves the uplink between them).
    results = {chain: simulate(p, prep.cluster) for chain, (prep, p) in runs.items()}
    for chain, result in results.items():
        trace = result.trace
        into = trace[(trace.engine == "h2d") & trace.dst.isin(["m0.gpu0", "m0.gpu1"])]["bytes"].sum()
        assert into == under[chain]
    assert results[True].makespan < results[False].makespan


# ---- the pipeline ---------------------------------------------------------------------------
def test_reorder_by_swaps_by_hand():
    # Two compute-bound sub-chunks A (copy 1, compute 3) then two copy-bound B (3, 1), two buffers.
    # Natural A A B B: copies end 1, 2, 7, 10 and computes 4, 7, 8, 11 (B's copy waits for the
    # buffer A's compute frees) -> 11. Alternating A B A B: copies 1, 4, 5, 8, computes 4, 5, 8, 9
    # -> 9, the lower bound (first copy 1 + all compute 8). The best single swap is positions 1, 2.
    tr, cp = [1.0, 1.0, 3.0, 3.0], [3.0, 3.0, 1.0, 1.0]
    assert pipeline_makespan(np.array(tr), np.array(cp), 2)[0] == 11
    order = reorder_by_swaps(tr, cp, window=2, rounds=10)
    assert order == [0, 2, 1, 3]
    assert pipeline_makespan(np.array(tr)[order], np.array(cp)[order], 2)[0] == 9
    # Swaps stay within a chunk: A B | B A (chunks 0 0 | 1 1) takes 1 + 3 + 3 + 1 + 3 = 11 in the
    # closed form tr[0] + sum max(cp[t], tr[t+1]) + cp[-1]; swapping inside chunk 1 gives
    # A B | A B = 1 + 3 + 1 + 3 + 1 = 9, while A A B B above has no useful swap inside a chunk.
    tr2, cp2 = [1.0, 3.0, 3.0, 1.0], [3.0, 1.0, 1.0, 3.0]
    assert reorder_by_swaps(tr2, cp2, window=2, rounds=10, chunks=[0, 0, 1, 1]) == [0, 1, 3, 2]
    assert reorder_by_swaps(tr, cp, window=2, rounds=10, chunks=[0, 0, 1, 1]) == [0, 1, 2, 3]
    # One buffer: nothing overlaps, every order takes the sum, 16.
    assert pipeline_makespan(np.array(tr), np.array(cp), 1)[0] == 16
    assert reorder_by_swaps(tr, cp, window=1, rounds=10) == [0, 1, 2, 3]


times = st.lists(st.tuples(st.floats(0, 10), st.floats(0, 10)), min_size=1, max_size=9)


@settings(max_examples=150, deadline=None)
@given(times, st.randoms(use_true_random=False))
def test_reordering_is_exact_and_never_worse(items, random):
    # The closed form equals the two-buffer recurrence, and the search ends at a local optimum
    # of single swaps, never worse than where it started.
    tr = np.array([t for t, _ in items])
    cp = np.array([c for _, c in items])
    assert double_buffered_makespan(tr, cp) == pytest.approx(pipeline_makespan(tr, cp, 2)[0])
    order = reorder_by_swaps(tr, cp, window=2, rounds=100)
    assert sorted(order) == list(range(len(items)))
    best = double_buffered_makespan(tr[order], cp[order])
    assert best <= double_buffered_makespan(tr, cp) + 1e-9
    a, b = sorted(random.sample(range(len(items)), 2)) if len(items) > 1 else (0, 0)
    swapped = list(order)
    swapped[a], swapped[b] = swapped[b], swapped[a]
    assert double_buffered_makespan(tr[swapped], cp[swapped]) >= best - 1e-9


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 30), st.integers(0, 80), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2**31))
def test_grid_stats_match_brute_force(n, m, p, k, seed):
    rng = np.random.default_rng(seed)
    p = min(p, n)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    bounds = np.array([(i * n) // p for i in range(p + 1)])
    chunk = np.repeat(np.arange(p), np.diff(bounds))
    stats = GridStats(chunk[dst], src, bounds, k)
    subs = sub_boundaries(bounds, k)
    for o in range(p):
        for q in range(p * k):
            inside = (chunk[dst] == o) & (src >= subs[q]) & (src < subs[q + 1])
            assert stats.edges[o, q] == inside.sum()
            assert stats.useful[o, q] == np.unique(src[inside]).size
    outers = list(range(p))[:2]
    union = stats.union_useful(outers)
    for q in range(p * k):
        inside = np.isin(chunk[dst], outers) & (src >= subs[q]) & (src < subs[q + 1])
        assert union[q] == np.unique(src[inside]).size


def test_sub_boundaries_split_each_chunk_in_k():
    # chunks of 5 and 2 vertices, k = 3: 5 -> 0,1,3,5 (floor(s*5/3)); 2 -> 5,5,6,7 (one empty)
    assert sub_boundaries(np.array([0, 5, 7]), 3).tolist() == [0, 1, 3, 5, 5, 6, 7]


def edge_computes(plan, gpu, tag):
    return [t for t in plan.tasks if t.device == gpu and t.id.startswith(tag) and t.id.endswith(".edge")]


def test_pipeline_overlaps_the_next_sub_chunk_copy_with_this_compute():
    # One GPU, 4 sub-chunks per edge chunk, two buffers: sub-chunk t + 1's copies (rows and edges)
    # may start once sub-chunk t - 1's compute is done, so they run while sub-chunk t computes.
    cfg = dict(graph="er:n=4000,deg=60", workers=1, selective=False, reorder=False)
    results = {}
    for pipeline in (True, False):
        prepared = prepare_run(config(**cfg, pipeline=pipeline))
        plan = prepared.plan()
        result = simulate(plan, prepared.cluster)
        results[pipeline] = result
        times = result.trace.set_index("task")
        computes = edge_computes(plan, "m0.gpu0", "i0.f0.")
        assert len(computes) == plan.meta["chunks"] ** 2 * (4 if pipeline else 1)
        overlaps = 0
        for this, following in zip(computes, computes[1:], strict=False):
            copies = [times.loc[d] for d in following.deps if d.endswith((".rows", ".adj"))]
            assert len(copies) == 2
            start, end = times.loc[this.id, "start"], times.loc[this.id, "end"]
            overlaps += any(c.start < end and c.end > start for c in copies)
        if pipeline:
            assert overlaps == len(computes) - 1  # every consecutive pair overlaps
        else:
            assert overlaps == 0
    assert results[True].makespan < results[False].makespan


# ---- byte conservation --------------------------------------------------------------------
def independent_count(prepared, selective, k, threshold, order):
    """Bytes per (phase, carries) recomputed from the graph with plain numpy, for 2-layer GCN."""
    inputs = prepared.inputs
    graph = inputs.graph
    grid = inputs.partition.chunk_grid
    bounds = np.asarray(grid.boundaries)
    p = bounds.size - 1
    n = np.diff(bounds)
    chunk = np.repeat(np.arange(p), n)
    src, dst = graph.indices, np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    sub_starts = [bounds[i] + (s * n[i]) // k for i in range(p) for s in range(k)] + [bounds[-1]]
    sub_size = np.diff(sub_starts)
    sub_of = np.searchsorted(sub_starts, np.arange(graph.num_nodes), side="right") - 1
    workers = inputs.num_workers
    owner = np.arange(p) // (p // workers)
    model = inputs.model
    widths = [layer.in_dim * 4 for layer in model.layers]  # [feat, hidden] x 4 bytes
    out = {}

    def add(phase, carries, nbytes):
        out[(phase, carries)] = out.get((phase, carries), 0) + int(nbytes)

    def walk(outer_v, inner_v, width, carries, backward):
        edges = np.zeros((p, p * k), dtype=np.int64)
        np.add.at(edges, (chunk[outer_v], sub_of[inner_v]), 1)
        pairs = {(int(o), int(x)) for o, x in zip(chunk[outer_v], inner_v, strict=True)}
        useful = np.zeros((p, p * k), dtype=np.int64)
        for o, x in pairs:
            useful[o, sub_of[x]] += 1
        for o in range(p):
            for q in np.flatnonzero(edges[o]):
                i = q // k
                fraction = useful[o, i * k : (i + 1) * k].sum() / n[i]
                rows = useful[o, q] if selective and fraction < threshold else sub_size[q]
                add("h2d", "adjacency", 4 * (edges[o, q] + n[o] + 1))
                if order == "column-row":
                    add("h2d", carries, rows * width)
        if order == "row-column":
            touched = set()
            for o in range(p):  # outer chunks in each GPU's order: owners stream theirs ascending
                present = np.flatnonzero(edges[o])
                if present.size:
                    add("h2d", carries, n[o] * width)  # the kept input chunk
                for q in present:
                    key = (owner[o], q)
                    if key in touched:
                        add("h2d", "partials", sub_size[q] * width)
                    touched.add(key)
                    add("d2h", "partials", sub_size[q] * width)
            for _, q in touched:  # the owner of the inner chunk loads every GPU's partial
                add("h2d", "partials", sub_size[q] * width)

    saved = [n * (layer.in_dim + layer.output_width) * 4 for layer in model.layers]
    walk(dst, src, widths[0], "features", False)  # forward layer 0: columns stream sources
    walk(dst, src, widths[1], "activations", False)  # forward layer 1
    walk(src, dst, widths[1], "gradients", True)  # backward layer 1: rows stream dA_1
    for layer in range(2):
        add("d2h", "activations", saved[layer].sum())  # each chunk's ApplyVertex swaps out
        add("h2d", "activations", saved[layer].sum())  # and backward swaps it back in
    add("d2h", "gradients", (n * widths[1]).sum())  # dA_1 of every chunk
    return out


@pytest.mark.parametrize(
    ("order", "selective", "pipeline"),
    [("column-row", False, False), ("column-row", True, True), ("row-column", False, True)],
)
def test_bytes_by_phase_and_carries_equal_an_independent_count(order, selective, pipeline):
    # 2 GPUs, no chain (the chain's own count is the test above); a sparse graph so that
    # selective scheduling filters some chunks.
    prepared = prepare_run(
        config(
            "er:n=3000,deg=4",
            workers=2,
            partition={"name": "chunk2d", "gpu_memory_bytes": "200KiB"},
            order=order,
            selective=selective,
            pipeline=pipeline,
            chain=False,
            sub_chunks=3,
        )
    )
    plan = prepared.plan()
    assert plan.meta["chunks"] > 2
    if selective:
        assert plan.meta["filtered_edge_chunks"] > 0
    expected = independent_count(prepared, selective, 3 if pipeline else 1, 25 / 37, order)
    got = {}
    for t in plan.tasks:
        if t.kind == "transfer":
            got[(t.phase, t.carries)] = got.get((t.phase, t.carries), 0) + t.bytes
    assert got == expected
    result = simulate(plan, prepared.cluster)
    by_phase = result.trace.groupby("phase")["bytes"].sum()
    for phase in ("h2d", "d2h"):
        assert by_phase[phase] == sum(v for (ph, _), v in expected.items() if ph == phase)
    assert sum(t.bytes for t in plan.tasks if t.kind == "collective") == plan.tasks[-3].bytes
    assert plan.tasks[-3].op == "allreduce"


def test_row_column_moves_more_and_takes_longer_than_column_row():
    # Fig. 16, with the streaming optimisations off: partial sums make round trips.
    off = dict(selective=False, pipeline=False, chain=False, workers=1, graph="er:n=4000,deg=30")
    plans = {}
    for order in ("column-row", "row-column"):
        prepared = prepare_run(
            config(**off, order=order, partition={"name": "chunk2d", "gpu_memory_bytes": "1MiB"})
        )
        plan = prepared.plan()
        plans[order] = (
            sum(t.bytes for t in plan.tasks if t.kind == "transfer"),
            simulate(plan, prepared.cluster),
        )
    assert plans["row-column"][0] > plans["column-row"][0]
    assert plans["row-column"][1].makespan > plans["column-row"][1].makespan


# ---- GPU memory ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("hardware", "switches"),
    [
        ("neugraph-8xp100-pcie", {}),
        ("neugraph-8xp100-pcie", {"selective": False, "pipeline": False, "chain": False}),
        ("neugraph-8xp100-pcie", {"order": "row-column", "selective": False, "chain": False}),
        ("v100x8-nvlink-bridge", {}),
        ("h100-1x", {}),
    ],
)
def test_plans_pass_the_memory_timeline_while_streaming(hardware, switches):
    # A grid of P > GPUs chunks: no GPU ever holds the graph's features, only chunks of them.
    prepared = prepare_run(
        config(
            "er:n=6000,deg=10",
            hardware=hardware,
            partition={"name": "chunk2d", "gpu_memory_bytes": "1MiB"},
            **switches,
        )
    )
    plan = prepared.plan()
    result = simulate(plan, prepared.cluster)
    inputs = prepared.inputs
    assert plan.meta["chunks"] > inputs.num_workers
    state = inputs.model.training_state_bytes()
    features = inputs.graph.num_nodes * inputs.feature_bytes
    for gpu in inputs.workers:
        assert state < result.memory[gpu] < state + features / 2


def small_gpu_cluster(memory: int):
    cluster = load_hardware("neugraph-8xp100-pcie")
    machine = cluster.machines[0]
    gpus = tuple(replace(g, memory_bytes=memory) for g in machine.gpus)
    return replace(cluster, machines=(replace(machine, gpus=gpus),))


def test_a_grid_that_does_not_fit_is_reported_with_numbers():
    # er:n=1600 on 8 GPUs: chunks of 200 vertices; the 2-layer GCN's training state is
    # (64*32 + 32 + 32*c + c) parameters x 4 bytes x 4 (weights, gradients, Adam's two) and each
    # column's accumulation 200 x 64 x 4 = 51,200 bytes, plus the streamed sub-chunks: 64 KiB
    # GPUs hold the state but not a column's working set.
    prepared = prepare_run(config(selective=False))
    plan = prepared.plan()
    state = prepared.inputs.model.training_state_bytes()
    assert state < 64 * 1024 < state + 51_200
    with pytest.raises(InfeasiblePlanError) as caught:
        simulate(plan, small_gpu_cluster(64 * 1024))
    message = str(caught.value)
    assert re.search(r"m0\.gpu\d holds \d+(\.\d)? KiB of 64 KiB \(\d+(\.\d)? KiB over\) at t=", message)
    # the live tensors named include a column's accumulation or a row's gradient
    assert re.search(r"tensor 'i0\.[fb]1\.w\d\.o\d\.(acc|grad)' \d+ KiB", message)


# ---- errors -------------------------------------------------------------------------------
def test_a_partition_without_a_chunk_grid_is_a_clear_error():
    prepared = prepare_run(config(partition={"name": "equal-vertex"}))
    with pytest.raises(ConfigError, match=r'chunk grid.*"chunk2d"'):
        prepared.plan()


def test_workers_on_several_machines_are_an_error():
    prepared = prepare_run(config(hardware="roc-4x4p100-nvlink-ib", workers=8))
    with pytest.raises(ConfigError, match="one server's host memory.*m0, m1"):
        prepared.plan()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"order": "diagonal"}, "order 'diagonal'; allowed: column-row, row-column"),
        ({"order": "row-column"}, "selective and chain"),
        ({"order": "row-column", "selective": False}, "which chain cannot"),
        ({"sub_chunks": 1}, "sub_chunks must be an integer >= 2"),
        ({"copy_throughput": "fast"}, "copy_throughput"),
        ({"transfer_throughput": 0}, "transfer_throughput must be positive"),
        ({"k": 4}, "unknown parameter"),
    ],
)
def test_bad_parameters_name_the_field(params, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        EXECUTION_SCHEMES.create(SCHEME, **params)


# ---- the schedule both the plan builder and the real executor read ---------------------------------
@pytest.mark.parametrize("workers", [1, 2])
def test_the_schedules_columns_against_a_brute_force_reading_of_the_graph(workers):
    """Each column streams exactly the sub-chunks with an edge into a member's outer chunk, once each;
    a filtered sub-chunk loads exactly its vertices with such an edge, another its whole sub-range;
    a sub-chunk's rows go down the chain to its last member with an edge; and the plan has the
    rows copy of every one of them under the schedule's id."""
    from workbench.strategies.execution.neugraph_stream import NeuGraphTaskIds

    prepared = prepare_run(
        config(
            graph="sbm:n=400,blocks=8,deg=4",
            workers=workers,
            partition={"name": "chunk2d", "gpu_memory_bytes": "100KiB"},
        )
    )
    inputs = prepared.inputs
    schedule = prepared.scheme.schedule(inputs)
    ids = {t.id for t in prepared.plan().tasks}
    bounds = schedule.setup.bounds
    src, dst = inputs.graph.indices, inputs.graph.edge_dst()
    filtered = 0
    for backward, layer in ((False, 0), (False, 1), (True, 1)):
        outer_of, inner_of = (src, dst) if backward else (dst, src)
        for column in schedule.columns(layer, backward):
            subs = column.sub_bounds
            qs = [sub.q for sub in column.items]
            assert sorted(qs) == sorted(set(qs))
            wanted = set()
            for o in column.outers:
                into = (outer_of >= bounds[o]) & (outer_of < bounds[o + 1])
                wanted |= set((np.searchsorted(subs, inner_of[into], side="right") - 1).tolist())
            assert set(qs) == wanted
            for sub in column.items:
                inside = (inner_of >= subs[sub.q]) & (inner_of < subs[sub.q + 1])
                per_member = [
                    ((outer_of >= bounds[o]) & (outer_of < bounds[o + 1]) & inside) for o in column.outers
                ]
                assert list(sub.edges) == [int(e.sum()) for e in per_member]
                useful = np.unique(np.concatenate([inner_of[e] for e in per_member]))
                whole = np.arange(subs[sub.q], subs[sub.q + 1])
                rows = column.row_vertices(sub)
                assert np.array_equal(rows, useful if sub.filtered else whole) and sub.rows == rows.size
                assert sub.needed == max(m for m, e in enumerate(per_member) if e.any())
                prefix = NeuGraphTaskIds.column_prefix(0, column.tag, column.group[0], column.outers[0])
                assert NeuGraphTaskIds.rows(prefix, sub.q) in ids
                filtered += sub.filtered
    assert filtered > 0
