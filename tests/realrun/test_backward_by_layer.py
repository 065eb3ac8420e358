"""backward_by_layer: one backward pass, each layer's share a row of its own, gradients unchanged."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import torch

from realrun.schemes.base import backward_by_layer


class Recorder:
    """What backward_by_layer needs of a worker context: a clock, a status and the rows it records."""

    def __init__(self) -> None:
        self.ticks = itertools.count()
        self.rows: list[tuple[str, float, float]] = []
        self.status = SimpleNamespace(phase=lambda *a: None)

    def now(self) -> float:
        return float(next(self.ticks))

    def row(self, task: str, phase: str, start: float, end: float) -> None:
        assert phase == "backward"
        self.rows.append((task, start, end))


def test_rows_tile_the_pass_top_layer_first_and_gradients_match_a_plain_backward() -> None:
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, 4) for _ in range(3)]
    x = torch.randn(5, 4)

    def run(timed: bool) -> list[torch.Tensor]:
        for layer in layers:
            layer.zero_grad()
        ins, h = [], x
        for layer in layers:
            ins.append(h)
            h = torch.relu(layer(h))
        loss = h.sum()
        ctx = Recorder()
        if timed:
            backward_by_layer(ctx, loss, ins, "i0.w0", 0)  # type: ignore[arg-type]
            # Clock ticks: 0 at the start, one per hook (layers 2 then 1), then the end.
            assert ctx.rows == [("i0.w0.bwd2", 0.0, 1.0), ("i0.w0.bwd1", 1.0, 2.0), ("i0.w0.bwd0", 2.0, 3.0)]
        else:
            loss.backward()
        return [p.grad.clone() for layer in layers for p in layer.parameters()]

    for timed, plain in zip(run(True), run(False), strict=True):
        assert torch.equal(timed, plain)
