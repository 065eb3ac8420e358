"""Saving and loading a :class:`CSRGraph` as one ``.npz`` file (arrays plus meta as JSON).

Writes are atomic (a temporary file in the same folder, then ``os.replace``), so a
reader never sees half a file and concurrent writers of the same graph do not clash.
Vertex ids are stored as int32 when they fit, halving the file of a products-sized graph.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from workbench.atomic import write_npz_atomically
from workbench.errors import GraphFormatError
from workbench.graph.csr import CSRGraph, index_dtype

# Bump when the layout changes; files of another version are rejected (and a cache regenerates them).
FORMAT_VERSION = 1
_MAGIC = "gnnwb-csr-graph"
_OPTIONAL_ARRAYS = (
    "edge_weight",
    "labels",
    "train_mask",
    "val_mask",
    "test_mask",
    "communities",
    "explicit_features",
)


def save_graph(graph: CSRGraph, path: str | os.PathLike) -> Path:
    """Write ``graph`` to ``path`` (an ``.npz`` file) atomically; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {
        "indptr": graph.indptr,
        "indices": graph.indices.astype(index_dtype(graph.num_nodes), copy=False),
    }
    for name in _OPTIONAL_ARRAYS:
        value = getattr(graph, name)
        if value is not None:
            arrays[name] = value
    header = {
        "magic": _MAGIC,
        "format_version": FORMAT_VERSION,
        "name": graph.name,
        "num_classes": graph.num_classes,
        "feat_dim": graph.feat_dim,
        "feature_seed": graph.feature_seed,
        "meta": graph.meta,
    }
    arrays["header"] = np.frombuffer(json.dumps(header, default=_json_default).encode(), dtype=np.uint8)
    return write_npz_atomically(path, arrays)


def load_graph(path: str | os.PathLike, *, validate: bool = True) -> CSRGraph:
    """Read a graph written by :func:`save_graph`; anything else raises :class:`GraphFormatError`."""
    path = Path(path)
    if not path.is_file():
        raise GraphFormatError(f"{path}: no such graph file")
    try:
        with np.load(path, allow_pickle=False) as data:
            if "header" not in data.files or "indptr" not in data.files or "indices" not in data.files:
                raise GraphFormatError(
                    f"{path}: not a workbench graph file (no header/indptr/indices arrays)"
                )
            header = json.loads(bytes(data["header"]).decode())
            arrays = {name: _narrow(name, data[name]) for name in data.files if name != "header"}
    except GraphFormatError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, UnicodeDecodeError) as exc:
        raise GraphFormatError(f"{path}: not a readable graph file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(header, dict):
        raise GraphFormatError(f"{path}: not a workbench graph file (the header is not a table)")
    if header.get("magic") != _MAGIC:
        raise GraphFormatError(f"{path}: not a workbench graph file (bad header)")
    if header.get("format_version") != FORMAT_VERSION:
        raise GraphFormatError(
            f"{path}: graph file format {header.get('format_version')}, this workbench reads {FORMAT_VERSION}"
        )
    _check_arrays(path, arrays)
    graph = CSRGraph(
        indptr=arrays["indptr"],
        indices=arrays["indices"],
        name=_header_field(path, header, "name", str, path.stem),
        num_classes=_header_field(path, header, "num_classes", int, 0),
        feat_dim=_header_field(path, header, "feat_dim", int, 0),
        feature_seed=_header_field(path, header, "feature_seed", int, 0),
        meta=_header_field(path, header, "meta", dict, {}),
        **{name: arrays[name] for name in _OPTIONAL_ARRAYS if name in arrays},
    )
    if validate:
        try:
            graph.validate()
        except GraphFormatError as exc:  # its message names the graph; the user knows the file
            raise GraphFormatError(f"{path}: {exc}") from None
    return graph


# Per-vertex class ids, read into the narrowest signed integer type that holds them: papers-like
# at full size stores 111M labels and communities as int64 (1.8 GB), in int16 and int32 0.7 GB.
_CLASS_IDS = ("labels", "communities")


def _narrow(name: str, values: np.ndarray) -> np.ndarray:
    if name not in _CLASS_IDS or values.dtype.kind not in "iu" or not values.size:
        return values
    low, high = int(values.min()), int(values.max())
    for kind in (np.int16, np.int32):  # not int8: a label plus one would wrap at 127
        info = np.iinfo(kind)
        if info.min <= low and high <= info.max:
            return values.astype(kind)
    return values


# What each array of a graph file must be: its dimensions and the kind of its dtype
# (numpy's dtype.kind: "iu" integers, "b" booleans, "f" floats). A float array where ids
# belong would be truncated on the way in: refused instead.
_ARRAY_KINDS: dict[str, tuple[int, str]] = {
    "indptr": (1, "iu"),
    "indices": (1, "iu"),
    "edge_weight": (1, "f"),
    "labels": (1, "iu"),
    "train_mask": (1, "b"),
    "val_mask": (1, "b"),
    "test_mask": (1, "b"),
    "communities": (1, "iu"),
    "explicit_features": (2, "f"),
}


def _check_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    for name, (ndim, kinds) in _ARRAY_KINDS.items():
        array = arrays.get(name)
        if array is None:
            continue
        if array.ndim != ndim or array.dtype.kind not in kinds:
            raise GraphFormatError(
                f"{path}: array {name} must be {ndim}-D of {_KIND_NAMES[kinds]}, "
                f"got {array.ndim}-D of {array.dtype}"
            )
        if kinds == "f" and not np.all(np.isfinite(array)):
            raise GraphFormatError(f"{path}: array {name} holds NaN or infinite values")


_KIND_NAMES = {"iu": "integers", "b": "booleans", "f": "floats"}


def _header_field(path: Path, header: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = header.get(key, default)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise GraphFormatError(f"{path}: header field {key} must be {_TYPE_NAMES[kind]}, got {value!r}")
    return value


_TYPE_NAMES = {str: "a string", int: "an integer", dict: "a table"}


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"meta value of type {type(value).__name__} is not JSON-serializable")
