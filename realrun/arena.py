"""A device-memory arena: one preallocated buffer of a memory policy's capacity, and the tensors
a step keeps in it.

ROC (paper 000, section 5) keeps every tensor of a training step in host DRAM and uses the GPU
as a cache whose contents a memory policy decides. A real run under such a policy places each
tensor the policy puts on the GPU in one buffer of exactly the capacity the policy was given
(``[execution] gpu_memory``): on CUDA device memory, on the CPU a separate preallocated buffer,
so no tensor of the step can live on the device outside what the policy accounted for. A load
really copies a host tensor into the arena and a write-back copies it out again; what the
arena holds at any moment is what the schedule says, so its peak is the schedule's.

Placement is the arena's own concern, not a decision of the schedule (which says what is on
the device when, not where): first fit, each tensor aligned to its element size. When no gap
fits a tensor that the free bytes would hold, the arena packs what it holds to the front (the
widest elements first, so no byte is lost to alignment) and counts a compaction; a tensor larger
than the free bytes is a :class:`~workbench.errors.ConfigError` naming it.

Views (:meth:`Arena.view`) are valid until the next :meth:`Arena.allocate` (a compaction moves
tensors): take them after a step's allocations.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workbench.errors import ConfigError
from workbench.strategies.memory.base import describe_bytes

__all__ = ["Arena"]


@dataclass
class _Slot:
    offset: int
    nbytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def end(self) -> int:
        return self.offset + self.nbytes

    @property
    def align(self) -> int:
        return self.dtype.itemsize


class Arena:
    """``capacity`` bytes of ``device`` memory, allocated once, holding named tensors."""

    def __init__(self, capacity: int, device: torch.device, where: str = "arena") -> None:
        self.capacity, self.device, self.where = int(capacity), device, where
        try:
            self.buffer = torch.empty(self.capacity, dtype=torch.uint8, device=device)
        except (RuntimeError, MemoryError) as exc:  # torch reports an impossible size as RuntimeError
            raise ConfigError(
                f"{where}: cannot allocate {describe_bytes(self.capacity)} on {device} ({exc}); "
                "set [execution] gpu_memory to what this device can hold"
            ) from None
        self.slots: dict[str, _Slot] = {}
        self.live_bytes = 0  # bytes of the tensors held (without alignment gaps)
        self.peak_bytes = 0
        self.compactions = 0
        self._pinned = device.type == "cuda"

    # ---- placement -------------------------------------------------------------------------
    def allocate(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
        """Room for ``name`` (``shape``, ``dtype``); its contents are undefined until written."""
        if name in self.slots:
            raise RuntimeError(f"{self.where}: {name!r} is already in the arena")
        slot = _Slot(0, _nbytes(shape, dtype), dtype, tuple(shape))
        if slot.nbytes > self.capacity - self.live_bytes:
            raise ConfigError(
                f"{self.where}: tensor {name!r} ({describe_bytes(slot.nbytes)}) does not fit: the arena "
                f"holds {describe_bytes(self.live_bytes)} of {describe_bytes(self.capacity)} "
                "([execution] gpu_memory)"
            )
        offset = self._first_fit(slot)
        if offset is None:
            offset = self._compact(slot)
        slot.offset = offset
        self.slots[name] = slot
        self.live_bytes += slot.nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def release(self, name: str) -> None:
        self.live_bytes -= self.slots.pop(name).nbytes

    def _first_fit(self, slot: _Slot) -> int | None:
        cursor = 0
        for held in sorted(self.slots.values(), key=lambda s: s.offset):
            start = _aligned(cursor, slot.align)
            if start + slot.nbytes <= held.offset:
                return start
            cursor = max(cursor, held.end)
        start = _aligned(cursor, slot.align)
        return start if start + slot.nbytes <= self.capacity else None

    def _compact(self, new: _Slot) -> int:
        """Pack the held tensors and ``new`` to the front, widest elements first (sizes are whole
        elements, so nothing is lost to alignment); returns ``new``'s offset."""
        self.compactions += 1
        saved = {name: self.view(name).clone() for name in self.slots}
        order = sorted([*self.slots.items(), ("", new)], key=lambda kv: -kv[1].align)
        cursor = 0
        for _, slot in order:
            slot.offset = _aligned(cursor, slot.align)
            cursor = slot.end
        for name, data in saved.items():
            self.view(name).copy_(data)
        return new.offset

    # ---- contents --------------------------------------------------------------------------
    def view(self, name: str) -> torch.Tensor:
        """``name`` as a tensor of its shape and dtype over its bytes of the buffer."""
        slot = self.slots[name]
        raw = self.buffer[slot.offset : slot.end]
        return raw.view(slot.dtype).view(slot.shape)

    def holds(self) -> set[str]:
        return set(self.slots)

    def load(self, name: str, host: torch.Tensor) -> int:
        """Copy ``host`` into the arena as ``name``; returns the bytes copied."""
        self.allocate(name, tuple(host.shape), host.dtype)
        self.view(name).copy_(host)
        return _nbytes(tuple(host.shape), host.dtype)

    def write_back(self, name: str, into: torch.Tensor | None = None) -> torch.Tensor:
        """A host copy of ``name``: into ``into`` when given (a tensor of its shape that host memory
        already holds, e.g. the rows of a chunk in a larger host array), else into a new tensor
        (pinned on CUDA, so the copy is a DMA transfer)."""
        slot = self.slots[name]
        host = torch.empty(slot.shape, dtype=slot.dtype, pin_memory=self._pinned) if into is None else into
        host.copy_(self.view(name))
        return host


def _nbytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    count = 1
    for n in shape:
        count *= int(n)
    return count * dtype.itemsize


def _aligned(offset: int, align: int) -> int:
    return -(-offset // align) * align
