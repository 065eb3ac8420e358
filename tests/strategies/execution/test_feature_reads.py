"""Where a worker reads each input vertex from, against a vertex-by-vertex rule on a hand-made layout."""

from __future__ import annotations

import numpy as np

from workbench.graph.datasets import load_dataset
from workbench.hardware import load_hardware
from workbench.model import build_model
from workbench.strategies.execution.base import SchemeInputs, feature_reads
from workbench.strategies.partition.base import PartitionResult
from workbench.strategies.placement.base import PlacementResult


def inputs_on_two_nodes(seed: int) -> SchemeInputs:
    """8 workers on 2 machines of 4 GPUs; GPUs peer in pairs; random owners, caches and homes."""
    graph = load_dataset("er:n=400,deg=4")
    rng = np.random.default_rng(seed)
    cluster = load_hardware("perlmutter-4xa100-slingshot", machines=2)
    workers = cluster.gpu_nodes()[:8]
    owner = rng.integers(0, 8, graph.num_nodes).astype(np.int64)
    caches = [np.flatnonzero(rng.random(graph.num_nodes) < 0.2).astype(np.int64) for _ in range(8)]
    home = np.full(graph.num_nodes, -1, dtype=np.int64)
    for g in range(8):  # the lowest-numbered GPU that keeps a vertex is its home
        free = home[caches[g]] < 0
        home[caches[g][free]] = g
    placement = PlacementResult(caches, home, ((0, 1), (2, 3), (4, 5), (6, 7)))
    model = build_model("sage", graph.feat_dim, graph.num_classes, hidden=8, num_layers=2)
    return SchemeInputs(
        graph, cluster, model, workers, PartitionResult(graph, owner, 8), [], graph.feat_dim * 4, placement
    )


def by_rule(inputs: SchemeInputs, w: int, v: int) -> tuple[str, str]:
    placement = inputs.placement
    assert placement is not None
    if v in set(placement.gpu_vertices[w].tolist()):
        return "local", inputs.workers[w]
    group = next(g for g in placement.groups() if w in g)
    if placement.home[v] in group and placement.home[v] != w:
        return "peer", inputs.workers[int(placement.home[v])]
    machine = int(inputs.worker_machine[inputs.partition.owner[v]])
    kind = "host" if machine == int(inputs.worker_machine[w]) else "remote"
    return kind, inputs.host_of_machine(machine)


def test_every_vertex_is_read_from_where_the_rule_says_in_request_order():
    for seed in range(3):
        inputs = inputs_on_two_nodes(seed)
        request = np.random.default_rng(seed + 10).permutation(inputs.graph.num_nodes)[:150]
        for w in range(8):
            reads = feature_reads(inputs, w, request)
            got = {int(v): (r.kind, r.source) for r in reads for v in r.vertices}
            assert got == {int(v): by_rule(inputs, w, int(v)) for v in request}
            for r in reads:  # each source's vertices in the request's order, no empty read
                assert r.count and np.array_equal(r.vertices, request[np.isin(request, r.vertices)])
            # Cache first, then peers, then machines by index (host or remote).
            stage = [{"local": 0, "peer": 1}.get(r.kind, 2) for r in reads]
            assert stage == sorted(stage)
            hosts = [r.source for r in reads if r.kind in ("host", "remote")]
            assert hosts == sorted(hosts, key=[m.host_node for m in inputs.cluster.machines].index)


def test_one_machine_without_a_cache_reads_everything_from_its_host_in_request_order():
    graph = load_dataset("er:n=400,deg=4")
    cluster = load_hardware("v100x8-nvswitch")
    workers = cluster.gpu_nodes()[:2]
    owner = np.random.default_rng(0).integers(0, 2, graph.num_nodes).astype(np.int64)
    model = build_model("sage", graph.feat_dim, graph.num_classes, hidden=8, num_layers=2)
    inputs = SchemeInputs(
        graph, cluster, model, workers, PartitionResult(graph, owner, 2), [], graph.feat_dim * 4
    )
    request = np.random.default_rng(1).permutation(graph.num_nodes)[:50]
    for w in range(2):
        (read,) = feature_reads(inputs, w, request)
        assert (read.kind, read.source) == ("host", cluster.machines[0].host_node)
        assert np.array_equal(read.vertices, request)
    assert feature_reads(inputs, 0, np.zeros(0, dtype=np.int64)) == []


def one_machine_inputs(caches: list[np.ndarray], home: np.ndarray) -> SchemeInputs:
    graph = load_dataset("er:n=403,deg=4")  # 403: the last byte of a cache's bits is partly used
    cluster = load_hardware("v100x8-nvswitch")
    workers = cluster.gpu_nodes()[:2]
    owner = np.arange(graph.num_nodes, dtype=np.int64) % 2
    model = build_model("sage", graph.feat_dim, graph.num_classes, hidden=8, num_layers=2)
    placement = PlacementResult(caches, home)
    return SchemeInputs(
        graph, cluster, model, workers, PartitionResult(graph, owner, 2), [], graph.feat_dim * 4, placement
    )


def test_a_whole_cache_is_read_locally_and_a_peer_holding_vertices_splits_the_request():
    n = 403
    everything = np.arange(n, dtype=np.int64)
    whole = one_machine_inputs([everything, everything], np.full(n, -1, dtype=np.int64))
    assert [s.only for s in whole.read_sources] == [0, 0]  # every code is 0: one read, no split
    (read,) = feature_reads(whole, 1, everything[::-1])
    assert read.kind == "local" and np.array_equal(read.vertices, everything[::-1])
    # GPU 1 caches vertices 0..9 (their home): GPU 0 reads them from its peer, the rest from host.
    mine = np.arange(10, dtype=np.int64)
    home = np.full(n, -1, dtype=np.int64)
    home[mine] = 1
    split = one_machine_inputs([np.empty(0, dtype=np.int64), mine], home)
    assert split.read_sources[0].only is None
    reads = {r.kind: r.vertices.tolist() for r in feature_reads(split, 0, everything)}
    assert reads == {"peer": mine.tolist(), "host": list(range(10, n))}


def test_cache_bits_answer_as_a_mask_would_and_a_shared_array_is_one_set():
    n = 403
    rng = np.random.default_rng(4)
    shared = np.flatnonzero(rng.random(n) < 0.3).astype(np.int64)
    own = np.array([0, 7, 8, 401, 402], dtype=np.int64)  # both ends of a byte, the last bits
    placement = PlacementResult([shared, own, shared], np.full(n, -1, dtype=np.int64))
    members = placement.membership
    assert len(members._bits) == 2  # GPUs 0 and 2 hold the same array
    probe = rng.permutation(n)
    for gpu, verts in enumerate([shared, own, shared]):
        expected = np.isin(probe, verts)
        assert np.array_equal(members.contains(gpu, probe), expected)
        assert np.array_equal(placement.cached_mask(gpu), np.isin(np.arange(n), verts))


def test_narrow_homes_are_the_homes():
    inputs = inputs_on_two_nodes(0)
    placement = inputs.placement
    assert placement is not None
    assert placement.narrow_home.dtype == np.int8  # 8 GPUs: ids -1..7
    assert np.array_equal(placement.narrow_home, placement.home)


def test_read_counts_are_the_sizes_of_the_reads_with_or_without_code_tables(monkeypatch):
    from workbench.strategies.execution import base

    for seed in range(3):
        request = np.random.default_rng(seed + 20).permutation(400)[:150]
        tabled = inputs_on_two_nodes(seed)
        monkeypatch.setattr(base, "CODE_TABLE_BYTES", 0)  # every request's codes worked out anew
        per_request = inputs_on_two_nodes(seed)
        assert not any(s.tabled for s in per_request.read_sources)  # read_sources is worked out here, once
        monkeypatch.undo()
        assert all(s.tabled for s in tabled.read_sources)
        for w in range(8):
            expected = [(r.kind, r.source, r.count) for r in feature_reads(per_request, w, request)]
            assert [(r.kind, r.source, r.count) for r in feature_reads(tabled, w, request)] == expected
            assert [(r.kind, r.source, r.count) for r in base.read_counts(tabled, w, request)] == expected
            assert [
                (r.kind, r.source, r.count) for r in base.read_counts(per_request, w, request)
            ] == expected
        assert base.read_counts(tabled, 0, np.zeros(0, dtype=np.int64)) == []
