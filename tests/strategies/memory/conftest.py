"""Shared pieces of the memory-policy tests: a one-GPU cluster of a given capacity and the
hand-written operator graph of ROC's Fig. 3 (fixtures: ``--import-mode=importlib`` forbids
importing sibling test modules)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec
from workbench.strategies.memory.base import Operator, OperatorGraph, Tensor


def _one_gpu(capacity: int) -> ClusterSpec:
    """m0: one GPU of ``capacity`` bytes on a 16 GB/s PCIe link to a 1 TiB host."""
    gpu = GPUSpec("TestGPU", capacity, 10e12, 500e9)
    machine = MachineSpec("m0", (gpu,), 2**40)
    return ClusterSpec("one-gpu", (machine,), (LinkSpec("m0.host", "m0.gpu0", 16e9, 1e-6, "pcie"),))


@pytest.fixture
def one_gpu() -> Callable[[int], ClusterSpec]:
    """``one_gpu(capacity)``: a cluster whose only GPU (``m0.gpu0``) holds ``capacity`` bytes."""
    return _one_gpu


# ROC's Fig. 3: a 1-layer GIN. Operators 1-7 as numbered in the figure; tensors as in Table 3
# (g: the neighbours, a: gathered, b: Linear+ReLU output, h1: Linear output, and gradients),
# with the weights' gradients added (never read again, so Table 3 does not list them).
# Table 3 keeps `a` active after operator 6, so the gather's backward (7) reads `a`.
GIN_OPERATORS = (
    Operator("1 gather", ("h0", "g"), ("a",)),
    Operator("2 linear+relu", ("a", "w1"), ("b",)),
    Operator("3 linear", ("b", "w2"), ("h1",)),
    Operator("4 softmax", ("h1",), ("grad_h1",)),
    Operator("5 linear.bwd", ("grad_h1", "w2", "b"), ("grad_b", "grad_w2"), "backward"),
    Operator("6 linear+relu.bwd", ("grad_b", "w1", "a", "b"), ("grad_a", "grad_w1"), "backward"),
    Operator("7 gather.bwd", ("grad_a", "g", "a"), ("grad_h0",), "backward"),
)
# Sizes (bytes) chosen so the capacity decides something: the graph g is the largest tensor.
GIN_SIZES = {
    "h0": 2, "g": 8, "a": 2, "w1": 1, "b": 2, "w2": 1, "h1": 2, "grad_h1": 2,
    "grad_b": 2, "grad_w2": 1, "grad_a": 2, "grad_w1": 1, "grad_h0": 2,
}  # fmt: skip


@pytest.fixture
def gin_fig3() -> OperatorGraph:
    return OperatorGraph(GIN_OPERATORS, tuple(Tensor(n, b) for n, b in GIN_SIZES.items()), "gin-fig3")
