"""Presets have the shapes they claim; the disk cache is keyed by parameters and survives corruption."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench.errors import ConfigError, GraphFormatError, UnknownNameError
from workbench.graph import io
from workbench.graph.datasets import DATASETS, cache_path, load_dataset, resolve


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_preset_shape_at_tiny_scale(name: str, tmp_path) -> None:
    preset = DATASETS[name]
    scale = 3000 / preset.full.nodes
    g = load_dataset(name, scale=scale, cache_dir=tmp_path)
    g.validate()
    assert g.num_nodes == 3000
    expected_degree = preset.full.avg_degree * preset.degree_scale
    assert g.num_edges / g.num_nodes == pytest.approx(expected_degree, rel=0.01)
    assert g.feat_dim == preset.full.feat_dim and g.num_classes == preset.full.classes
    assert g.meta["full_size"]["nodes"] == preset.full.nodes
    assert g.meta["scale"] == scale and g.meta["degree_scale"] == preset.degree_scale
    assert g.train_mask.sum() == round(preset.full.train_fraction * 3000)
    assert g.features(np.arange(5)).shape == (5, preset.full.feat_dim)


def test_products_like_default_is_at_least_a_million_vertices() -> None:
    recipe = resolve("products-like")
    assert recipe.structure["num_nodes"] >= 1_000_000
    assert recipe.extra_meta["degree_scale"] < 1  # reduced degree, recorded explicitly


def test_cache_hit_returns_identical_arrays(tmp_path) -> None:
    first = load_dataset("arxiv-like", scale=0.01, seed=4, cache_dir=tmp_path)
    path = cache_path(resolve("arxiv-like", scale=0.01, seed=4), tmp_path)
    assert path.is_file() and first.meta["cache_path"] == str(path)
    again = load_dataset("arxiv-like", scale=0.01, seed=4, cache_dir=tmp_path)
    for attr in ("indptr", "indices", "labels", "train_mask", "val_mask", "test_mask", "communities"):
        assert np.array_equal(getattr(first, attr), getattr(again, attr)), attr
    assert (again.feat_dim, again.feature_seed, again.num_classes) == (
        first.feat_dim,
        first.feature_seed,
        first.num_classes,
    )
    assert np.array_equal(first.features(), again.features())


def test_cache_is_keyed_by_every_parameter(tmp_path) -> None:
    base = resolve("products-like", scale=0.001, seed=0)
    others = [
        resolve("products-like", scale=0.001, seed=1),
        resolve("products-like", scale=0.002, seed=0),
        resolve("products-like", scale=0.001, seed=0, degree_scale=0.5),
        resolve("rmat:n=2449,m=41000", seed=0),
    ]
    paths = {cache_path(r, tmp_path) for r in [base, *others]}
    assert len(paths) == 5
    assert cache_path(base, tmp_path) == cache_path(resolve("products-like", scale=0.001, seed=0), tmp_path)


def test_corrupt_cache_file_is_regenerated(tmp_path) -> None:
    good = load_dataset("pubmed-like", scale=0.1, cache_dir=tmp_path)
    path = cache_path(resolve("pubmed-like", scale=0.1), tmp_path)
    path.write_bytes(b"not an npz file at all")
    again = load_dataset("pubmed-like", scale=0.1, cache_dir=tmp_path)
    assert np.array_equal(good.indices, again.indices)
    io.load_graph(path)  # rewritten


def test_cache_off_writes_nothing(tmp_path) -> None:
    load_dataset("pubmed-like", scale=0.05, cache=False, cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_default_cache_dir_follows_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GNNWB_CACHE", str(tmp_path / "c"))
    g = load_dataset("er:n=500,deg=4")
    # one root for every cache: graphs beside samples/ and spine/, not among them
    assert g.meta["cache_path"].startswith(str(tmp_path / "c" / "graphs") + "/")


@pytest.mark.parametrize(
    "spec, nodes, edges",
    [
        ("rmat:n=4000,m=40000", 4000, 40000),
        (
            "rmat:n=4000,m=40000,a=0.5,b=0.2,c=0.2,communities=10,p_in=0.5,classes=5,feat=8,connect=1",
            4000,
            40000,
        ),
        ("sbm:n=3000,blocks=6,deg=8,p_in=0.9,exponent=2.5,classes=6", 3000, 24000),
    ],
)
def test_ad_hoc_specs(spec: str, nodes: int, edges: int, tmp_path) -> None:
    g = load_dataset(spec, cache_dir=tmp_path)
    assert (g.num_nodes, g.num_edges) == (nodes, edges)
    assert g.labels is not None and g.train_mask is not None
    half = load_dataset(spec, scale=0.5, cache_dir=tmp_path)
    assert half.num_nodes == nodes // 2


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(UnknownNameError) as exc:
        load_dataset("products-lke")
    message = str(exc.value)
    assert "products-lke" in message and "products-like" in message and "papers-like" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "name, error, message",
    [
        ("rmat:n=100", ConfigError, "missing m"),
        ("rmat:n=100,m=200,colour=3", ConfigError, "colour"),
        ("sbm:n=abc,blocks=2,deg=3", ConfigError, "not a number"),
        ("./no/such/graph.npz", GraphFormatError, "no such graph file"),
    ],
)
def test_bad_names(name: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        load_dataset(name, cache=False)


def test_negative_scale_is_rejected() -> None:
    with pytest.raises(ConfigError, match="scale"):
        load_dataset("products-like", scale=-1)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "datasets"


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_shipped_example_descriptions_load(example: Path, tmp_path) -> None:
    g = load_dataset(str(example), scale=0.05, cache_dir=tmp_path)
    g.validate()
    assert g.name == example.stem and g.labels is not None and g.feat_dim > 0


def test_toml_matches_the_equivalent_spec(tmp_path) -> None:
    from_file = load_dataset(str(EXAMPLES / "rmat-communities-small.toml"), scale=0.1, cache=False)
    spec = "rmat:n=50000,m=800000,a=0.45,b=0.2,c=0.2,connect=1,communities=40,p_in=0.8,classes=20,feat=64"
    from_spec = load_dataset(spec, scale=0.1, cache=False)
    assert np.array_equal(from_file.indices, from_spec.indices)
    assert np.array_equal(from_file.labels, from_spec.labels)


@pytest.mark.parametrize(
    "text, message",
    [
        ('generator = "kronecker"\nn = 10', "generator must be one of"),
        ('generator = "rmat"\nn = 100\nm = 200\ncolour = 1', "unknown key 'colour'"),
        ('generator = "rmat"\nn = "many"\nm = 200', "n must be an integer >= 2, got 'many'"),
        ("generator = [", "not valid TOML"),
    ],
)
def test_bad_toml_descriptions(text: str, message: str, tmp_path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_dataset(str(path), cache=False)


def test_truncated_cache_file_is_regenerated(tmp_path) -> None:
    good = load_dataset("arxiv-like", scale=0.01, cache_dir=tmp_path)
    path = cache_path(resolve("arxiv-like", scale=0.01), tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # as if a writer died mid-file (atomic writes prevent this)
    again = load_dataset("arxiv-like", scale=0.01, cache_dir=tmp_path)
    assert np.array_equal(good.indices, again.indices)
    assert path.stat().st_size == len(data)


def test_scale_on_a_stored_graph_is_an_error() -> None:
    with pytest.raises(ConfigError, match="scale applies only"):
        load_dataset("karate", scale=0.5)
