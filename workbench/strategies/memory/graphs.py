"""The operator graph of one full-graph training step of a GNN layer stack on one partition.

:func:`operator_graph` turns a :class:`~workbench.model.ModelSpec` and a partition's
sizes into the :class:`~workbench.strategies.memory.base.OperatorGraph` that memory
policies schedule. Operators follow ROC's Fig. 3 (gather, then linear + activation
fused into one operator), forward then the loss then backward; each is one GPU
kernel's worth of work with its cost features. Tensors (fp32 values of
``DTYPE_BYTES``, indices of ``INDEX_BYTES``), for a partition of ``N`` vertices
that aggregate over ``E`` in-edges from ``N_src`` source vertices (``N`` own plus
``N_src - N`` halo vertices owned by other partitions):

=============== ================================ ===========================================
``graph``        ``(N + 1 + E) * INDEX_BYTES``     the partition's in-edge CSR (host)
``features``     ``N_src * d_0 * DTYPE_BYTES``     input features of own and halo vertices (host)
``labels``       ``N * INDEX_BYTES``               (host)
``W{l}``         the layer's parameters            (host; ``W{l}a``/``W{l}b`` for GIN's two linears)
``halo{l}``      ``(N_src - N) * d_l``             layer ``l``'s output on halo vertices (host:
                                                   other partitions wrote it), when ``N_src > N``
``agg{l}``       ``N * d_{l-1}``                   gathered neighbours of layer ``l``
``h{l}``         ``N * d_l``                       layer ``l``'s output (``h{L}``: the logits)
``grad_*``       the size of what they differentiate  gradients; ``grad_W{l}`` are step outputs
``sent_rows``    ``S * INDEX_BYTES``               positions of the part's rows in other partitions'
                                                   halos, reader by reader (host), when ``S > 0``
``grad_readers{l}`` ``S * d_l``                    the gradients of those rows that the readers
                                                   wrote back (host: other partitions wrote them)
=============== ================================ ===========================================

``S`` (``num_sent``) counts the part's rows that other partitions read, once per reader.

Operators, layer ``l = 1..L`` (``layer = l - 1`` in the plan):

* ``gather{l}`` reads ``graph``, ``h{l-1}`` (``features`` for ``l = 1``) and
  ``halo{l-1}``; writes ``agg{l}``.
* ``update{l}`` (linear + activation; none on the last layer) reads ``agg{l}``,
  ``W{l}`` (and ``h{l-1}`` for SAGE/CommNet's self term and for a residual layer);
  writes ``h{l}``. GIN has ``mlp{l}a`` (linear + ReLU to ``mid{l}``) and ``mlp{l}b``.
* ``loss`` (softmax cross-entropy) reads ``h{L}`` and ``labels``; writes ``grad_h{L}``.
* ``update{l}.bwd`` reads ``grad_h{l}``, what the forward saved (``agg{l}``, ``W{l}``,
  ``h{l}`` for the activation's mask, ``h{l-1}`` for a self term); writes
  ``grad_W{l}`` and, for ``l > 1``, ``grad_agg{l}`` (and ``grad_self{l}``).
* ``gather{l}.bwd`` (``l > 1``; the input features need no gradient) reads ``graph``
  and ``grad_agg{l}`` (plus ``grad_self{l}``, and ``grad_h{l}`` for a residual
  layer's skip path); writes ``grad_h{l-1}`` and ``grad_halo{l-1}``, the halo
  vertices' share that goes back to their owners.
* ``halo_grad{l-1}`` (``S > 0``: other partitions read the part's rows): then ``gather{l}.bwd``
  writes ``grad_local{l-1}``, its own aggregation's share, and this operator reads it with
  ``sent_rows`` and ``grad_readers{l-1}`` and writes ``grad_h{l-1}``: the readers' shares added
  in at the rows they read, so that the layer below differentiates the whole graph's loss.

Every operator reads the previous one's output, so the step is a chain: one
execution order, and ``dpmm``'s state space is only its cached sets.
GAT and GG-NN layers are not modelled here (their attention and gate tensors would
need their own operators); asking for them is a :class:`ConfigError`.
"""

from __future__ import annotations

from workbench.errors import ConfigError
from workbench.model import BACKWARD_FLOP_RATIO, DTYPE_BYTES, INDEX_BYTES, LayerSpec, ModelSpec
from workbench.strategies.memory.base import Operator, OperatorGraph, Tensor

SUPPORTED_KINDS = ("gcn", "gin", "sage", "commnet")


def operator_graph(
    model: ModelSpec,
    num_vertices: int,
    num_edges: int,
    *,
    num_src: int | None = None,
    num_sent: int = 0,
    name: str | None = None,
) -> OperatorGraph:
    """One training step of ``model`` on a partition of ``num_vertices`` vertices and
    ``num_edges`` in-edges whose sources span ``num_src`` vertices (default: no halo), of which
    other partitions read ``num_sent`` rows (counted once per reader; default none)."""
    src = num_vertices if num_src is None else num_src
    sizes = (
        ("num_vertices", num_vertices),
        ("num_edges", num_edges),
        ("num_src", src),
        ("num_sent", num_sent),
    )
    for label, value in sizes:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"operator_graph: {label} must be a whole number >= 0, got {value!r}")
    if num_vertices < 1:
        raise ConfigError("operator_graph: the partition needs at least one vertex")
    if src < num_vertices:
        raise ConfigError(
            f"operator_graph: num_src ({src}) counts the partition's own {num_vertices} vertices and its halo; "
            "it cannot be smaller"
        )
    for layer in model.layers:
        if layer.kind not in SUPPORTED_KINDS:
            raise ConfigError(
                f"operator_graph: {layer.kind} layers are not modelled; supported: {', '.join(SUPPORTED_KINDS)}"
            )
    return _Builder(model, num_vertices, num_edges, src, num_sent, name or f"{model.name}-step").build()


class _Builder:
    def __init__(self, model: ModelSpec, n: int, e: int, src: int, sent: int, name: str) -> None:
        self.model, self.n, self.e, self.src, self.sent, self.name = model, n, e, src, sent, name
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Operator] = []

    def tensor(self, name: str, nbytes: int, carries: str) -> str:
        self.tensors.setdefault(name, Tensor(name, int(nbytes), carries))
        return name

    def act(self, name: str, rows: int, width: int, carries: str = "activations") -> str:
        return self.tensor(name, rows * width * DTYPE_BYTES, carries)

    def op(
        self,
        name: str,
        reads: list[str],
        writes: list[str],
        phase: str,
        layer: int | None,
        flops: float,
        edges: int = 0,
        in_dim: int = 0,
        out_dim: int = 0,
    ) -> None:
        moved = sum(self.tensors[t].bytes for t in (*reads, *writes))
        # A gather also reads a source row and an index per edge, as LayerSpec.cost_features
        # counts them: the two cost paths of one layer then time it alike.
        moved += edges * (INDEX_BYTES + in_dim * DTYPE_BYTES)
        features = {
            "vertices": float(self.n),
            "edges": float(edges),
            "in_dim": float(in_dim),
            "out_dim": float(out_dim),
            "flops": float(flops),
            "bytes": float(moved),
        }
        self.ops.append(Operator(name, tuple(reads), tuple(writes), phase, layer, features))

    def build(self) -> OperatorGraph:
        n, e, halo = self.n, self.e, self.src - self.n
        layers = self.model.layers
        last = len(layers)
        graph = self.tensor("graph", (n + 1 + e) * INDEX_BYTES, "adjacency")
        prev = self.act("features", self.src, layers[0].in_dim, "features")
        prev_halo: str | None = None
        for l, layer in enumerate(layers, start=1):  # noqa: E741 (l is the paper's layer index)
            d_in = layer.in_dim
            reads = [graph, prev] + ([prev_halo] if prev_halo else [])
            agg = self.act(f"agg{l}", n, d_in)
            self.op(
                f"gather{l}", reads, [agg], "forward", l - 1, e * d_in, edges=e, in_dim=d_in, out_dim=d_in
            )
            out = self.act(f"h{l}", n, layer.output_width)
            self.forward_update(l, layer, agg, prev, out, l == last)
            if halo and l < last:
                prev_halo = self.act(f"halo{l}", halo, layer.output_width)
            prev = out
        labels = self.tensor("labels", n * INDEX_BYTES, "labels")
        grad = self.act(f"grad_h{last}", n, layers[-1].output_width, "gradients")
        classes = layers[-1].output_width
        self.op(
            "loss",
            [prev, labels],
            [grad],
            "forward",
            None,
            5.0 * n * classes,
            in_dim=classes,
            out_dim=classes,
        )
        for l in range(last, 0, -1):  # noqa: E741
            layer = layers[l - 1]
            into = self.backward_update(l, layer, grad, l == last)
            if l == 1:
                break
            d_in = layer.in_dim
            reads = [graph, *into]
            if layer.residual:
                reads.append(grad)  # the skip path's gradient adds to the gathered one
                if d_in != layer.output_width:
                    reads.append(f"W{l}")
            own = f"grad_local{l - 1}" if self.sent else f"grad_h{l - 1}"
            grad_prev = self.act(own, n, d_in, "gradients")
            writes = [grad_prev] + ([self.act(f"grad_halo{l - 1}", halo, d_in, "gradients")] if halo else [])
            self.op(
                f"gather{l}.bwd",
                reads,
                writes,
                "backward",
                l - 1,
                e * d_in,
                edges=e,
                in_dim=d_in,
                out_dim=d_in,
            )
            grad = self.halo_gradients(l - 1, d_in, grad_prev) if self.sent else grad_prev
        return OperatorGraph(tuple(self.ops), tuple(self.tensors.values()), self.name)

    def halo_gradients(self, layer: int, width: int, local: str) -> str:
        """``halo_grad{layer}``: the readers' gradients of the part's rows added into its own
        (``local``); returns the whole gradient, ``grad_h{layer}``."""
        rows = self.tensor("sent_rows", self.sent * INDEX_BYTES, "adjacency")
        readers = self.act(f"grad_readers{layer}", self.sent, width, "gradients")
        whole = self.act(f"grad_h{layer}", self.n, width, "gradients")
        self.op(
            f"halo_grad{layer}", [local, rows, readers], [whole], "backward", layer,
            self.sent * width, in_dim=width, out_dim=width,
        )  # fmt: skip
        return whole

    # ---- the transform half of a layer, forward and backward ------------------------
    def weights(self, l: int, layer: LayerSpec) -> list[str]:  # noqa: E741
        params = layer.param_count() * DTYPE_BYTES
        if layer.kind == "gin":
            first = (layer.in_dim * layer.out_dim + layer.out_dim) * DTYPE_BYTES
            return [self.tensor(f"W{l}a", first, "model"), self.tensor(f"W{l}b", params - first, "model")]
        return [self.tensor(f"W{l}", params, "model")]

    def self_term(self, layer: LayerSpec) -> bool:
        return layer.kind in ("sage", "commnet") or layer.residual

    def forward_update(self, l: int, layer: LayerSpec, agg: str, prev: str, out: str, last: bool) -> None:  # noqa: E741
        n, d_in, d_out = self.n, layer.in_dim, layer.output_width
        flops = layer.forward_flops(n, n, 0)  # the transform part: aggregation is gather's
        w = self.weights(l, layer)
        if layer.kind == "gin":
            mid = self.act(f"mid{l}", n, layer.out_dim)
            self.op(
                f"mlp{l}a",
                [agg, w[0]],
                [mid],
                "forward",
                l - 1,
                2.0 * n * d_in * d_out,
                in_dim=d_in,
                out_dim=d_out,
            )
            reads = [mid, w[1]] + ([prev] if layer.residual else [])
            self.op(
                f"mlp{l}b",
                reads,
                [out],
                "forward",
                l - 1,
                2.0 * n * d_out * d_out,
                in_dim=d_out,
                out_dim=d_out,
            )
            return
        reads = [agg, *w] + ([prev] if self.self_term(layer) else [])
        self.op(f"update{l}", reads, [out], "forward", l - 1, flops, in_dim=d_in, out_dim=d_out)

    def backward_update(self, l: int, layer: LayerSpec, grad: str, last: bool) -> list[str]:  # noqa: E741
        """Emit the transform's backward; return the gradients gather{l}.bwd reads."""
        n, d_in, d_out = self.n, layer.in_dim, layer.output_width
        w = [f"W{l}a", f"W{l}b"] if layer.kind == "gin" else [f"W{l}"]
        mask = [] if last else [f"h{l}"]  # the activation's derivative reads its output
        grad_w = [self.tensor(f"grad_{x}", self.tensors[x].bytes, "gradients") for x in w]
        flops = BACKWARD_FLOP_RATIO * layer.forward_flops(n, n, 0)
        if layer.kind == "gin":
            grad_mid = self.act(f"grad_mid{l}", n, layer.out_dim, "gradients")
            self.op(
                f"mlp{l}b.bwd", [grad, f"mid{l}", w[1], *mask], [grad_mid, grad_w[1]], "backward", l - 1,
                BACKWARD_FLOP_RATIO * 2.0 * n * d_out * d_out, in_dim=d_out, out_dim=d_out,
            )  # fmt: skip
            grad, mask, w, grad_w = grad_mid, [f"mid{l}"], [w[0]], [grad_w[0]]
            flops = BACKWARD_FLOP_RATIO * 2.0 * n * d_in * d_out
        reads = [grad, f"agg{l}", *w, *mask]
        into: list[str] = []
        if l > 1:
            into.append(self.act(f"grad_agg{l}", n, d_in, "gradients"))
            if layer.kind in ("sage", "commnet"):
                into.append(self.act(f"grad_self{l}", n, d_in, "gradients"))
        if layer.kind in ("sage", "commnet") or (layer.residual and d_in != d_out):
            reads.append(
                f"h{l - 1}" if l > 1 else "features"
            )  # the self term's or projection's weight gradient
        name = f"mlp{l}a.bwd" if layer.kind == "gin" else f"update{l}.bwd"
        self.op(name, reads, [*into, *grad_w], "backward", l - 1, flops, in_dim=d_out, out_dim=d_in)
        return into
