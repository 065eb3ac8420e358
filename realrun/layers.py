"""GNN layers in plain PyTorch that compute what DGL's layers compute, on any torch device.

DGL's PyPI wheel is a CPU build, so on a GPU the real executor cannot hand a block to
``dgl.nn``. These layers take the workbench's :class:`~workbench.strategies.sampling.base.Block`
as torch tensors (:class:`TensorBlock`: ``edge_src``, ``edge_dst``, ``num_src``,
``num_dst``) and reproduce DGL 2.1's layers operation for operation, with the same
parameter names, shapes and initialisations, so a ``state_dict`` moves between the two:

==========  ====================================================================
``GraphConv``  ``dgl.nn.GraphConv`` (norm ``both``, ``right``, ``left``, ``none``);
               like DGL it multiplies by the weight before aggregating when
               ``in_feats > out_feats``, after otherwise
``SAGEConv``   ``dgl.nn.SAGEConv(aggregator_type="mean")``
``GATConv``    ``dgl.nn.GATConv`` (no dropout, no built-in residual: the stack adds
               residuals the same way for every layer kind)
``GINConv``    ``dgl.nn.GINConv(mlp, "sum", learn_eps=True)`` with the two-layer MLP
               that :mod:`workbench.model` counts
==========  ====================================================================

Aggregation (DGL's ``update_all(copy_u, sum)``) is a sparse-dense product: the block's
adjacency as a CSR matrix (destinations by sources), built once per block and cached,
with its transpose for the backward pass, so both directions are one CSR x dense
product (about 12x faster than gathering along edges and scattering with ``index_add``
on this CPU; cuSPARSE on a GPU). GAT's attention-weighted sum, which needs gradients
for the per-edge weights too, is a CSR product per head forward and a sampled dense
product (SDDMM) backward, so no ``edges x heads x width`` message tensor is ever built.

:func:`build_layers` builds a :class:`GNNStack` from a :class:`~workbench.model.ModelSpec`;
:func:`build_dgl_layers` builds the same stack from DGL's layers (through
:func:`workbench.dgl_loader.load_dgl`) with the same weights, for comparison. The
stack runs either kind of block: it only calls ``block.num_dst_nodes()``, which both
:class:`TensorBlock` and a DGL block have.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from workbench.errors import ConfigError
from workbench.model import LayerSpec, ModelSpec
from workbench.strategies.sampling.base import Block

GCN_NORMS = ("both", "right", "left", "none")
# The layer kinds with a plain-PyTorch twin of a DGL layer; the others fail with ConfigError.
SUPPORTED_KINDS = ("gcn", "sage", "gat", "gin")


# ---- blocks as tensors -------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class TensorBlock:
    """A block's edges as torch tensors on one device (the workbench's conventions:
    ``edge_src`` indexes the block's sources, ``edge_dst`` its destinations, and the
    destinations are the first ``num_dst`` sources)."""

    edge_src: Tensor
    edge_dst: Tensor
    num_src: int
    num_dst: int
    edge_weight: Tensor | None = None

    def __post_init__(self) -> None:
        if self.edge_src.shape != self.edge_dst.shape or self.edge_src.dim() != 1:
            raise ValueError(
                f"edge_src {tuple(self.edge_src.shape)} and edge_dst {tuple(self.edge_dst.shape)} "
                "must be 1-D and of one length"
            )
        if self.num_dst > self.num_src:
            raise ValueError(f"num_dst {self.num_dst} > num_src {self.num_src}: destinations prefix sources")
        if self.edge_weight is not None and self.edge_weight.shape[0] != self.edge_src.shape[0]:
            raise ValueError(f"edge_weight has {self.edge_weight.shape[0]} values for {self.num_edges} edges")

    @classmethod
    def from_block(cls, block: Block, device: torch.device | str = "cpu") -> TensorBlock:
        weight = None
        if block.edge_weight is not None:
            weight = torch.as_tensor(np.asarray(block.edge_weight, dtype=np.float32), device=device)
        return cls(
            torch.as_tensor(np.asarray(block.edge_src, dtype=np.int64), device=device),
            torch.as_tensor(np.asarray(block.edge_dst, dtype=np.int64), device=device),
            block.num_src,
            block.num_dst,
            weight,
        )

    def to(self, device: torch.device | str, non_blocking: bool = False) -> TensorBlock:
        def move(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(device, non_blocking=non_blocking)

        return TensorBlock(
            move(self.edge_src), move(self.edge_dst), self.num_src, self.num_dst, move(self.edge_weight)
        )

    @property
    def device(self) -> torch.device:
        return self.edge_src.device

    @property
    def num_edges(self) -> int:
        return int(self.edge_src.shape[0])

    # DGL's block API, so one stack runs either kind of block.
    def num_src_nodes(self) -> int:
        return self.num_src

    def num_dst_nodes(self) -> int:
        return self.num_dst

    @cached_property
    def in_degrees(self) -> Tensor:
        """Edges into each destination (multi-edges counted), int64."""
        return torch.bincount(self.edge_dst, minlength=self.num_dst)

    @cached_property
    def out_degrees(self) -> Tensor:
        """Edges out of each source (multi-edges counted), int64: DGL's ``block.out_degrees()``."""
        return torch.bincount(self.edge_src, minlength=self.num_src)

    @cached_property
    def pattern(self) -> EdgePattern:
        """The block's sparsity pattern (built once, on the block's device)."""
        return EdgePattern.of(self.edge_dst, self.edge_src, self.num_dst, self.num_src)

    @cached_property
    def adjacency(self) -> tuple[Tensor, Tensor]:
        """The unweighted adjacency as CSR matrices: ``(A, A^T)`` with ``A`` of shape
        ``(num_dst, num_src)``; a multi-edge is one entry holding its multiplicity."""
        return self.pattern.matrices(None)

    @cached_property
    def weighted_adjacency(self) -> tuple[Tensor, Tensor]:
        """:attr:`adjacency` with ``edge_weight`` as its values (multi-edges' weights summed)."""
        if self.edge_weight is None:
            raise ValueError("this block has no edge weights")
        return self.pattern.matrices(self.edge_weight)


def _sparse_csr(crow: Tensor, col: Tensor, values: Tensor, shape: tuple[int, int]) -> Tensor:
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta": it is what we use
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


def _crow(rows: Tensor, n_rows: int) -> Tensor:
    crow = torch.zeros(n_rows + 1, dtype=torch.int64, device=rows.device)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=n_rows), 0)
    return crow


def _argsort(key: Tensor) -> Tensor:
    """An order that sorts ``key``; equal keys in any order (they are one entry). On the CPU
    numpy sorts: torch 2.13's CPU sort takes ~190 ms on 133k unsorted int64 keys here,
    numpy's ~1.7 ms."""
    if key.device.type == "cpu":
        return torch.from_numpy(np.argsort(key.numpy()))
    return torch.sort(key)[1]


def edge_sum(rows: Tensor, cols: Tensor, values: Tensor, n_rows: int, x: Tensor) -> Tensor:
    """``out[r] = sum of values[e] * x[cols[e]]`` over the edges ``e`` with ``rows[e] == r``:
    ``(n_rows, *x.shape[1:])``, as one CSR x dense product (no autograd). Gathering ``x[cols]``
    and ``index_add_``-ing it materialises an edge-wide copy of the rows twice: on the CPU, 10,000
    edges of 128 floats took 5.0 ms that way against 1.5-2.6 ms here. A repeated (row, column)
    pair is two entries of the matrix, which the product adds."""
    order = _argsort(rows * x.shape[0] + cols)  # by row, then column, as cuSPARSE expects
    rows, cols = rows[order], cols[order]
    a = _sparse_csr(_crow(rows, n_rows), cols, values[order].to(x.dtype), (n_rows, x.shape[0]))
    flat = x.reshape(x.shape[0], -1).contiguous()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return (a @ flat).reshape(n_rows, *x.shape[1:])


@dataclass(frozen=True, eq=False)
class EdgePattern:
    """A block's edges as the entries of a ``(n_rows, n_cols)`` CSR matrix and of its
    transpose: ``crow``/``col`` (entries sorted by row, then column, multi-edges merged
    into one entry), ``entry_of_edge`` (each edge's entry), ``crow_t``/``col_t`` (the
    transpose's) and ``t_order`` (the transpose's entry ``k`` is entry ``t_order[k]``).

    Building it costs two sorts of the edges' linear indices (~4 ms for 133k edges here);
    COO ``coalesce`` and a conversion to CSR cost several times more."""

    crow: Tensor
    col: Tensor
    entry_of_edge: Tensor
    crow_t: Tensor
    col_t: Tensor
    t_order: Tensor
    shape: tuple[int, int]

    @classmethod
    def of(cls, rows: Tensor, cols: Tensor, n_rows: int, n_cols: int) -> EdgePattern:
        key = rows * n_cols + cols
        order = _argsort(key)
        key = key[order]
        entry_of_edge = torch.empty_like(order)
        if key.shape[0] > 1 and bool((key[1:] == key[:-1]).any()):  # multi-edges: one entry each
            key, inverse = torch.unique_consecutive(key, return_inverse=True)
            entry_of_edge[order] = inverse
        else:
            entry_of_edge[order] = torch.arange(key.shape[0], device=key.device)
        row, col = key // n_cols, key % n_cols
        t_order = _argsort(col * n_rows + row)
        return cls(_crow(row, n_rows), col, entry_of_edge, _crow(col, n_cols), row[t_order], t_order,
                   (n_rows, n_cols))  # fmt: skip

    @property
    def nnz(self) -> int:
        return int(self.col.shape[0])

    def entry_values(self, edge_values: Tensor | None, dtype: torch.dtype = torch.float32) -> Tensor:
        """Per-edge values (``(E, *)``; ones when None) summed into their entries: ``(nnz, *)``."""
        if edge_values is None:  # each entry's multiplicity
            return torch.bincount(self.entry_of_edge, minlength=self.nnz).to(dtype)
        out = edge_values.new_zeros((self.nnz, *edge_values.shape[1:]))
        return out.index_add_(0, self.entry_of_edge, edge_values)

    def matrices(
        self, edge_values: Tensor | None, dtype: torch.dtype = torch.float32
    ) -> tuple[Tensor, Tensor]:
        """``(A, A^T)`` with per-edge ``edge_values`` (``(E,)``) as the entries."""
        vals = self.entry_values(None if edge_values is None else edge_values.reshape(-1).to(dtype), dtype)
        return (
            _sparse_csr(self.crow, self.col, vals, self.shape),
            _sparse_csr(self.crow_t, self.col_t, vals[self.t_order], self.shape[::-1]),
        )


class _CSRMatmul(torch.autograd.Function):
    """``A @ x`` with a fixed sparse ``A``; backward is ``A^T @ grad`` with a precomputed
    CSR transpose, so neither direction relies on autograd through a sparse layout."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, a_t: Tensor, x: Tensor) -> Tensor:
        ctx.a_t = a_t
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return a @ x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, None, Tensor | None]:
        if not ctx.needs_input_grad[2]:
            return None, None, None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return None, None, ctx.a_t @ grad.contiguous()


class _EdgeWeightedSpMM(torch.autograd.Function):
    """``out[v, h] = sum over edges e = u->v of w[e, h] * x[u, h]`` for ``w`` ``(E, H)`` and
    ``x`` ``(num_src, H, D)``, differentiable in both, without an ``E x H x D`` message
    tensor: per head one CSR product forward, and backward one CSR product for ``x``'s
    gradient and one sampled dense product (SDDMM, ``torch.sparse.sampled_addmm``) for
    ``w``'s: ``dL/dw[e, h] = <dL/dout[v, h], x[u, h]>``."""

    @staticmethod
    def forward(ctx: Any, pattern: EdgePattern, w: Tensor, x: Tensor) -> Tensor:
        vals = pattern.entry_values(w)  # (nnz, H)
        ctx.pattern = pattern
        ctx.save_for_backward(vals, x)
        heads = [
            _sparse_csr(pattern.crow, pattern.col, vals[:, h].contiguous(), pattern.shape)
            @ x[:, h, :].contiguous()
            for h in range(x.shape[1])
        ]
        return torch.stack(heads, dim=1)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, Tensor | None, Tensor | None]:
        pattern: EdgePattern = ctx.pattern
        vals, x = ctx.saved_tensors
        grad_w = grad_x = None
        if ctx.needs_input_grad[2]:
            vals_t = vals[pattern.t_order]
            grad_x = torch.stack(
                [
                    _sparse_csr(pattern.crow_t, pattern.col_t, vals_t[:, h].contiguous(), pattern.shape[::-1])
                    @ grad[:, h, :].contiguous()
                    for h in range(x.shape[1])
                ],
                dim=1,
            )
        if ctx.needs_input_grad[1]:
            ones = torch.ones(pattern.nnz, dtype=x.dtype, device=x.device)
            mask = _sparse_csr(pattern.crow, pattern.col, ones, pattern.shape)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                per_entry = torch.stack(
                    [
                        torch.sparse.sampled_addmm(
                            mask, grad[:, h, :].contiguous(), x[:, h, :].t().contiguous(), beta=0.0
                        ).values()
                        for h in range(x.shape[1])
                    ],
                    dim=1,
                )
            grad_w = per_entry[pattern.entry_of_edge]
        return None, grad_w, grad_x


def edge_weighted_sum(block: TensorBlock, weight: Tensor, feat: Tensor) -> Tensor:
    """Per-head weighted sum over in-edges: ``weight`` ``(E, H)``, ``feat`` ``(num_src, H, D)``
    -> ``(num_dst, H, D)``; GAT's ``update_all(u_mul_e, sum)`` with gradients for both."""
    if block.num_edges == 0:
        return feat.new_zeros((block.num_dst, *feat.shape[1:])) + 0 * weight.sum()
    return _EdgeWeightedSpMM.apply(block.pattern, weight, feat)


def aggregate_sum(block: TensorBlock, feat: Tensor, edge_weight: Tensor | None = None) -> Tensor:
    """``sum over edges u->v of w_e * feat[u]`` for every destination ``v``: DGL's
    ``update_all(copy_u or u_mul_e, sum)``. ``feat`` is ``(num_src, *)``; the result
    ``(num_dst, *)``. An unweighted sum, or one whose weights need no gradient, is one
    CSR x dense product; weights that need a gradient go through :func:`edge_weighted_sum`."""
    if feat.shape[0] != block.num_src:
        raise ValueError(f"features have {feat.shape[0]} rows, the block {block.num_src} sources")
    tail = feat.shape[1:]
    if edge_weight is not None and edge_weight.requires_grad:
        flat = feat.reshape(block.num_src, 1, -1)
        out = edge_weighted_sum(block, edge_weight.reshape(-1, 1).to(feat.dtype), flat)
        return out.reshape(block.num_dst, *tail)
    if edge_weight is None:
        a, a_t = block.adjacency
    elif edge_weight is block.edge_weight:
        a, a_t = block.weighted_adjacency
    else:
        a, a_t = block.pattern.matrices(edge_weight, feat.dtype)
    if a.dtype != feat.dtype:
        a, a_t = a.to(feat.dtype), a_t.to(feat.dtype)
    flat = feat.reshape(block.num_src, -1).contiguous()
    return _CSRMatmul.apply(a, a_t, flat).reshape(block.num_dst, *tail)


def aggregate_mean(block: TensorBlock, feat: Tensor, edge_weight: Tensor | None = None) -> Tensor:
    """DGL's ``update_all(copy_u or u_mul_e, mean)``: the sum over in-edges divided by the
    in-degree; a destination with no in-edges gets zeros."""
    total = aggregate_sum(block, feat, edge_weight)
    deg = block.in_degrees.clamp(min=1).to(total.dtype)
    return total / deg.reshape(-1, *([1] * (total.dim() - 1)))


def edge_softmax(block: TensorBlock, logits: Tensor) -> Tensor:
    """Softmax of per-edge ``logits`` (``(E, *)``) over each destination's in-edges, as
    DGL's ``edge_softmax``: subtract the per-destination maximum, exponentiate, divide by
    the sum. The maximum is a constant shift of each group, so it is detached."""
    idx = block.edge_dst.reshape(-1, *([1] * (logits.dim() - 1))).expand_as(logits)
    top = logits.new_full((block.num_dst, *logits.shape[1:]), -math.inf)
    top = top.scatter_reduce(0, idx, logits.detach(), reduce="amax", include_self=True)
    ex = torch.exp(logits - top[block.edge_dst])
    denom = logits.new_zeros((block.num_dst, *logits.shape[1:])).index_add(0, block.edge_dst, ex)
    return ex / denom[block.edge_dst]


# ---- layers --------------------------------------------------------------------------
class GraphConv(nn.Module):
    """``dgl.nn.GraphConv(in_feats, out_feats, norm, allow_zero_in_degree=True)``.

    ``norm="both"``: ``D_in^-1/2 A D_out^-1/2 X W + b`` (degrees clamped to at least 1, the
    out-degrees those of the block's sources); ``"right"``: ``D_in^-1 A X W + b``.
    """

    def __init__(self, in_feats: int, out_feats: int, norm: str = "both", bias: bool = True) -> None:
        super().__init__()
        if norm not in GCN_NORMS:
            raise ConfigError(f"GraphConv norm {norm!r} unknown; allowed: {', '.join(GCN_NORMS)}")
        self._in_feats, self._out_feats, self._norm = in_feats, out_feats, norm
        self.weight = nn.Parameter(torch.empty(in_feats, out_feats))
        self.bias = nn.Parameter(torch.empty(out_feats)) if bias else None
        self.reset_parameters()

    @property
    def norm(self) -> str:
        """The degree normalisation (``GCN_NORMS``): what a layer made from this one's weights needs."""
        return self._norm

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        nn.init.xavier_uniform_(self.weight, generator=generator)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, block: TensorBlock, feat: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        feat_src = feat
        if self._norm in ("left", "both"):
            deg = block.out_degrees.to(feat.dtype).clamp(min=1)
            norm = deg.pow(-0.5) if self._norm == "both" else 1.0 / deg
            feat_src = feat_src * norm.reshape(-1, *([1] * (feat.dim() - 1)))
        if self._in_feats > self._out_feats:  # DGL's order: transform first when it shrinks
            rst = aggregate_sum(block, torch.matmul(feat_src, self.weight), edge_weight)
        else:
            rst = torch.matmul(aggregate_sum(block, feat_src, edge_weight), self.weight)
        if self._norm in ("right", "both"):
            deg = block.in_degrees.to(feat.dtype).clamp(min=1)
            norm = deg.pow(-0.5) if self._norm == "both" else 1.0 / deg
            rst = rst * norm.reshape(-1, *([1] * (rst.dim() - 1)))
        if self.bias is not None:
            rst = rst + self.bias
        return rst


class SAGEConv(nn.Module):
    """``dgl.nn.SAGEConv(in_feats, out_feats, "mean")``: ``fc_self(h_v) + fc_neigh(mean_u h_u)``
    (``fc_neigh`` before the mean when ``in_feats > out_feats``, as DGL does)."""

    def __init__(self, in_feats: int, out_feats: int, bias: bool = True) -> None:
        super().__init__()
        self._in_feats, self._out_feats = in_feats, out_feats
        self.fc_neigh = nn.Linear(in_feats, out_feats, bias=False)
        self.fc_self = nn.Linear(in_feats, out_feats, bias=bias)
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_uniform_(self.fc_self.weight, gain=gain, generator=generator)
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=gain, generator=generator)
        if self.fc_self.bias is not None:  # nn.Linear's default, which DGL keeps
            bound = 1.0 / math.sqrt(self._in_feats)
            nn.init.uniform_(self.fc_self.bias, -bound, bound, generator=generator)

    def forward(self, block: TensorBlock, feat: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        h_self = feat[: block.num_dst]
        if self._in_feats > self._out_feats:
            h_neigh = aggregate_mean(block, self.fc_neigh(feat), edge_weight)
        else:
            h_neigh = self.fc_neigh(aggregate_mean(block, feat, edge_weight))
        return self.fc_self(h_self) + h_neigh


class GATConv(nn.Module):
    """``dgl.nn.GATConv(in_feats, out_feats, num_heads, allow_zero_in_degree=True)``; output
    ``(num_dst, num_heads, out_feats)``. A destination without in-edges gets the bias."""

    def __init__(
        self, in_feats: int, out_feats: int, num_heads: int, negative_slope: float = 0.2, bias: bool = True
    ) -> None:
        super().__init__()
        self._num_heads, self._out_feats = num_heads, out_feats
        self.negative_slope = negative_slope
        self.fc = nn.Linear(in_feats, out_feats * num_heads, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.bias = nn.Parameter(torch.empty(num_heads * out_feats)) if bias else None
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain, generator=generator)
        nn.init.xavier_normal_(self.attn_l, gain=gain, generator=generator)
        nn.init.xavier_normal_(self.attn_r, gain=gain, generator=generator)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, block: TensorBlock, feat: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        heads, out = self._num_heads, self._out_feats
        feat_src = self.fc(feat).view(feat.shape[0], heads, out)
        feat_dst = feat_src[: block.num_dst]
        el = (feat_src * self.attn_l).sum(dim=-1).unsqueeze(-1)  # (num_src, heads, 1)
        er = (feat_dst * self.attn_r).sum(dim=-1).unsqueeze(-1)  # (num_dst, heads, 1)
        e = F.leaky_relu(el[block.edge_src] + er[block.edge_dst], self.negative_slope)
        a = edge_softmax(block, e)  # (E, heads, 1)
        if edge_weight is not None:  # DGL scales the attention by the edge weight
            a = a * edge_weight.reshape(-1, 1, 1)
        rst = edge_weighted_sum(block, a.squeeze(-1), feat_src)
        if self.bias is not None:
            rst = rst + self.bias.view(1, heads, out)
        return rst


class GINConv(nn.Module):
    """``dgl.nn.GINConv(apply_func, "sum", learn_eps=True)``: ``mlp((1 + eps) h_v + sum_u h_u)``
    with ``apply_func = Linear(in, out), ReLU, Linear(out, out)``."""

    def __init__(self, in_feats: int, out_feats: int, init_eps: float = 0.0) -> None:
        super().__init__()
        self.apply_func = _gin_mlp(in_feats, out_feats)
        self.eps = nn.Parameter(torch.tensor([float(init_eps)]))

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        for module in self.apply_func:
            if isinstance(module, nn.Linear):
                _reset_linear(module, generator)

    def forward(self, block: TensorBlock, feat: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        rst = (1 + self.eps) * feat[: block.num_dst] + aggregate_sum(block, feat, edge_weight)
        return self.apply_func(rst)


def _gin_mlp(in_feats: int, out_feats: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_feats, out_feats), nn.ReLU(), nn.Linear(out_feats, out_feats))


def _reset_linear(module: nn.Linear, generator: torch.Generator | None) -> None:
    """``nn.Linear``'s default initialisation, drawn from ``generator``."""
    nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
    if module.bias is not None:
        bound = 1.0 / math.sqrt(module.in_features)
        nn.init.uniform_(module.bias, -bound, bound, generator=generator)


# ---- the stack -------------------------------------------------------------------------
class GNNStack(nn.Module):
    """A model's layers, input layer first; ReLU between layers, none after the last.

    GAT's heads are concatenated (``flatten(1)``); the last layer of a model built by
    :func:`workbench.model.build_model` has one head. A residual layer adds its
    destinations' input (identity when the widths agree, else a bias-free linear
    projection, as :mod:`workbench.model` counts it) before the activation.
    ``convs[l]`` is any module called as ``conv(block, h, edge_weight=...)``: one of ours
    on a :class:`TensorBlock`, or DGL's on a DGL block.
    """

    def __init__(self, model: ModelSpec, convs: Sequence[nn.Module]) -> None:
        super().__init__()
        if len(convs) != model.num_layers:
            raise ConfigError(f"model {model.name!r}: {len(convs)} layers built for {model.num_layers}")
        self.spec = model
        self.convs = nn.ModuleList(convs)
        self.residuals = nn.ModuleList(
            nn.Linear(s.in_dim, s.output_width, bias=False)
            if s.residual and s.in_dim != s.output_width
            else nn.Identity()
            for s in model.layers
        )

    def layer_forward(self, index: int, block: Any, h: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        """Layer ``index`` alone (conv, residual, activation): for schemes that time or
        move layers one at a time."""
        spec = self.spec.layers[index]
        out = self.convs[index](block, h, edge_weight=edge_weight)
        if spec.kind == "gat":
            out = out.flatten(1)
        if spec.residual:
            out = out + self.residuals[index](h[: block.num_dst_nodes()])
        if index < len(self.convs) - 1:
            out = F.relu(out)
        return out

    def forward(
        self, blocks: Sequence[Any], x: Tensor, edge_weights: Sequence[Tensor | None] | None = None
    ) -> Tensor:
        """Logits of ``blocks[-1]``'s destinations from ``x``, the input features of
        ``blocks[0]``'s sources. ``edge_weights`` per block (default: each
        :class:`TensorBlock`'s own ``edge_weight``, none for a DGL block)."""
        if len(blocks) != len(self.convs):
            raise ValueError(f"{len(blocks)} blocks for a {len(self.convs)}-layer model")
        h = x
        for i, block in enumerate(blocks):
            # A TensorBlock carries its sampler's weights; DGL blocks get them through edge_weights.
            weight = getattr(block, "edge_weight", None) if edge_weights is None else edge_weights[i]
            h = self.layer_forward(i, block, h, weight)
        return h


def _torch_conv(spec: LayerSpec, gcn_norm: str) -> nn.Module:
    if spec.kind == "gcn":
        return GraphConv(spec.in_dim, spec.out_dim, norm=gcn_norm)
    if spec.kind == "sage":
        return SAGEConv(spec.in_dim, spec.out_dim)
    if spec.kind == "gat":
        return GATConv(spec.in_dim, spec.out_dim, spec.heads)
    if spec.kind == "gin":
        return GINConv(spec.in_dim, spec.out_dim)
    raise ConfigError(
        f"layer kind {spec.kind!r} has no real-execution layer; supported: {', '.join(SUPPORTED_KINDS)}"
    )


def build_layers(model: ModelSpec, *, seed: int = 0, gcn_norm: str = "both") -> GNNStack:
    """The plain-PyTorch stack of ``model``, on the CPU (move it with ``.to(device)``),
    initialised from ``seed`` as DGL initialises each layer. Layer kinds without a
    twin here (``commnet``, ``ggnn``) raise :class:`ConfigError`."""
    if gcn_norm not in GCN_NORMS:
        raise ConfigError(f"gcn_norm {gcn_norm!r} unknown; allowed: {', '.join(GCN_NORMS)}")
    stack = GNNStack(model, [_torch_conv(spec, gcn_norm) for spec in model.layers])
    generator = torch.Generator().manual_seed(seed)
    for conv, residual in zip(stack.convs, stack.residuals, strict=True):
        conv.reset_parameters(generator)
        if isinstance(residual, nn.Linear):
            _reset_linear(residual, generator)
    return stack


def build_dgl_layers(model: ModelSpec, *, seed: int = 0, gcn_norm: str = "both") -> GNNStack:
    """The same stack made of ``dgl.nn`` layers, holding exactly the weights that
    :func:`build_layers` gives for ``seed`` (the parameter names agree, so the state dict
    loads as is). Run it on DGL blocks (:func:`to_dgl_block`); CPU only with DGL's wheel."""
    from workbench.dgl_loader import load_dgl

    dglnn = load_dgl().nn
    convs: list[nn.Module] = []
    for spec in model.layers:
        if spec.kind == "gcn":
            convs.append(dglnn.GraphConv(spec.in_dim, spec.out_dim, norm=gcn_norm, allow_zero_in_degree=True))
        elif spec.kind == "sage":
            convs.append(dglnn.SAGEConv(spec.in_dim, spec.out_dim, "mean"))
        elif spec.kind == "gat":
            convs.append(dglnn.GATConv(spec.in_dim, spec.out_dim, spec.heads, allow_zero_in_degree=True))
        elif spec.kind == "gin":
            convs.append(dglnn.GINConv(_gin_mlp(spec.in_dim, spec.out_dim), "sum", learn_eps=True))
        else:
            _torch_conv(spec, gcn_norm)  # raises the ConfigError that names the supported kinds
    stack = GNNStack(model, convs)
    stack.load_state_dict(build_layers(model, seed=seed, gcn_norm=gcn_norm).state_dict())
    return stack


def to_dgl_block(block: Block | TensorBlock) -> Any:
    """A DGL block (CPU) with the same edges, in the same order, as ``block``."""
    from workbench.dgl_loader import load_dgl

    dgl = load_dgl()
    if isinstance(block, Block):
        block = TensorBlock.from_block(block)
    return dgl.create_block(
        (block.edge_src.cpu(), block.edge_dst.cpu()),
        num_src_nodes=block.num_src,
        num_dst_nodes=block.num_dst,
    )


# ---- which layers a real run uses ------------------------------------------------------------------
LAYER_CHOICES = ("auto", "dgl", "torch")


@dataclass(frozen=True)
class LayerBackend:
    """The layer implementation a real run trains with, and the blocks it takes.

    ``dgl``: ``dgl.nn`` layers on DGL blocks (the PyPI wheel's kernels are CPU-only);
    ``torch``: the plain-PyTorch twins on :class:`TensorBlock` s, for any device. Both
    start from the same weights for a seed (:func:`build_dgl_layers`).
    """

    name: str

    def build(self, model: ModelSpec, seed: int) -> GNNStack:
        return build_dgl_layers(model, seed=seed) if self.name == "dgl" else build_layers(model, seed=seed)

    def block(self, block: Block | TensorBlock, device: torch.device | str) -> Any:
        """``block`` as these layers take it."""
        if self.name == "dgl":
            return to_dgl_block(block)
        tensors = block if isinstance(block, TensorBlock) else TensorBlock.from_block(block, device)
        # Built here, with the block (DGL builds its graph in to_dgl_block): otherwise the first
        # layer's forward would time the sparse pattern's sorts, which the microbenchmark and DGL's
        # layers keep out of their timings.
        _ = tensors.pattern
        return tensors


def edge_weight(block: Block | TensorBlock, device: torch.device | str) -> Tensor | None:
    """The sampler's edge weights of ``block`` (None for unweighted samplers), as a tensor on ``device``."""
    if isinstance(block, TensorBlock):
        return block.edge_weight
    if block.edge_weight is None:
        return None
    return torch.as_tensor(np.asarray(block.edge_weight, dtype=np.float32), device=device)


def layer_backend(choice: str, device: torch.device | str) -> LayerBackend:
    """``auto``: DGL's layers where DGL runs (the CPU, when it loads), the plain-PyTorch ones
    elsewhere; ``dgl`` insists (a one-line error where it cannot run); ``torch`` never uses DGL."""
    if choice not in LAYER_CHOICES:
        raise ConfigError(f"--layers {choice!r}: allowed {', '.join(LAYER_CHOICES)}")
    if choice == "torch":
        return LayerBackend("torch")
    why = _why_no_dgl(torch.device(device))
    if why is None:
        return LayerBackend("dgl")
    if choice == "dgl":
        raise ConfigError(f"--layers dgl: {why}; use --layers torch (the plain-PyTorch twins)")
    return LayerBackend("torch")


def _why_no_dgl(device: torch.device) -> str | None:
    if device.type != "cpu":
        return f"DGL's PyPI wheel has no {device.type} kernels"
    from workbench.dgl_loader import DGLUnavailableError, load_dgl

    try:
        load_dgl()
    except DGLUnavailableError as exc:
        return str(exc)
    return None
