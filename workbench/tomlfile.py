"""Reading the TOML files a user writes (run configs, clusters, graph recipes) with one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The table in ``path``; a missing, unreadable or malformed file raises :class:`ConfigError`
    naming the file and, for a missing one, ``what`` it should have been ("hardware file")."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read {what} ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None


def toml_text(data: dict[str, Any]) -> str:
    """``data`` written as TOML that :func:`tomllib.loads` reads back equal: the top level's plain
    values first, then one ``[table]`` per nested table (``[a.b]`` deeper down), lists inline.

    Strings, booleans, integers, finite floats, lists (tuples) and tables; ``None`` values are
    left out (TOML has no null). Used to save what a run executed (its configuration) beside
    its outputs, so a run folder says what ran rather than what was asked for."""
    lines: list[str] = []
    _write_table(data, (), lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _write_table(data: dict[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    plain = {k: v for k, v in data.items() if v is not None and not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    if path and (plain or not tables):  # an empty table still exists: keep its header
        lines.append("")
        lines.append("[" + ".".join(_key(p) for p in path) + "]")
    for key, value in plain.items():
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in tables.items():
        _write_table(value, (*path, key), lines)


_BARE_KEY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _key(key: str) -> str:
    return key if key and set(key) <= _BARE_KEY else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"TOML has no value for {value!r} here")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"no TOML form for a {type(value).__name__}: {value!r}")


def _string(text: str) -> str:
    """A basic string: quotes, backslashes and control characters escaped (TOML refuses them bare)."""
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
