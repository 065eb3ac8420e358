"""The bulk-pipeline scheme (paper 004, section 6): byte conservation, per-process sampling volume
against the paper's sparsity-oblivious analysis, bad parameters, simulation.

Byte counts are recomputed here with plain numpy from the sampled blocks, the process grid
and the model, by the definitions in bulk_pipeline's and bulk_matrix_plan's docstrings.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from sim import simulate
from workbench.config import config_from_dict
from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.registry import EXECUTION_SCHEMES
from workbench.run import prepare_run

IB, VB = 8, 4
PERLMUTTER = "perlmutter-4xa100-slingshot"


def config(execution=None, **tables):
    data = {
        "name": "bulk",
        "seed": 2,
        "graph": {"name": "er:n=600,deg=6"},
        "hardware": {"name": PERLMUTTER},
        "model": {"name": "sage", "hidden": 16, "num_layers": 2},
        "training": {"batch_size": 12, "iterations": 3, "workers": 8},
        "partition": {"name": "random"},
        "sampling": {"name": "bulk-matrix", "fanouts": [4, 3]},
        "execution": {"name": "bulk-pipeline", **(execution or {})},
    }
    data.update(tables)
    return config_from_dict(data, "bulk.toml")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("samples"))


def expected_bytes(inputs, mode, c, per_step):
    """(phase, carries) -> bytes, from the sampled blocks, with loops over the grid."""
    graph = inputs.graph
    p = inputs.num_workers
    rows = p // c
    n = graph.num_nodes
    block_of = np.array(
        [next(t for t in range(rows) if t * n // rows <= v < (t + 1) * n // rows) for v in range(n)]
    )
    deg = graph.in_degrees()
    out = defaultdict(int)
    machine = [int(g.split(".")[0][1:]) for g in inputs.workers]
    # The feature fetch: rows of H from the process of the same column that holds their block.
    for row in inputs.epoch:
        for w, mb in enumerate(row):
            i, j = divmod(w, c)
            for t in range(rows):
                count = int((block_of[mb.input_nodes] == t).sum())
                if t == i or count == 0:
                    continue
                owner = t * c + j
                phase = "d2d" if machine[owner] == machine[w] else "gather_remote"
                out[(phase, "indices")] += count * IB
                out[(phase, "features")] += count * inputs.feature_bytes
    out[("allreduce", "gradients")] = len(inputs.epoch) * inputs.model.gradient_bytes()
    if mode == "replicated":
        return dict(out)
    # The sampling steps: per layer (seeds outwards), process row and column block, the rows of A needed.
    layers = inputs.model.num_layers
    for start in range(0, len(inputs.epoch), per_step):
        its = range(start, min(start + per_step, len(inputs.epoch)))
        for layer in range(layers - 1, -1, -1):
            for i in range(rows):
                mine = [inputs.epoch[it][w] for w in range(i * c, (i + 1) * c) for it in its]
                dsts = [mb.blocks[layer].dst_nodes for mb in mine]
                columns = set(np.concatenate(dsts).tolist())
                for j in range(c):
                    for t in range(j, rows, c):
                        need = [v for v in columns if block_of[v] == t]
                        if t == i or not need:
                            continue
                        out[("sample", "indices")] += IB * len(need)
                        out[("sample", "adjacency")] += sum(int(deg[v]) * (IB + VB) + IB for v in need)
                if c > 1:
                    q_rows = sum(len(d) for d in dsts)
                    nnz = sum(int(deg[d].sum()) for d in dsts)
                    out[("sample", "probabilities")] += nnz * (IB + VB) + (q_rows + 1) * IB
    return dict(out)


def plan_bytes(plan):
    out = defaultdict(int)
    for t in plan.tasks:
        if t.bytes:
            out[(t.phase, t.carries)] += t.bytes
    return dict(out)


@pytest.mark.parametrize(
    "mode,c,bulk",
    [
        ("replicated", 1, None),
        ("replicated", 2, 16),
        ("partitioned-1.5d", 1, 8),
        ("partitioned-1.5d", 2, None),
    ],
)
def test_bytes_by_phase_equal_an_independent_count(cache_dir, mode, c, bulk):
    execution = {"mode": mode, "replication": c} | ({"bulk": bulk} if bulk else {})
    prepared = prepare_run(config(execution), cache_dir=cache_dir)
    inputs = prepared.inputs
    per_step = bulk // 8 if bulk else len(inputs.epoch)
    plan = prepared.plan()
    want = expected_bytes(inputs, mode, c, per_step)
    assert plan_bytes(plan) == want
    # One sampling step per `per_step` iterations, each with its own task ids.
    steps = {t.id.split(".")[0] for t in plan.tasks if t.id.startswith("b")}
    assert len(steps) == -(-len(inputs.epoch) // per_step)
    # Each GPU keeps its process row's block of H (and of A when partitioned).
    n, rows = inputs.graph.num_nodes, 8 // c
    features = {r.device: r.bytes for r in plan.resident if r.name.endswith(".features")}
    for w, gpu in enumerate(inputs.workers):
        i = w // c
        assert features[gpu] == ((i + 1) * n // rows - i * n // rows) * inputs.feature_bytes
    # The trace carries the same bytes: transfers as moved, collectives as their buffers (one row per device).
    result = simulate(plan, prepared.cluster)
    trace = result.trace
    moved = trace[trace["kind"] == "transfer"].groupby("phase")["bytes"].sum().to_dict()
    collective = trace[trace["kind"] == "collective"].drop_duplicates("task")
    buffers = collective.groupby("phase")["buffer_bytes"].sum().to_dict()
    reduced = {("sample", "probabilities"), ("allreduce", "gradients")}
    assert moved == {
        ph: sum(v for (q, carries), v in want.items() if q == ph and (q, carries) not in reduced)
        for ph, _ in want
        if ph != "allreduce"
    }
    assert buffers == {ph: v for (ph, carries), v in want.items() if (ph, carries) in reduced}
    assert result.makespan > 0


def test_the_sampled_blocks_live_on_their_gpu_until_backward(cache_dir):
    prepared = prepare_run(config({"bulk": 16}), cache_dir=cache_dir)
    plan = prepared.plan()
    allocated = {name: (t.id, nbytes) for t in plan.tasks for name, nbytes in t.allocate.items()}
    freed = {name: t.id for t in plan.tasks for name in t.free}
    for it, row in enumerate(prepared.inputs.epoch):
        for w, mb in enumerate(row):
            name = f"i{it}.w{w}.sampled-blocks"
            by, nbytes = allocated[name]
            assert by.startswith(f"b{it // 2}.") and by.endswith(f"r{w}.p0.extract")
            want = sum(b.num_edges * (IB + VB) + (b.num_dst + 1) * IB + b.num_src * IB for b in mb.blocks)
            assert nbytes == want
            assert freed[name] == f"i{it}.w{w}.bwd0"


def complete_graph(n: int) -> CSRGraph:
    """K_n without self loops: every row of A has d = n - 1 nonzeros."""
    src = np.repeat(np.arange(n), n)
    dst = np.tile(np.arange(n), n)
    keep = src != dst
    g = CSRGraph.from_edges(src[keep], dst[keep], n, name=f"complete{n}", feat_dim=8, num_classes=2)
    return g


@pytest.mark.parametrize("workers,c", [(8, 1), (8, 2), (16, 4)])
def test_per_process_volume_against_the_papers_analysis(tmp_path, workers, c):
    """Paper 004 section 5.2.1 (sparsity-oblivious): per layer, process (i, j) receives P/c^2 block rows
    of A, n c / P rows of d nonzeros each: n d / c nonzeros; each process row all-reduces the CSR of
    P_i, (rows of Q_i) x d nonzeros, b k d c / P in the seed layer.

    On K_64 with full neighbourhoods the second layer's frontier is the whole graph, so Q_i A touches
    every row of A: the sparsity-aware plan then receives exactly the paper's rows, except the block
    that is the process's own (i = j mod c), and moves 8 + 4 bytes per nonzero, 8 per row (its length)
    and 8 per requested row id.
    """
    n, d, batch = 64, 63, 2
    graph = complete_graph(n)
    cfg = config(
        {"mode": "partitioned-1.5d", "replication": c},
        model={"name": "sage", "hidden": 8, "num_layers": 2},
        training={"batch_size": batch, "workers": workers},
        partition={"name": "equal-vertex"},
        sampling={"name": "bulk-matrix", "fanouts": [n, n]},
    )
    prepared = prepare_run(cfg, graph=graph, cache_dir=str(tmp_path))
    inputs = prepared.inputs
    k = workers * len(inputs.epoch)  # the whole epoch in one bulk step
    assert all(len(mb.seeds) == batch for row in inputs.epoch for mb in row)
    plan = prepared.plan()
    p, rows = workers, workers // c
    received = defaultdict(lambda: [0, 0, 0])  # (layer step, device) -> [rows, row bytes, request bytes]
    for t in plan.tasks:
        if t.kind == "transfer" and t.phase == "sample":
            step = int(t.id.split(".")[1][1:])
            if t.carries == "adjacency":
                received[(step, t.dst)][0] += t.items
                received[(step, t.dst)][1] += t.bytes
            else:
                received[(step, t.src)][2] += t.bytes
    # Step 1 (the layer below the seeds): every batch's frontier is all of K_64.
    assert all(len(mb.blocks[0].dst_nodes) == n for row in inputs.epoch for mb in row)
    figures = []
    for w, gpu in enumerate(inputs.workers):
        i, j = divmod(w, c)
        paper_rows = (p // c**2) * (n * c // p)  # = n / c
        paper_nnz = paper_rows * d  # = n d / c
        own = i % c == j  # one of its P/c^2 block rows is local
        want_rows = paper_rows - (n * c // p if own else 0)
        got_rows, got_bytes, got_request = received.get((1, gpu), [0, 0, 0])
        got_nnz = (got_bytes - got_rows * IB) // (IB + VB)
        assert got_rows == want_rows
        assert got_nnz == want_rows * d == paper_nnz - (n * c // p * d if own else 0)
        assert got_request == got_rows * IB
        figures.append((gpu, paper_nnz, got_nnz))
    # The all-reduce of each process row (c > 1): the CSR of P_i.
    allreduces = {t.id: t for t in plan.tasks if t.kind == "collective" and t.phase == "sample"}
    if c == 1:
        assert not allreduces
    else:
        for i in range(rows):
            seed_layer = allreduces[f"b0.l0.r{i}.P.allreduce"]
            paper = batch * k * d * c // p  # b k d c / P nonzeros
            assert seed_layer.bytes == paper * (IB + VB) + (batch * k * c // p + 1) * IB
            frontier = allreduces[f"b0.l1.r{i}.P.allreduce"]
            q_rows = n * k * c // p  # the frontier (all n vertices) of each of the row's k c / P batches
            assert frontier.bytes == q_rows * d * (IB + VB) + (q_rows + 1) * IB
    # In the seed layer Q_i A does not touch every row: the sparsity-aware plan moves less than the paper's bound.
    seed_nnz = sum((v[1] - v[0] * IB) // (IB + VB) for (step, _), v in received.items() if step == 0)
    assert seed_nnz < p * (n * d // c)
    simulate(plan, prepared.cluster)
    print(f"P={p} c={c}: per process (paper n d / c, plan) nonzeros:", figures)


def test_bad_parameters(cache_dir):
    with pytest.raises(ConfigError, match=r"replication c=3 does not fit P=8 workers.*c to divide P"):
        prepare_run(config({"mode": "partitioned-1.5d", "replication": 3}), cache_dir=cache_dir).plan()
    with pytest.raises(
        ConfigError, match=r"replication c=4 does not fit P=8 workers.*c\^2 <= P \(c\^2 = 16\)"
    ):
        prepare_run(config({"replication": 4}), cache_dir=cache_dir).plan()
    with pytest.raises(ConfigError, match=r"bulk k=12 minibatches must be a multiple of the P=8 workers"):
        prepare_run(config({"bulk": 12}), cache_dir=cache_dir).plan()
    with pytest.raises(
        ConfigError, match="unknown mode 'partitioned'; allowed: replicated, partitioned-1.5d"
    ):
        EXECUTION_SCHEMES.create("bulk-pipeline", mode="partitioned")
    with pytest.raises(ConfigError, match="replication must be a positive integer, got 0"):
        EXECUTION_SCHEMES.create("bulk-pipeline", replication=0)
    with pytest.raises(ConfigError, match="bulk must be a positive integer, got 0"):
        EXECUTION_SCHEMES.create("bulk-pipeline", bulk=0)
    with pytest.raises(ConfigError, match="'bulk-pipeline'.*replication.*integer"):
        EXECUTION_SCHEMES.create("bulk-pipeline", replication="2")
    with pytest.raises(ConfigError, match=r"a \[placement\] cache has no role"):
        prepare_run(
            config(placement={"name": "degree"}, cache={"capacity": "10%"}), cache_dir=cache_dir
        ).plan()
    with pytest.raises(ConfigError, match="blocks are weighted"):
        prepare_run(config(sampling={"name": "ladies", "layer_sizes": [40, 20]}), cache_dir=cache_dir).plan()


def test_replicated_sampling_moves_nothing_and_keeps_a_everywhere(cache_dir):
    prepared = prepare_run(config({"replication": 2}), cache_dir=cache_dir)
    plan = prepared.plan()
    assert not [t for t in plan.tasks if t.phase == "sample" and t.kind != "compute"]
    assert sorted(r.device for r in plan.resident if r.name == "A (replicated)") == sorted(
        prepared.inputs.workers
    )
    # Every worker samples its own batches on its own GPU.
    sampled_on = {t.device for t in plan.tasks if t.phase == "sample"}
    assert sampled_on == set(prepared.inputs.workers)
