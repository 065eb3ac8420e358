"""positions_by_key against one mask per key, brute force."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.grouping import positions_by_key


@pytest.mark.parametrize("size", [1, 7, 64, 2**15, 2**15 + 1, 100_000])
def test_positions_by_key_equal_one_mask_per_key(size: int) -> None:
    rng = np.random.default_rng(size)
    keys = rng.integers(0, size, 3000)
    keys[:3] = size - 1  # the largest key, which decides the sort's width
    for given in (None, size):
        groups = positions_by_key(keys, given)
        assert list(groups) == sorted(set(keys.tolist()))
        for k, at in groups.items():
            assert np.array_equal(at, np.flatnonzero(keys == k))


def test_no_keys_no_groups() -> None:
    assert positions_by_key(np.empty(0, dtype=np.int64)) == {}
    assert positions_by_key(np.empty(0, dtype=np.int64), 5) == {}
