"""A file of named arrays that readers map into memory instead of copying: the sample cache's format.

An ``.npz`` is read by copying every member into fresh memory: a products-like epoch (1.2 GB)
took 0.7-1.3 s to load, as long as sampling it again, and longer where the kernel stalls
faulting in fresh pages. Here every array lies at an aligned offset of one file, so a reader
maps the file (copy-on-write: the arrays are writable, the file is never changed) and the
arrays are views of the page cache, paged in as they are read.

Writers replace a file whole (a new file renamed over the old one), never rewrite it in place:
a reader's mapping keeps the file it opened, whereas one cut short under it would fault.

Layout: ``MAGIC``, the index's length (8 bytes, little-endian), the index (JSON: per array its
name, dtype, shape and offset from the first array), then the arrays' bytes, the first at the next
multiple of ``ALIGN`` after the index and each at a multiple of ``ALIGN`` from it.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import numpy as np

from workbench.atomic import write_atomically

MAGIC = b"GNNWB-ARRAYS-2\n"  # 2: offsets from the first array (1, never released: from the file's start)
ALIGN = 64


def write_mapped_arrays(path: Path, arrays: Mapping[str, np.ndarray | Sequence[np.ndarray]]) -> Path:
    """Write ``arrays`` to ``path`` atomically (:func:`write_atomically`). A sequence of 1-D arrays
    of one dtype is stored as their concatenation, written part by part (never built whole)."""
    entries = [(name, *_layout(name, value)) for name, value in arrays.items()]
    index = []
    offset = 0
    for name, dtype, shape, nbytes, _ in entries:
        index.append([name, dtype.str, list(shape), offset])
        offset += _aligned(nbytes)
    text = json.dumps({"arrays": index}).encode()
    head = len(MAGIC) + 8 + len(text)
    start = _aligned(head)

    def write(f: IO[bytes]) -> None:
        f.write(MAGIC + len(text).to_bytes(8, "little") + text)
        at = head
        for (_, _, _, nbytes, parts), (_, _, _, offset) in zip(entries, index, strict=True):
            f.write(b"\0" * (start + offset - at))
            for part in parts:
                f.write(np.ascontiguousarray(part).data)
            at = start + offset + nbytes

    return write_atomically(path, write)


def _aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of ``ALIGN``."""
    return -(-nbytes // ALIGN) * ALIGN


def _layout(
    name: str, value: np.ndarray | Sequence[np.ndarray]
) -> tuple[np.dtype, tuple[int, ...], int, list[np.ndarray]]:
    """``value``'s dtype, shape, size in bytes and the parts to write in order."""
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise ValueError(f"{name}: arrays of Python objects cannot be stored")
        return value.dtype, value.shape, value.nbytes, [value]
    parts = list(value)
    if not parts:
        raise ValueError(f"{name}: no array to concatenate (its dtype is unknown)")
    dtype = parts[0].dtype
    if dtype.hasobject or any(p.ndim != 1 or p.dtype != dtype for p in parts):
        raise ValueError(f"{name}: parts must be 1-D arrays of one dtype ({dtype})")
    length = sum(int(p.shape[0]) for p in parts)
    return dtype, (length,), length * dtype.itemsize, parts


def read_mapped_arrays(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a file :func:`write_mapped_arrays` wrote, as views of its mapping.

    Raises ``ValueError`` naming what is wrong when the file is not such a file or is cut short."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if f.read(len(MAGIC)) != MAGIC:
            raise ValueError(f"{path}: not a mapped-arrays file")
        length = int.from_bytes(f.read(8), "little")
        if len(MAGIC) + 8 + length > size:
            raise ValueError(f"{path}: the index runs past the end of the file")
        try:
            index = json.loads(f.read(length))["arrays"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: unreadable index ({exc})") from None
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    start = _aligned(len(MAGIC) + 8 + length)
    out = {}
    for name, dtype_text, shape, relative in index:
        dtype = np.dtype(dtype_text)
        count = int(np.prod(shape, dtype=np.int64))
        offset = start + relative
        if relative % ALIGN or offset + count * dtype.itemsize > size:
            raise ValueError(f"{path}: array {name} lies outside the file")
        if count == 0:
            out[name] = np.zeros(shape, dtype=dtype)
            continue
        out[name] = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset).reshape(shape)
    return out
