"""The hopgnn study's cause sections: P3's artifact client (scheme options, off by default), the
per-phase table and the locality ablation's table, on tiny plans and hand-made result rows."""

from __future__ import annotations

import pandas as pd
import pytest

from studies.study_hopgnn import LOCAL_P_IN, PAPER_SETTING, _local_products, local_ablation_table, phase_table
from workbench.config import config_from_dict
from workbench.run import prepare_run


def _p3(**options: bool) -> object:
    return config_from_dict(
        {
            "name": "p3-client",
            "seed": 3,
            "graph": {"name": "er:n=600,deg=6"},
            "hardware": {"name": "hopgnn-4xa100-10gbe"},
            "model": {"name": "sage", "hidden": 16, "num_layers": 2},
            "training": {"batch_size": 32, "iterations": 2, "seeds": "global"},
            "partition": {"name": "random"},
            "sampling": {"name": "neighbor", "fanouts": [4, 3]},
            "execution": {"name": "p3", "feature_service": True, **options},
        },
        "p3.toml",
    )


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("samples"))


def _h2d(plan) -> int:
    return sum(t.bytes for t in plan.tasks if t.phase == "h2d")


def test_p3s_padded_copy_carries_the_full_feature_width(cache_dir):
    plain = prepare_run(_p3(), cache_dir=cache_dir)
    padded = prepare_run(_p3(padded_copy=True), cache_dir=cache_dir)
    # 4 workers each copy a quarter of every row's width without padding, all of it with.
    assert _h2d(padded.plan()) == 4 * _h2d(plain.plan()) > 0


def test_p3s_serial_reads_chain_each_workers_reads_after_every_structure(cache_dir):
    plan = prepare_run(_p3(serial_reads=True), cache_dir=cache_dir).plan()
    deps = {t.id: t.deps for t in plan.tasks}
    serves = sorted(t for t in deps if t.startswith("i0.w1.") and t.endswith(".host.serve"))
    assert len(serves) == 4  # one read per minibatch
    structures = {t for t in deps if t.startswith("i0.") and ".graph-to-w1" in t}
    assert len(structures) == 3 and structures <= set(deps[serves[0]])
    hosts = [s.removesuffix(".serve") for s in serves]
    for before, read in zip(hosts, serves[1:], strict=False):
        assert before in deps[read]  # the next read waits for the copy before it


def test_p3s_client_options_are_off_by_default_and_leave_the_plan_as_it_was(cache_dir):
    plain = prepare_run(_p3(), cache_dir=cache_dir).plan()
    off = prepare_run(_p3(serial_reads=False, padded_copy=False), cache_dir=cache_dir).plan()
    assert [(t.id, t.deps, t.bytes) for t in plain.tasks] == [(t.id, t.deps, t.bytes) for t in off.tasks]
    assert "serial_reads" not in plain.meta and "padded_copy" not in plain.meta


def test_phase_table_gives_work_per_worker_and_iteration():
    rows = pd.DataFrame(
        {
            "workers": [2],
            "iterations": [5],
            "epoch_s": [1.0],
            "sample_busy_s": [2.0],
            "gather_remote_busy_s": [1.0],
            "h2d_bytes": [10e6],
            "gather_remote_bytes": [20e6],
        }
    )
    table = phase_table(rows, ["x"]).set_index("ms per worker-iteration")["x"]
    assert table["sampling (CPU; P3: + structure exchange)"] == pytest.approx(200.0)
    assert table["remote feature fetch"] == pytest.approx(100.0)
    assert table["P3 partials and gradients"] == 0.0  # a phase the row lacks
    assert table["iteration (epoch / iterations)"] == pytest.approx(200.0)
    assert table["network MB"] == pytest.approx(2.0) and table["host-to-GPU MB"] == pytest.approx(1.0)


def test_local_ablation_table_sets_both_graphs_speedups_side_by_side():
    rows = [
        ("ablation", "DGL", 6.0),
        ("ablation", "+MG", 12.0),
        ("ablation", "+PG", 3.0),
        ("local-ablation", "DGL", 6.0),
        ("local-ablation", "+MG", 4.0),
    ]
    table = local_ablation_table(pd.DataFrame(rows, columns=["part", "variant", "epoch_s"]))
    assert table["graph"].tolist() == ["products-like", f"p_in {LOCAL_P_IN}"]
    assert table["DGL / +MG"].tolist() == [0.5, 1.5]
    assert table["DGL / +PG"].iloc[0] == 2.0 and table["DGL / +PG"].isna().iloc[1]


def test_the_local_graph_is_products_likes_generator_with_more_edges_inside_communities():
    spec = _local_products(False)["name"]
    assert spec.startswith("rmat:n=244903,") and f"p_in={LOCAL_P_IN}," in spec
    assert "feat=100," in spec and PAPER_SETTING["batch"] == 8000
