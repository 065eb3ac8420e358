"""Host rows copied through one pinned staging buffer (realrun/host_rows.py). No GPU here: an
allocator stands in for pinned memory and records what it made."""

from __future__ import annotations

import pytest
import torch

from realrun.host_rows import HostRows, pin_in_place, pinned


class StandInPinned:
    """Records each staging allocation (shape, dtype) and hands out ordinary host tensors."""

    def __init__(self) -> None:
        self.made: list[tuple[tuple[int, ...], torch.dtype]] = []

    def __call__(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        self.made.append((shape, dtype))
        return torch.full(shape, float("nan"), dtype=dtype)


def test_staged_gather_returns_the_rows_in_index_order() -> None:
    source = torch.arange(40, dtype=torch.float32).reshape(10, 4)
    rows = HostRows(torch.device("cpu"), pin=True, allocate=StandInPinned())
    index = torch.tensor([7, 2, 2, 9])
    assert torch.equal(rows.gather(source, index), source[index])
    assert rows.staged_calls == 1


def test_staging_buffer_is_made_once_and_reused_until_a_larger_gather() -> None:
    alloc = StandInPinned()
    rows = HostRows(torch.device("cpu"), pin=True, allocate=alloc)
    source = torch.randn(100_000, 4)
    first = rows.gather(source, torch.arange(10))
    second = rows.gather(source, torch.arange(20, 30))
    # One allocation of at least 2**16 elements served both (with the stand-in the "device copy"
    # is the staging view itself, so both results are the same rows).
    assert len(alloc.made) == 1 and alloc.made[0][0][0] >= 1 << 16
    assert torch.equal(second, source[20:30])
    assert first.data_ptr() == second.data_ptr()  # the same staging rows were reused
    rows.gather(source, torch.arange(50_000))  # 200k elements > 2**16: the buffer grows once
    assert len(alloc.made) == 2 and alloc.made[1][0][0] == 200_000


def test_unpinned_gather_never_allocates_staging() -> None:
    alloc = StandInPinned()
    rows = HostRows(torch.device("cpu"), allocate=alloc)  # pin defaults to device.type == "cuda"
    source = torch.randn(5, 3)
    out = rows.gather(source, torch.tensor([4, 0]))
    assert torch.equal(out, source[[4, 0]])
    assert alloc.made == [] and rows.staged_calls == 0


def test_staging_keeps_row_shape_and_dtype() -> None:
    source = torch.arange(24, dtype=torch.float64).reshape(4, 3, 2)
    rows = HostRows(torch.device("cpu"), pin=True, allocate=StandInPinned())
    out = rows.gather(source, torch.tensor([3, 1]))
    assert out.dtype == torch.float64 and out.shape == (2, 3, 2)
    assert torch.equal(out, source[[3, 1]])


def test_pinned_leaves_host_tensors_alone_off_cuda() -> None:
    t = torch.randn(3, 2)
    assert pinned(t, torch.device("cpu")) is t


def test_pin_in_place_registers_the_tensors_own_bytes_on_cuda_only() -> None:
    # A 10 x 4 float32 view at row 2 of a larger tensor: 160 bytes starting 2 rows (32 bytes) in.
    calls: list[tuple[int, int]] = []

    def accept(ptr: int, nbytes: int) -> bool:
        calls.append((ptr, nbytes))
        return True

    whole = torch.zeros(12, 4)
    view = whole[2:]
    assert pin_in_place(view, torch.device("cuda"), register=accept)
    assert calls == [(whole.data_ptr() + 32, 160)]
    assert not pin_in_place(view, torch.device("cpu"), register=accept)
    assert not pin_in_place(torch.zeros(0), torch.device("cuda"), register=accept)
    assert len(calls) == 1


def test_pin_in_place_warns_when_the_driver_refuses() -> None:
    with pytest.warns(RuntimeWarning, match="stay pageable"):
        assert not pin_in_place(torch.zeros(3), torch.device("cuda"), register=lambda ptr, n: False)
