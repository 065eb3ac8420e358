"""Validators by class, shared by every loader and command that reads user input.

Each validator takes the value and ``where`` (what the user would search for: a file and
a field, or a command-line option) and returns the value as it was meant, or raises
:class:`~workbench.errors.ConfigError` with one line naming ``where``. Nothing is coerced
silently: a boolean is never a number, a float is never an integer, NaN and infinity are
never quantities, and an integer must fit the int64 columns and arrays that store it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
MAX_PORT = 65535


def finite_number(
    value: Any,
    where: str,
    *,
    minimum: float | None = None,
    positive: bool = False,
) -> float:
    """``value`` as a float: an int or float that is finite; ``positive`` refuses <= 0,
    ``minimum`` refuses anything below it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an int beyond a float's range
        raise ConfigError(f"{where} must be a finite number, got {value!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    if positive and not number > 0:
        raise ConfigError(f"{where} must be positive, got {value!r}")
    if minimum is not None and number < minimum:
        raise ConfigError(f"{where} must be at least {minimum:g}, got {value!r}")
    return number


def integer(
    value: Any,
    where: str,
    *,
    minimum: int | None = None,
    maximum: int = INT64_MAX,
) -> int:
    """``value`` as an int: an int (not a bool, not a float) within ``[minimum, maximum]``;
    the default maximum is what an int64 column holds."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where} must be an integer, got {value!r}")
    lowest = INT64_MIN if minimum is None else max(minimum, INT64_MIN)
    if value < lowest:
        raise ConfigError(f"{where} must be at least {lowest}, got {value!r}")
    if value > maximum:
        raise ConfigError(f"{where} must be at most {maximum}, got {value!r}")
    return value


def boolean(value: Any, where: str) -> bool:
    """``value`` if it is true or false; 1, 0 and strings are refused."""
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    return value


def string(value: Any, where: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    if nonempty and not value.strip():
        raise ConfigError(f"{where} must not be empty")
    return value


def table(value: Any, where: str) -> dict[str, Any]:
    """``value`` if it is a table (a JSON object, a TOML table)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table, got {short_repr(value)}")
    return value


def array(value: Any, where: str) -> list[Any]:
    """``value`` if it is a list (a JSON or TOML array)."""
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list, got {short_repr(value)}")
    return value


def port(value: Any, where: str) -> int:
    """A TCP port: 0 (any free one) to 65535."""
    return integer(value, where, minimum=0, maximum=MAX_PORT)


def existing_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` if it is a readable file; a missing path or a folder is an error naming ``what``."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p}: is a folder, expected a {what}")
    if not p.exists():
        raise ConfigError(f"{p}: no such {what}")
    if not os.access(p, os.R_OK):
        raise ConfigError(f"{p}: cannot read {what} (permission denied)")
    return p


def existing_folder(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` if it is a folder; a missing path or a file is an error naming ``what``."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{p}: is a file, expected a {what}")
    if not p.exists():
        raise ConfigError(f"{p}: no such {what}")
    return p


def writable_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` if a file can be written there: not a folder, and its nearest existing
    ancestor is a writable folder. Checked before work starts, so no result is lost to a
    bad output path at the end."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p}: is a folder, expected a {what} to write")
    _writable_ancestor(p.parent, p, what)
    if p.exists() and not os.access(p, os.W_OK):
        raise ConfigError(f"{p}: cannot write {what} (permission denied)")
    return p


def writable_folder(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` if it is, or can be made, a writable folder (checked, not created)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{p}: is a file, expected a {what}")
    _writable_ancestor(p, p, what)
    return p


def _writable_ancestor(start: Path, target: Path, what: str) -> None:
    folder = start if str(start) else Path(".")
    while not folder.exists():
        if folder.parent == folder:
            break
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{target}: {folder} is a file, so no {what} can be written under it")
    if folder.exists() and not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{target}: cannot write {what} under {folder} (permission denied)")


def short_repr(value: Any) -> str:
    """``repr(value)``, cut to 40 characters: a message quotes the value, not a whole table."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
