"""The mapped-arrays file: what is written is what is read, as views of the file; damage is named."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.mapped_arrays import ALIGN, read_mapped_arrays, write_mapped_arrays


def test_arrays_and_parts_read_back_as_written(tmp_path) -> None:
    parts = [np.arange(5, dtype=np.int64), np.zeros(0, dtype=np.int64), np.array([7, -1], dtype=np.int64)]
    strided = np.arange(12, dtype=np.int64)[::3]  # not contiguous: stored as its values
    arrays = {
        "ids": parts,
        "eye": np.eye(3, dtype=np.float32),
        "strided": [strided],
        "empty": np.zeros(0, dtype=np.float32),
        "flags": np.array([True, False, True]),
        "odd": np.arange(3, dtype=np.int8),  # 3 bytes: the next array is still aligned
        "last": np.arange(4, dtype=np.int64),
    }
    path = write_mapped_arrays(tmp_path / "e.epoch", arrays)
    got = read_mapped_arrays(path)
    assert list(got) == list(arrays)
    assert np.array_equal(got["ids"], [0, 1, 2, 3, 4, 7, -1]) and got["ids"].dtype == np.int64
    assert np.array_equal(got["eye"], np.eye(3)) and got["eye"].dtype == np.float32
    assert np.array_equal(got["strided"], [0, 3, 6, 9])
    assert got["empty"].shape == (0,) and got["empty"].dtype == np.float32
    assert got["flags"].tolist() == [True, False, True]
    assert np.array_equal(got["last"], np.arange(4))
    for name in ("ids", "eye", "last"):  # views of the mapping, aligned, writable without touching the file
        assert got[name].base is not None and got[name].ctypes.data % ALIGN == 0
    got["last"][0] = 99
    assert read_mapped_arrays(path)["last"][0] == 0
    assert [p.name for p in tmp_path.iterdir()] == ["e.epoch"]


def test_bad_parts_are_refused_by_name_and_leave_no_file(tmp_path) -> None:
    with pytest.raises(ValueError, match="x: parts must be 1-D arrays of one dtype"):
        write_mapped_arrays(tmp_path / "f.epoch", {"x": [np.zeros(2, np.int64), np.zeros(2, np.int32)]})
    with pytest.raises(ValueError, match="y: no array to concatenate"):
        write_mapped_arrays(tmp_path / "f.epoch", {"y": []})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: b"PK\x03\x04" + data[4:], "not a mapped-arrays file"),
        (lambda data: data[:20], "the index runs past the end of the file"),
        (lambda data: data[: len(data) - 8], "array b lies outside the file"),
    ],
)
def test_a_damaged_file_is_refused_with_what_is_wrong(tmp_path, damage, message) -> None:
    path = write_mapped_arrays(tmp_path / "e.epoch", {"a": np.arange(3), "b": np.arange(10, dtype=np.int64)})
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError, match=message):
        read_mapped_arrays(path)
