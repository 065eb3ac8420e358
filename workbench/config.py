"""Run configurations: a typed, validated tree loaded from TOML.

::

    name = "sage-on-products"
    seed = 0

    [graph]
    name = "products-like"    # a preset, "rmat:n=...,m=...", or a path to a graph file
    scale = 0.01

    [hardware]
    name = "hopgnn-4xa100-10gbe"   # a preset or a path to a hardware TOML file

    [model]
    name = "sage"
    hidden = 256
    num_layers = 3

    [training]
    batch_size = 1024
    epochs = 1
    workers = 4               # one per GPU, in the cluster's order (default: every GPU)

    [cache]
    capacity = "10%"          # per-GPU feature cache: a share of the vertices, a size, or a count

    [partition]          # one table per strategy kind; every key but `name`
    name = "metis"       # is a parameter of that strategy (`gnnwb strategies show KIND NAME`)
    balance_train = true

    [sampling]
    name = "neighbor"
    fanouts = [15, 10, 5]     # fanouts live here, with the sampler: input layer first

    [execution]
    name = "model-centric"

Every field carries its help text (``field(metadata={"help": ...})``); the command
line and ``describe_config`` read it from there. Loading validates every value and
names the field and the allowed values on error; it has no side effects.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints

from workbench.errors import ConfigError, UnknownNameError
from workbench.params import check_value
from workbench.registry import REGISTRIES
from workbench.tomlfile import read_toml
from workbench.validate import INT64_MIN, finite_number, integer, string, table

GRAPH_ORDERS = ("as-is", "degree", "metis")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class GraphConfig:
    name: str = field(metadata=_help("dataset preset, ad-hoc generator spec, or path to a graph file"))
    scale: float | None = field(
        default=None, metadata=_help("size factor for a preset (default: the preset's own)")
    )
    seed: int = field(default=0, metadata=_help("generator seed"))
    order: str = field(
        default="as-is",
        metadata=_help(
            "vertex numbering: 'as-is' (generated graphs are shuffled), 'degree' (highest in-degree "
            "first, as in crawled or sorted data sets): contiguous partitioners see the skew, or 'metis' "
            "(METIS recursive bisection into 64 parts, each part's vertices numbered together: NeuGraph's "
            "preprocessing, so edges gather near the diagonal chunks)"
        ),
    )

    def validate(self, where: str) -> None:
        string(self.name, f"{where}.name", nonempty=True)
        if self.scale is not None:
            finite_number(self.scale, f"{where}.scale", positive=True)
        integer(self.seed, f"{where}.seed", minimum=0)  # numpy takes no negative seed
        if self.order not in GRAPH_ORDERS:
            raise ConfigError(f"{where}.order {self.order!r}; allowed: {', '.join(GRAPH_ORDERS)}")


@dataclass(frozen=True)
class HardwareConfig:
    name: str = field(metadata=_help("hardware preset (gnnwb hardware list) or path to a TOML file"))
    profile: str | None = field(default=None, metadata=_help("calibrated profile to apply (path)"))
    machines: int | None = field(
        default=None,
        metadata=_help("machines of a preset built of identical machines (hopgnn, roc, perlmutter)"),
    )

    def validate(self, where: str) -> None:
        string(self.name, f"{where}.name", nonempty=True)
        if self.profile is not None:
            string(self.profile, f"{where}.profile", nonempty=True)
        if self.machines is not None:
            integer(self.machines, f"{where}.machines", minimum=1)


@dataclass(frozen=True)
class ModelConfig:
    name: str = field(
        default="sage", metadata=_help("model family: gcn, sage, gat, gin, commnet, ggnn, resgcn")
    )
    hidden: int = field(default=256, metadata=_help("hidden width"))
    num_layers: int = field(default=2, metadata=_help("number of GNN layers"))
    heads: int = field(default=1, metadata=_help("attention heads (gat)"))

    def validate(self, where: str) -> None:
        from workbench.model import MODEL_FAMILIES

        if self.name not in MODEL_FAMILIES:
            raise ConfigError(
                f"{where}.name: unknown model {self.name!r}; allowed: {', '.join(MODEL_FAMILIES)}"
            )
        for attr in ("hidden", "num_layers", "heads"):
            if getattr(self, attr) < 1:
                raise ConfigError(f"{where}.{attr} must be >= 1, got {getattr(self, attr)}")


@dataclass(frozen=True)
class TrainingConfig:
    batch_size: int = field(default=1024, metadata=_help("seed vertices per minibatch"))
    epochs: int = field(default=1, metadata=_help("training epochs"))
    iterations: int | None = field(
        default=None, metadata=_help("stop after this many iterations (quick runs)")
    )
    learning_rate: float = field(default=0.01, metadata=_help("optimizer learning rate"))
    optimizer: str = field(
        default="adam", metadata=_help("sgd, momentum or adam: sets the optimizer state kept")
    )
    workers: int | None = field(
        default=None,
        metadata=_help("training workers, one per GPU in the cluster's order (default: every GPU)"),
    )
    seeds: str = field(
        default="partition",
        metadata=_help(
            "where each worker's minibatch roots come from: 'partition' (its part's training vertices, "
            "DistDGL) or 'global' (one shuffle of all training vertices dealt in turn, single-machine DGL)"
        ),
    )

    def validate(self, where: str) -> None:
        from workbench.model import OPTIMIZER_STATES

        for attr in ("batch_size", "epochs"):
            if getattr(self, attr) < 1:
                raise ConfigError(f"{where}.{attr} must be >= 1, got {getattr(self, attr)}")
        if self.iterations is not None and self.iterations < 1:
            raise ConfigError(f"{where}.iterations must be >= 1, got {self.iterations}")
        if not self.learning_rate > 0:
            raise ConfigError(f"{where}.learning_rate must be positive, got {self.learning_rate}")
        if self.optimizer not in OPTIMIZER_STATES:
            raise ConfigError(
                f"{where}.optimizer: unknown optimizer {self.optimizer!r}; allowed: {', '.join(OPTIMIZER_STATES)}"
            )
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"{where}.workers must be >= 1, got {self.workers}")
        if self.seeds not in ("partition", "global"):
            raise ConfigError(f"{where}.seeds {self.seeds!r}; allowed: partition, global")


@dataclass(frozen=True)
class CacheConfig:
    capacity: str | int = field(
        default=0,
        metadata=_help(
            "per-GPU feature cache the placement fills: a share of the vertices ('10%'), "
            "a size ('2GiB'), or a vertex count (default 0: no cache)"
        ),
    )

    def validate(self, where: str) -> None:
        if isinstance(self.capacity, int) and self.capacity < 0:
            raise ConfigError(f"{where}.capacity must be >= 0 vertices, got {self.capacity}")
        if isinstance(self.capacity, str):
            self.vertices(1, 1, where)  # checks the text

    def vertices(self, num_nodes: int, feature_bytes: int, where: str = "cache") -> int:
        """The capacity in vertices for a graph of ``num_nodes`` with ``feature_bytes`` per vertex."""
        from workbench.hardware.units import parse_size

        c = self.capacity
        if isinstance(c, int):
            return c
        text = c.strip()
        if text.endswith("%"):
            try:
                share = float(text[:-1]) / 100.0
            except ValueError:
                raise ConfigError(f"{where}.capacity {c!r}: expected a percentage like '10%'") from None
            if not 0.0 <= share <= 1.0:
                raise ConfigError(f"{where}.capacity {c!r} must lie between 0% and 100%")
            return int(share * num_nodes)
        return int(parse_size(text, f"{where}.capacity")) // max(feature_bytes, 1)


@dataclass(frozen=True)
class StrategyConfig:
    """One strategy: its registered name and its parameters."""

    kind: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Any:
        return REGISTRIES[self.kind].create(self.name, **self.params)


STRATEGY_KINDS = tuple(REGISTRIES)


@dataclass(frozen=True)
class RunConfig:
    graph: GraphConfig
    hardware: HardwareConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    strategies: dict[str, StrategyConfig] = field(default_factory=dict)
    name: str = field(default="run", metadata=_help("run name, used in output folders"))
    seed: int = field(default=0, metadata=_help("seed for every random decision of the run"))

    def strategy(self, kind: str) -> StrategyConfig | None:
        return self.strategies.get(kind)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "seed": self.seed}
        for section in ("graph", "hardware", "model", "training", "cache"):
            obj = getattr(self, section)
            out[section] = {
                f.name: _plain(getattr(obj, f.name)) for f in fields(obj) if getattr(obj, f.name) is not None
            }
        for kind, s in self.strategies.items():
            out[kind] = {"name": s.name, **s.params}
        return out


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _section(cls: type, data: Any, where: str) -> Any:
    table(data, where)
    hints = get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = set(data) - set(known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(known)}"
        )
    kwargs = {}
    for name, f in known.items():
        if name in data:
            kwargs[name] = check_value(data[name], hints[name], f"{where}.{name}")
        elif f.default is MISSING and f.default_factory is MISSING:  # type: ignore[misc]
            raise ConfigError(f"{where}: missing field {name!r} ({f.metadata.get('help', '')})")
    obj = cls(**kwargs)
    if hasattr(obj, "validate"):
        obj.validate(where)
    return obj


def config_from_dict(
    data: dict[str, Any], source: str = "<config>", *, check_strategies: bool = True
) -> RunConfig:
    """Validate a parsed TOML table into a :class:`RunConfig`."""
    table(data, source)
    _check_numbers(data, f"{source}: ")
    sections = {"graph", "hardware", "model", "training", "cache"}
    top = {"name", "seed"}
    unknown = set(data) - sections - top - set(STRATEGY_KINDS)
    if unknown:
        allowed = ", ".join(sorted(top | sections | set(STRATEGY_KINDS)))
        raise ConfigError(f"{source}: unknown field(s) {', '.join(sorted(unknown))}; allowed: {allowed}")
    for required in ("graph", "hardware"):
        if required not in data:
            raise ConfigError(f"{source}: missing table [{required}]")
    if isinstance(data.get("model"), dict) and "fanouts" in data["model"]:
        raise ConfigError(
            f"{source}: [model] fanouts: fanouts live in [sampling], with the sampler that uses them"
        )
    strategies = {}
    for kind in STRATEGY_KINDS:
        if kind not in data:
            continue
        chosen = table(data[kind], f"{source}: [{kind}]")
        if "name" not in chosen:
            raise ConfigError(
                f"{source}: [{kind}] needs a 'name' (allowed: {', '.join(REGISTRIES[kind].names())})"
            )
        params = {k: v for k, v in chosen.items() if k != "name"}
        s = StrategyConfig(kind, string(chosen["name"], f"{source}: [{kind}] name", nonempty=True), params)
        if check_strategies:
            try:
                s.build()  # checks the name and every parameter
            except (ConfigError, UnknownNameError) as exc:
                raise ConfigError(f"{source}: [{kind}] {exc}") from None
        strategies[kind] = s
    name = string(data.get("name", Path(source).stem), f"{source}: name", nonempty=True)
    seed = integer(data.get("seed", 0), f"{source}: seed", minimum=0)  # numpy takes no negative seed
    cfg = RunConfig(
        graph=_section(GraphConfig, data["graph"], f"{source}: graph"),
        hardware=_section(HardwareConfig, data["hardware"], f"{source}: hardware"),
        model=_section(ModelConfig, data.get("model", {}), f"{source}: model"),
        training=_section(TrainingConfig, data.get("training", {}), f"{source}: training"),
        cache=_section(CacheConfig, data.get("cache", {}), f"{source}: cache"),
        strategies=strategies,
        name=name,
        seed=seed,
    )
    sampling = strategies.get("sampling")
    layered = None
    if sampling is not None:  # an empty list is the sampler's to refuse, not a missing one
        layered = next((sampling.params[k] for k in ("fanouts", "layer_sizes") if k in sampling.params), None)
    if layered is not None and len(layered) != cfg.model.num_layers:
        raise ConfigError(
            f"{source}: [sampling] has {len(layered)} layers ({list(layered)}) for a "
            f"{cfg.model.num_layers}-layer model ([model] num_layers)"
        )
    return cfg


def _check_numbers(value: Any, where: str) -> None:
    """Refuse NaN, infinity and integers beyond int64 anywhere in a document, naming the key:
    no field or strategy parameter has a use for them, and a NaN would reach the outputs."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_numbers(item, f"{where}{'.' if not where.endswith(' ') else ''}{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_numbers(item, f"{where}[{i}]")
    elif isinstance(value, float):
        finite_number(value, where)
    elif isinstance(value, int) and not isinstance(value, bool):
        integer(value, where, minimum=INT64_MIN)


def load_config(path: str | Path, *, check_strategies: bool = True) -> RunConfig:
    data = read_toml(path, "configuration file")
    return config_from_dict(data, str(path), check_strategies=check_strategies)


def describe_config(cls: type = RunConfig, prefix: str = "") -> list[tuple[str, str]]:
    """(field path, help) for every documented field, for help texts and docs."""
    out = []
    for f in fields(cls):
        t = f.type if not isinstance(f.type, str) else get_type_hints(cls)[f.name]
        if is_dataclass(t):
            out.extend(describe_config(t, f"{prefix}{f.name}."))
        elif "help" in f.metadata:
            out.append((f"{prefix}{f.name}", f.metadata["help"]))
    return out
