"""Files that appear whole or not at all, whoever else writes or reads the same name."""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import numpy as np


def write_npz_atomically(path: Path, arrays: Mapping[str, np.ndarray | Sequence[np.ndarray]]) -> Path:
    """Write ``arrays`` to ``path`` (``np.savez``'s format) through a temporary file of its own in the
    same folder. A sequence of 1-D arrays of one dtype is written as their concatenation, part by part:
    the sample cache's epoch of products-like is 1.2 GB, and building it whole first took 1-5 s of
    copying into freshly faulted pages, longer than sampling the epoch (1.1 s).

    Parallel study points build and cache the same entry at once: each writer has a unique
    temporary name (``mkstemp``) and ``os.replace`` swaps a complete file in, so no writer
    trips over another's file, the last one wins with identical contents, and a reader never
    sees half a file. A failed write leaves no temporary behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with (
            os.fdopen(fd, "wb") as f,
            zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf,
        ):
            for name, value in arrays.items():
                with zf.open(f"{name}.npy", "w", force_zip64=True) as entry:
                    _write_entry(entry, name, value)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _write_entry(entry: IO[bytes], name: str, value: np.ndarray | Sequence[np.ndarray]) -> None:
    """The ``.npy`` of ``value``, or of the concatenation of its parts (1-D, of one dtype), written
    part by part."""
    if isinstance(value, np.ndarray):
        np.lib.format.write_array(entry, value, allow_pickle=False)
        return
    parts = value
    if not parts:
        raise ValueError(f"{name}: no array to concatenate (its dtype is unknown)")
    dtype = parts[0].dtype
    if any(p.ndim != 1 or p.dtype != dtype for p in parts):
        raise ValueError(f"{name}: parts must be 1-D arrays of one dtype ({dtype})")
    header = {
        "descr": np.lib.format.dtype_to_descr(dtype),
        "fortran_order": False,
        "shape": (sum(int(p.shape[0]) for p in parts),),
    }
    np.lib.format.write_array_header_1_0(entry, header)
    for part in parts:
        entry.write(np.ascontiguousarray(part).data)
