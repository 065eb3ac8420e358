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

An exchange phase (:data:`EXCHANGE_PHASES`: a real feature store's remote and peer reads)
adds one unknown per protocol its rows use (``phase.protocol``: a feature store's fetch, a
pre-gather, a halo send; :func:`sim.costmodel.exchange_protocol`), its fixed cost per transfer
(``sim.costmodel``'s ``transfer_overhead``), fitted where rows of other phases over the same
links (the point-to-point microbenchmark) tell it from the links' latency; otherwise it stays
in the latency. The phase itself gets the median of its protocols' costs, for a protocol no
fitted trace used.

Collective rows (``allreduce`` and ``alltoall`` phases; one row per device, the buffer in
``buffer_bytes``) enter the same model as :mod:`sim.collectives` runs them: a step per ring
hop (``2(n-1)`` for an all-reduce over ``n`` devices) that waits its slowest chunk route's
latency and moves ``buffer / n`` at the step's rate (a link crossed by ``m`` chunks gives
each ``1/m`` of itself); their direction is the op (``network.allreduce``). All-reduces of
one buffer size and one worker count cannot tell bandwidth from latency and are left out.
A collective phase also gets a fixed cost per call, an unknown like an exchange protocol's
(``sim.costmodel``'s ``transfer_overhead``); rows of collectives on one device (no link
crossed, the call's cost alone: 0.36-0.42 ms for a one-rank gloo all-reduce on the 2-core
CPU runs) tell it from the steps' latency.

Which unknowns the rows determine: a bandwidth needs its leg group to have at least
:data:`MIN_LINK_ROWS` rows of two or more sizes (otherwise its rows are left out and a note says so); a
latency needs routes that tell kinds apart (a host link and a PCIe link that always
appear together cannot be): kinds whose latency the rows cannot separate keep the given
hardware's latency, those that are never a bottleneck first, and are marked
``latency_fitted = false``. Link kinds no row's bottleneck is keep their bandwidth
(``bandwidth_fitted = false``).

Applied to the cluster: links of one spec link are full duplex with one bandwidth, so a
kind fitted in both directions gets the row-weighted mean of its directions' time per
byte; each direction's own fit is kept in the profile. A kind that is the bottleneck on
its own (not tied) somewhere takes that fit; tied fits apply to kinds with no other.

A measured migration's parts (a model's parameters, its gradients, ...: the plan's
``migrate`` tasks of one hop, ids that differ in their last part) whose rows overlap one
another were recorded from one start, the parts posted together as one message stream
(traces of ``hopgnn`` and ``naive-feature-centric`` recorded before each took its parts one at a
time): they are fitted as one transfer of their summed bytes from the first start to the last end
(:func:`_hops_as_one`), not left out as overlapping nor fitted one part each (the later
parts' bytes moved inside the first part's row). Parts recorded one after the other (both
schemes now: each row times its own bytes) stay one transfer each.

Rows left out (counted in the profile): copies within one memory (no link crossed; the
simulator gives them no time), rows that took no time, and, unless asked to keep them,
rows that overlapped another transfer in the same run on a shared link that sharing could
slow (one under twice the row's bottleneck rate): their time includes sharing, which the
simulator models but this fit does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from sim.calibrate.regress import Fit, independent_columns, r_squared, relative_nnls
from sim.calibrate.sources import CalibrationError
from sim.costmodel import exchange_of, exchange_protocol
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
    crossings: tuple[int, ...] = ()  # a collective step's chunks crossing each link (empty: once each)

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


COLLECTIVE_OPS = {"allreduce": "allreduce", "alltoall": "alltoall"}  # trace phase -> the op it runs


def collective_legs(
    cluster: ClusterSpec, topo: Topology, op: str, devices: list[str], where: str
) -> tuple[tuple[Leg, int], ...]:
    """A ring collective's step (as one leg) and how many times it runs, as :mod:`sim.collectives` runs it.

    A step moves one chunk between every pair it names at once, as one lockstep flow: a link
    crossed by ``m`` chunks gives it ``capacity / m``, so the step's rate is the smallest of
    those; it waits the largest chunk route latency first (that route's links are the leg's
    latency kinds). The leg's direction is the op.
    """
    n = len(devices)
    if n < 2:
        return ()
    for node in devices:
        if node not in cluster.memory_nodes():
            raise CalibrationError(f"{where}: device {node!r} is not in hardware {cluster.name!r}")
    if op == "allreduce":
        pairs, steps = [(devices[i], devices[(i + 1) % n]) for i in range(n)], 2 * (n - 1)
    else:
        pairs, steps = [(a, b) for a in devices for b in devices if a != b], 1
    routes = []
    for a, b in pairs:
        route = topo.route(a, b)
        if route is None:
            raise CalibrationError(f"{where}: hardware {cluster.name!r} has no route from {a} to {b}")
        routes.append(route)
    crossings: dict[int, int] = {}
    for r in routes:
        for lid in r.links:
            crossings[lid] = crossings.get(lid, 0) + 1
    rate = {lid: topo.capacity[lid] / m for lid, m in crossings.items()}
    low = min(rate.values())
    tied = tuple(sorted({cluster.links[lid // 2].kind for lid, r in rate.items() if r <= low * (1 + TIE)}))
    slowest = max(routes, key=lambda r: r.latency)
    leg = Leg(
        tuple(crossings),
        tuple(cluster.links[lid // 2].kind for lid in slowest.links),
        tuple(topo.latency[lid] for lid in slowest.links),
        op,
        tied,
        low,
        tuple(crossings.values()),
    )
    return ((leg, steps),)


@dataclass
class LinkCalibration:
    cluster: ClusterSpec  # the given hardware with the fitted links
    kinds: dict[str, dict[str, Any]]  # per link kind: what its links got, and how well it was fitted
    link_flags: list[tuple[bool, bool]]  # per spec link: (bandwidth fitted, latency fitted)
    rows_used: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Per exchange phase, the host's fixed work before its transfers move (sim.costmodel's
    # transfer_overhead) and its standard error; only where the rows tell it from latency.
    overheads: dict[str, tuple[float, float]] = field(default_factory=dict)


# Phases whose real transfers are exchanges (request counts, ids, then rows: realrun.feature_store),
# so each pays a fixed protocol cost that a link's latency does not describe.
EXCHANGE_PHASES = ("gather_remote", "d2d")
# Phases with a fixed cost per transfer or call: the exchanges, and the collectives (a library's
# work per call, paid on one device too: sim.costmodel's transfer_overhead).
FIXED_COST_PHASES = EXCHANGE_PHASES + tuple(COLLECTIVE_OPS)


def transfer_rows(sources: list[Any]) -> pd.DataFrame:
    """Every source's transfer and collective rows: source, run, kind, src, dst, bytes (a
    collective's: its buffer), start, end, and a collective's op and devices (its rows' devices)."""
    columns = [
        "source",
        "run_id",
        "task",
        "iteration",
        "kind",
        "src",
        "dst",
        "bytes",
        "start",
        "end",
        "op",
        "devices",
        "phase",
    ]
    frames = []
    for s in sources:
        df = s.trace
        if "src" not in df.columns or "dst" not in df.columns:
            continue
        kind = (
            df["kind"]
            if "kind" in df.columns
            else pd.Series("transfer", index=df.index).where(df["src"] != "", "")
        )
        part = df.loc[
            kind == "transfer", ["run_id", "iteration", "src", "dst", "bytes", "start", "end"]
        ].copy()
        real = _measured(df)
        part["phase"] = df.loc[kind == "transfer", "phase"] if "phase" in df.columns else "other"
        part["kind"], part["op"], part["devices"] = "transfer", "", [()] * len(part)
        part["task"] = (
            df.loc[kind == "transfer", "task"] if "task" in df.columns else [f"#{i}" for i in part.index]
        )
        frames.append((_hops_as_one(_exchange_ends(part)) if real else part).assign(source=s.name))
        coll = df[kind == "collective"]
        if len(coll) and "task" in coll.columns and "buffer_bytes" in coll.columns:
            keys = ["run_id", "task", "iteration"]
            members = coll.groupby(keys, sort=False)["device"].agg(lambda d: tuple(sorted(set(d))))
            part = coll[["run_id", "task", "iteration", "start", "end"]].copy()
            part["bytes"] = coll["buffer_bytes"].to_numpy()
            part["devices"] = [members[k] for k in zip(*(coll[c] for c in keys), strict=True)]
            part["op"] = coll["phase"].map(lambda p: COLLECTIVE_OPS.get(p, "")).to_numpy()
            part["phase"] = coll["phase"].to_numpy()
            part["kind"], part["src"], part["dst"] = "collective", "", ""
            if real:  # like an exchange's (see _exchange_ends), a collective's rows end with its last
                part["end"] = part.groupby(keys, sort=False)["end"].transform("max").to_numpy()
            frames.append(part.assign(source=s.name))
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def _measured(df: pd.DataFrame) -> bool:
    """Whether a trace was measured (a real run's), not simulated: only measured workers differ."""
    return "executor" in df.columns and bool((df["executor"] == "real").any())


MIGRATION_PHASE = "migrate"


def hop_of(task: str) -> str:
    """The hop a migration task belongs to: its id without the part it carries, e.g.
    ``i3.w1.m1.migrate.model`` -> ``i3.w1.m1.migrate``."""
    return task.rsplit(".", 1)[0]


def _hops_as_one(part: pd.DataFrame) -> pd.DataFrame:
    """Each hop (migration rows of one run, iteration and :func:`hop_of`) whose rows overlap one
    another as one row: its summed bytes from its first start to its last end (the module
    docstring). A hop whose rows follow one another keeps them. Measured traces only: the
    simulator runs a hop's parts as transfers of their own."""
    hop = (part["phase"] == MIGRATION_PHASE).to_numpy() & (part["task"].astype(str) != "")
    if not hop.any() or "run_id" not in part.columns:
        return part
    part = part.copy()
    rows = part.loc[hop]
    names = rows["task"].astype(str).map(hop_of)
    drop: list[Any] = []
    for name, group in rows.groupby([rows["run_id"], rows["iteration"], names], sort=False):
        if len(group) < 2:
            continue
        group = group.sort_values(["start", "end"], kind="stable")
        start, end = group["start"].to_numpy(), group["end"].to_numpy()
        if not (start[1:] < np.maximum.accumulate(end)[:-1]).any():
            continue  # one after another: each row times its own part
        first = group.index[0]
        part.loc[first, ["start", "end"]] = float(start.min()), float(end.max())
        part.loc[first, "bytes"] = int(group["bytes"].sum())
        part.loc[first, "task"] = name[2]
        drop.extend(group.index[1:])
    return part.drop(index=drop)


def _exchange_ends(part: pd.DataFrame) -> pd.DataFrame:
    """Exchange-phase rows end with the last of their exchange (every row of one run, iteration
    and :func:`exchange_of`).

    An exchange is collective: it starts for all once all have arrived, and the workers
    get their rows at different times (on the 2-core machine, rank 0 gets its rows
    2-4 ms after rank 1 in every iteration); the early one then waits for the late one at
    the next collective. The simulator's workers are alike, so an exchange fitted to each
    row's own time predicts the mean worker, while each iteration goes at the slowest one's
    pace; fitted to the exchange's span, the simulated exchange lasts as long as the real
    one did for the group, and the early worker's wait moves from the all-reduce to it.
    Measured traces only: a simulated exchange's rows differ by their bytes alone. On
    ``gnnwb fidelity``'s grid (8 held out, same real runs) this and the same for collectives
    took the epoch error from 13.6% to 9.5% (median) and 18.4% to 15.7% (worst); on a fresh
    grid of runs from 8.0% to 6.9% and 20.9% to 17.4%.
    """
    exchange = part["phase"].isin(EXCHANGE_PHASES).to_numpy() & (part["task"].astype(str) != "")
    if not exchange.any() or "run_id" not in part.columns:
        return part
    part = part.copy()
    rows = part.loc[exchange]
    key = [rows["run_id"], rows["iteration"], rows["phase"], rows["task"].map(exchange_of)]
    part.loc[exchange, "end"] = rows.groupby(key, sort=False)["end"].transform("max").to_numpy()
    return part


def _overlapping(rows: pd.DataFrame, links: list[tuple[int, ...]]) -> np.ndarray:
    """Rows whose [start, end] overlaps another task's on a shared directed link of the same run.

    A collective's rows (one per device, all of one task) are one interval, from the first
    start to the last end; they do not overlap each other.
    """
    keys = list(zip(rows["source"], rows["run_id"], rows["task"], rows["iteration"], strict=True))
    ids, first = {}, []
    for i, k in enumerate(keys):
        if k not in ids:
            ids[k] = len(first)
            first.append(i)
    task = np.fromiter((ids[k] for k in keys), dtype=np.int64, count=len(keys))
    start = np.full(len(first), np.inf)
    end = np.full(len(first), -np.inf)
    np.minimum.at(start, task, rows["start"].to_numpy(dtype=np.float64))
    np.maximum.at(end, task, rows["end"].to_numpy(dtype=np.float64))
    pairs: dict[tuple[str, str, int], list[int]] = {}
    for t, i in enumerate(first):
        for lid in set(links[i]):
            pairs.setdefault((keys[i][0], keys[i][1], lid), []).append(t)
    hit = np.zeros(len(first), dtype=bool)
    for members in pairs.values():
        if len(members) < 2:
            continue
        m = np.asarray(members)
        m = m[np.argsort(start[m], kind="stable")]
        s, e = start[m], end[m]
        prev_end = np.maximum.accumulate(np.concatenate([[-np.inf], e[:-1]]))
        next_start = np.concatenate([s[1:], [np.inf]])
        hit[m[(prev_end > s) | (next_start < e)]] = True
    return hit[task]


def _narrow(leg: Leg, topo: Topology) -> tuple[int, ...]:
    """A leg's links that sharing with one other transfer could slow: under twice its bottleneck rate."""
    shares = leg.crossings or (1,) * len(leg.links)
    return tuple(
        lid for lid, m in zip(leg.links, shares, strict=True) if topo.capacity[lid] / m < 2 * leg.bandwidth
    )


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
    """Fit link latencies, leg group bandwidths and exchange overheads to ``rows`` (from
    :func:`transfer_rows`) on ``cluster``, the hardware they were measured on (see the module docstring)."""
    topo = Topology(cluster)
    legs, chunk, unknown_op = _row_legs(rows, cluster, topo)
    seconds = (rows["end"] - rows["start"]).to_numpy(dtype=np.float64)
    keep, skipped = _rows_to_fit(rows, legs, seconds, unknown_op, topo, keep_overlapping)
    index = np.flatnonzero(keep)
    kinds_of_links = sorted({k.kind for k in cluster.links})
    result = LinkCalibration(cluster, {}, [(False, False)] * len(cluster.links), len(index), skipped)
    if not len(index):
        return result
    design = _drop_one_size_collectives(_design_matrix(rows, legs, seconds, chunk, index), result)
    design = _drop_undetermined_groups(design, result)
    if not len(design.y):
        return result
    fit, coef, stderr = _solve(design, result)
    latency = {
        design.lat_kinds[j]: (float(coef[j]), float(stderr[j]))
        for j in range(len(design.lat_kinds))
        if j in coef
    }
    per_group = _group_fits(design, fit, coef, stderr)
    _apply(result, cluster, design.lat_kinds, latency, per_group, kinds_of_links)
    result.notes.extend(_bottleneck_notes(result.cluster, design.used, design.groups))
    result.kinds["_overall"] = {"rows": len(design.y), "r2": fit.r2, **fit.spread()}
    return result


def _row_legs(
    rows: pd.DataFrame, cluster: ClusterSpec, topo: Topology
) -> tuple[list[tuple[tuple[Leg, int], ...]], np.ndarray, np.ndarray]:
    """Per row, its legs and how many times each runs (empty: no link crossed or an unknown
    op), the bytes each run of a leg moves, and whether it is a collective of an unknown op."""
    cache: dict[Any, tuple[tuple[Leg, int], ...]] = {}  # many rows share a route: compute it once
    legs: list[tuple[tuple[Leg, int], ...]] = []
    chunk = rows["bytes"].to_numpy(dtype=np.float64).copy()
    unknown_op = np.zeros(len(rows), dtype=bool)
    for i, (source, kind, src, dst, op, devices) in enumerate(
        zip(rows["source"], rows["kind"], rows["src"], rows["dst"], rows["op"], rows["devices"], strict=True)
    ):
        if kind == "collective":
            if not op:
                unknown_op[i] = True
                legs.append(())
                continue
            key: Any = (op, devices)
            if key not in cache:
                where = f"{source}: {op} row {i} ({', '.join(devices)})"
                cache[key] = collective_legs(cluster, topo, op, list(devices), where)
            chunk[i] /= max(len(devices), 1)
        else:
            key = (src, dst)
            if key not in cache:
                where = f"{source}: transfer row {i} ({src} -> {dst})"
                cache[key] = tuple((leg, 1) for leg in route_legs(cluster, topo, src, dst, where))
        legs.append(cache[key])
    return legs, chunk, unknown_op


def _rows_to_fit(
    rows: pd.DataFrame,
    legs: list[tuple[tuple[Leg, int], ...]],
    seconds: np.ndarray,
    unknown_op: np.ndarray,
    topo: Topology,
    keep_overlapping: bool,
) -> tuple[np.ndarray, dict[str, int]]:
    """Which rows the fit can use, and how many were left out for each reason."""
    skipped: dict[str, int] = {}
    keep = np.array([bool(x) for x in legs], dtype=bool)
    is_collective = (rows["kind"] == "collective").to_numpy()
    skipped["collectives_other_ops"] = int(unknown_op.sum())
    skipped["within_one_memory"] = int((~keep & ~is_collective).sum())
    # A collective on one device crosses no link, but its time is the call's fixed cost alone:
    # the row that tells that cost from the ring steps' latency.
    keep |= is_collective & ~unknown_op
    no_time = keep & ~(seconds > 0)
    skipped["no_time"] = int(no_time.sum())
    keep &= ~no_time
    if not keep_overlapping and keep.any():
        # A collective's rows (one per device) overlap each other by design: one row per task is
        # enough for the check, and each overlaps only with other tasks.
        flat = [tuple(lid for leg, _ in ls for lid in _narrow(leg, topo)) for ls in legs]
        shared = _overlapping(rows, flat) & keep
        skipped["overlapping"] = int(shared.sum())
        keep &= ~shared
    return keep, skipped


@dataclass
class _Design:
    """The regression's rows and columns: per kept row its time, source, phase and legs; per
    latency kind and per leg group, each row's coefficient."""

    y: np.ndarray  # seconds
    sources: np.ndarray
    phases: np.ndarray  # per row its phase; an exchange's row: its overhead key (_overhead_keys)
    used: list[tuple[tuple[Leg, int], ...]]  # per row: (leg, times it runs)
    lat_kinds: list[str]
    groups: list[str]
    lat_count: np.ndarray  # per row and latency kind: links of that kind crossed
    lat_given: np.ndarray  # the given hardware's latency, summed per kind
    per_byte: np.ndarray  # per row and leg group: seconds at the given bottleneck bandwidth
    touches: np.ndarray  # per row and leg group: whether the row crosses it

    @property
    def gpos(self) -> dict[str, int]:
        return {g: j for j, g in enumerate(self.groups)}

    def without(self, drop: np.ndarray) -> _Design:
        """The design less the rows in ``drop``, and less the columns no remaining row uses."""
        keep_rows = ~drop
        lat_count, lat_given = self.lat_count[keep_rows], self.lat_given[keep_rows]
        per_byte, touches = self.per_byte[keep_rows], self.touches[keep_rows]
        alive = touches.any(axis=0)
        present = lat_count.any(axis=0)
        return _Design(
            y=self.y[keep_rows],
            sources=self.sources[keep_rows],
            phases=self.phases[keep_rows],
            used=[u for u, k in zip(self.used, keep_rows, strict=True) if k],
            lat_kinds=[k for k, a in zip(self.lat_kinds, present, strict=True) if a],
            groups=[g for g, a in zip(self.groups, alive, strict=True) if a],
            lat_count=lat_count[:, present],
            lat_given=lat_given[:, present],
            per_byte=per_byte[:, alive],
            touches=touches[:, alive],
        )


def _design_matrix(
    rows: pd.DataFrame,
    legs: list[tuple[tuple[Leg, int], ...]],
    seconds: np.ndarray,
    chunk: np.ndarray,
    index: np.ndarray,
) -> _Design:
    """The regression's coefficients for the rows at ``index``."""
    used = [legs[i] for i in index]
    nbytes = chunk[index]
    lat_kinds = sorted({k for ls in used for leg, _ in ls for k in leg.kinds})
    groups = sorted({leg.group for ls in used for leg, _ in ls})
    lat_count = np.zeros((len(index), len(lat_kinds)))
    lat_given = np.zeros((len(index), len(lat_kinds)))
    per_byte = np.zeros((len(index), len(groups)))
    touches = np.zeros((len(index), len(groups)), dtype=bool)
    kpos = {k: j for j, k in enumerate(lat_kinds)}
    gpos = {g: j for j, g in enumerate(groups)}
    for r, ls in enumerate(used):
        for leg, times in ls:
            for k, lat in zip(leg.kinds, leg.latencies, strict=True):
                lat_count[r, kpos[k]] += times
                lat_given[r, kpos[k]] += times * lat
            per_byte[r, gpos[leg.group]] += times * nbytes[r] / leg.bandwidth
            touches[r, gpos[leg.group]] = True
    return _Design(
        y=seconds[index],
        sources=rows["source"].to_numpy()[index],
        phases=_overhead_keys(rows).to_numpy()[index],
        used=used,
        lat_kinds=lat_kinds,
        groups=groups,
        lat_count=lat_count,
        lat_given=lat_given,
        per_byte=per_byte,
        touches=touches,
    )


def _drop_one_size_collectives(design: _Design, result: LinkCalibration) -> _Design:
    """A bandwidth needs rows that move different amounts over its links. Collectives of one buffer
    size and worker count (a training run's all-reduce) cannot tell bandwidth from latency: they are
    left out (counted in ``result``, with a note per leg group); transfers of one size are an error
    (:func:`_check_bandwidths_determined`)."""
    ops = set(COLLECTIVE_OPS.values())
    drop = np.zeros(len(design.y), dtype=bool)
    for g, j in design.gpos.items():
        rows_g = design.touches[:, j]
        if g.rsplit(".", 1)[1] in ops and len(np.unique(design.per_byte[rows_g, j])) < 2:
            drop |= rows_g
            result.notes.append(
                f"{g}: {int(rows_g.sum())} collective row(s) all move the same bytes per step: they cannot tell "
                "bandwidth from latency and were left out (collectives of several sizes or worker counts can)"
            )
    if not drop.any():
        return design
    result.skipped["collectives_one_size"] = int(drop.sum())
    design = design.without(drop)
    result.rows_used = len(design.y)
    return design


def _drop_undetermined_groups(design: _Design, result: LinkCalibration) -> _Design:
    """Every leg group needs :data:`MIN_LINK_ROWS` rows of two or more sizes to fit its bandwidth. A
    group with fewer (a run whose transfers over some links all move one size: a model's migration
    between two workers) is left out with its rows, the hardware's bandwidth kept, and a note says
    which and why; leaving rows out can leave another group short, so it repeats until none is."""
    while len(design.y):
        short = []
        for g, j in design.gpos.items():
            rows_g = design.touches[:, j]
            sizes = np.unique(design.per_byte[rows_g, j])
            if rows_g.sum() < MIN_LINK_ROWS or len(sizes) < 2:
                short.append((g, rows_g, len(sizes)))
        if not short:
            return design
        drop = np.zeros(len(design.y), dtype=bool)
        for g, rows_g, sizes in short:
            kinds, direction = g.rsplit(".", 1)
            result.notes.append(
                f"{_names(list(design.sources[rows_g]))}: {int(rows_g.sum())} row(s) of {sizes} size(s) cannot "
                f"fit the bandwidth of {kinds} links ({direction}) (need at least {MIN_LINK_ROWS} rows of 2 or more "
                "sizes): left out, the hardware's bandwidth kept"
            )
            drop |= rows_g
        result.skipped["bandwidth_undetermined"] = result.skipped.get("bandwidth_undetermined", 0) + int(
            drop.sum()
        )
        design = design.without(drop)
        result.rows_used = len(design.y)
    return design


def _solve(design: _Design, result: LinkCalibration) -> tuple[Fit, dict[int, float], dict[int, float]]:
    """The regression over the columns the rows determine; returns the fit and, per fitted
    column, its coefficient and standard error. Sets ``result.overheads``."""
    lat_kinds, groups = design.lat_kinds, design.groups
    bottleneck_kinds = {k for g in groups for k in g.rsplit(".", 1)[0].split("+")}
    # An exchange's fixed cost, one unknown per exchange phase and protocol present; it is told
    # apart from the links' latencies only by rows of other phases over the same links (microbenchmarks).
    exchanges = sorted(str(k) for k in set(design.phases) if str(k).split(".", 1)[0] in FIXED_COST_PHASES)
    base = len(lat_kinds) + len(groups)
    exchange_columns = (
        np.stack([(design.phases == p).astype(float) for p in exchanges], axis=1) if exchanges else None
    )
    x = np.hstack(
        [design.lat_count, design.per_byte] + ([exchange_columns] if exchange_columns is not None else [])
    )
    w = 1.0 / design.y**2
    # Unknowns the rows cannot tell apart: an exchange's overhead goes first (its time stays in the
    # latency, as without it), then latencies keep the given hardware's, non-bottleneck kinds first.
    order = [base + k for k in range(len(exchanges))] + sorted(
        range(len(lat_kinds)), key=lambda j: (lat_kinds[j] in bottleneck_kinds, lat_kinds[j])
    )
    columns = independent_columns(x, w, order)
    if any(len(lat_kinds) + j not in columns for j in range(len(groups))):
        lost = [groups[j] for j in range(len(groups)) if len(lat_kinds) + j not in columns][0]
        raise CalibrationError(
            f"{_names(list(design.sources))}: the rows cannot tell the bandwidth of {lost.rsplit('.', 1)[0]} links "
            f"({lost.rsplit('.', 1)[1]}) from the others'; add transfers that use those links alone"
        )
    fixed = [j for j in range(len(lat_kinds)) if j not in columns]
    offset = design.lat_given[:, fixed].sum(axis=1) if fixed else np.zeros(len(design.y))
    fit = relative_nnls(x[:, columns], design.y, offset)
    coef = dict(zip(columns, fit.coef, strict=True))
    stderr = dict(zip(columns, fit.stderr, strict=True))
    result.overheads = {
        p: (float(coef[base + k]), float(stderr[base + k]))
        for k, p in enumerate(exchanges)
        if base + k in coef
    }
    _phase_fallbacks(result.overheads)
    for k, p in enumerate(exchanges):
        if base + k not in coef:
            remedy = (
                "a one-worker run, whose calls are the fixed cost alone"
                if p.split(".", 1)[0] in COLLECTIVE_OPS
                else "the point-to-point microbenchmark over the same links"
            )
            result.notes.append(
                f"{p}: the rows cannot tell its fixed cost per call from the links' latency (add {remedy}); "
                "it stays in the latency"
            )
    return fit, coef, stderr


def _overhead_keys(rows: pd.DataFrame) -> pd.Series:
    """Per row the key its fixed cost is fitted under: an exchange phase's row with a task id,
    ``phase.protocol`` (:func:`sim.costmodel.exchange_protocol`: schemes exchange one phase's rows
    by protocols that cost differently); any other row, its phase."""
    phase = rows["phase"].astype(str)
    task = rows["task"].astype(str) if "task" in rows.columns else pd.Series("", index=rows.index)
    protocol = task.map(exchange_protocol)
    keyed = phase.isin(EXCHANGE_PHASES) & (protocol != "")
    return phase.where(~keyed, phase + "." + protocol)


def _phase_fallbacks(overheads: dict[str, tuple[float, float]]) -> None:
    """Give each phase fitted only per protocol a phase entry, the median of its protocols' (what a
    protocol no fitted trace used gets)."""
    by_phase: dict[str, list[tuple[float, float]]] = {}
    for key, value in overheads.items():
        if "." in key:
            by_phase.setdefault(key.split(".", 1)[0], []).append(value)
    for phase, values in by_phase.items():
        if phase not in overheads:
            overheads[phase] = (
                float(np.median([v for v, _ in values])),
                float(np.median([e for _, e in values])),
            )


def _group_fits(
    design: _Design, fit: Fit, coef: dict[int, float], stderr: dict[int, float]
) -> dict[str, dict[str, Any]]:
    """Per leg group: its rows, fitted time-per-byte factor, bandwidth scale and how well it fits."""
    per_group: dict[str, dict[str, Any]] = {}
    for g, j in design.gpos.items():
        c = float(coef[len(design.lat_kinds) + j])
        se = float(stderr[len(design.lat_kinds) + j])
        mask = design.touches[:, j]
        given = {leg.bandwidth for ls in design.used for leg, _ in ls if leg.group == g}
        entry: dict[str, Any] = {
            "rows": int(mask.sum()),
            "time_per_byte_factor": c,
            "bandwidth_scale": 1.0 / c if c > 0 else float("inf"),
            "bandwidth_rel_stderr": se / c if c > 0 else float("inf"),
            "r2": r_squared(design.y[mask], fit.predicted[mask]),
            **fit.spread(mask),
        }
        if len(given) == 1 and c > 0:
            entry["bandwidth"] = next(iter(given)) / c
        per_group[g] = entry
    return per_group


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


def _bottleneck_notes(
    cluster: ClusterSpec, used: list[tuple[tuple[Leg, int], ...]], groups: list[str]
) -> list[str]:
    """Leg groups whose bottleneck moved to another kind once the fitted values were applied."""
    topo = Topology(cluster)
    notes = []
    seen: set[tuple[int, ...]] = set()
    for ls in used:
        for leg, _ in ls:
            if leg.links in seen:
                continue
            seen.add(leg.links)
            shares = leg.crossings or (1,) * len(leg.links)
            caps = [topo.capacity[lid] / m for lid, m in zip(leg.links, shares, strict=True)]
            low = min(caps)
            kinds = [cluster.links[lid // 2].kind for lid in leg.links]
            now = {k for k, c in zip(kinds, caps, strict=True) if c <= low * (1 + TIE)}
            if not now & set(leg.bottleneck):
                notes.append(
                    f"leg group {leg.group}: with the fitted values its bottleneck is {'+'.join(sorted(now))} "
                    "instead; the given hardware's other links may be narrower than measured"
                )
    return sorted(set(notes))
