"""Figures a paper published, as a file ``gnnwb calibrate --published`` fits a testbed to.

A published-figures file is TOML::

    paper = "003"
    title = "HopGNN: DGL's time breakdown (Observation I)"

    [testbed]                  # the cluster the profile describes
    hardware = "hopgnn-4xa100-10gbe"
    machines = 4               # optional

    [fit]
    parameters = ["transfer_overhead.gather_remote", "cost.sample.cpu.per_edge"]
    start = { "transfer_overhead.gather_remote" = 1e-3 }   # where the testbed's value is 0

    [settings.dgl-sage]        # a run configuration, as `gnnwb sim CONFIG` reads it
    graph = { name = "products-like", scale = 0.05 }
    ...
    [settings.dgl-gat]         # another, as a named setting with changes
    base = "dgl-sage"
    model = { name = "gat", heads = 2 }
    [settings.from-file]
    config = "../../examples/configs/sage-products-hopgnn.toml"   # relative to this file

    [[figures]]
    setting = "dgl-sage"
    quantity = "share"
    phases = ["gather_remote"]
    value = [0.44, 0.83]       # a number, or a range [low, high]
    source = "section 3.1, Observation I"
    headline = false           # headline figures are never fitted: held out and reported
    held_out = false           # true: not fitted either, reported beside the headline ones
    use = true                 # false: the workbench cannot compute it; reason says why
    reason = ""

A setting without ``[hardware]`` runs on the testbed. Quantities (:data:`QUANTITIES`) are
what a simulated run gives. Parameters (:data:`PARAMETER_FORMS`) are a few of the
testbed's: cost-model coefficients per phase and device model, a link kind's bandwidth
or latency, a phase's fixed cost per transfer. Every bad entry raises
:class:`~workbench.errors.ConfigError` naming the file and the entry (``figures[3]``).
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.costmodel import COEFFICIENT_FIELDS
from workbench import validate
from workbench.errors import ConfigError, UnknownNameError, WorkbenchError
from workbench.plan import PHASES
from workbench.tomlfile import read_toml

# quantity -> what it is (the file's vocabulary; the fit computes each from a simulated run)
QUANTITIES = {
    "epoch_s": "the simulated epoch time (s)",
    "iteration_s": "the epoch time divided by its iterations (s)",
    "phase_s": "busy seconds per epoch of `phases`, summed over workers and divided by their number (s)",
    "share": "busy seconds of `phases` over the busy seconds of every phase, both summed over workers",
    "bytes": "bytes per epoch that `phases` move, summed over workers",
    "speedup": "the epoch time of `baseline` (another setting) over this setting's",
    "phase_ratio": "busy seconds of `phases` in `baseline` (another setting) over this setting's",
}
NEEDS_PHASES = ("phase_s", "share", "bytes", "phase_ratio")
NEEDS_BASELINE = ("speedup", "phase_ratio")
PARAMETER_FORMS = (
    "cost.<phase>.<device model>.<coefficient>: a cost-model coefficient of one phase on one device model "
    "('cpu' for the host, a GPU model such as 'A100-40GB', or 'default'); coefficient 'scale' multiplies "
    "all of them (the phase's speed, whatever its features)",
    "link.<kind>.bandwidth or link.<kind>.latency: every link of that kind (bytes/s, s)",
    "transfer_overhead.<phase>: the fixed seconds before each transfer of that phase moves a byte",
    "phases or link kinds joined by '+' (cost.forward+backward.P100.scale, link.pcie+pcie-uplink.bandwidth) "
    "share one value: one thing the figures can identify where they cannot tell its parts apart",
)
# A number read off a paper's figure or text carries about this much relative error: the
# tolerance of a figure given as one value (log scale).
POINT_TOLERANCE = math.log(1.1)
_TOP = frozenset({"paper", "title", "testbed", "fit", "settings", "figures", "notes"})
_FIGURE_FIELDS = frozenset(
    {
        "id",
        "setting",
        "quantity",
        "phases",
        "baseline",
        "value",
        "source",
        "headline",
        "held_out",
        "use",
        "reason",
        "note",
    }
)


@dataclass(frozen=True)
class Figure:
    """One published number: where it was measured, what it is, and how the fit treats it."""

    index: int
    id: str
    setting: str
    quantity: str
    value: tuple[float, float]  # (low, high); equal for one value
    source: str
    phases: tuple[str, ...] = ()
    baseline: str = ""
    headline: bool = False
    held_out: bool = False
    use: bool = True
    reason: str = ""
    note: str = ""

    @property
    def fitted(self) -> bool:
        """Whether the fit uses it: used, and neither a headline nor held out."""
        return self.use and not self.headline and not self.held_out

    @property
    def target(self) -> float:
        """What the fit aims at: the value, or a range's geometric midpoint."""
        return math.sqrt(self.value[0] * self.value[1])

    @property
    def tolerance(self) -> float:
        """A range's half-width on the log scale, never below :data:`POINT_TOLERANCE`."""
        return max(POINT_TOLERANCE, 0.5 * math.log(self.value[1] / self.value[0]))

    def value_text(self) -> str:
        low, high = self.value
        return f"{low:.4g}" if low == high else f"{low:.4g}-{high:.4g}"


@dataclass(frozen=True)
class Parameter:
    """A testbed parameter the fit may change: ``cost``, ``link`` or ``transfer_overhead``."""

    name: str
    family: str
    parts: tuple[str, ...]  # the name's parts after the family; the first may join several by '+'

    @property
    def targets(self) -> tuple[str, ...]:
        """The phases (cost, transfer_overhead) or link kinds (link) that share this value."""
        return tuple(self.parts[0].split("+"))


@dataclass
class PublishedFigures:
    """A parsed figures file: its testbed, settings (run configuration tables), figures and parameters."""

    path: Path
    sha256: str
    paper: str
    title: str
    hardware: str
    machines: int | None
    settings: dict[str, dict[str, Any]]
    figures: list[Figure]
    parameters: list[Parameter]
    start: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def fitted(self) -> list[Figure]:
        return [f for f in self.figures if f.fitted]

    def held_out(self) -> list[Figure]:
        return [f for f in self.figures if f.use and not f.fitted]

    def unused(self) -> list[Figure]:
        return [f for f in self.figures if not f.use]


def load_published(path: str | Path, *, require_fit: bool = True) -> PublishedFigures:
    """Read and check a figures file; ``require_fit`` refuses one with nothing to fit."""
    p = validate.existing_file(path, "published-figures file")
    raw = p.read_bytes()
    data = read_toml(p, "published-figures file")
    src = str(p)
    unknown = set(data) - _TOP
    if unknown:
        raise ConfigError(
            f"{src}: unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_TOP))}"
        )
    testbed = validate.table(data.get("testbed"), f"{src}: [testbed]") if "testbed" in data else None
    if testbed is None:
        raise ConfigError(f"{src}: missing table [testbed] (hardware = a preset or hardware file)")
    hardware = validate.string(testbed.get("hardware"), f"{src}: testbed.hardware", nonempty=True)
    machines = testbed.get("machines")
    if machines is not None:
        machines = validate.integer(machines, f"{src}: testbed.machines", minimum=1)
    settings = _settings(data.get("settings", {}), hardware, machines, p)
    figures = [
        _figure(item, i, settings, f"{src}: figures[{i}]")
        for i, item in enumerate(validate.array(data.get("figures", []), f"{src}: figures"))
    ]
    _check_unique_ids(figures, src)
    fit = validate.table(data.get("fit", {}), f"{src}: [fit]")
    parameters = [
        parse_parameter(name, f"{src}: fit.parameters[{i}]")
        for i, name in enumerate(validate.array(fit.get("parameters", []), f"{src}: fit.parameters"))
    ]
    start = {
        validate.string(k, f"{src}: fit.start"): validate.finite_number(
            v, f"{src}: fit.start.{k}", positive=True
        )
        for k, v in validate.table(fit.get("start", {}), f"{src}: fit.start").items()
    }
    for name in start:
        if name not in {q.name for q in parameters}:
            raise ConfigError(f"{src}: fit.start.{name}: not one of fit.parameters")
    if require_fit:
        if not any(f.fitted for f in figures):
            raise ConfigError(
                f"{src}: no non-headline figure to fit (every figure is a headline, held out or not used)"
            )
        if not parameters:
            raise ConfigError(f"{src}: [fit] parameters is empty: name the testbed parameters to fit")
    notes = [
        validate.string(n, f"{src}: notes") for n in validate.array(data.get("notes", []), f"{src}: notes")
    ]
    return PublishedFigures(
        p,
        hashlib.sha256(raw).hexdigest(),
        str(data.get("paper", "")),
        str(data.get("title", p.stem)),
        hardware,
        machines,
        settings,
        figures,
        parameters,
        start,
        notes,
    )


def _settings(raw: Any, hardware: str, machines: int | None, path: Path) -> dict[str, dict[str, Any]]:
    """Each named setting as a whole run configuration table (``base`` and ``config`` resolved)."""
    src = str(path)
    tables = validate.table(raw, f"{src}: settings")
    out: dict[str, dict[str, Any]] = {}

    def resolve(name: str, trail: tuple[str, ...]) -> dict[str, Any]:
        if name in out:
            return out[name]
        where = f"{src}: settings.{name}"
        if name in trail:
            raise ConfigError(f"{where}: base chain loops ({' -> '.join([*trail, name])})")
        table = dict(validate.table(tables[name], where))
        base: dict[str, Any] = {}
        if "base" in table:
            parent = validate.string(table.pop("base"), f"{where}.base")
            if parent not in tables:
                raise ConfigError(
                    f"{where}.base: no setting {parent!r}; defined: {', '.join(sorted(tables))}"
                )
            base = copy.deepcopy(resolve(parent, (*trail, name)))
        if "config" in table:
            file = path.parent / validate.string(table.pop("config"), f"{where}.config")
            base = _merge(
                base, read_toml(validate.existing_file(file, f"{where}.config"), "run configuration")
            )
        merged = _merge(base, table)
        merged.setdefault("name", name)
        merged.setdefault("hardware", {"name": hardware, **({"machines": machines} if machines else {})})
        out[name] = merged
        return merged

    for name in tables:
        resolve(name, ())
    return out


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes``: tables merged key by key, anything else replaced."""
    out = copy.deepcopy(base)
    for k, v in changes.items():
        out[k] = (
            _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
        )
    return out


def _figure(item: Any, index: int, settings: dict[str, dict[str, Any]], where: str) -> Figure:
    item = validate.table(item, where)
    unknown = set(item) - _FIGURE_FIELDS
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_FIGURE_FIELDS))}"
        )
    source = validate.string(item.get("source", ""), f"{where}.source")
    if not source.strip():
        raise ConfigError(f"{where}: missing source (the figure, table or section the number comes from)")
    quantity = validate.string(item.get("quantity", ""), f"{where}.quantity")
    if quantity not in QUANTITIES:
        raise ConfigError(f"{where}: unknown quantity {quantity!r}; allowed: {', '.join(QUANTITIES)}")
    use = validate.boolean(item.get("use", True), f"{where}.use")
    reason = validate.string(item.get("reason", ""), f"{where}.reason")
    if not use and not reason.strip():
        raise ConfigError(f"{where}: use = false needs a reason (why the workbench cannot compute it)")
    value = _value(item.get("value"), f"{where}.value")
    setting = validate.string(item.get("setting", ""), f"{where}.setting")
    phases = tuple(
        validate.string(x, f"{where}.phases")
        for x in validate.array(item.get("phases", []), f"{where}.phases")
    )
    baseline = validate.string(item.get("baseline", ""), f"{where}.baseline")
    if use:
        _check_setting(setting, settings, f"{where}.setting")
        for phase in phases:
            if phase not in PHASES:
                raise ConfigError(f"{where}.phases: unknown phase {phase!r}; allowed: {', '.join(PHASES)}")
        if quantity in NEEDS_PHASES and not phases:
            raise ConfigError(f"{where}: quantity {quantity!r} needs phases = [...]")
        if quantity in NEEDS_BASELINE:
            _check_setting(baseline, settings, f"{where}.baseline")
        if quantity == "share" and value[1] > 1:
            raise ConfigError(f"{where}.value: a share is at most 1, got {value[1]!r}")
    return Figure(
        index,
        validate.string(item.get("id", f"figures[{index}]"), f"{where}.id", nonempty=True),
        setting,
        quantity,
        value,
        source,
        phases,
        baseline,
        validate.boolean(item.get("headline", False), f"{where}.headline"),
        validate.boolean(item.get("held_out", False), f"{where}.held_out"),
        use,
        reason,
        validate.string(item.get("note", ""), f"{where}.note"),
    )


def _value(raw: Any, where: str) -> tuple[float, float]:
    """A positive finite number, or a range [low, high] of them (low <= high)."""
    if raw is None:
        raise ConfigError(f"{where}: missing (a number, or a range [low, high])")
    if isinstance(raw, list):
        if len(raw) != 2:
            raise ConfigError(f"{where}: a range is [low, high], got {len(raw)} number(s)")
        low, high = (validate.finite_number(x, where, positive=True) for x in raw)
        if low > high:
            raise ConfigError(f"{where}: range [{low:g}, {high:g}] has low above high")
        return low, high
    number = validate.finite_number(raw, where, positive=True)
    return number, number


def _check_setting(name: str, settings: dict[str, dict[str, Any]], where: str) -> None:
    """The named setting exists and builds as a run configuration."""
    from workbench.config import config_from_dict

    if not name:
        raise ConfigError(f"{where}: missing (the name of a [settings.NAME] table)")
    if name not in settings:
        raise ConfigError(f"{where}: no setting {name!r}; defined: {', '.join(sorted(settings)) or 'none'}")
    try:
        config_from_dict(settings[name], f"settings.{name}")
    except (WorkbenchError, UnknownNameError) as exc:
        raise ConfigError(f"{where}: the workbench cannot build setting {name!r}: {exc}") from None


def _check_unique_ids(figures: list[Figure], src: str) -> None:
    seen: dict[str, int] = {}
    for f in figures:
        if f.id in seen:
            raise ConfigError(f"{src}: figures[{f.index}]: id {f.id!r} already used by figures[{seen[f.id]}]")
        seen[f.id] = f.index


def parse_parameter(name: Any, where: str) -> Parameter:
    """A parameter name of one of :data:`PARAMETER_FORMS`; unknown phases and coefficients refused here,
    device models and link kinds once the settings' clusters are known (:func:`check_parameter`)."""
    name = validate.string(name, where, nonempty=True)
    parts = tuple(name.split("."))
    family = parts[0]
    joined = parts[1].split("+") if len(parts) > 1 else []
    phases = bool(joined) and all(x in PHASES for x in joined)
    ok = (
        (family == "cost" and len(parts) == 4 and phases and parts[3] in (*COEFFICIENT_FIELDS, "scale"))
        or (family == "link" and len(parts) == 3 and all(joined) and parts[2] in ("bandwidth", "latency"))
        or (family == "transfer_overhead" and len(parts) == 2 and phases)
    )
    if not ok:
        raise ConfigError(f"{where}: no parameter {name!r}; the forms are: " + "; ".join(PARAMETER_FORMS))
    return Parameter(name, family, parts[1:])
