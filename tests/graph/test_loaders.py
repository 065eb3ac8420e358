"""Loaders: OGB folders, DGL files, shipped networkx graphs, and files that are not graphs."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from workbench.errors import GraphFormatError
from workbench.graph import io
from workbench.graph.datasets import load_dataset
from workbench.graph.loaders import REAL_GRAPHS, load_dgl_graph, load_graph_file, load_ogb, load_real_graph

# A 5-vertex OGB-style graph: a path 0-1-2-3 plus 3->4, vertex 4 unlabeled (NaN, like papers100M).
EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 4]])
FEATS = np.arange(10, dtype=np.float32).reshape(5, 2)
LABELS = ["0", "1", "1", "0", "nan"]


def _write_gz(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def make_ogb_csv(root: Path) -> Path:
    raw = root / "raw"
    _write_gz(raw / "edge.csv.gz", [f"{s},{d}" for s, d in EDGES])
    _write_gz(raw / "num-node-list.csv.gz", ["5"])
    _write_gz(raw / "num-edge-list.csv.gz", [str(len(EDGES))])
    _write_gz(raw / "node-feat.csv.gz", [",".join(str(x) for x in row) for row in FEATS])
    _write_gz(raw / "node-label.csv.gz", LABELS)
    _write_gz(root / "split" / "time" / "train.csv.gz", ["0", "1"])
    _write_gz(root / "split" / "time" / "valid.csv.gz", ["2"])
    _write_gz(root / "split" / "time" / "test.csv.gz", ["3"])
    return root


def test_ogb_csv_folder(tmp_path) -> None:
    g = load_ogb(make_ogb_csv(tmp_path / "ogbn_tiny"))
    g.validate()
    assert g.num_nodes == 5 and g.num_edges == 8  # symmetrized
    assert set(g.in_neighbors(2).tolist()) == {1, 3}
    assert np.array_equal(g.features(), FEATS) and g.feat_dim == 2
    assert g.labels.tolist() == [0, 1, 1, 0, -1] and g.num_classes == 2
    assert g.train_mask.tolist() == [True, True, False, False, False]
    assert g.val_mask.tolist() == [False, False, True, False, False]
    assert g.test_mask.tolist() == [False, False, False, True, False]
    directed = load_ogb(tmp_path / "ogbn_tiny", symmetric=False)
    assert directed.num_edges == 4 and directed.in_neighbors(2).tolist() == [1]


def test_ogb_binary_folder(tmp_path) -> None:
    raw = tmp_path / "papers" / "raw"
    raw.mkdir(parents=True)
    np.savez(raw / "data.npz", edge_index=EDGES.T, num_nodes_list=np.array([5]), node_feat=FEATS)
    np.savez(raw / "node-label.npz", node_label=np.array([[0], [1], [1], [0], [np.nan]]))
    g = load_graph_file(tmp_path / "papers")
    assert g.num_edges == 8 and g.labels.tolist() == [0, 1, 1, 0, -1] and g.train_mask is None


def test_ogb_folder_through_load_dataset(tmp_path) -> None:
    g = load_dataset(str(make_ogb_csv(tmp_path / "ogbn_tiny")))
    assert g.num_nodes == 5 and "OGB" in g.meta["source"]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda root: (root / "raw" / "edge.csv.gz").write_text("not gzip"), "not a readable OGB table"),
        (lambda root: _write_gz(root / "raw" / "edge.csv.gz", ["0,1,2"]), "two columns"),
        (lambda root: _write_gz(root / "raw" / "edge.csv.gz", ["0,9"]), "outside"),
        (lambda root: _write_gz(root / "raw" / "node-label.csv.gz", ["1", "0"]), "2 labels for 5 vertices"),
        (lambda root: (root / "raw" / "num-node-list.csv.gz").unlink(), "missing num-node-list"),
    ],
)
def test_broken_ogb_folders(tmp_path, damage, message: str) -> None:
    root = make_ogb_csv(tmp_path / "ogbn_tiny")
    damage(root)
    with pytest.raises(GraphFormatError, match=message):
        load_ogb(root)


def test_folder_that_is_not_ogb(tmp_path) -> None:
    (tmp_path / "photos").mkdir()
    with pytest.raises(GraphFormatError, match="not an OGB data set folder"):
        load_graph_file(tmp_path / "photos")


@pytest.mark.parametrize("content", [b"", b"hello, I am a text file\n", b"PK\x03\x04 truncated zip"])
def test_npz_that_is_not_a_graph(tmp_path, content: bytes) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    with pytest.raises(GraphFormatError, match=str(bad)):
        load_graph_file(bad)


def test_npz_of_other_arrays_is_not_a_graph(tmp_path) -> None:
    np.savez(tmp_path / "weights.npz", w=np.ones(3))
    with pytest.raises(GraphFormatError, match="not a workbench graph file"):
        load_graph_file(tmp_path / "weights.npz")


def test_unknown_suffix(tmp_path) -> None:
    (tmp_path / "graph.txt").write_text("0 1\n")
    with pytest.raises(GraphFormatError, match="unknown graph file type"):
        load_graph_file(tmp_path / "graph.txt")


def test_saved_graph_round_trip(tmp_path) -> None:
    g = load_dataset("sbm:n=500,blocks=5,deg=6,classes=5,feat=4", cache=False)
    io.save_graph(g, tmp_path / "g.npz")
    back = load_graph_file(tmp_path / "g.npz")
    assert np.array_equal(back.indices, g.indices) and np.array_equal(back.labels, g.labels)
    assert back.meta["feature_signal"] == g.meta["feature_signal"]
    assert np.array_equal(back.features(), g.features())


@pytest.mark.parametrize("name", sorted(REAL_GRAPHS))
def test_shipped_real_graphs(name: str) -> None:
    g = load_real_graph(name)
    g.validate()
    assert g.num_nodes > 10 and g.num_edges > 0 and g.num_classes >= 2
    assert np.array_equal(g.to_scipy().toarray(), g.to_scipy().toarray().T)
    assert g.features().shape == (g.num_nodes, g.feat_dim)
    assert load_dataset(name).num_edges == g.num_edges


def test_karate_is_labelled_by_club() -> None:
    g = load_real_graph("karate")
    assert g.num_nodes == 34 and g.num_edges == 2 * 78
    assert np.bincount(g.labels).tolist() == [17, 17]  # Mr. Hi's and the Officer's clubs
    assert g.labels[0] != g.labels[33]  # the two leaders


@pytest.fixture(scope="module")
def dgl():
    from workbench.dgl_loader import dgl_available, load_dgl

    if not dgl_available():
        pytest.skip("DGL cannot be imported here")
    return load_dgl()


def test_dgl_saved_graph(dgl, tmp_path) -> None:
    import torch

    g = dgl.graph((torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 4])), num_nodes=5)
    g.ndata["feat"] = torch.from_numpy(FEATS)
    g.ndata["label"] = torch.tensor([0, 1, 1, 0, 2])
    g.ndata["train_mask"] = torch.tensor([True, True, False, False, False])
    g.ndata["val_mask"] = torch.tensor([False, False, True, False, False])
    path = tmp_path / "tiny.bin"
    dgl.save_graphs(str(path), [g])
    loaded = load_dataset(str(path))
    assert loaded.num_nodes == 5 and loaded.num_edges == 8
    assert np.array_equal(loaded.features(), FEATS) and loaded.num_classes == 3
    assert loaded.train_mask.tolist() == [True, True, False, False, False]
    assert loaded.test_mask is None


def test_dgl_file_that_is_not_a_graph(dgl, tmp_path) -> None:
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x00\x01 not a dgl graph" * 10)
    with pytest.raises(GraphFormatError, match="not a DGL graph file"):
        load_dgl_graph(bad)


def test_truncated_dgl_file_is_a_one_line_error(dgl, tmp_path) -> None:
    import torch

    g = dgl.graph((torch.tensor([0, 1]), torch.tensor([1, 2])))
    path = tmp_path / "cut.bin"
    dgl.save_graphs(str(path), [g])
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(GraphFormatError, match="not a readable DGL graph file") as exc:
        load_graph_file(path)
    assert "\n" not in str(exc.value)
