"""A small TOML writer for calibrated profiles (Python ships a TOML reader, not a writer).

Writes nested tables (``[a.b]``), arrays of tables (``[[a.c]]``, nested ones too), and
scalars and flat arrays of scalars as values. ``None`` values are left out. Floats are
written with ``repr`` (all their digits), so a profile read back holds the same numbers.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def dumps(data: dict[str, Any], header: str = "") -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    _table(lines, [], data, array_item=False)
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list | tuple) and len(v) > 0 and all(isinstance(x, dict) for x in v)


def _table(lines: list[str], path: list[str], d: dict[str, Any], array_item: bool) -> None:
    scalars = [
        (k, v) for k, v in d.items() if v is not None and not isinstance(v, dict) and not _is_table_array(v)
    ]
    children = [k for k, v in d.items() if isinstance(v, dict) or _is_table_array(v)]
    if path and (array_item or scalars or not children):
        name = ".".join(map(_key, path))
        lines.extend(["", f"[[{name}]]" if array_item else f"[{name}]"])
    for k, v in scalars:
        lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in d.items():
        if isinstance(v, dict):
            _table(lines, [*path, k], v, array_item=False)
    for k, v in d.items():
        if _is_table_array(v):
            for item in v:
                _table(lines, [*path, k], item, array_item=True)


def _key(k: str) -> str:
    return k if _BARE.fullmatch(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if hasattr(v, "item"):  # a numpy scalar
        return _value(v.item())
    raise TypeError(f"cannot write {type(v).__name__} {v!r} to TOML")
