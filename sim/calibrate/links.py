"""Link latency and bandwidth from transfer rows: bytes against time, over the hardware's routes.

Each transfer row's ``src`` and ``dst`` give the route the simulator takes on the given
hardware (:class:`sim.topology.Topology`), in the legs the plan executor uses (a copy
between machines without GPUDirect RDMA is staged through host memory: GPU -> host,
host -> host over the network, host -> GPU). A transfer alone on its links takes, per leg,
the route's summed link latencies plus its bytes over the route's bottleneck bandwidth::

    time = sum over legs ( sum of the route's link latencies + bytes / bottleneck bandwidth )

Unknowns: one latency per link kind (every link of a kind gets it), and per leg group a
bandwidth *scale* relative to the given hardware's: a leg group is the leg's bottleneck
link kind (the kinds tied at the smallest bandwidth on the given hardware, joined by
``+``, when several are) and its direction (``h2d``, ``d2h``, ``d2d``, ``h2h``: the kinds
of memory the leg joins). Fitting a scale keeps the given hardware's ratios between links
of one kind (a double NVLink brick stays twice as wide). The model is linear in the
unknowns (latencies, and 1 / scale as time per byte over the given bottleneck), and is
fitted in one go by :func:`sim.calibrate.regress.relative_nnls`.

Which unknowns the rows determine: a bandwidth needs its leg group to have at least
:data:`MIN_LINK_ROWS` rows of two or more sizes (an error names the traces otherwise); a
latency needs routes that tell kinds apart (a host link and a PCIe link that always
appear together cannot be): kinds whose latency the rows cannot separate keep the given
hardware's latency, those that are never a bottleneck first, and are marked
``latency_fitted = false``. Link kinds no row's bottleneck is keep their bandwidth
(``bandwidth_fitted = false``).

Applied to the cluster: links of one spec link are full duplex with one bandwidth, so a
kind fitted in both directions gets the row-weighted mean of its directions' time per
byte; each direction's own fit is kept in the profile. A kind that is the bottleneck on
its own (not tied) somewhere takes that fit; tied fits apply to kinds with no other.

Rows left out (counted in the profile): copies within one memory (no link crossed; the
simulator gives them no time), rows that took no time, and, unless asked to keep them,
rows that overlapped another transfer on a shared link in the same run (their time
includes sharing, which the simulator models but this fit does not).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from sim.calibrate.regress import independent_columns, r_squared, relative_nnls
from sim.calibrate.sources import CalibrationError
from sim.topology import Topology
from workbench.hardware.spec import ClusterSpec

MIN_LINK_ROWS = 3
TIE = 1e-9  # relative: bandwidths this close are a tie


@dataclass(frozen=True)
class Leg:
    links: tuple[int, ...]  # directed link ids of its route
    kinds: tuple[str, ...]  # each link's kind
    latencies: tuple[float, ...]  # each link's latency on the given hardware
    direction: str  # h2d, d2h, d2d or h2h
    bottleneck: tuple[str, ...]  # kinds tied at the smallest bandwidth
    bandwidth: float  # that bandwidth on the given hardware

    @property
    def group(self) -> str:
        return f"{'+'.join(self.bottleneck)}.{self.direction}"


def _kind(memory: str) -> str:
    return "d" if ".gpu" in memory else "h"


def route_legs(cluster: ClusterSpec, topo: Topology, src: str, dst: str, where: str) -> tuple[Leg, ...]:
    """The legs of a copy from ``src`` to ``dst``, as :mod:`sim.executor` runs it."""
    memories = set(cluster.memory_nodes())
    for node in (src, dst):
        if node not in memories:
            raise CalibrationError(
                f"{where}: memory {node!r} is not in hardware {cluster.name!r} (memories: "
                f"{', '.join(cluster.memory_nodes())}); pass the hardware the trace was measured on with --hardware"
            )
    if src == dst:
        return ()
    pairs = [(src, dst)]
    if src.split(".", 1)[0] != dst.split(".", 1)[0]:
        pairs = []
        net_src, net_dst = src, dst
        if ".gpu" in src and not cluster.machine_of(src).gpudirect_rdma:
            net_src = cluster.machine_of(src).host_node
            pairs.append((src, net_src))
        if ".gpu" in dst and not cluster.machine_of(dst).gpudirect_rdma:
            net_dst = cluster.machine_of(dst).host_node
        pairs.append((net_src, net_dst))
        if net_dst != dst:
            pairs.append((net_dst, dst))
    legs = []
    for a, b in pairs:
        route = topo.route(a, b)
        if route is None:
            raise CalibrationError(f"{where}: hardware {cluster.name!r} has no route from {a} to {b}")
        kinds = tuple(cluster.links[lid // 2].kind for lid in route.links)
        caps = [topo.capacity[lid] for lid in route.links]
        low = min(caps)
        tied = tuple(sorted({k for k, c in zip(kinds, caps, strict=True) if c <= low * (1 + TIE)}))
        legs.append(
            Leg(
                route.links,
                kinds,
                tuple(topo.latency[lid] for lid in route.links),
                f"{_kind(a)}2{_kind(b)}",
                tied,
                low,
            )
        )
    return tuple(legs)


@dataclass
class LinkCalibration:
    cluster: ClusterSpec  # the given hardware with the fitted links
    kinds: dict[str, dict[str, Any]]  # per link kind: what its links got, and how well it was fitted
    link_flags: list[tuple[bool, bool]]  # per spec link: (bandwidth fitted, latency fitted)
    rows_used: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def transfer_rows(sources: list[Any]) -> pd.DataFrame:
    """Every source's transfer rows: source, run, src, dst, bytes, start, end."""
    frames = []
    for s in sources:
        df = s.trace
        if "src" not in df.columns or "dst" not in df.columns:
            continue
        is_transfer = (
            df["kind"] == "transfer" if "kind" in df.columns else (df["src"] != "") & (df["dst"] != "")
        )
        part = df.loc[is_transfer, ["run_id", "src", "dst", "bytes", "start", "end"]].copy()
        part.insert(0, "source", s.name)
        frames.append(part)
    if not frames:
        return pd.DataFrame(columns=["source", "run_id", "src", "dst", "bytes", "start", "end"])
    return pd.concat(frames, ignore_index=True)


def _overlapping(rows: pd.DataFrame, links: list[tuple[int, ...]]) -> np.ndarray:
    """Rows whose [start, end] overlaps another row's on a shared directed link of the same run."""
    out = np.zeros(len(rows), dtype=bool)
    pairs: dict[tuple[str, str, int], list[int]] = {}
    for i, (source, run, ls) in enumerate(zip(rows["source"], rows["run_id"], links, strict=True)):
        for lid in set(ls):
            pairs.setdefault((source, run, lid), []).append(i)
    start = rows["start"].to_numpy()
    end = rows["end"].to_numpy()
    for members in pairs.values():
        if len(members) < 2:
            continue
        m = np.asarray(members)
        m = m[np.argsort(start[m], kind="stable")]
        s, e = start[m], end[m]
        prev_end = np.maximum.accumulate(np.concatenate([[-np.inf], e[:-1]]))
        next_start = np.concatenate([s[1:], [np.inf]])
        out[m[(prev_end > s) | (next_start < e)]] = True
    return out


def _names(sources: list[str]) -> str:
    unique = list(dict.fromkeys(sources))
    text = ", ".join(unique[:3])
    return text + (f" and {len(unique) - 3} more" if len(unique) > 3 else "")


def fit_links(
    rows: pd.DataFrame,
    cluster: ClusterSpec,
    *,
    keep_overlapping: bool = False,
) -> LinkCalibration:
    topo = Topology(cluster)
    skipped: dict[str, int] = {}
    leg_cache: dict[tuple[str, str], tuple[Leg, ...]] = {}
    legs: list[tuple[Leg, ...]] = []
    for i, (source, src, dst) in enumerate(zip(rows["source"], rows["src"], rows["dst"], strict=True)):
        key = (src, dst)
        if key not in leg_cache:
            leg_cache[key] = route_legs(
                cluster, topo, src, dst, f"{source}: transfer row {i} ({src} -> {dst})"
            )
        legs.append(leg_cache[key])
    seconds = (rows["end"] - rows["start"]).to_numpy(dtype=np.float64)
    keep = np.array([bool(x) for x in legs], dtype=bool)
    skipped["within_one_memory"] = int((~keep).sum())
    no_time = keep & ~(seconds > 0)
    skipped["no_time"] = int(no_time.sum())
    keep &= ~no_time
    if not keep_overlapping and keep.any():
        flat = [tuple(lid for leg in ls for lid in leg.links) for ls in legs]
        shared = _overlapping(rows, flat) & keep
        skipped["overlapping"] = int(shared.sum())
        keep &= ~shared
    index = np.flatnonzero(keep)
    kinds_of_links = sorted({k.kind for k in cluster.links})
    result = LinkCalibration(cluster, {}, [(False, False)] * len(cluster.links), len(index), skipped)
    if not len(index):
        return result
    used = [legs[i] for i in index]
    y = seconds[index]
    nbytes = rows["bytes"].to_numpy(dtype=np.float64)[index]
    sources = rows["source"].to_numpy()[index]
    lat_kinds = sorted({k for ls in used for leg in ls for k in leg.kinds})
    groups = sorted({leg.group for ls in used for leg in ls})
    lat_count = np.zeros((len(index), len(lat_kinds)))
    lat_given = np.zeros((len(index), len(lat_kinds)))  # the given hardware's latency, summed per kind
    per_byte = np.zeros((len(index), len(groups)))
    touches = np.zeros((len(index), len(groups)), dtype=bool)
    kpos = {k: j for j, k in enumerate(lat_kinds)}
    gpos = {g: j for j, g in enumerate(groups)}
    for r, ls in enumerate(used):
        for leg in ls:
            for k, lat in zip(leg.kinds, leg.latencies, strict=True):
                lat_count[r, kpos[k]] += 1
                lat_given[r, kpos[k]] += lat
            per_byte[r, gpos[leg.group]] += nbytes[r] / leg.bandwidth
            touches[r, gpos[leg.group]] = True
    for g, j in gpos.items():
        rows_g = touches[:, j]
        sizes = np.unique(nbytes[rows_g])
        if rows_g.sum() < MIN_LINK_ROWS or len(sizes) < 2:
            kinds, direction = g.rsplit(".", 1)
            raise CalibrationError(
                f"{_names(list(sources[rows_g]))}: {int(rows_g.sum())} transfer row(s) of {len(sizes)} size(s) "
                f"to fit the bandwidth of {kinds} links ({direction}): need at least {MIN_LINK_ROWS} rows of 2 or "
                "more sizes"
            )
    bottleneck_kinds = {k for g in groups for k in g.rsplit(".", 1)[0].split("+")}
    x = np.hstack([lat_count, per_byte])
    w = 1.0 / y**2
    # Latencies the rows cannot tell apart keep the given hardware's: non-bottleneck kinds go first.
    order = sorted(range(len(lat_kinds)), key=lambda j: (lat_kinds[j] in bottleneck_kinds, lat_kinds[j]))
    columns = independent_columns(x, w, order)
    if any(len(lat_kinds) + j not in columns for j in range(len(groups))):
        lost = [groups[j] for j in range(len(groups)) if len(lat_kinds) + j not in columns][0]
        raise CalibrationError(
            f"{_names(list(sources))}: the rows cannot tell the bandwidth of {lost.rsplit('.', 1)[0]} links "
            f"({lost.rsplit('.', 1)[1]}) from the others'; add transfers that use those links alone"
        )
    fixed = [j for j in range(len(lat_kinds)) if j not in columns]
    offset = lat_given[:, fixed].sum(axis=1) if fixed else np.zeros(len(y))
    fit = relative_nnls(x[:, columns], y, offset)
    coef = dict(zip(columns, fit.coef, strict=True))
    stderr = dict(zip(columns, fit.stderr, strict=True))
    latency = {lat_kinds[j]: (float(coef[j]), float(stderr[j])) for j in range(len(lat_kinds)) if j in coef}
    per_group: dict[str, dict[str, Any]] = {}
    for g, j in gpos.items():
        c = float(coef[len(lat_kinds) + j])
        se = float(stderr[len(lat_kinds) + j])
        mask = touches[:, j]
        given = {leg.bandwidth for ls in used for leg in ls if leg.group == g}
        entry: dict[str, Any] = {
            "rows": int(mask.sum()),
            "time_per_byte_factor": c,
            "bandwidth_scale": 1.0 / c if c > 0 else float("inf"),
            "bandwidth_rel_stderr": se / c if c > 0 else float("inf"),
            "r2": r_squared(y[mask], fit.predicted[mask]),
            **fit.spread(mask),
        }
        if len(given) == 1 and c > 0:
            entry["bandwidth"] = next(iter(given)) / c
        per_group[g] = entry
    _apply(result, cluster, lat_kinds, latency, per_group, kinds_of_links)
    result.notes.extend(_bottleneck_notes(result.cluster, used, groups))
    result.kinds["_overall"] = {"rows": len(y), "r2": fit.r2, **fit.spread()}
    return result


def _apply(
    result: LinkCalibration,
    cluster: ClusterSpec,
    lat_kinds: list[str],
    latency: dict[str, tuple[float, float]],
    per_group: dict[str, dict[str, Any]],
    kinds_of_links: list[str],
) -> None:
    scale: dict[str, float] = {}
    for kind in kinds_of_links:
        own = {g: e for g, e in per_group.items() if g.rsplit(".", 1)[0] == kind}
        tied = {g: e for g, e in per_group.items() if kind in g.rsplit(".", 1)[0].split("+") and g not in own}
        chosen = own or tied
        usable = {g: e for g, e in chosen.items() if e["time_per_byte_factor"] > 0}
        entry: dict[str, Any] = {"bandwidth_fitted": False, "latency_fitted": kind in latency}
        if len(usable) < len(chosen):
            result.notes.append(
                f"{kind} links: time did not grow with bytes in {', '.join(sorted(set(chosen) - set(usable)))}; "
                "that direction was not used for the bandwidth"
            )
        if usable:
            rows = np.array([e["rows"] for e in usable.values()], dtype=float)
            factor = float(np.dot(rows, [e["time_per_byte_factor"] for e in usable.values()]) / rows.sum())
            scale[kind] = 1.0 / factor
            entry["bandwidth_fitted"] = True
            entry["bandwidth_scale"] = scale[kind]
            given = {link.bandwidth for link in cluster.links if link.kind == kind}
            if len(given) == 1:
                entry["bandwidth"] = next(iter(given)) * scale[kind]
            entry["from"] = sorted(usable)
        if kind in latency:
            entry["latency"], entry["latency_stderr"] = latency[kind]
        elif kind in lat_kinds:
            entry["latency_note"] = (
                "the rows cannot tell this kind's latency from others': kept the given hardware's"
            )
        if chosen:
            entry["directions"] = {g.rsplit(".", 1)[1] if g in own else g: e for g, e in chosen.items()}
        result.kinds[kind] = entry
    links = []
    flags = []
    for link in cluster.links:
        bw = link.bandwidth * scale[link.kind] if link.kind in scale else link.bandwidth
        lat = latency[link.kind][0] if link.kind in latency else link.latency
        links.append(replace(link, bandwidth=bw, latency=lat))
        flags.append((link.kind in scale, link.kind in latency))
    result.cluster = replace(cluster, links=tuple(links))
    result.link_flags = flags


def _bottleneck_notes(cluster: ClusterSpec, used: list[tuple[Leg, ...]], groups: list[str]) -> list[str]:
    """Leg groups whose bottleneck moved to another kind once the fitted values were applied."""
    topo = Topology(cluster)
    notes = []
    seen: set[tuple[int, ...]] = set()
    for ls in used:
        for leg in ls:
            if leg.links in seen:
                continue
            seen.add(leg.links)
            caps = [topo.capacity[lid] for lid in leg.links]
            low = min(caps)
            now = {k for k, c in zip(leg.kinds, caps, strict=True) if c <= low * (1 + TIE)}
            if not now & set(leg.bottleneck):
                notes.append(
                    f"leg group {leg.group}: with the fitted values its bottleneck is {'+'.join(sorted(now))} "
                    "instead; the given hardware's other links may be narrower than measured"
                )
    return sorted(set(notes))
