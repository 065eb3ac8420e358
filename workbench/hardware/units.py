"""Parse quantities with units, as written in hardware TOML files.

Bandwidth: ``"12 GB/s"``, ``"100 Gbit/s"`` (also ``Gb/s``), plain numbers are bytes/s.
Latency: ``"5 us"``, ``"1.5 ms"``, ``"2 ns"``, plain numbers are seconds.
Size: ``"16 GiB"``, ``"40 GB"``, plain numbers are bytes.
Rate: ``"9.3 TFLOP/s"``, plain numbers are FLOP/s.

Every quantity is a finite number (an int or float, never a bool) or a string with a
unit; NaN, infinity and numbers too large for a float (``"1e400 GiB"``) are errors
naming ``where``. A size is a whole number of bytes that fits an int64: a plain
``1.5`` is refused (no byte is half there), while a size written with a unit
(``"1.3 GiB"``) is rounded to the nearest byte, which is what it means. Signs are the
callers' to check (a negative bandwidth is refused where the hardware is validated).
"""

from __future__ import annotations

import math
import re

from workbench.errors import ConfigError
from workbench.validate import INT64_MAX, INT64_MIN, finite_number, short_repr

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_NUMBER = r"([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*"


def _plain(value: object, where: str, what: str) -> float | None:
    """``value`` as a finite float when it is a plain number, None when it is a string;
    anything else (a bool, a list, a table, NaN, infinity) is an error."""
    if isinstance(value, str):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"{where}: a {what} must be a number or a string with a unit, got {short_repr(value)}"
        )
    return finite_number(value, f"{where}: a {what}")


def _finite(number: float, where: str, what: str, value: object) -> float:
    if not math.isfinite(number):
        raise ConfigError(f"{where}: a {what} must be a finite number, got {value!r}")
    return number


def _split(text: str, where: str) -> tuple[float, str]:
    m = re.fullmatch(_NUMBER + r"(.*)", text.strip())
    if not m:
        raise ConfigError(f"{where}: cannot read {text!r} as a number with a unit")
    return float(m.group(1)), m.group(2).strip()


def _multiplier(prefix: str, where: str, text: str) -> float:
    if prefix in _BINARY:
        return _BINARY[prefix]
    if prefix in _PREFIX:
        return _PREFIX[prefix]
    raise ConfigError(f"{where}: unknown unit prefix in {text!r}")


def parse_bandwidth(value: float | int | str, where: str) -> float:
    """Bytes per second."""
    plain = _plain(value, where, "bandwidth")
    if plain is not None:
        return plain
    num, unit = _split(value, where)  # type: ignore[arg-type]
    m = re.fullmatch(r"(Ki|Mi|Gi|Ti|[kKMGTP]?)(B|bit|b|bps)(/s)?", unit)
    if not m or (m.group(2) in ("B", "b", "bit") and m.group(3) is None):
        raise ConfigError(f"{where}: bandwidth {value!r} needs a unit like GB/s or Gbit/s")
    scale = _multiplier(m.group(1), where, value)  # type: ignore[arg-type]
    bits = m.group(2) in ("bit", "b", "bps")
    return _finite(num * scale / (8.0 if bits else 1.0), where, "bandwidth", value)


def parse_latency(value: float | int | str, where: str) -> float:
    """Seconds."""
    plain = _plain(value, where, "latency")
    if plain is not None:
        return plain
    num, unit = _split(value, where)  # type: ignore[arg-type]
    scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}.get(unit)
    if scale is None:
        raise ConfigError(f"{where}: latency {value!r} needs a unit: s, ms, us or ns")
    return _finite(num * scale, where, "latency", value)


def parse_size(value: float | int | str, where: str) -> int:
    """Bytes: a whole number that fits an int64 (see the module docstring)."""
    plain = _plain(value, where, "size")
    if plain is not None:
        if isinstance(value, float) and not plain.is_integer():
            raise ConfigError(f"{where}: a size must be a whole number of bytes, got {value!r}")
        nbytes = value if isinstance(value, int) else int(plain)
    else:
        num, unit = _split(value, where)  # type: ignore[arg-type]
        m = re.fullmatch(r"(Ki|Mi|Gi|Ti|[kKMGTP]?)B", unit)
        if not m:
            raise ConfigError(f"{where}: size {value!r} needs a unit like GB or GiB")
        scaled = _finite(num * _multiplier(m.group(1), where, value), where, "size", value)  # type: ignore[arg-type]
        nbytes = round(scaled)
    if not INT64_MIN <= nbytes <= INT64_MAX:
        raise ConfigError(f"{where}: size {value!r} is beyond what an int64 holds ({INT64_MAX} bytes)")
    return nbytes


def parse_rate(value: float | int | str, where: str) -> float:
    """FLOP per second."""
    plain = _plain(value, where, "compute rate")
    if plain is not None:
        return plain
    num, unit = _split(value, where)  # type: ignore[arg-type]
    m = re.fullmatch(r"([kKMGTP]?)FLOP/?s", unit, flags=re.IGNORECASE)
    if not m:
        raise ConfigError(f"{where}: compute rate {value!r} needs a unit like TFLOP/s")
    scale = _multiplier(m.group(1).upper() if m.group(1) != "k" else "k", where, value)  # type: ignore[arg-type]
    return _finite(num * scale, where, "compute rate", value)


def format_bandwidth(bps: float) -> str:
    return f"{bps / 1e9:g} GB/s"


def format_latency(seconds: float) -> str:
    return f"{seconds * 1e6:g} us"


def format_size(nbytes: float) -> str:
    if nbytes >= 2**30:
        return f"{nbytes / 2**30:g} GiB"
    return f"{nbytes / 2**20:g} MiB"


def format_rate(flops: float) -> str:
    return f"{flops / 1e12:g} TFLOP/s"
