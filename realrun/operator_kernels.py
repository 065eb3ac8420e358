"""The operators of a part's training step (:func:`workbench.strategies.memory.graphs.operator_graph`)
computed by hand on the tensors a memory policy put in the device arena.

A memory policy schedules a training step operator by operator (ROC's Fig. 3: gather, then
the fused linear and activation, the loss, and each one's backward), each reading and writing
named tensors. Run for real, each operator is a kernel over exactly those tensors, as views of
the arena (:class:`realrun.arena.Arena`): autograd cannot span operators whose inputs come and go
between them, so forward and backward are written out here, and they compute what the model's
layers compute (DGL's ``SAGEConv`` with the mean and ``GraphConv`` with ``norm="both"``, on the
part's block: its vertices, then its halo rows owner by owner), up to summation order.

Tensors as the operator graph sizes them: ``graph`` is the part's in-edge CSR (``N + 1`` row
pointers, then ``E`` source positions, int64); ``labels`` int64 with ``-100`` where a vertex does
not train (so the loss needs no other mask); ``W{l}`` the layer's parameters flattened in the
model's order, ``grad_W{l}`` their gradients; ``sent_rows`` the positions of the part's rows in
the readers' halos, reader by reader, ``grad_readers{l}`` those rows' gradients. Temporaries a
kernel needs beyond its inputs and outputs (a sparse matrix's values, an aggregation's sources
joined) are workspace outside the arena, as cuSPARSE's would be.

neugraph-stream's executor (:mod:`realrun.schemes.neugraph_stream`) runs the same ApplyVertex
(``update``), its backward and the loss on one chunk at a time, and adds each streamed edge chunk
into a chunk's accumulation with :func:`edge_chunk_sum`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from workbench.errors import ConfigError
from workbench.model import ModelSpec

__all__ = ["IGNORED_LABEL", "KERNEL_KINDS", "LossFigures", "PartKernels", "edge_chunk_sum"]

KERNEL_KINDS = ("sage", "gcn")  # the layer kinds whose operators are written out here
IGNORED_LABEL = -100  # F.cross_entropy's ignore_index: a vertex outside the training set
_NAME = re.compile(r"^(gather|update|halo_grad)(\d+)(\.bwd)?$")


@dataclass(frozen=True)
class LossFigures:
    """What the loss operator found: the summed loss, correct predictions, training vertices."""

    loss_sum: float
    correct: int
    seeds: int


class PartKernels:
    """The operators of one part's step: ``num_vertices`` destinations, the model's layer shapes
    (``params[l]``: each layer's parameter names and shapes, in the model's order), and the scale
    that makes the summed gradients over the workers those of the graph's mean loss."""

    def __init__(
        self,
        model: ModelSpec,
        params: list[list[tuple[str, tuple[int, ...]]]],
        num_vertices: int,
        loss_scale: float,
    ) -> None:
        for index, spec in enumerate(model.layers):
            if spec.kind not in KERNEL_KINDS or spec.residual:
                raise ConfigError(
                    f"roc-fullgraph under a memory policy runs {' and '.join(KERNEL_KINDS)} layers without "
                    f"residuals for real; layer {index} is {'residual ' if spec.residual else ''}{spec.kind}"
                )
        self.model, self.params, self.n, self.loss_scale = model, params, num_vertices, loss_scale

    # ---- shapes of what the operators write ---------------------------------------------------
    def output_shape(self, name: str, halo_rows: int) -> tuple[int, ...]:
        """The shape of output tensor ``name`` (float32) of a part with ``halo_rows`` halo rows."""
        layers = self.model.layers
        kind, layer = _split(name)
        if kind == "grad_W":
            return (sum(_numel(shape) for _, shape in self.params[layer - 1]),)
        if kind in ("agg", "grad_agg", "grad_self"):
            return (self.n, layers[layer - 1].in_dim)
        width = layers[layer - 1].output_width if layer else layers[0].in_dim
        if kind == "grad_halo":
            return (halo_rows, width)
        if kind in ("h", "grad_h", "grad_local"):
            return (self.n, width)
        raise RuntimeError(f"no kernel writes tensor {name!r}")

    # ---- the operators -------------------------------------------------------------------------
    def run(self, op: str, t: Mapping[str, Tensor]) -> LossFigures | None:
        """Operator ``op`` over the arena views ``t`` (its inputs and outputs by name)."""
        if op == "loss":
            return self._loss(t)
        match = _NAME.match(op)
        if match is None:
            raise RuntimeError(f"no kernel for operator {op!r}")
        kind, layer, backward = match.group(1), int(match.group(2)), bool(match.group(3))
        if kind == "halo_grad":
            _halo_grad(t, layer)
        elif kind == "gather":
            (self._gather_backward if backward else self._gather)(t, layer)
        else:
            (self._update_backward if backward else self._update)(t, layer)
        return None

    def _gather(self, t: Mapping[str, Tensor], layer: int) -> None:
        """``agg{l}``: the layer's aggregation of its sources (own rows, then the halo's)."""
        source = t["features"] if layer == 1 else _joined(t[f"h{layer - 1}"], t.get(f"halo{layer - 1}"))
        a, _ = self._adjacency(t["graph"], layer, source.shape[0])
        t[f"agg{layer}"].copy_(_spmm(a, source))

    def _gather_backward(self, t: Mapping[str, Tensor], layer: int) -> None:
        """The sources' gradients: the part's own (plus the self term's) and its halo rows'."""
        below = layer - 1
        own = t.get(f"grad_local{below}", t.get(f"grad_h{below}"))
        halo = t.get(f"grad_halo{below}")
        num_src = self.n + (0 if halo is None else halo.shape[0])
        _, a_t = self._adjacency(t["graph"], layer, num_src)
        grad = _spmm(a_t, t[f"grad_agg{layer}"])
        if f"grad_self{layer}" in t:
            grad[: self.n] += t[f"grad_self{layer}"]
        own.copy_(grad[: self.n])  # type: ignore[union-attr]
        if halo is not None:
            halo.copy_(grad[self.n :])

    def _update(self, t: Mapping[str, Tensor], layer: int) -> None:
        """``h{l}``: the layer's transform of ``agg{l}`` (and of the own rows, SAGE's self term),
        ReLU but on the last layer."""
        w = self._weights(t[f"W{layer}"], layer)
        agg, out = t[f"agg{layer}"], t[f"h{layer}"]
        if self.model.layers[layer - 1].kind == "sage":
            own = self._own_input(t, layer)
            h = F.linear(own, w["fc_self.weight"], w["fc_self.bias"]) + agg @ w["fc_neigh.weight"].t()
        else:
            h = agg @ w["weight"] + w["bias"]
        out.copy_(F.relu(h) if layer < self.model.num_layers else h)

    def _update_backward(self, t: Mapping[str, Tensor], layer: int) -> None:
        """The weights' gradients, and (above layer 1) those of ``agg{l}`` and the self term."""
        grad = t[f"grad_h{layer}"]
        if layer < self.model.num_layers:  # ReLU's derivative, from its output
            grad = grad * (t[f"h{layer}"] > 0)
        w = self._weights(t[f"W{layer}"], layer)
        gw = self._weights(t[f"grad_W{layer}"], layer)
        agg = t[f"agg{layer}"]
        if self.model.layers[layer - 1].kind == "sage":
            torch.mm(grad.t(), agg, out=gw["fc_neigh.weight"])
            torch.mm(grad.t(), self._own_input(t, layer), out=gw["fc_self.weight"])
            torch.sum(grad, 0, out=gw["fc_self.bias"])
            if layer > 1:
                torch.mm(grad, w["fc_neigh.weight"], out=t[f"grad_agg{layer}"])
                torch.mm(grad, w["fc_self.weight"], out=t[f"grad_self{layer}"])
            return
        torch.mm(agg.t(), grad, out=gw["weight"])
        torch.sum(grad, 0, out=gw["bias"])
        if layer > 1:
            torch.mm(grad, w["weight"].t(), out=t[f"grad_agg{layer}"])

    def _loss(self, t: Mapping[str, Tensor]) -> LossFigures:
        """Cross entropy over the part's training vertices, and its gradient ``grad_h{L}``, scaled so
        that the workers' gradients summed and averaged are those of the graph's mean loss."""
        top = self.model.num_layers
        labels = t["labels"]
        with torch.enable_grad():
            logits = t[f"h{top}"].detach().clone().requires_grad_(True)
            summed = F.cross_entropy(logits, labels, ignore_index=IGNORED_LABEL, reduction="sum")
            (grad,) = torch.autograd.grad(summed * self.loss_scale, logits)
        t[f"grad_h{top}"].copy_(grad)
        train = labels != IGNORED_LABEL
        correct = int((logits.detach()[train].argmax(dim=1) == labels[train]).sum())
        seeds = int(train.sum())
        return LossFigures(float(summed.detach()) if seeds else 0.0, correct, seeds)

    # ---- pieces --------------------------------------------------------------------------------
    def _own_input(self, t: Mapping[str, Tensor], layer: int) -> Tensor:
        """The layer's input on the part's own vertices (the first rows of its sources)."""
        return (t["features"] if layer == 1 else t[f"h{layer - 1}"])[: self.n]

    def _weights(self, flat: Tensor, layer: int) -> dict[str, Tensor]:
        """Views of layer ``layer``'s parameters (or their gradients) in a flat tensor."""
        out, offset = {}, 0
        for name, shape in self.params[layer - 1]:
            size = _numel(shape)
            out[name] = flat[offset : offset + size].view(shape)
            offset += size
        return out

    def _adjacency(self, graph: Tensor, layer: int, num_src: int) -> tuple[Tensor, Tensor]:
        """The layer's normalised adjacency, destinations by sources, and its transpose, built from
        the part's CSR in the arena: SAGE's mean (``1 / in-degree``), GCN's ``both``
        (``in-degree^-1/2 out-degree^-1/2``, degrees within the part's block, as DGL counts them)."""
        crow, col = graph[: self.n + 1], graph[self.n + 1 :]
        in_deg = torch.diff(crow).to(torch.float32).clamp(min=1)
        row = torch.repeat_interleave(torch.arange(self.n, device=graph.device), torch.diff(crow))
        if self.model.layers[layer - 1].kind == "sage":
            values = (1.0 / in_deg)[row]
        else:
            out_deg = torch.bincount(col, minlength=num_src).to(torch.float32).clamp(min=1)
            values = in_deg.pow(-0.5)[row] * out_deg.pow(-0.5)[col]
        with warnings.catch_warnings():  # "sparse CSR support is in beta": it is what we use
            warnings.simplefilter("ignore", UserWarning)
            a = torch.sparse_csr_tensor(crow, col, values, (self.n, num_src), check_invariants=False)
            return a, a.t()


def edge_chunk_sum(out: Tensor, adjacency: Tensor, rows: Tensor) -> None:
    """One streamed edge (sub-)chunk's Scatter-Gather (NeuGraph, paper 001): ``out[r]`` gains the sum
    of the ``rows`` its edges reach. ``adjacency`` is the chunk as it was streamed: ``len(out) + 1``
    pointers over ``out``'s rows (CSC forward, CSR backward), then each edge's position in ``rows``;
    degree normalisations are the caller's (applied per vertex, before and after)."""
    n = out.shape[0]
    pointers, indices = adjacency[: n + 1], adjacency[n + 1 :]
    values = torch.ones(indices.shape[0], dtype=rows.dtype, device=rows.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        a = torch.sparse_csr_tensor(pointers, indices, values, (n, rows.shape[0]), check_invariants=False)
    out += _spmm(a, rows)


def _halo_grad(t: Mapping[str, Tensor], layer: int) -> None:
    """``grad_h{l}``: the part's own share plus the readers' shares at the rows they read."""
    out = t[f"grad_h{layer}"]
    out.copy_(t[f"grad_local{layer}"])
    out.index_add_(0, t["sent_rows"], t[f"grad_readers{layer}"])


def _spmm(a: Tensor, x: Tensor) -> Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return a @ x.contiguous()


def _joined(own: Tensor, halo: Tensor | None) -> Tensor:
    return own if halo is None else torch.cat([own, halo])


def _split(name: str) -> tuple[str, int]:
    """``grad_halo1`` -> ``("grad_halo", 1)``."""
    match = re.match(r"^(.*?)(\d+)$", name)
    if match is None:
        raise RuntimeError(f"no kernel writes tensor {name!r}")
    return match.group(1), int(match.group(2))


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count
