"""The parameters of ad-hoc generator specs (``er:n=1000,deg=8``) and graph recipe files, checked.

Every parameter has a :class:`Rule` (integer or number, and its range). A value that
breaks it is refused with one line naming the spec, the key, what is allowed and the
value (``er:n=0: n must be an integer >= 2, got 0``); nothing is clamped or rounded
silently. Sizes are checked before anything is generated: vertex ids must fit the
int64 edge keys the generators build, the graph must not be too dense for rejection
sampling, and the arrays it needs must fit in the memory that is available.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from workbench.errors import ConfigError
from workbench.validate import INT64_MAX, finite_number, integer

# Generators key an edge as src * n + dst in an int64, so n * n must fit one.
MAX_NODES = math.isqrt(INT64_MAX)
# Peak bytes while generating, per stored edge (by generator) and per vertex. R-MAT and SBM
# keep one buffer of int64 pair keys (8 bytes per pair, half a stored edge, plus a sixteenth
# of slack) beside the int32 CSR (4 per stored edge); per vertex: indptr, the counting sort's
# cursors, the permutation, communities, then labels and masks. Measured: papers-like at scale
# 0.1 (11.1M vertices, 161.6M stored edges) peaks at 1.89 GiB against 2.2 GB estimated here.
# Erdos-Renyi graphs have no communities: labels come from a BFS over the symmetrised edge list
# (int64), ~70 bytes per stored edge (measured: 2.97 GB for 2M vertices and 40M edges).
# An estimate on the high side: refusing a graph that would just fit is better than
# dying with an allocation error half way through.
BYTES_PER_EDGE = {"rmat": 9, "sbm": 9, "er": 80}
BYTES_PER_NODE = 64
# Decimal exponents beyond this are refused without building the (huge) integer.
_MAX_DIGITS = 400


@dataclass(frozen=True)
class Rule:
    """What a parameter accepts: an integer or a finite number in ``[low, high]``
    (``open_low``: strictly above ``low``)."""

    whole: bool
    low: float
    high: float | None = None
    open_low: bool = False

    def describe(self) -> str:
        kind = "an integer" if self.whole else "a number"
        if self.high is not None and not self.open_low:
            return f"{kind} in [{self.low:g}, {self.high:g}]"
        bound = f"> {self.low:g}" if self.open_low else f">= {self.low:g}"
        upper = f" and <= {self.high:g}" if self.high is not None else ""
        return f"{kind} {bound}{upper}"


RULES: dict[str, Rule] = {
    "n": Rule(True, 2),  # at most MAX_NODES, checked with the scale (scaled_nodes)
    "m": Rule(True, 0),
    "communities": Rule(True, 0),
    "blocks": Rule(True, 1),
    "classes": Rule(True, 1),
    "feat": Rule(True, 0),
    "connect": Rule(True, 0, 1),
    "deg": Rule(False, 0),
    "a": Rule(False, 0, 1, open_low=True),
    "b": Rule(False, 0, 1),
    "c": Rule(False, 0, 1),
    "p_in": Rule(False, 0, 1),
    "train": Rule(False, 0, 1),
    "val": Rule(False, 0, 1),
    "test": Rule(False, 0, 1),
    "noise": Rule(False, 0, 1),
    "exponent": Rule(False, 2, open_low=True),
    "concentration": Rule(False, 0, open_low=True),
}


def parse_number(raw: str) -> int | float | None:
    """The number a spec's text ``raw`` spells, or ``None`` if it spells none.

    Integers stay integers, and so do integral values in exponent notation (``1e6``),
    exactly (read as decimals, not floats); ``1.5`` is a float; ``nan`` and ``inf``
    come back as such, for the parameter's rule to refuse with the key's name.
    """
    text = raw.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    if not number.is_finite():
        return float(number)
    if number == number.to_integral_value() and number.adjusted() < _MAX_DIGITS:
        return int(number)
    return float(number)  # inf beyond a float's range: refused as not finite


def check_param(key: str, value: Any, where: str, spelled: str | None = None) -> int | float:
    """``value`` of parameter ``key`` if its rule allows it; else one line naming ``where`` and ``key``
    and showing the value as the user ``spelled`` it (a spec's text), if given."""
    rule = RULES[key]
    shown = spelled.strip() if spelled is not None else repr(value)
    if key == "connect" and isinstance(value, bool):
        return int(value)  # a flag: true/false in a TOML file, 1/0 in a spec
    label = f"{where}: {key}"
    try:
        if rule.whole:
            maximum = INT64_MAX if rule.high is None else int(rule.high)
            return integer(value, label, minimum=int(rule.low), maximum=maximum)
        number = finite_number(value, label, minimum=rule.low)
    except ConfigError:
        raise ConfigError(f"{label} must be {rule.describe()}, got {shown}") from None
    if (rule.open_low and number <= rule.low) or (rule.high is not None and number > rule.high):
        raise ConfigError(f"{label} must be {rule.describe()}, got {shown}")
    return value  # as given (an int stays an int), so the cache key of a graph does not change


def scaled_nodes(n: int, factor: float, where: str) -> int:
    """``n * factor`` vertices, rounded; at least 2 and at most :data:`MAX_NODES`."""
    exact = n * factor
    if exact > MAX_NODES:
        raise ConfigError(
            f"{where}: n={n} at scale {factor:g} is {exact:.3g} vertices; at most {MAX_NODES} are possible"
        )
    nodes = int(round(exact))
    if nodes < 2:
        raise ConfigError(f"{where}: n={n} at scale {factor:g} leaves {nodes} vertices; a graph needs 2")
    return nodes


def scaled_edges(m: int, factor: float, where: str) -> int:
    """``m * factor`` stored edges, an even count (a symmetric graph stores both directions)."""
    if factor == 1.0:
        if m % 2:
            raise ConfigError(
                f"{where}: m must be even (a symmetric graph stores both directions of each edge), got {m}"
            )
        return m
    exact = m * factor / 2
    if exact > INT64_MAX // 2:
        raise ConfigError(f"{where}: m={m} at scale {factor:g} is {2 * exact:.3g} edges, beyond int64")
    return int(round(exact)) * 2


def check_density(nodes: int, edges: float, where: str) -> None:
    """Refuse more than a quarter of the possible directed edges: rejection sampling would crawl."""
    possible = nodes * (nodes - 1)
    if edges > possible // 4:
        raise ConfigError(
            f"{where}: {edges:.0f} stored edges on {nodes} vertices is denser than a quarter of the "
            f"{possible} possible edges; use fewer edges or more vertices"
        )


def check_memory(nodes: int, edges: int, where: str, generator: str) -> None:
    """Refuse a graph whose generation needs more memory than is available, with the sizes."""
    per_edge = BYTES_PER_EDGE[generator]
    needed = edges * per_edge + nodes * BYTES_PER_NODE
    available = available_memory()
    if available is not None and needed > available:
        raise ConfigError(
            f"{where}: {nodes:,} vertices and {edges:,} stored edges need about {_gib(needed)} of memory "
            f"to generate (~{per_edge} bytes per edge), but only {_gib(available)} is available"
        )


# The graph cache's file (workbench.graph.io.save_graph): indices as int32 below 2**31 vertices,
# indptr int64, and per vertex labels and planted communities (int64) and three masks (bool); an
# edge-weight column only for graphs that have one, left out of the estimate. Measured: an R-MAT
# graph of 100,000 vertices and 1.2M edges is 7,502,945 bytes on disk against 7,500,008 here.
INDPTR_BYTES = 8
NODE_FILE_BYTES = 8 + 8 + 3


def cache_file_bytes(nodes: int, edges: int) -> int:
    """About how many bytes the graph cache's file of such a graph takes."""
    index = 4 if nodes < 2**31 - 1 else 8
    return edges * index + (nodes + 1) * INDPTR_BYTES + nodes * NODE_FILE_BYTES


def check_disk(nodes: int, edges: int, folder: os.PathLike | str, where: str) -> None:
    """Refuse a graph whose cache file would not fit the free space under ``folder``, with the sizes."""
    needed = cache_file_bytes(nodes, edges)
    free = free_disk(folder)
    if free is not None and needed > free:
        raise ConfigError(
            f"{where}: {nodes:,} vertices and {edges:,} stored edges need about {_gib(needed)} in the graph "
            f"cache ({folder}), but only {_gib(free)} is free there; set GNNWB_CACHE to a larger disk"
        )


def free_disk(folder: os.PathLike | str) -> int | None:
    """Free bytes on the file system that holds ``folder`` (its nearest existing ancestor)."""
    import shutil
    from pathlib import Path

    path = Path(folder).expanduser().absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable``), or ``None`` if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gib(size: float) -> str:
    return f"{size / 2**30:,.1f} GiB"
