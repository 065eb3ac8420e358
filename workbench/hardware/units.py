"""Parse quantities with units, as written in hardware TOML files.

Bandwidth: ``"12 GB/s"``, ``"100 Gbit/s"`` (also ``Gb/s``), plain numbers are bytes/s.
Latency: ``"5 us"``, ``"1.5 ms"``, ``"2 ns"``, plain numbers are seconds.
Size: ``"16 GiB"``, ``"40 GB"``, plain numbers are bytes.
Rate: ``"9.3 TFLOP/s"``, plain numbers are FLOP/s.
"""

from __future__ import annotations

import re

from workbench.errors import ConfigError

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_NUMBER = r"([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*"


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
    if isinstance(value, int | float):
        return float(value)
    num, unit = _split(value, where)
    m = re.fullmatch(r"(Ki|Mi|Gi|Ti|[kKMGTP]?)(B|bit|b|bps)(/s)?", unit)
    if not m or (m.group(2) in ("B", "b", "bit") and m.group(3) is None):
        raise ConfigError(f"{where}: bandwidth {value!r} needs a unit like GB/s or Gbit/s")
    scale = _multiplier(m.group(1), where, value)
    bits = m.group(2) in ("bit", "b", "bps")
    return num * scale / (8.0 if bits else 1.0)


def parse_latency(value: float | int | str, where: str) -> float:
    """Seconds."""
    if isinstance(value, int | float):
        return float(value)
    num, unit = _split(value, where)
    scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}.get(unit)
    if scale is None:
        raise ConfigError(f"{where}: latency {value!r} needs a unit: s, ms, us or ns")
    return num * scale


def parse_size(value: float | int | str, where: str) -> int:
    """Bytes."""
    if isinstance(value, int | float):
        return int(value)
    num, unit = _split(value, where)
    m = re.fullmatch(r"(Ki|Mi|Gi|Ti|[kKMGTP]?)B", unit)
    if not m:
        raise ConfigError(f"{where}: size {value!r} needs a unit like GB or GiB")
    return int(num * _multiplier(m.group(1), where, value))


def parse_rate(value: float | int | str, where: str) -> float:
    """FLOP per second."""
    if isinstance(value, int | float):
        return float(value)
    num, unit = _split(value, where)
    m = re.fullmatch(r"([kKMGTP]?)FLOP/?s", unit, flags=re.IGNORECASE)
    if not m:
        raise ConfigError(f"{where}: compute rate {value!r} needs a unit like TFLOP/s")
    return num * _multiplier(m.group(1).upper() if m.group(1) != "k" else "k", where, value)


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
