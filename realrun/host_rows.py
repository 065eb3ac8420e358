"""Host-to-device copies of host rows, pinned on CUDA: the one rule every real scheme's ``h2d`` follows.

A copy from pageable host memory goes through the driver's own bounce buffer and runs at a
fraction of a DMA copy's bandwidth (the microbenchmark's ``h2d`` rows time both). A scheme whose
host rows were pageable would time a slower copy than another's pinned one and the comparison
would measure the allocation, not the scheme; so every host tensor a scheme copies from is
pinned on CUDA (:func:`pinned`), and rows picked out of one are gathered into a reused pinned
staging buffer, then copied in one DMA transfer (:class:`HostRows`). On CPU nothing is pinned
(the device is host memory): the same calls index and return the rows.

``pin`` is passed in (the executors pass ``device.type == "cuda"``); tests on a machine without
CUDA give an allocator that stands in for pinned memory.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import torch

Allocator = Callable[[tuple[int, ...], torch.dtype], torch.Tensor]


def _pinned_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, pin_memory=True)


def pinned(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` in host memory as a copy to ``device`` reads it: pinned when ``device`` is a GPU."""
    return t.pin_memory() if device.type == "cuda" and not t.is_pinned() else t


def register_host(ptr: int, nbytes: int) -> bool:
    """Page-lock ``nbytes`` of host memory at ``ptr`` with the CUDA driver (portable: every
    context sees it pinned); False where the driver refuses."""
    return int(torch.cuda.cudart().cudaHostRegister(ptr, nbytes, 1)) == 0


def pin_in_place(
    t: torch.Tensor, device: torch.device, *, register: Callable[[int, int], bool] = register_host
) -> bool:
    """Page-lock the host memory ``t`` already occupies when ``device`` is a GPU, for memory
    :func:`pinned` cannot copy (a mapping other worker processes share, such as NeuGraph's
    server memory): copies between it and the GPU are then DMA transfers, as the rule above wants.
    It stays locked for the process's life (workers exit without tearing down). Returns whether
    ``t`` is pinned now; where the driver refuses, a warning says the copies stay pageable."""
    if device.type != "cuda" or t.numel() == 0:
        return False
    if register(t.data_ptr(), t.numel() * t.element_size()):
        return True
    warnings.warn(
        f"could not page-lock {t.numel() * t.element_size()} bytes of shared host memory: copies between "
        "it and the GPU stay pageable (slower than the other schemes' pinned copies)",
        RuntimeWarning,
        stacklevel=2,
    )
    return False


def host_features(rows: np.ndarray, device: torch.device) -> torch.Tensor:
    """Feature rows (any array) as a contiguous float32 host tensor, pinned when ``device`` is a GPU."""
    return pinned(torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32)), device)


class HostRows:
    """Rows of host tensors copied to ``device`` through one pinned staging buffer (grown as
    needed, reused across calls). ``allocate``: how the staging buffer is made (pinned memory by
    default; a test's stand-in on CPU)."""

    def __init__(self, device: torch.device, *, pin: bool | None = None, allocate: Allocator | None = None):
        self.device = device
        self.pin = device.type == "cuda" if pin is None else pin
        self._allocate = allocate or _pinned_empty
        self._buffer: torch.Tensor | None = None
        self.staged_calls = 0  # copies that went through the staging buffer (tests read it)

    def staging(self, rows: int, row_shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A pinned host buffer of ``rows`` rows of ``row_shape``; its earlier contents may be
        overwritten only once the copy out of it has finished, hence the wait before reuse."""
        buf = self._buffer
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()
        need = rows * int(torch.Size(row_shape).numel())
        if buf is None or buf.dtype != dtype or buf.numel() < need:
            buf = self._allocate((max(need, 1 << 16),), dtype)
            self._buffer = buf
        return buf[:need].view(rows, *row_shape)

    def gather(self, source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Rows ``index`` of the host tensor ``source``, on the device (one DMA copy on CUDA)."""
        if not self.pin:
            return source.index_select(0, index).to(self.device)
        staged = self.staging(int(index.shape[0]), tuple(source.shape[1:]), source.dtype)
        torch.index_select(source, 0, index, out=staged)
        self.staged_calls += 1
        return staged.to(self.device, non_blocking=True)
