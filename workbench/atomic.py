"""Files that appear whole or not at all, whoever else writes or reads the same name."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

import numpy as np


def write_atomically(path: Path, write: Callable[[IO[bytes]], None]) -> Path:
    """Write ``path`` with ``write`` (given the open file) through a temporary file of its own in the
    same folder.

    Parallel study points build and cache the same entry at once: each writer has a unique
    temporary name (``mkstemp``) and ``os.replace`` swaps a complete file in, so no writer
    trips over another's file, the last one wins with identical contents, and a reader never
    sees half a file. A failed write leaves no temporary behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_npz_atomically(path: Path, arrays: Mapping[str, np.ndarray]) -> Path:
    """Write ``arrays`` to ``path`` (``np.savez``) atomically (:func:`write_atomically`)."""
    return write_atomically(path, lambda f: np.savez(f, **arrays))
