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
    fanouts = [15, 10, 5]

    [training]
    batch_size = 1024
    epochs = 1

    [partition]          # one table per strategy kind; every key but `name`
    name = "metis"       # is a parameter of that strategy
    balance_train = true

Every field carries its help text (``field(metadata={"help": ...})``); the command
line and ``describe_config`` read it from there. Loading validates every value and
names the field and the allowed values on error; it has no side effects.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints

from workbench.errors import ConfigError, UnknownNameError
from workbench.registry import REGISTRIES
from workbench.tomlfile import read_toml


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class GraphConfig:
    name: str = field(metadata=_help("dataset preset, ad-hoc generator spec, or path to a graph file"))
    scale: float | None = field(
        default=None, metadata=_help("size factor for a preset (default: the preset's own)")
    )
    seed: int = field(default=0, metadata=_help("generator seed"))

    def validate(self, where: str) -> None:
        if self.scale is not None and not self.scale > 0:
            raise ConfigError(f"{where}.scale must be positive, got {self.scale}")


@dataclass(frozen=True)
class HardwareConfig:
    name: str = field(metadata=_help("hardware preset (gnnwb hardware list) or path to a TOML file"))
    profile: str | None = field(default=None, metadata=_help("calibrated profile to apply (path)"))


@dataclass(frozen=True)
class ModelConfig:
    name: str = field(
        default="sage", metadata=_help("model family: gcn, sage, gat, gin, commnet, ggnn, resgcn")
    )
    hidden: int = field(default=256, metadata=_help("hidden width"))
    num_layers: int = field(default=2, metadata=_help("number of GNN layers"))
    heads: int = field(default=1, metadata=_help("attention heads (gat)"))
    fanouts: tuple[int, ...] = field(
        default=(),
        metadata=_help("per-layer sampling fanouts, input layer first (DGL order: the seeds use the last)"),
    )

    def validate(self, where: str) -> None:
        from workbench.model import MODEL_FAMILIES

        if self.name not in MODEL_FAMILIES:
            raise ConfigError(
                f"{where}.name: unknown model {self.name!r}; allowed: {', '.join(MODEL_FAMILIES)}"
            )
        for attr in ("hidden", "num_layers", "heads"):
            if getattr(self, attr) < 1:
                raise ConfigError(f"{where}.{attr} must be >= 1, got {getattr(self, attr)}")
        if self.fanouts and len(self.fanouts) != self.num_layers:
            raise ConfigError(f"{where}.fanouts has {len(self.fanouts)} entries for {self.num_layers} layers")
        if any(f < 1 for f in self.fanouts):
            raise ConfigError(f"{where}.fanouts must all be >= 1, got {list(self.fanouts)}")


@dataclass(frozen=True)
class TrainingConfig:
    batch_size: int = field(default=1024, metadata=_help("seed vertices per minibatch"))
    epochs: int = field(default=1, metadata=_help("training epochs"))
    iterations: int | None = field(
        default=None, metadata=_help("stop after this many iterations (quick runs)")
    )
    learning_rate: float = field(default=0.01, metadata=_help("optimizer learning rate"))

    def validate(self, where: str) -> None:
        if self.batch_size < 1 or self.epochs < 1:
            raise ConfigError(f"{where}: batch_size and epochs must be >= 1")
        if self.iterations is not None and self.iterations < 1:
            raise ConfigError(f"{where}.iterations must be >= 1, got {self.iterations}")
        if not self.learning_rate > 0:
            raise ConfigError(f"{where}.learning_rate must be positive, got {self.learning_rate}")


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
    strategies: dict[str, StrategyConfig] = field(default_factory=dict)
    name: str = field(default="run", metadata=_help("run name, used in output folders"))
    seed: int = field(default=0, metadata=_help("seed for every random decision of the run"))

    def strategy(self, kind: str) -> StrategyConfig | None:
        return self.strategies.get(kind)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "seed": self.seed}
        for section in ("graph", "hardware", "model", "training"):
            obj = getattr(self, section)
            out[section] = {
                f.name: _plain(getattr(obj, f.name)) for f in fields(obj) if getattr(obj, f.name) is not None
            }
        for kind, s in self.strategies.items():
            out[kind] = {"name": s.name, **s.params}
        return out


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _check_type(value: Any, hint: Any, where: str) -> Any:
    """Coerce and check a TOML value against a simple type hint (int, float, str, bool, tuple[int, ...], X | None)."""
    args = getattr(hint, "__args__", ())
    if type(None) in args:
        if value is None:
            return None
        hint = next(a for a in args if a is not type(None))
        args = getattr(hint, "__args__", ())
    origin = getattr(hint, "__origin__", None)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where} must be a list, got {value!r}")
        return tuple(_check_type(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, got {value!r}")
        return value
    return value


def _section(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a table")
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
            kwargs[name] = _check_type(data[name], hints[name], f"{where}.{name}")
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
    sections = {"graph", "hardware", "model", "training"}
    top = {"name", "seed"}
    unknown = set(data) - sections - top - set(STRATEGY_KINDS)
    if unknown:
        allowed = ", ".join(sorted(top | sections | set(STRATEGY_KINDS)))
        raise ConfigError(f"{source}: unknown field(s) {', '.join(sorted(unknown))}; allowed: {allowed}")
    for required in ("graph", "hardware"):
        if required not in data:
            raise ConfigError(f"{source}: missing table [{required}]")
    strategies = {}
    for kind in STRATEGY_KINDS:
        if kind not in data:
            continue
        table = data[kind]
        if not isinstance(table, dict) or "name" not in table:
            raise ConfigError(
                f"{source}: [{kind}] needs a 'name' (allowed: {', '.join(REGISTRIES[kind].names())})"
            )
        params = {k: v for k, v in table.items() if k != "name"}
        s = StrategyConfig(kind, str(table["name"]), params)
        if check_strategies:
            try:
                s.build()  # checks the name and every parameter
            except (ConfigError, UnknownNameError) as exc:
                raise ConfigError(f"{source}: [{kind}] {exc}") from None
        strategies[kind] = s
    name = data.get("name", Path(source).stem)
    seed = data.get("seed", 0)
    if not isinstance(name, str):
        raise ConfigError(f"{source}: name must be a string")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"{source}: seed must be an integer, got {seed!r}")
    return RunConfig(
        graph=_section(GraphConfig, data["graph"], f"{source}: graph"),
        hardware=_section(HardwareConfig, data["hardware"], f"{source}: hardware"),
        model=_section(ModelConfig, data.get("model", {}), f"{source}: model"),
        training=_section(TrainingConfig, data.get("training", {}), f"{source}: training"),
        strategies=strategies,
        name=name,
        seed=seed,
    )


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
