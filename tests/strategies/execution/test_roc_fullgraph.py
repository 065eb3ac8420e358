"""roc-fullgraph: halo bytes counted independently, the online partitioner beating equal-edge, memory."""

from __future__ import annotations

import numpy as np
import pytest

from sim import simulate
from workbench.config import config_from_dict
from workbench.errors import ConfigError, InfeasiblePlanError
from workbench.graph.csr import CSRGraph
from workbench.online import train_online
from workbench.run import prepare_run


def skewed_graph(n: int = 8000, hubs: int = 800, hub_degree: int = 100, seed: int = 0) -> CSRGraph:
    """The first ``hubs`` vertices read 100 random in-neighbours each, the others 2: per-vertex work
    is very uneven, so equal edge counts are not equal times (the dense transform is per vertex)."""
    rng = np.random.default_rng(seed)
    degree = np.where(np.arange(n) < hubs, hub_degree, 2)
    dst = np.repeat(np.arange(n), degree)
    src = rng.integers(0, n, dst.size)
    return CSRGraph.from_edges(src, dst, n, name="skewed", feat_dim=128, num_classes=8)


def config(partition: str, hardware: str = "roc-4x4p100-nvlink-ib", **extra):
    return config_from_dict(
        {
            "name": "roc",
            "graph": {"name": "skewed"},
            "hardware": {"name": hardware},
            "model": {"name": "gcn", "hidden": 256, "num_layers": 2},
            "training": {"workers": 4, "iterations": 6},
            "partition": {"name": partition},
            "execution": {"name": "roc-fullgraph", **extra},
        }
    )


def test_learned_partition_beats_equal_edge_and_changes_during_training():
    graph = skewed_graph()
    equal_edge = prepare_run(config("equal-edge"), graph=graph)
    baseline = simulate(equal_edge.scheme.plan_iteration(equal_edge.inputs, 0), equal_edge.cluster).makespan
    online = prepare_run(config("roc"), graph=graph)
    records, trace = train_online(online, lambda plan: simulate(plan, online.cluster).trace)
    # The first iterations use roc's equal-edge fallback (fewer than 5 measurements per layer).
    assert records[0].boundaries == records[1].boundaries
    # (roc rounds each split to the nearest prefix, the equal-edge partitioner does not: close, not equal)
    assert records[0].seconds == pytest.approx(baseline, rel=0.01)
    # Then the learned model moves the boundaries and the simulated iteration gets faster.
    assert records[-1].boundaries != records[0].boundaries
    assert records[-1].seconds < 0.9 * baseline
    # The trace shows it: the parts' vertex counts (items of the forward rows) change.
    fwd = trace[(trace["phase"] == "forward") & (trace["layer"] == 0)].sort_values(["iteration", "worker"])
    first = fwd[fwd["iteration"] == 0]["items"].tolist()
    last = fwd[fwd["iteration"] == 5]["items"].tolist()
    assert first != last and sum(first) == sum(last) == graph.num_nodes
    assert (
        trace["iteration"].tolist() == sorted(trace["iteration"].tolist())
        or trace["start"].is_monotonic_increasing
    )


def test_halo_bytes_equal_an_independent_count():
    # Four parts on the four NVLink-joined GPUs of one roc machine. Count with Python sets, per part
    # p, the distinct in-neighbours of p's vertices that other parts own: each layer moves their
    # activations (d_in floats each) in, and backward moves the layer-1 gradients back out.
    rng = np.random.default_rng(1)
    n = 300
    dst = np.repeat(np.arange(n), 3)
    src = (dst + rng.integers(1, 60, dst.size)) % n
    graph = CSRGraph.from_edges(src, dst, n, name="ring", feat_dim=16, num_classes=4)
    prepared = prepare_run(config("equal-vertex"), graph=graph)
    plan = prepared.scheme.plan_iteration(prepared.inputs, 0)
    owner = prepared.inputs.partition.owner
    halo = [0] * 4
    for p in range(4):
        readers = {int(u) for v in np.flatnonzero(owner == p) for u in graph.in_neighbors(v) if owner[u] != p}
        halo[p] = len(readers)
    dims = [layer.in_dim for layer in prepared.inputs.model.layers]  # 16, 256
    forward = sum(halo) * (dims[0] + dims[1]) * 4
    backward = sum(halo) * dims[1] * 4  # layer 1's halo gradients go back; layer 0's inputs need none
    moved = sum(t.bytes for t in plan.tasks if t.kind == "transfer" and ".halo" in t.id)
    assert moved == forward + backward
    features = sum(t.bytes for t in plan.tasks if t.id.endswith(".features"))
    assert features == n * 16 * 4
    result = simulate(plan, prepared.cluster)
    assert result.trace.loc[result.trace["task"].str.contains(".halo"), "bytes"].sum() == moved


def test_a_part_that_does_not_fit_is_reported(tmp_path):
    from workbench.cli.main import main

    main(["hardware", "export", "roc-4x4p100-nvlink-ib", "-o", str(tmp_path / "hw.toml")])
    text = (tmp_path / "hw.toml").read_text().replace('memory = "16 GiB"', 'memory = "4 MiB"')
    (tmp_path / "hw.toml").write_text(text)
    prepared = prepare_run(config("equal-vertex", hardware=str(tmp_path / "hw.toml")), graph=skewed_graph())
    with pytest.raises(InfeasiblePlanError, match=r"m0.gpu\d holds .* of 4 MiB"):
        simulate(prepared.plan(), prepared.cluster)


def test_unknown_memory_policy_is_named():
    with pytest.raises(ConfigError, match="memory_policy .magic.; allowed: resident, dpmm, lru, streaming"):
        config("roc", memory_policy="magic")


def test_degree_order_numbers_the_hubs_first():
    from workbench.config import GraphConfig
    from workbench.run import load_graph

    shuffled = load_graph(GraphConfig("er:n=400,deg=5"))
    ordered = load_graph(GraphConfig("er:n=400,deg=5", order="degree"))
    assert np.all(np.diff(ordered.in_degrees()) <= 0)
    assert sorted(ordered.in_degrees().tolist()) == sorted(shuffled.in_degrees().tolist())
    assert ordered.num_edges == shuffled.num_edges and ordered.train_nids().size == shuffled.train_nids().size


def test_memory_policies_stream_the_step_through_host_memory_with_the_schedules_bytes():
    from workbench.strategies.memory.graphs import operator_graph

    graph = skewed_graph(n=3000, hubs=300, hub_degree=30)
    moved = {}
    for policy in ("streaming", "lru", "dpmm"):
        cfg = config("equal-edge", memory_policy=policy, gpu_memory="12MiB")
        data = cfg.to_dict()
        data["training"] = {"workers": 1, "iterations": 1}
        prepared = prepare_run(config_from_dict(data), graph=graph)
        plan = prepared.plan()
        result = simulate(plan, prepared.cluster)
        by_phase = result.trace.groupby("phase")["bytes"].sum()
        # One part, no halo. Counted over the step's operators: every policy writes each output back
        # once; streaming keeps nothing, so it loads every input of every operator.
        step = operator_graph(prepared.inputs.model, graph.num_nodes, graph.num_edges)
        size = {t.name: t.bytes for t in step.tensors}
        written = sum(size[y] for op in step.operators for y in op.writes)
        assert by_phase["d2h"] == written
        if policy == "streaming":
            assert by_phase["h2d"] == sum(size[x] for op in step.operators for x in op.reads)
        moved[policy] = by_phase["h2d"]
        assert result.memory["m0.gpu0"] <= 12 * 2**20 + prepared.inputs.model.training_state_bytes("adam")
    assert moved["dpmm"] <= moved["lru"] < moved["streaming"]


def test_a_memory_policy_across_machines_exchanges_halos_between_hosts():
    # 8 parts on ROC's first two machines: halos between machines cross the network host to host
    # (forward: input features and layer-1 activations; backward: layer-1 halo gradients), each
    # exactly the halo's rows x width x 4 bytes, and the owners' write-backs come first.
    graph = skewed_graph(n=4000, hubs=400, hub_degree=20)
    cfg = config("equal-vertex", memory_policy="lru", gpu_memory="16MiB").to_dict()
    cfg["training"] = {"workers": 8, "iterations": 1}
    prepared = prepare_run(config_from_dict(cfg), graph=graph)
    plan = prepared.plan()
    inputs = prepared.inputs
    owner = inputs.partition.owner
    machine = inputs.worker_machine
    dims = [layer.in_dim for layer in inputs.model.layers]
    expected = 0
    halo: list[set[int]] = [set() for _ in range(8)]  # brute force: each part's halo vertices
    for v in range(graph.num_nodes):
        for u in graph.in_neighbors(v):
            if owner[u] != owner[v]:
                halo[owner[v]].add(int(u))
    for p in range(8):
        remote = sum(1 for u in halo[p] if machine[owner[u]] != machine[p])
        expected += remote * (dims[0] + dims[1]) * 4  # forward: features, h1
        expected += remote * dims[1] * 4  # backward: the halo gradient of layer 1
    remote_tasks = [t for t in plan.tasks if t.phase == "gather_remote"]
    assert sum(t.bytes for t in remote_tasks) == expected > 0
    ids = {t.id for t in plan.tasks}
    assert all(d in ids for t in plan.tasks for d in t.deps)
    forward = [t for t in remote_tasks if ".halo1." in t.id]
    assert forward and all(any(".wb.h1" in d for d in t.deps) for t in forward)
    # The host copies are exactly those the schedule names.
    schedule = prepared.scheme.schedule(inputs, 0)
    assert sorted(t.id for t in remote_tasks) == sorted(schedule.roc_tasks())
    simulate(plan, prepared.cluster)


# A 6-vertex graph, by hand. In-neighbours:  0 <- 1, 3   1 <- 0, 4   2 <- 1, 3, 5
#                                            3 <- 2      4 <- 3, 5   5 <- 0, 2, 4
# Two parts, [0, 3) and [3, 6), on two GPUs of one machine.
# Part 0's halo from part 1: {3, 4, 5} (3 for 0 and 2, 4 for 1, 5 for 2); its in-edges: 2 + 2 + 3 = 7.
# Part 1's halo from part 0: {0, 2} (2 for 3 and 5, 0 for 5); its in-edges: 1 + 2 + 3 = 6.
# So part 0 sends its vertices 0 and 2 (positions 0, 2), part 1 all three of its own (0, 1, 2).
IN_NEIGHBOURS = {0: [1, 3], 1: [0, 4], 2: [1, 3, 5], 3: [2], 4: [3, 5], 5: [0, 2, 4]}


def tiny_run():
    dst = np.array([v for v, us in IN_NEIGHBOURS.items() for _ in us])
    src = np.array([u for us in IN_NEIGHBOURS.values() for u in us])
    graph = CSRGraph.from_edges(src, dst, 6, name="tiny", feat_dim=16, num_classes=2)
    data = config("equal-vertex").to_dict()
    data["training"] = {"workers": 2, "iterations": 1}
    prepared = prepare_run(config_from_dict(data), graph=graph)
    assert prepared.inputs.partition.owner.tolist() == [0, 0, 0, 1, 1, 1]
    return prepared


def test_the_schedule_of_a_tiny_graph_by_hand():
    prepared = tiny_run()
    schedule = prepared.scheme.schedule(prepared.inputs, 0)
    zero, one = (part.layout for part in schedule.parts)
    assert (zero.vertices.tolist(), one.vertices.tolist()) == ([0, 1, 2], [3, 4, 5])
    assert (zero.edges, one.edges) == (7, 6)
    assert {q: r.tolist() for q, r in zero.halo_rows.items()} == {1: [3, 4, 5]}
    assert {q: r.tolist() for q, r in one.halo_rows.items()} == {0: [0, 2]}
    assert {q: r.tolist() for q, r in zero.send_rows.items()} == {1: [0, 2]}
    assert {q: r.tolist() for q, r in one.send_rows.items()} == {0: [0, 1, 2]}


def test_the_plan_of_a_tiny_graph_moves_the_bytes_worked_out_by_hand():
    # Layer inputs 16 floats (features) and 256 (gcn hidden): 64 B and 1024 B per halo row.
    # Layer 0's rows come from the owner's host (h2d); layer 1's and their gradients GPU to GPU.
    prepared = tiny_run()
    plan = prepared.scheme.plan_iteration(prepared.inputs, 0)
    roc = {t.id: (t.bytes, t.phase) for t in plan.tasks if ".halo" in t.id or t.id.endswith(".features")}
    assert roc == {
        "i0.w0.features": (3 * 64, "h2d"),
        "i0.w1.features": (3 * 64, "h2d"),
        "i0.w0.halo0.from1": (3 * 64, "h2d"),
        "i0.w1.halo0.from0": (2 * 64, "h2d"),
        "i0.w0.halo1.from1": (3 * 1024, "d2d"),
        "i0.w1.halo1.from0": (2 * 1024, "d2d"),
        "i0.w0.halograd1.to1": (3 * 1024, "d2d"),
        "i0.w1.halograd1.to0": (2 * 1024, "d2d"),
    }


def test_the_plans_roc_tasks_are_the_ones_the_schedule_names():
    from workbench.strategies.execution import task_ids

    prepared = tiny_run()
    inputs = prepared.inputs
    plan = prepared.scheme.plan_iteration(inputs, 0)
    common = {task_ids.allreduce_task(0)}
    for w in range(2):
        prefix = task_ids.worker_prefix(0, w)
        common.add(task_ids.update_task(0, w))
        for layer in range(2):
            common |= {task_ids.forward_task(prefix, layer), task_ids.backward_task(prefix, layer)}
    own = [t.id for t in plan.tasks if t.id not in common]
    assert sorted(own) == sorted(prepared.scheme.schedule(inputs, 0).roc_tasks())
    assert {t.id for t in plan.tasks} >= common


def test_a_partition_too_big_for_one_operator_is_named_with_numbers():
    cfg = config("equal-edge", memory_policy="dpmm", gpu_memory="1MiB")
    with pytest.raises(
        ConfigError,
        match=r"part 0 on m0.gpu0 \([\d,]+ vertices\): memory policy 'dpmm': operator 'gather\d' .* needs",
    ):
        prepare_run(cfg, graph=skewed_graph(n=8000, hubs=800)).plan()


def test_under_a_memory_policy_owners_load_and_add_the_halo_gradients_readers_wrote_back():
    # The tiny graph under streaming (one machine: the write-backs are the exchange). Part 0's rows
    # 0 and 2 are in part 1's halo, all three of part 1's in part 0's: each owner loads the layer-1
    # gradients of those rows (256 floats each) with their positions (one int64 each), after the
    # reader wrote them back, and adds them into its own before its layer-0 backward.
    prepared = tiny_run()
    data = prepared.config.to_dict()
    data["execution"] = {"name": "roc-fullgraph", "memory_policy": "streaming", "gpu_memory": "64MiB"}
    prepared = prepare_run(config_from_dict(data), graph=prepared.inputs.graph)
    plan = prepared.scheme.plan_iteration(prepared.inputs, 0)
    tasks = {t.id: t for t in plan.tasks}
    for owner, reader, sent in ((0, 1, 2), (1, 0, 3)):
        mine, theirs = f"i0.w{owner}", f"i0.w{reader}"
        load = tasks[f"{mine}.halo_grad1.load.grad_readers1"]
        assert (load.phase, load.src, load.dst, load.bytes) == (
            "h2d",
            "m0.host",
            f"m0.gpu{owner}",
            sent * 1024,
        )
        assert f"{theirs}.gather2.bwd.wb.grad_halo1" in load.deps
        assert tasks[f"{mine}.halo_grad1.load.sent_rows"].bytes == sent * 8
        assert tasks[f"{mine}.halo_grad1"].phase == "backward"
        assert f"{mine}.halo_grad1" in tasks[f"{mine}.update1.bwd"].deps
        assert not [d for d in tasks[f"{mine}.update1.bwd"].deps if d.startswith(theirs)]
    simulate(plan, prepared.cluster)


def test_a_capacity_below_one_tensor_names_the_tensor_in_one_line():
    # The tiny graph's layer-0 weights: (16 x 256 + 256) floats = 17,408 bytes, more than 4 KiB.
    data = tiny_run().config.to_dict()
    data["execution"] = {"name": "roc-fullgraph", "memory_policy": "lru", "gpu_memory": "4KiB"}
    with pytest.raises(ConfigError) as caught:
        prepare_run(config_from_dict(data), graph=tiny_run().inputs.graph).plan()
    message = str(caught.value)
    assert "\n" not in message
    assert "tensor 'W1' alone is 17,408 bytes" in message and "gpu_memory" in message
