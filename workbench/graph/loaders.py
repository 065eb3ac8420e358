"""Graphs from disk and graphs that installed packages ship.

- :func:`load_graph_file`: a path to any supported graph (dispatches on what it is):
  a ``.npz`` written by :func:`workbench.graph.io.save_graph`, a DGL ``save_graphs``
  ``.bin`` file (:func:`load_dgl_graph`) or an OGB node-property folder (:func:`load_ogb`).
- :func:`load_real_graph`: the small real graphs networkx ships (no download).

Every loader raises :class:`GraphFormatError` naming the path and what is wrong when the
input is not a graph it understands. Loaded graphs are symmetrized by default (GNN
training aggregates over both directions); ``meta["symmetrized"]`` says so.
"""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import GraphFormatError
from workbench.graph import io
from workbench.graph.csr import CSRGraph

REAL_GRAPHS: dict[str, str] = {
    "karate": "networkx: Zachary's karate club, 34 vertices, labels = club",
    "les-miserables": "networkx: Les Miserables co-appearances, 77 vertices, labels = Louvain communities",
    "davis-southern-women": "networkx: Davis' southern women, 32 vertices, bipartite, labels = side",
    "florentine-families": "networkx: Florentine marriages, 15 vertices, labels = Louvain communities",
}
# Feature size of the generated (class-signal) features of the shipped real graphs.
REAL_GRAPH_FEAT_DIM = 16


def load_graph_file(path: str | Path, *, symmetric: bool = True) -> CSRGraph:
    """Load whatever graph ``path`` holds; see the module doc for the formats."""
    path = Path(path).expanduser()
    if path.is_dir():
        return load_ogb(path, symmetric=symmetric)
    if not path.is_file():
        raise GraphFormatError(f"{path}: no such graph file or folder")
    with path.open("rb") as f:
        head = f.read(8)
    if path.suffix == ".npz" or head.startswith(b"PK"):
        return io.load_graph(path)
    if path.suffix == ".bin" or head == _DGL_MAGIC:
        return load_dgl_graph(path, symmetric=symmetric)
    raise GraphFormatError(
        f"{path}: unknown graph file type (expected a .npz saved by gnnwb, a DGL .bin or an OGB data set folder)"
    )


# ---- OGB ---------------------------------------------------------------------------
def load_ogb(root: str | Path, *, symmetric: bool = True, split: str | None = None) -> CSRGraph:
    """An OGB node-property data set folder as OGB leaves it on disk after a download.

    ``root`` holds ``raw/`` (``edge.csv.gz`` one ``src,dst`` per line, ``num-node-list.csv.gz``,
    optional ``node-feat.csv.gz`` and ``node-label.csv.gz``; or, for the big sets such as
    ogbn-papers100M, ``data.npz`` with ``edge_index``/``num_nodes_list``/``node_feat`` and
    ``node-label.npz`` with ``node_label``) and ``split/<kind>/{train,valid,test}.csv.gz``
    (one vertex id per line; the first ``<kind>`` folder in name order, or ``split``).
    Unlabeled vertices (NaN labels, as in papers100M) get label -1.
    """
    root = Path(root).expanduser()
    raw = root / "raw" if (root / "raw").is_dir() else root
    if (raw / "data.npz").is_file():
        src, dst, num_nodes, feats = _ogb_binary(raw / "data.npz")
    elif (raw / "edge.csv.gz").is_file():
        src, dst, num_nodes, feats = _ogb_csv(raw)
    else:
        raise GraphFormatError(f"{root}: not an OGB data set folder (no raw/edge.csv.gz or raw/data.npz)")
    labels = _ogb_labels(raw, num_nodes)
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
        raise GraphFormatError(
            f"{raw}: an edge endpoint lies outside the {num_nodes} vertices of num-node-list"
        )
    if symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    graph = CSRGraph.from_edges(src, dst, num_nodes, name=root.name)
    graph.meta = {"source": f"OGB folder {root}", "symmetrized": symmetric}
    if feats is not None:
        if feats.shape[0] != num_nodes:
            raise GraphFormatError(
                f"{raw}: node features have {feats.shape[0]} rows for {num_nodes} vertices"
            )
        graph.explicit_features = _finite_features(feats, raw)
        graph.feat_dim = int(feats.shape[1])
    if labels is not None:
        graph.labels = labels
        graph.num_classes = int(labels.max()) + 1 if labels.size and labels.max() >= 0 else 0
    masks = _ogb_split(root, num_nodes, split)
    if masks is not None:
        graph.train_mask, graph.val_mask, graph.test_mask = masks
    graph.validate()
    return graph


def _read_csv_gz(path: Path, dtype: Any) -> np.ndarray:
    import pandas as pd

    try:
        return pd.read_csv(path, compression="gzip", header=None, dtype=dtype).to_numpy()
    except (
        OSError,
        ValueError,
        EOFError,
        gzip.BadGzipFile,
        pd.errors.ParserError,
        pd.errors.EmptyDataError,
    ) as exc:
        raise GraphFormatError(f"{path}: not a readable OGB table ({type(exc).__name__}: {exc})") from exc


def _ogb_csv(raw: Path) -> tuple[np.ndarray, np.ndarray, int, np.ndarray | None]:
    edges = _read_csv_gz(raw / "edge.csv.gz", np.int64)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise GraphFormatError(
            f"{raw / 'edge.csv.gz'}: expected two columns (src,dst), got shape {edges.shape}"
        )
    if not (raw / "num-node-list.csv.gz").is_file():
        raise GraphFormatError(f"{raw}: missing num-node-list.csv.gz")
    counts = _read_csv_gz(raw / "num-node-list.csv.gz", np.int64).ravel()
    if counts.size != 1:
        raise GraphFormatError(
            f"{raw}: num-node-list.csv.gz lists {counts.size} graphs; node-property sets have one"
        )
    feats = None
    if (raw / "node-feat.csv.gz").is_file():
        feats = _read_csv_gz(raw / "node-feat.csv.gz", np.float32)
    return edges[:, 0].copy(), edges[:, 1].copy(), int(counts[0]), feats


def _ogb_binary(path: Path) -> tuple[np.ndarray, np.ndarray, int, np.ndarray | None]:
    try:
        with np.load(path, allow_pickle=False) as data:
            edge_index = data["edge_index"]
            counts = data["num_nodes_list"].ravel()
            feats = data["node_feat"].astype(np.float32, copy=False) if "node_feat" in data.files else None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise GraphFormatError(f"{path}: not a readable OGB data.npz ({type(exc).__name__}: {exc})") from exc
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or counts.size != 1:
        raise GraphFormatError(f"{path}: expected edge_index of shape (2, E) and one entry in num_nodes_list")
    return edge_index[0].astype(np.int64), edge_index[1].astype(np.int64), int(counts[0]), feats


def _ogb_labels(raw: Path, num_nodes: int) -> np.ndarray | None:
    if (raw / "node-label.npz").is_file():
        try:
            with np.load(raw / "node-label.npz", allow_pickle=False) as data:
                values = data["node_label"].astype(np.float64).ravel()
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise GraphFormatError(
                f"{raw / 'node-label.npz'}: unreadable ({type(exc).__name__}: {exc})"
            ) from exc
    elif (raw / "node-label.csv.gz").is_file():
        table = _read_csv_gz(raw / "node-label.csv.gz", np.float64)
        if table.ndim == 2 and table.shape[1] != 1:
            raise GraphFormatError(
                f"{raw / 'node-label.csv.gz'}: {table.shape[1]} label columns; only single-label sets are supported"
            )
        values = table.ravel()
    else:
        return None
    if values.size != num_nodes:
        raise GraphFormatError(f"{raw}: {values.size} labels for {num_nodes} vertices")
    labels = np.full(num_nodes, -1, dtype=np.int64)
    known = ~np.isnan(values)
    labels[known] = values[known].astype(np.int64)
    return labels


def _ogb_split(root: Path, num_nodes: int, kind: str | None) -> tuple[np.ndarray, ...] | None:
    split_root = root / "split"
    if not split_root.is_dir():
        return None
    kinds = sorted(p for p in split_root.iterdir() if p.is_dir())
    chosen = split_root / kind if kind else (kinds[0] if kinds else None)
    if chosen is None or not chosen.is_dir():
        return None
    masks = []
    for part in ("train", "valid", "test"):
        mask = np.zeros(num_nodes, dtype=bool)
        file = chosen / f"{part}.csv.gz"
        if file.is_file():
            ids = _read_csv_gz(file, np.int64).ravel()
            if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
                raise GraphFormatError(f"{file}: vertex id outside [0, {num_nodes})")
            mask[ids] = True
        masks.append(mask)
    return tuple(masks)


def _finite_features(feats: np.ndarray, where: Path) -> np.ndarray:
    """``feats`` if every value is finite: a NaN feature would turn every result it touches into NaN."""
    if not np.all(np.isfinite(feats)):
        bad = np.argwhere(~np.isfinite(feats))[0]
        raise GraphFormatError(
            f"{where}: node features hold NaN or infinite values (first at vertex {bad[0]}, column {bad[-1]})"
        )
    return feats


# ---- DGL ---------------------------------------------------------------------------
# First 8 bytes of every dgl.save_graphs file (kDGLSerializeMagic in DGL's graph_serialize.cc).
_DGL_MAGIC = (0xDD2E4FF046B4A13F).to_bytes(8, "little")
_FEATURE_KEYS = ("feat", "features", "x")
_LABEL_KEYS = ("label", "labels", "y")
_MASK_KEYS = {
    "train_mask": ("train_mask",),
    "val_mask": ("val_mask", "valid_mask"),
    "test_mask": ("test_mask",),
}


def load_dgl_graph(path: str | Path, *, index: int = 0, symmetric: bool = True) -> CSRGraph:
    """Graph ``index`` of a file written by ``dgl.save_graphs`` (homogeneous graphs only).

    Reads node data ``feat``/``features``/``x``, ``label``/``labels``/``y`` and
    ``train_mask``/``val_mask`` (or ``valid_mask``)/``test_mask`` when present.
    """
    from workbench.dgl_loader import load_dgl

    path = Path(path).expanduser()
    if not path.is_file():
        raise GraphFormatError(f"{path}: no such DGL graph file")
    with path.open("rb") as f:
        if f.read(8) != _DGL_MAGIC:
            # Checked here: DGL's own error for a foreign file is a multi-line C++ stack trace.
            raise GraphFormatError(
                f"{path}: not a DGL graph file (it does not start with DGL's magic number)"
            )
    dgl = load_dgl()
    try:
        graphs, _ = dgl.load_graphs(str(path))
    except Exception as exc:  # noqa: BLE001 - DGL raises DGLError and others for a damaged file
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise GraphFormatError(
            f"{path}: not a readable DGL graph file ({type(exc).__name__}: {first_line})"
        ) from exc
    if not 0 <= index < len(graphs):
        raise GraphFormatError(f"{path}: holds {len(graphs)} graphs, no graph {index}")
    g = graphs[index]
    if not g.is_homogeneous:
        raise GraphFormatError(
            f"{path}: graph {index} is heterogeneous ({g.ntypes}); only homogeneous graphs load"
        )
    src, dst = (t.numpy().astype(np.int64) for t in g.edges())
    n = int(g.num_nodes())
    if symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    graph = CSRGraph.from_edges(src, dst, n, name=path.stem)
    graph.meta = {"source": f"DGL file {path} (graph {index})", "symmetrized": symmetric}
    ndata = {k: v.numpy() for k, v in g.ndata.items()}
    feats = next((ndata[k] for k in _FEATURE_KEYS if k in ndata), None)
    if feats is not None:
        graph.explicit_features = _finite_features(feats.reshape(n, -1).astype(np.float32, copy=False), path)
        graph.feat_dim = int(graph.explicit_features.shape[1])
    labels = next((ndata[k] for k in _LABEL_KEYS if k in ndata), None)
    if labels is not None:
        labels = labels.reshape(n, -1)
        if labels.shape[1] != 1:
            raise GraphFormatError(
                f"{path}: labels have {labels.shape[1]} columns; only single labels are supported"
            )
        graph.labels = np.nan_to_num(labels[:, 0].astype(np.float64), nan=-1).astype(np.int64)
        graph.num_classes = int(graph.labels.max()) + 1 if n else 0
    for attr, keys in _MASK_KEYS.items():
        mask = next((ndata[k] for k in keys if k in ndata), None)
        if mask is not None:
            setattr(graph, attr, mask.reshape(n).astype(bool))
    graph.validate()
    return graph


# ---- graphs networkx ships -------------------------------------------------------------
def load_real_graph(name: str, seed: int = 0) -> CSRGraph:
    """A small real graph shipped by networkx, with labels and generated class-signal features."""
    import networkx as nx

    from workbench.graph.signal import attach_node_data

    builders = {
        "karate": nx.karate_club_graph,
        "les-miserables": nx.les_miserables_graph,
        "davis-southern-women": nx.davis_southern_women_graph,
        "florentine-families": nx.florentine_families_graph,
    }
    if name not in builders:
        from workbench.errors import UnknownNameError

        raise UnknownNameError(f"unknown shipped graph {name!r}; valid: {', '.join(REAL_GRAPHS)}")
    nxg = builders[name]()
    nodes = list(nxg.nodes())
    index = {v: i for i, v in enumerate(nodes)}
    pairs = np.array([(index[u], index[v]) for u, v in nxg.edges()], dtype=np.int64).reshape(-1, 2)
    weights = np.array([float(d.get("weight", 1.0)) for _, _, d in nxg.edges(data=True)], dtype=np.float32)
    src = np.concatenate([pairs[:, 0], pairs[:, 1]])
    dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
    weighted = bool(np.any(weights != 1.0))
    graph = CSRGraph.from_edges(
        src, dst, len(nodes), weight=np.concatenate([weights, weights]) if weighted else None, name=name
    )
    if name == "karate":
        clubs = sorted({nxg.nodes[v]["club"] for v in nodes})
        labels = np.array([clubs.index(nxg.nodes[v]["club"]) for v in nodes], dtype=np.int64)
        labelled_by = "club attribute"
    elif name == "davis-southern-women":
        labels = np.array([int(nxg.nodes[v]["bipartite"]) for v in nodes], dtype=np.int64)
        labelled_by = "bipartite side"
    else:
        communities = nx.community.louvain_communities(nxg, seed=seed)
        labels = np.empty(len(nodes), dtype=np.int64)
        for c, members in enumerate(sorted(communities, key=lambda s: min(index[v] for v in s))):
            labels[[index[v] for v in members]] = c
        labelled_by = "Louvain communities"
    graph.communities = labels.copy()
    attach_node_data(graph, int(labels.max()) + 1, REAL_GRAPH_FEAT_DIM, seed, labels=labels)
    graph.meta.update(
        {"source": REAL_GRAPHS[name], "labels_from": labelled_by, "vertex_names": [str(v) for v in nodes]}
    )
    return graph
