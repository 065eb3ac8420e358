"""Typed parameters: what a strategy (or a config section) accepts, and checking values against it.

A strategy declares its parameters by its constructor's signature: each keyword's
type hint is its type, its default its default, and the class's ``HELP`` mapping
(parameter name -> one line) its help text::

    @SAMPLERS.register("neighbor")
    class NeighborSampler(Sampler):
        HELP = {"fanouts": "neighbors drawn per vertex and layer, input layer first"}

        def __init__(self, fanouts: Sequence[int]) -> None: ...

:func:`parameters_of` reads that declaration; :func:`check_value` checks a value
from a TOML table against a type hint (``int``, ``float``, ``bool``, ``str``,
sequences of those, unions with ``None``), so a wrong type is reported with the
table and the key before the strategy is built.
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin, get_type_hints

from workbench.errors import ConfigError


@dataclass(frozen=True)
class Parameter:
    """One declared parameter: its name, type hint, default (``REQUIRED`` if none) and help."""

    name: str
    hint: Any
    default: Any
    help: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def type_name(self) -> str:
        return type_name(self.hint)


class _Required:
    def __repr__(self) -> str:
        return "required"


REQUIRED: Any = _Required()


def parameters_of(cls: type) -> list[Parameter]:
    """The keyword parameters of ``cls``'s constructor, typed, with ``cls.HELP`` as their help."""
    signature = inspect.signature(cls)
    try:
        hints = get_type_hints(cls.__init__)
    except (NameError, TypeError):  # a hint naming something not importable here: left unchecked
        hints = {}
    helps = getattr(cls, "HELP", {})
    out = []
    for name, p in signature.parameters.items():
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        default = REQUIRED if p.default is inspect.Parameter.empty else p.default
        out.append(Parameter(name, hints.get(name, Any), default, helps.get(name, "")))
    return out


def type_name(hint: Any) -> str:
    """A readable name for a hint: ``integer``, ``list of integers``, ``number or none``."""
    if hint is Any:
        return "any value"
    origin = get_origin(hint)
    args = get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin in (list, tuple, collections.abc.Sequence):
        item = type_name(args[0]) if args else "value"
        return f"list of ({item})" if " " in item else f"list of {item}s"
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in args)
    return {int: "integer", float: "number", bool: "true or false", str: "string", type(None): "none"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


def check_value(value: Any, hint: Any, where: str) -> Any:
    """``value`` checked against ``hint`` (and converted where TOML is looser: an int for a float,
    a list for a tuple); raises :class:`ConfigError` naming ``where`` and the expected type."""
    ok, converted = _match(value, hint)
    if not ok:
        raise ConfigError(f"{where} must be {_article(type_name(hint))}, got {value!r}")
    return converted


def _article(name: str) -> str:
    if name.startswith(("true", "any", "'")):
        return name
    return f"a{'n' if name[0] in 'aeiou' else ''} {name}"


def _match(value: Any, hint: Any) -> tuple[bool, Any]:
    if hint is Any or hint is inspect.Parameter.empty:
        return True, value
    origin = get_origin(hint)
    args = get_args(hint)
    if origin in (Union, types.UnionType):
        for arg in args:
            ok, converted = _match(value, arg)
            if ok:
                return True, converted
        return False, value
    if origin is typing.Literal:
        return value in args, value
    if origin in (list, tuple, collections.abc.Sequence):
        if not isinstance(value, list | tuple):
            return False, value
        item = args[0] if args else Any
        items = []
        for v in value:
            ok, converted = _match(v, item)
            if not ok:
                return False, value
            items.append(converted)
        return True, tuple(items) if origin is tuple else items
    if hint is type(None):
        return value is None, value
    if hint is bool:
        return isinstance(value, bool), value
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if hint is str:
        return isinstance(value, str), value
    if isinstance(hint, type):
        return isinstance(value, hint), value
    return True, value  # a hint this checker does not know (an array type, say): the constructor checks


def check_params(params: dict[str, Any], declared: list[Parameter], where: str) -> dict[str, Any]:
    """Check a strategy table against its declared parameters: unknown keys, missing required
    ones and wrong types are one-line errors naming ``where``, the key and the allowed keys."""
    by_name = {p.name: p for p in declared}
    allowed = ", ".join(by_name) or "(none)"
    unknown = [k for k in params if k not in by_name]
    if unknown:
        raise ConfigError(f"{where}: unknown parameter(s) {', '.join(unknown)}; allowed: {allowed}")
    missing = [p.name for p in declared if p.required and p.name not in params]
    if missing:
        raise ConfigError(f"{where}: missing parameter(s) {', '.join(missing)}; allowed: {allowed}")
    return {k: check_value(v, by_name[k].hint, f"{where}: {k}") for k, v in params.items()}
