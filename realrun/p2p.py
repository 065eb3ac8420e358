"""Batched point-to-point exchanges that behave the same under gloo and NCCL.

``torch.distributed.batch_isend_irecv`` returns one work per operation under gloo, but one
work for the whole batch under NCCL (the batch is one NCCL group call). Code that indexes a
work per operation runs on gloo and fails at its first exchange on GPUs, so every batched
exchange here goes through :func:`start` and :func:`completions`, which serve both: with a
work per operation each operation's completion is noted as it happens; with one work for the
batch every operation completes when the batch does.

CPU tests check the NCCL side with :func:`install_nccl_standin`, which makes gloo's
``batch_isend_irecv`` return one work for the batch, as NCCL does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist

# Set to 1 in a real run's environment (tests): the workers take the NCCL stand-in.
NCCL_STANDIN_ENV = "GNNWB_NCCL_STANDIN"


def start(ops: Sequence[dist.P2POp]) -> list[Any]:
    """Post every operation of ``ops`` at once; returns the works (one per operation or one in all)."""
    return list(dist.batch_isend_irecv(list(ops))) if ops else []


def completions(works: Sequence[Any], count: int) -> Iterator[int]:
    """Wait for the ``count`` operations behind ``works`` in their order, yielding each one's index
    once it is complete: one at a time where each has its work, all at once where the batch has
    one work (NCCL)."""
    if len(works) == count:
        for k, work in enumerate(works):
            work.wait()
            yield k
        return
    if count and len(works) != 1:
        raise RuntimeError(f"a batch of {count} point-to-point operations returned {len(works)} works")
    for work in works:
        work.wait()
    yield from range(count)


def wait_all(ops: Sequence[dist.P2POp]) -> None:
    """Post ``ops`` and wait for all of them."""
    works = start(ops)
    for _ in completions(works, len(ops)):
        pass


class _BatchWork:
    """One work standing for a whole batch, as NCCL returns it."""

    def __init__(self, works: list[Any]) -> None:
        self.works = works

    def wait(self) -> bool:
        for work in self.works:
            work.wait()
        return True

    def is_completed(self) -> bool:
        return all(work.is_completed() for work in self.works)


def install_nccl_standin() -> None:
    """Give this process's gloo NCCL's point-to-point semantics: ``batch_isend_irecv`` returns one
    work per batch, and an unbatched ``isend`` on the main group returns only once the peer has
    posted its receive (an NCCL send between two ranks waits for the peer's matching call: two
    ranks that both send before they receive hang). Other groups keep gloo's semantics, as the
    gloo group a CUDA run keeps beside NCCL does (:func:`standin_installed`)."""
    original = dist.batch_isend_irecv
    if getattr(original, "nccl_standin", False):
        return
    isend = _NcclIsend(dist.isend)

    def batched(p2p_op_list: list[dist.P2POp]) -> list[Any]:
        # A batch is one group call, its sends waiting on nothing alone; torch tells a send from a
        # receive by identity with its own isend.
        for op in p2p_op_list:
            if op.op is isend:
                op.op = isend.original
        works = original(p2p_op_list)
        return [_BatchWork(list(works))] if works else []

    batched.nccl_standin = True  # type: ignore[attr-defined]
    dist.batch_isend_irecv = batched
    dist.isend = isend
    dist.all_reduce = _deferred_all_reduce(dist.all_reduce)


def _main_group(group: Any) -> bool:
    return group is None or group is dist.group.WORLD


# The stand-in's all-reduces on the main group still in flight: NCCL's return at once, and the
# wait happens wherever the device is next synchronised (:func:`synchronize`).
_DEFERRED: list[Any] = []


def _deferred_all_reduce(original: Any) -> Any:
    def all_reduce(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        group = kwargs.get("group", args[1] if len(args) > 1 else None)
        if kwargs.get("async_op") or len(args) > 2 or not _main_group(group):
            return original(tensor, *args, **kwargs)
        _DEFERRED.append(original(tensor, *args, **{**kwargs, "async_op": True}))
        return None

    return all_reduce


def synchronize(device: Any) -> None:
    """Wait for the work queued on ``device``: the GPU's stream under CUDA, the deferred all-reduces
    under the NCCL stand-in."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    while _DEFERRED:
        _DEFERRED.pop(0).wait()


class _NcclIsend:
    """``isend`` that, on the main group, returns once its peer has posted the receive. It compares
    equal to the function it wraps, so ``P2POp(dist.isend, ...)`` still passes torch's check of the
    operation."""

    def __init__(self, original: Any) -> None:
        self.original = original

    def __call__(self, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        work = self.original(tensor, *args, **kwargs)
        group = kwargs.get("group", args[1] if len(args) > 1 else None)
        if _main_group(group):
            work.wait()
        return work

    def __eq__(self, other: object) -> bool:
        return other is self or other is self.original

    def __hash__(self) -> int:
        return hash(self.original)


def standin_installed() -> bool:
    """Whether this process runs with the NCCL stand-in (its runs then keep a gloo group beside the
    main one, as CUDA runs do)."""
    return bool(getattr(dist.batch_isend_irecv, "nccl_standin", False))


def install_standins_from_environment() -> None:
    """What a worker process does at its start: the stand-ins its environment asks for."""
    if os.environ.get(NCCL_STANDIN_ENV) == "1":
        install_nccl_standin()
