"""GNN model specs and their per-layer cost features.

A :class:`ModelSpec` is a description, not a network: layer kinds, dimensions,
fanouts. Execution schemes ask it for the cost features of each layer on a concrete
block (``vertices``, ``edges``, ``in_dim``, ``out_dim``, ``flops``, ``bytes``), and
both executors time tasks from those features. The real executor builds the matching
PyTorch/DGL modules from the same spec.

FLOP counts are forward-pass multiply-adds x 2, per layer kind:

============ =====================================================================
gcn          aggregate ``E * d_in`` + transform ``2 * V_dst * d_in * d_out``
sage (mean)  aggregate ``E * d_in`` + two transforms ``2 * 2 * V_dst * d_in * d_out``
gat          transform ``2 * V_src * d_in * h * d_out`` + attention ``E * h * (2 * d_out + 3)``
             + aggregate ``E * h * d_out``
gin          aggregate ``E * d_in`` + 2-layer MLP ``2 * V_dst * (d_in + d_out) * d_out``
commnet      mean communication ``E * d_in`` + two transforms ``2 * 2 * V_dst * d_in * d_out``
ggnn         message transform ``2 * V_src * d_in * d_out`` + aggregate ``E * d_out``
             + GRU ``3 * 2 * 2 * V_dst * d_out * d_out`` (``d_in == d_out``)
============ =====================================================================

A residual connection adds ``V_dst * d_out`` (identity) or ``2 * V_dst * d_in * d_out``
(linear projection when dims differ: ROC section 7.5). Backward costs about twice
the forward FLOPs; executors use ``BACKWARD_FLOP_RATIO``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.errors import ConfigError, UnknownNameError

LAYER_KINDS = ("gcn", "sage", "gat", "gin", "commnet", "ggnn")
BACKWARD_FLOP_RATIO = 2.0
# Tensors of optimizer state per parameter: plain SGD none, momentum one, Adam two (m and v).
OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2}
DTYPE_BYTES = 4
INDEX_BYTES = 8


@dataclass(frozen=True)
class LayerSpec:
    kind: str
    in_dim: int
    out_dim: int
    heads: int = 1
    residual: bool = False

    def __post_init__(self) -> None:
        if self.kind not in LAYER_KINDS:
            raise ConfigError(f"layer kind {self.kind!r} unknown; allowed: {', '.join(LAYER_KINDS)}")
        if self.in_dim < 1 or self.out_dim < 1 or self.heads < 1:
            raise ConfigError(f"{self.kind} layer: in_dim, out_dim and heads must be >= 1")
        if self.kind == "ggnn" and self.in_dim != self.out_dim:
            raise ConfigError("ggnn layer: the GRU update needs in_dim == out_dim")

    @property
    def output_width(self) -> int:
        """Activations per vertex this layer writes (heads are concatenated)."""
        return self.out_dim * self.heads

    def param_count(self) -> int:
        i, o, h = self.in_dim, self.out_dim, self.heads
        n = {
            "gcn": i * o + o,
            "sage": 2 * i * o + o,
            "gat": h * (i * o + 2 * o) + h * o,
            "gin": i * o + o + o * o + o + 1,
            "commnet": 2 * i * o + o,
            "ggnn": i * o + o + 3 * (2 * o * o + 2 * o),
        }[self.kind]
        if self.residual and i != self.output_width:
            n += i * self.output_width
        return n

    def forward_flops(self, num_src: int, num_dst: int, num_edges: int) -> float:
        i, o, h, e, vs, vd = self.in_dim, self.out_dim, self.heads, num_edges, num_src, num_dst
        flops = {
            "gcn": e * i + 2.0 * vd * i * o,
            "sage": e * i + 4.0 * vd * i * o,
            "gat": 2.0 * vs * i * h * o + e * h * (2.0 * o + 3.0) + e * h * o,
            "gin": e * i + 2.0 * vd * (i + o) * o,
            "commnet": e * i + 4.0 * vd * i * o,
            "ggnn": 2.0 * vs * i * o + e * o + 12.0 * vd * o * o,
        }[self.kind]
        if self.residual:
            flops += vd * self.output_width if i == self.output_width else 2.0 * vd * i * self.output_width
        return float(flops)

    def cost_features(self, num_src: int, num_dst: int, num_edges: int) -> dict[str, float]:
        """Cost features of the forward pass on a block (the compute task's ``features``)."""
        moved = (
            num_src * self.in_dim * DTYPE_BYTES  # read source activations
            + num_edges * (INDEX_BYTES + self.in_dim * DTYPE_BYTES)  # gather along edges
            + num_dst * self.output_width * DTYPE_BYTES  # write outputs
            + self.param_count() * DTYPE_BYTES
        )
        return {
            "vertices": float(num_dst),
            "src_vertices": float(num_src),
            "edges": float(num_edges),
            "in_dim": float(self.in_dim),
            "out_dim": float(self.output_width),
            "flops": self.forward_flops(num_src, num_dst, num_edges),
            "bytes": float(moved),
        }

    def activation_bytes(self, num_dst: int) -> int:
        """Bytes of this layer's output activations (what the next layer reads)."""
        return num_dst * self.output_width * DTYPE_BYTES

    def saved_for_backward_bytes(self, num_src: int, num_dst: int, num_edges: int) -> int:
        """Bytes autograd keeps from this layer's forward pass until its backward pass.

        What each layer's backward needs, counted as PyTorch keeps it: the input of each
        linear transform (the aggregated neighbours, and the vertex's own representation
        for SAGE/CommNet), the output the activation's gradient reads, GAT's projected
        source features and per-edge attention logits and weights (per head), GG-NN's
        messages and three GRU gates. The graph structure (indices) is not counted: it
        is the block, which lives as long as the minibatch anyway.
        """
        i, o, h, e, vs, vd = self.in_dim, self.out_dim, self.heads, num_edges, num_src, num_dst
        values = {
            "gcn": vd * i + vd * o,
            "sage": 2 * vd * i + vd * o,
            "gat": vs * h * o + 2 * e * h + vd * h * o,
            "gin": vd * i + 2 * vd * o,
            "commnet": 2 * vd * i + vd * o,
            "ggnn": vs * o + 3 * vd * o + vd * o,
        }[self.kind]
        if self.residual:
            values += vd * self.output_width
        return int(values) * DTYPE_BYTES

    def backward_cost_features(self, num_src: int, num_dst: int, num_edges: int) -> dict[str, float]:
        """Cost features of the backward pass: the forward's, with ``BACKWARD_FLOP_RATIO`` times
        the FLOPs and bytes (gradients with respect to the inputs and to the weights)."""
        features = self.cost_features(num_src, num_dst, num_edges)
        features["flops"] *= BACKWARD_FLOP_RATIO
        features["bytes"] *= BACKWARD_FLOP_RATIO
        return features


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: tuple[LayerSpec, ...]
    fanouts: tuple[int, ...] = ()
    description: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.layers:
            raise ConfigError(f"model {self.name!r}: needs at least one layer")
        for a, b in zip(self.layers, self.layers[1:], strict=False):
            if a.output_width != b.in_dim:
                raise ConfigError(
                    f"model {self.name!r}: a {a.kind} layer outputs {a.output_width} but the next expects {b.in_dim}"
                )
        if self.fanouts and len(self.fanouts) != len(self.layers):
            raise ConfigError(
                f"model {self.name!r}: {len(self.fanouts)} fanouts for {len(self.layers)} layers"
            )
        if any(f < 1 for f in self.fanouts):
            raise ConfigError(f"model {self.name!r}: fanouts must be >= 1, got {list(self.fanouts)}")

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def in_dim(self) -> int:
        return self.layers[0].in_dim

    @property
    def out_dim(self) -> int:
        return self.layers[-1].output_width

    def param_count(self) -> int:
        return sum(layer.param_count() for layer in self.layers)

    def param_bytes(self) -> int:
        """Bytes of the weights: what a model migration moves with the gradients."""
        return self.param_count() * DTYPE_BYTES

    def gradient_bytes(self) -> int:
        """Bytes of the weights' gradients: what a data-parallel all-reduce moves per device."""
        return self.param_count() * DTYPE_BYTES

    def optimizer_state_bytes(self, optimizer: str = "adam") -> int:
        """Bytes of the optimizer's state: ``OPTIMIZER_STATES`` tensors the size of the weights."""
        if optimizer not in OPTIMIZER_STATES:
            raise ConfigError(f"unknown optimizer {optimizer!r}; allowed: {', '.join(OPTIMIZER_STATES)}")
        return OPTIMIZER_STATES[optimizer] * self.param_count() * DTYPE_BYTES

    def training_state_bytes(self, optimizer: str = "adam") -> int:
        """Weights, their gradients and the optimizer state: what each data-parallel GPU keeps resident."""
        return self.param_bytes() + self.gradient_bytes() + self.optimizer_state_bytes(optimizer)

    def layer_costs(self, block_sizes: list[tuple[int, int, int]]) -> list[dict[str, float]]:
        """Cost features per layer for ``(num_src, num_dst, num_edges)`` of each block, input layer first."""
        if len(block_sizes) != self.num_layers:
            raise ConfigError(f"model {self.name!r}: {len(block_sizes)} blocks for {self.num_layers} layers")
        return [layer.cost_features(*size) for layer, size in zip(self.layers, block_sizes, strict=True)]


# Each builder: (in_dim, hidden, num_classes, num_layers, heads) -> layers.
def _stack(
    kind: str, in_dim: int, hidden: int, classes: int, layers: int, heads: int = 1
) -> tuple[LayerSpec, ...]:
    dims = [in_dim] + [hidden] * (layers - 1) + [classes]
    out = []
    for k in range(layers):
        last = k == layers - 1
        h = 1 if last else heads
        d_in = dims[k] if k == 0 else dims[k] * (heads if kind == "gat" else 1)
        out.append(LayerSpec(kind, d_in, dims[k + 1], heads=h if kind == "gat" else 1))
    return tuple(out)


def _ggnn(in_dim: int, hidden: int, classes: int, layers: int, heads: int = 1) -> tuple[LayerSpec, ...]:
    # GG-NN propagates at a fixed width: input and output projections are folded into
    # the first and last GRU steps' widths by using hidden everywhere except a final GCN readout.
    if in_dim != hidden:
        body = [LayerSpec("gcn", in_dim, hidden)] + [
            LayerSpec("ggnn", hidden, hidden) for _ in range(layers - 2)
        ]
    else:
        body = [LayerSpec("ggnn", hidden, hidden) for _ in range(layers - 1)]
    return tuple(body + [LayerSpec("gcn", hidden, classes)])


def _deep_residual_gcn(
    in_dim: int, hidden: int, classes: int, layers: int, heads: int = 1
) -> tuple[LayerSpec, ...]:
    """ROC section 7.5: stacked GCN layers with a residual connection around every layer."""
    dims = [in_dim] + [hidden] * (layers - 1) + [classes]
    return tuple(LayerSpec("gcn", dims[k], dims[k + 1], residual=True) for k in range(layers))


MODEL_FAMILIES = {
    "gcn": ("GCN (Kipf & Welling)", lambda *a: _stack("gcn", *a)),
    "sage": ("GraphSAGE with mean aggregation", lambda *a: _stack("sage", *a)),
    "gat": ("GAT with multi-head attention (heads concatenated)", lambda *a: _stack("gat", *a)),
    "gin": ("GIN with 2-layer MLPs", lambda *a: _stack("gin", *a)),
    "commnet": ("CommNet (communication by neighbor mean)", lambda *a: _stack("commnet", *a)),
    "ggnn": ("gated graph NN (GRU updates) with a GCN readout", _ggnn),
    "resgcn": ("deep residual GCN (ROC section 7.5)", _deep_residual_gcn),
}


def build_model(
    name: str,
    in_dim: int,
    num_classes: int,
    *,
    hidden: int = 256,
    num_layers: int = 2,
    heads: int = 1,
    fanouts: list[int] | tuple[int, ...] = (),
) -> ModelSpec:
    """A model of family ``name`` (see ``MODEL_FAMILIES``)."""
    if name not in MODEL_FAMILIES:
        raise UnknownNameError(f"unknown model {name!r}; valid: {', '.join(MODEL_FAMILIES)}")
    if num_layers < 1 or (name == "ggnn" and num_layers < 2):
        raise ConfigError(
            f"model {name!r}: num_layers must be >= {2 if name == 'ggnn' else 1}, got {num_layers}"
        )
    if min(in_dim, num_classes, hidden, heads) < 1:
        raise ConfigError(f"model {name!r}: in_dim, num_classes, hidden and heads must be >= 1")
    description, builder = MODEL_FAMILIES[name]
    return ModelSpec(
        name, builder(in_dim, hidden, num_classes, num_layers, heads), tuple(fanouts), description
    )
