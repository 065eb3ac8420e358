"""Registries of strategies, one per kind.

A strategy registers itself next to its class::

    @PARTITIONERS.register("metis")
    class MetisPartitioner(Partitioner): ...

so adding a strategy is one file. ``create`` builds one from its configured name and
parameters and fails with the list of valid names when the name is unknown.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from workbench.errors import ConfigError, UnknownNameError
from workbench.params import Parameter, check_params, parameters_of

T = TypeVar("T")


class Registry(Generic[T]):
    """Named constructors of one kind of strategy."""

    def __init__(self, kind: str, package: str | None = None) -> None:
        self.kind = kind
        # The package whose modules are imported on first lookup, so that every
        # strategy file has run its ``register`` line before a name is resolved.
        self._package = package
        self._loaded = package is None
        self._entries: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        def decorate(cls: type[T]) -> type[T]:
            if name in self._entries and self._entries[name] is not cls:
                raise ValueError(f"{self.kind} strategy {name!r} registered twice")
            self._entries[name] = cls
            cls.registered_name = name  # type: ignore[attr-defined]
            return cls

        return decorate

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        package = importlib.import_module(self._package)  # type: ignore[arg-type]
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{self._package}.{info.name}")

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def get(self, name: str) -> type[T]:
        self._load()
        try:
            return self._entries[name]
        except KeyError:
            valid = ", ".join(self.names()) or "(none registered)"
            raise UnknownNameError(f"unknown {self.kind} strategy {name!r}; valid: {valid}") from None

    def parameters(self, name: str) -> list[Parameter]:
        """The typed parameters strategy ``name`` declares (see :mod:`workbench.params`)."""
        return parameters_of(self.get(name))

    def create(self, name: str, **params: Any) -> T:
        """Build strategy ``name``; its parameters are checked against their declared types first."""
        cls = self.get(name)
        checked = check_params(params, parameters_of(cls), f"{self.kind} strategy {name!r}")
        try:
            return cls(**checked)
        except TypeError as exc:
            raise ConfigError(f"{self.kind} strategy {name!r}: {exc}") from None

    def describe(self, name: str) -> str:
        """First line of the strategy's docstring (for ``gnnwb strategies list``)."""
        doc = inspect.getdoc(self.get(name)) or ""
        return doc.splitlines()[0] if doc else ""


PARTITIONERS: Registry[Any] = Registry("partition", "workbench.strategies.partition")
PLACEMENTS: Registry[Any] = Registry("placement", "workbench.strategies.placement")
SAMPLERS: Registry[Any] = Registry("sampling", "workbench.strategies.sampling")
MEMORY_POLICIES: Registry[Any] = Registry("memory", "workbench.strategies.memory")
EXECUTION_SCHEMES: Registry[Any] = Registry("execution", "workbench.strategies.execution")

REGISTRIES: dict[str, Registry[Any]] = {
    r.kind: r for r in (PARTITIONERS, PLACEMENTS, SAMPLERS, MEMORY_POLICIES, EXECUTION_SCHEMES)
}


def registry_for(kind: str) -> Registry[Any]:
    try:
        return REGISTRIES[kind]
    except KeyError:
        raise UnknownNameError(f"unknown strategy kind {kind!r}; valid: {', '.join(REGISTRIES)}") from None
