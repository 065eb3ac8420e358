"""The run spine and the model-centric scheme: byte conservation counted independently, config errors.

The byte counts are recomputed here from the sampled vertex sets, the partition and the
placement with plain numpy, without the scheme's helpers, and compared with the plan.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim import simulate
from workbench.config import config_from_dict
from workbench.errors import ConfigError, InfeasiblePlanError
from workbench.run import prepare_run, results_row


def config(**tables):
    data = {
        "name": "mc",
        "seed": 3,
        "graph": {"name": "er:n=600,deg=6"},
        "hardware": {"name": "hopgnn-4xa100-10gbe"},
        "model": {"name": "sage", "hidden": 16, "num_layers": 2},
        "training": {"batch_size": 32, "iterations": 3},
        "partition": {"name": "random"},
        "sampling": {"name": "neighbor", "fanouts": [4, 3]},
    }
    data.update(tables)
    return config_from_dict(data, "mc.toml")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("samples"))


def test_feature_bytes_by_phase_equal_an_independent_count(cache_dir):
    cfg = config(placement={"name": "degree"}, cache={"capacity": "20%"})
    prepared = prepare_run(cfg, cache_dir=cache_dir)
    plan = prepared.plan()
    inputs = prepared.inputs
    fb = inputs.graph.feat_dim * 4
    # hopgnn-4xa100-10gbe: 4 machines of one GPU each, so worker w is machine w and a vertex's
    # features live on the host of the worker that owns it; the degree placement replicates
    # the same top 20% on every GPU (no peers).
    owner = inputs.partition.owner
    cached = np.zeros(inputs.graph.num_nodes, dtype=bool)
    cached[np.argsort(-inputs.graph.in_degrees(), kind="stable")[: int(0.2 * inputs.graph.num_nodes)]] = True
    expected = {"gather_local": 0, "h2d": 0, "gather_remote": 0}
    for row in inputs.epoch:
        for w, mb in enumerate(row):
            v = mb.input_nodes
            expected["gather_local"] += int(cached[v].sum())
            expected["h2d"] += int((~cached[v] & (owner[v] == w)).sum())
            expected["gather_remote"] += int((~cached[v] & (owner[v] != w)).sum())
    items = {phase: sum(t.items for t in plan.tasks if t.phase == phase) for phase in expected}
    assert items == expected
    moved = {p: sum(t.bytes for t in plan.tasks if t.phase == p) for p in ("h2d", "gather_remote")}
    assert moved == {"h2d": expected["h2d"] * fb, "gather_remote": expected["gather_remote"] * fb}
    # The trace carries the same bytes, and each all-reduce moves the gradients.
    result = simulate(plan, prepared.cluster)
    by_phase = result.trace.groupby("phase")["bytes"].sum()
    assert by_phase["h2d"] == moved["h2d"] and by_phase["gather_remote"] == moved["gather_remote"]
    allreduces = [t for t in plan.tasks if t.kind == "collective"]
    assert len(allreduces) == 3 and all(t.bytes == inputs.model.gradient_bytes() for t in allreduces)
    row = results_row(prepared, result.trace)
    assert row["epoch_s"] == pytest.approx(result.makespan) and row["h2d_bytes"] == moved["h2d"]
    assert row["scheme"] == "model-centric" and row["iterations"] == 3


def test_each_worker_trains_on_its_own_partition(cache_dir):
    prepared = prepare_run(config(), cache_dir=cache_dir)
    owner = prepared.inputs.partition.owner
    for row in prepared.inputs.epoch:
        for w, mb in enumerate(row):
            assert (owner[mb.seeds] == w).all() and mb.seeds.shape[0] <= 32


def test_the_sampled_epoch_is_cached_and_reused(cache_dir, tmp_path):
    first = prepare_run(config(), cache_dir=str(tmp_path))
    files = list(tmp_path.glob("*.epoch"))
    assert len(files) == 1
    again = prepare_run(config(), cache_dir=str(tmp_path))
    for a_row, b_row in zip(first.inputs.epoch, again.inputs.epoch, strict=True):
        for a, b in zip(a_row, b_row, strict=True):
            assert np.array_equal(a.seeds, b.seeds)
            for x, y in zip(a.blocks, b.blocks, strict=True):
                assert all(
                    np.array_equal(getattr(x, k), getattr(y, k))
                    for k in ("src_nodes", "edge_src", "edge_dst")
                )
    # Another hardware preset or placement reuses it; another seed does not.
    four = {"batch_size": 32, "iterations": 3, "workers": 4}  # perlmutter-like has 16 GPUs
    prepare_run(
        config(hardware={"name": "perlmutter-4xa100-slingshot"}, training=four), cache_dir=str(tmp_path)
    )
    assert len(list(tmp_path.glob("*.epoch"))) == 1
    prepare_run(config(seed=4), cache_dir=str(tmp_path))
    assert len(list(tmp_path.glob("*.epoch"))) == 2
    # An unreadable cache file is sampled again.
    files[0].write_bytes(b"not an epoch file")
    assert prepare_run(config(), cache_dir=str(tmp_path)).inputs.epoch[0][0].seeds.shape[0] > 0


def test_infeasible_runs_are_reported_with_numbers(cache_dir):
    with pytest.raises(ConfigError, match="5 workers but cluster 'hopgnn-4xa100-10gbe' has 4 GPUs"):
        prepare_run(config(training={"batch_size": 32, "workers": 5}), cache_dir=cache_dir)
    with pytest.raises(ConfigError, match="needs a \\[sampling\\] table"):
        data = config().to_dict()
        del data["sampling"]
        prepare_run(config_from_dict(data), cache_dir=cache_dir)
    # A GCN 64 -> 40M -> 8 has 64*40M + 40M + 40M*8 + 8 = 2.92e9 parameters; weights, gradients
    # and Adam's two states are 4 copies of 4 bytes: 46.7 GB, more than an A100's 40 GiB (42.9 GB).
    huge = prepare_run(
        config(model={"name": "gcn", "hidden": 40_000_000, "num_layers": 2}), cache_dir=cache_dir
    )
    assert huge.inputs.model.training_state_bytes("adam") == 16 * (
        64 * 40_000_000 + 40_000_000 + 40_000_000 * 8 + 8
    )
    with pytest.raises(
        InfeasiblePlanError,
        match=r"m0.gpu0 holds 43.5 GiB of 40 GiB .* at t=0 s; live then: resident 'w0.training-state'",
    ):
        simulate(huge.plan(), huge.cluster)


def test_locality_aware_sampling_takes_each_gpus_cache_from_the_placement(cache_dir):
    with pytest.raises(ConfigError, match="give the run a \\[placement\\]"):
        prepare_run(config(sampling={"name": "locality-aware", "fanouts": [4, 3]}), cache_dir=cache_dir)
    cfg = config(
        sampling={"name": "locality-aware", "fanouts": [4, 3], "factor": 10.0},
        placement={"name": "degree"},
        cache={"capacity": "20%"},
    )
    prepared = prepare_run(cfg, cache_dir=cache_dir)
    plain = prepare_run(config(placement={"name": "degree"}, cache={"capacity": "20%"}), cache_dir=cache_dir)

    def hit_share(p):
        members = p.inputs.placement.membership
        hits = sum(
            int(members.contains(w, mb.input_nodes).sum())
            for row in p.inputs.epoch
            for w, mb in enumerate(row)
        )
        total = sum(mb.input_nodes.shape[0] for row in p.inputs.epoch for mb in row)
        return hits / total

    assert hit_share(prepared) > hit_share(plain)


def test_a_cache_larger_than_the_gpu_is_reported_with_numbers(cache_dir, tmp_path):
    from workbench.cli.main import main

    # hopgnn's cluster with 1 MiB GPUs: a 5% cache of er:n=100000 is 5,000 vertices x 64 floats
    # x 4 B = 1.22 MiB, beside the training state of a tiny SAGE: over before anything runs.
    main(["hardware", "export", "hopgnn-4xa100-10gbe", "-o", str(tmp_path / "hw.toml")])
    text = (tmp_path / "hw.toml").read_text().replace('memory = "40 GiB"', 'memory = "1 MiB"')
    (tmp_path / "hw.toml").write_text(text)
    cfg = config(
        graph={"name": "er:n=100000,deg=4"},
        hardware={"name": str(tmp_path / "hw.toml")},
        model={"name": "sage", "hidden": 4, "num_layers": 2},
        placement={"name": "degree"},
        cache={"capacity": "5%"},
    )
    prepared = prepare_run(cfg, cache_dir=cache_dir)
    with pytest.raises(
        InfeasiblePlanError, match=r"m0.gpu0 holds 1.2 MiB of 1 MiB .* resident 'w0.feature-cache' 1.2 MiB"
    ):
        simulate(prepared.plan(), prepared.cluster)


def test_global_seeds_deal_one_shuffle_of_all_training_vertices(cache_dir):
    prepared = prepare_run(
        config(training={"batch_size": 32, "iterations": 3, "seeds": "global"}), cache_dir=cache_dir
    )
    seeds = np.concatenate([mb.seeds for row in prepared.inputs.epoch for mb in row])
    owner = prepared.inputs.partition.owner
    assert np.unique(seeds).size == seeds.size  # no vertex twice in an epoch
    assert np.isin(seeds, prepared.inputs.graph.train_nids()).all()
    # Roots are no longer all local: with 4 random parts about 3/4 belong to other workers.
    foreign = sum(
        int((owner[mb.seeds] != w).sum()) for row in prepared.inputs.epoch for w, mb in enumerate(row)
    )
    assert 0.6 < foreign / seeds.size < 0.9
    with pytest.raises(ConfigError, match="training.seeds 'near'; allowed: partition, global"):
        config(training={"seeds": "near"})


def _deps(plan):
    return {t.id: set(t.deps) for t in plan.tasks}


@pytest.mark.parametrize("scheme", ["model-centric", "p3", "naive-feature-centric"])
@pytest.mark.parametrize("prefetch", [0, 1, 2])
def test_sampling_runs_at_most_prefetch_minibatches_ahead_of_training(cache_dir, prefetch, scheme):
    cfg = config(
        training={"batch_size": 8, "iterations": 5},
        execution={"name": scheme, "prefetch": prefetch},
    )
    plan = prepare_run(cfg, cache_dir=cache_dir).plan()
    deps = _deps(plan)
    assert plan.meta["prefetch"] == prefetch and plan.meta["iterations"] == 5
    for it in range(5):
        for w in range(4):
            # Sampling i waits for the previous sampling and for the step of i - 1 - prefetch, no other.
            expected = {f"i{it - 1}.w{w}.sample"} if it else set()
            if it - 1 - prefetch >= 0:
                expected.add(f"i{it - 1 - prefetch}.w{w}.update")
            assert deps[f"i{it}.w{w}.sample"] == expected
    # In simulated time, too: no sampling starts before the step it waits for has ended.
    trace = simulate(plan, prepare_run(cfg, cache_dir=cache_dir).cluster).trace.set_index("task")
    for it in range(1 + prefetch, 5):
        for w in range(4):
            assert (
                trace.at[f"i{it}.w{w}.sample", "start"]
                >= trace.at[f"i{it - 1 - prefetch}.w{w}.update", "end"]
            )


def test_a_negative_prefetch_is_a_config_error(cache_dir):
    with pytest.raises(ConfigError, match="prefetch must be >= 0"):
        prepare_run(config(execution={"name": "model-centric", "prefetch": -1}), cache_dir=cache_dir).plan()


def test_staged_reads_follow_the_real_feature_stores_order(cache_dir):
    """Cache, then host, then the other machines (one exchange): each stage waits for the one before,
    and the exchange, collective, for every worker's stage before it."""
    tables = {"placement": {"name": "degree"}, "cache": {"capacity": "20%"}}
    overlapped = prepare_run(config(**tables), cache_dir=cache_dir).plan()
    staged = prepare_run(
        config(**tables, execution={"name": "model-centric", "overlap_reads": False}), cache_dir=cache_dir
    ).plan()
    assert {t.id for t in overlapped.tasks} == {t.id for t in staged.tasks}
    on, off = _deps(overlapped), _deps(staged)
    checked = 0
    for it in range(3):
        arrivals = set()  # every worker's inline reads: the exchange starts once all are done
        for w in range(4):
            arrivals |= {
                i for i in off if i.startswith(f"i{it}.w{w}.") and i.split(".")[2] in ("local", "host")
            }
        for w in range(4):
            p = f"i{it}.w{w}"
            reads = sorted(
                i for i in on if i.startswith(f"{p}.") and i.split(".")[2] in ("local", "host", "remote")
            )
            assert all(on[r] == {f"{p}.sample"} for r in reads)  # overlapped: all at once
            local = [r for r in reads if ".local." in r]
            host = [r for r in reads if ".host." in r]
            remote = [r for r in reads if ".remote." in r]
            stage0 = local + host
            assert off[stage0[0]] == {f"{p}.sample"}
            if len(stage0) == 2:
                assert off[stage0[1]] == {stage0[0]}
            for r in remote:  # from 3 other machines, together, after every worker's inline reads
                assert off[r] == arrivals and set(stage0) < arrivals and len(remote) == 3
            checked += len(remote)
    assert checked > 0
