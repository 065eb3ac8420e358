"""Flow-level bandwidth sharing: max-min fair rates over directed links.

A flow is a transfer in progress: bytes left, the directed links it crosses, and a
rate. A flow may list a link more than once (a collective step moving several chunks
in lockstep, see ``sim.collectives``): it then takes its rate once per listing from
that link's capacity, and counts once per listing in the link's fair share. Whenever
flows start or end, the rates of the flows connected to them (flows that share a link,
transitively) are recomputed by progressive filling: raise all rates together, freeze
the flows of the link that saturates first at its fair share (ties go to the link
listed first), repeat. Flows in other components keep their rates and their
completion times.

Changes at one instant are batched: starting or ending a flow only marks links dirty,
and one rebalance runs after every other event of that instant (priority ``LATE``),
so a collective step that starts n flows at once recomputes rates once, not n times.

Why arrays and one wake-up. An all-to-all among 128 GPUs is thousands of concurrent
flows in one component, and every completion changes every other flow's rate: with a
heap entry per flow and rate change, and the component search and progressive filling
in Python, one iteration of paper 004's pipeline on 128 GPUs took minutes (44,000
rebalances of about 160 flows each pushed 7.1M completions). Flows therefore live in
slot arrays (bytes left, rate, the time of their last rate change, their completion
time), the component search, progressive filling and rescheduling run in numba over
them, and the network keeps one clock entry: a wake-up at the earliest completion,
which ends every flow due then, in the order their completion times were set (the
order their completion events had when each flow had its own).

Only the links that can bind are walked (:mod:`sim.binding`): on a fat tree most links
of a route are wider than the narrower links that feed them, together, and leaving them out
gives the same rates to the bit while components split where only such links joined them
(an all-to-all's flows out of one machine and into another share only the spine). A
component is re-rated in the order its flows started, so that completions due at one
instant end in an order that does not depend on which links were left out.

The common case of a flow that starts alone (the only flow started since the last
rebalance, on links that were all empty) skips the component search and takes the
rate cached on its link list: a ring collective's steps are mostly such flows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numba
import numpy as np

from sim.binding import BindingLinks
from sim.clock import LATE, SimClock

# Ended flows are squeezed out of the slot arrays once they are at least this many and at
# least as many as the flows in progress: every scan (the earliest completion, the flows on
# each link) then stays within twice the flows in progress, at O(1) amortised per flow.
COMPACT_MIN = 64

# A slot's state (``FlowNetwork._state``).
FREE, STARTED, RATED = 0, 1, 2  # ended (or never used); in progress without a rate yet; with one
# The per-slot arrays of ``FlowNetwork`` (``_values`` holds one row per float, below).
SLOT_ARRAYS = ("_state", "_path_of", "_order", "_values")
# Rows of ``FlowNetwork._values``.
REMAINING, RATE, UPDATED, FINISH = 0, 1, 2, 3  # bytes left at UPDATED, the rate since, its completion time


class Flow:
    """A handle on a flow in progress (its slot moves when the arrays are compacted)."""

    __slots__ = ("net", "slot", "on_done")

    def __init__(self, net: FlowNetwork, slot: int, on_done: Callable[[], None]) -> None:
        self.net = net
        self.slot = slot
        self.on_done = on_done

    @property
    def rate(self) -> float:
        return float(self.net._values[RATE, self.slot])


class FlowNetwork:
    """The set of flows in progress on a topology's directed links."""

    def __init__(self, clock: SimClock, capacity: Sequence[float]) -> None:
        self.clock = clock
        self.capacity = np.asarray(capacity, dtype=np.float64)
        n_links = self.capacity.shape[0]
        self.occupancy = [0] * n_links  # flows in progress on each link
        self.rebalances = 0
        # Link lists: per distinct list, its links as listed and its distinct links (in
        # order of first listing), both as offsets into growing arrays.
        self._paths: dict[tuple[int, ...], int] = {}
        self._alone: list[float] = []  # per path: the rate of one flow alone on it (-1: not yet known)
        self._binding = BindingLinks(self.capacity)  # per path, the links progressive filling walks
        # Flow slots, in the order flows started (compaction keeps that order): state,
        # link list and completion-order number; the float values by row.
        self._flows: list[Flow | None] = []
        self._state = np.zeros(256, dtype=np.int8)
        self._path_of = np.zeros(256, dtype=np.int64)
        self._order = np.zeros(256, dtype=np.int64)
        self._values = np.zeros((4, 256), dtype=np.float64)
        self._used = 0
        self._ended = 0
        self._seq = 0  # completion times set so far: orders flows due at one instant
        self._dirty: dict[int, None] = {}
        self._rebalance_pending = False
        self._wake_at = -1.0  # when the pending wake-up fires (-1: none pending)
        self._wake_version = 0
        self._due: list[int] = []  # the flows that end then, in order
        self._due_known = True  # the wake-up and ``_due`` hold for every flow with a rate
        self._last: Flow | None = None  # the flow started last
        self._last_alone = False  # it found its links empty
        self._started = 0  # flows started since the last rebalance
        self._scratch = np.full(n_links, -1, dtype=np.int64)  # per link, cleared after each use
        # Per link, the flows on it in start order (CSR), as of the last flow started: valid until a
        # flow starts or the slots are compacted. Flows that ended since are still listed (their
        # state is FREE) and the component search skips them, so a rebalance after completions
        # only (most of them: an all-to-all's flows end one by one) reuses it.
        self._on_links: tuple[np.ndarray, np.ndarray] | None = None

    def _grow_slots(self) -> None:
        n, used = 2 * self._state.shape[0], self._used
        for name in SLOT_ARRAYS:
            old = getattr(self, name)
            array = np.zeros(old.shape[:-1] + (n,), dtype=old.dtype)
            array[..., :used] = old[..., :used]
            setattr(self, name, array)

    def _path(self, links: tuple[int, ...]) -> int:
        pid = self._paths.get(links)
        if pid is None:
            pid = self._paths[links] = len(self._alone)
            self._binding.add(links)
            self._alone.append(-1.0)
        return pid

    def start(self, links: tuple[int, ...], nbytes: float, on_done: Callable[[], None]) -> Flow:
        """Start moving ``nbytes`` over ``links`` (non-empty); ``on_done()`` runs when the last byte is through."""
        pid = self._path(links)
        if self._ended >= COMPACT_MIN and 2 * self._ended >= self._used:
            self._compact()
        if self._used == self._state.shape[0]:
            self._grow_slots()
        slot = self._used
        self._used += 1
        flow = self._last = Flow(self, slot, on_done)
        self._on_links = None
        self._flows.append(flow)
        self._state[slot] = STARTED
        self._path_of[slot] = pid
        self._values[REMAINING, slot] = nbytes
        occupancy = self.occupancy
        dirty = self._dirty
        alone = True
        distinct = self._binding.distinct_of[pid]
        kept = self._binding.kept_of[pid]  # the links that can bind: only they are re-rated
        if kept is not distinct:
            for lid in distinct:
                occupancy[lid] += 1
            for lid in kept:
                if occupancy[lid] > 1:
                    alone = False
                dirty[lid] = None
        else:
            for lid in distinct:
                if occupancy[lid]:
                    alone = False
                occupancy[lid] += 1
                dirty[lid] = None
        self._last_alone = alone
        self._started += 1
        self._rebalance_later()
        return flow

    def _rebalance_later(self) -> None:
        """Recompute rates once, after every other event of this instant."""
        if not self._rebalance_pending:
            self._rebalance_pending = True
            self.clock.call_later(0.0, self._rebalance, LATE)

    def close(self) -> None:
        """Forget the flows' callbacks (they may be bound to the caller: a cycle)."""
        self._last = None
        self._flows = [None] * self._used

    def _compact(self) -> None:
        """Squeeze ended flows out of the slot arrays, keeping the order flows started in."""
        keep = np.flatnonzero(self._state[: self._used])
        n = keep.shape[0]
        for name in SLOT_ARRAYS:
            array = getattr(self, name)
            array[..., :n] = array[..., keep]
        self._state[n : self._used] = FREE
        flows = [self._flows[i] for i in keep.tolist()]
        for slot, flow in enumerate(flows):
            flow.slot = slot  # type: ignore[union-attr]
        self._flows = flows
        self._due = [int(x) for x in np.searchsorted(keep, self._due)] if self._due else []
        self._used = n
        self._ended = 0
        self._on_links = None

    def _wake(self, version: int) -> None:
        """End every flow due now, in the order their completion times were set."""
        if version != self._wake_version:
            return  # superseded: an earlier completion was armed after this one
        self._wake_at = -1.0
        self._due_known = False
        flows = self._flows
        # Handles, not slots: a callback may start a flow, and that may compact the slots.
        due = [flows[slot] for slot in self._due]
        self._due = []
        dirty = self._dirty
        occupancy = self.occupancy
        kept_of = self._binding.kept_of
        distinct_of = self._binding.distinct_of
        for flow in due:
            slot = flow.slot  # type: ignore[union-attr]
            self._state[slot] = FREE
            self._ended += 1
            self._flows[slot] = None  # its callback may hold the caller: let it go now
            pid = self._path_of[slot]
            distinct = distinct_of[pid]
            kept = kept_of[pid]
            if kept is not distinct:
                for lid in distinct:
                    occupancy[lid] -= 1
                for lid in kept:
                    if occupancy[lid]:  # a link left idle has nobody to speed up
                        dirty[lid] = None
            else:
                for lid in distinct:
                    occupancy[lid] -= 1
                    if occupancy[lid]:
                        dirty[lid] = None
            if dirty:
                self._rebalance_later()
            flow.on_done()  # type: ignore[union-attr]
        if not self._rebalance_pending:
            self._arm()

    def _arm(self) -> None:
        """Keep one wake-up pending, at the earliest completion of any flow (and know who ends then)."""
        due = _due(self._state, self._values, self._order, self._used)
        self._due = due.tolist()
        self._due_known = True
        if not self._due:
            return
        self._wake_on(float(self._values[FINISH, self._due[0]]))

    def _wake_on(self, when: float) -> None:
        if when == self._wake_at:
            return
        self._wake_version += 1
        self._wake_at = when
        version = self._wake_version
        self.clock.call_at(when, lambda: self._wake(version))

    def _rebalance(self) -> None:
        self._rebalance_pending = False
        self.rebalances += 1
        dirty = self._dirty
        self._dirty = {}
        last = self._last
        started = self._started
        self._started = 0
        now = self.clock.now
        binding = self._binding
        kept = binding.kept
        if started == 1 and self._last_alone and last is not None:
            pid = int(self._path_of[last.slot])
            if dirty.keys() == binding.kept_set[pid]:
                # The flow that just started alone is the only flow on its links now, and
                # the dirty links are its links: its rate is its link list's alone rate.
                rate = self._alone[pid]
                slot = last.slot
                if rate < 0.0:
                    rate = self._alone[pid] = float(
                        _progressive_filling(
                            np.array([slot]), self._path_of, kept.ids, kept.start, kept.end, self.capacity,
                            self._scratch,
                        )[0]
                    )  # fmt: skip
                self._seq = _set_rate(slot, rate, now, self._state, self._values, self._order, self._seq)
                if not self._due_known:
                    self._arm()
                    return
                # No other flow's rate changed: the earliest completion moves only if this
                # flow's is as early (it was rated last, so it ends last among equals).
                finish = float(self._values[FINISH, slot])
                if self._wake_at < 0.0 or finish < self._wake_at:
                    self._due = [slot]
                    self._wake_on(finish)
                elif finish == self._wake_at:
                    self._due.append(slot)
                return
        if dirty:
            if self._on_links is None:
                distinct = binding.kept_distinct
                self._on_links = _flows_on_links(
                    self._used, self._state, self._path_of, distinct.ids, distinct.start, distinct.end,
                    self.capacity.shape[0],
                )  # fmt: skip
            on_ptr, on_flows = self._on_links
            self._seq = _rebalance_component(
                np.fromiter(dirty, dtype=np.int64, count=len(dirty)), self._used, on_ptr, on_flows,
                self._state, self._path_of, self._values, self._order, self._seq,
                kept.ids, kept.start, kept.end, self.capacity, self._scratch, now,
            )  # fmt: skip
        self._arm()


# ---- kernels ---------------------------------------------------------------------------
@numba.njit(cache=True)
def _due(state: np.ndarray, values: np.ndarray, order: np.ndarray, used: int) -> np.ndarray:
    """The flows in progress with the earliest completion time, in the order their times were set."""
    best = np.inf
    n = 0
    for s in range(used):
        if state[s] == RATED:
            t = values[FINISH, s]
            if t < best:
                best = t
                n = 1
            elif t == best:
                n += 1
    slots = np.empty(n, dtype=np.int64)
    keys = np.empty(n, dtype=np.int64)
    k = 0
    for s in range(used):
        if state[s] == RATED and values[FINISH, s] == best:
            slots[k] = s
            keys[k] = order[s]
            k += 1
    if n > 1:
        return slots[np.argsort(keys, kind="mergesort")]
    return slots


@numba.njit(cache=True, error_model="numpy")
def _set_rate(
    s: int, rate: float, now: float, state: np.ndarray, values: np.ndarray, order: np.ndarray, seq: int
) -> int:
    """Give flow ``s`` its new rate from now on and set its completion time at that rate."""
    if state[s] == RATED:
        left = values[REMAINING, s] - values[RATE, s] * (now - values[UPDATED, s])
        values[REMAINING, s] = left if left > 0.0 else 0.0
    state[s] = RATED
    values[UPDATED, s] = now
    values[RATE, s] = rate
    values[FINISH, s] = now + values[REMAINING, s] / rate
    order[s] = seq
    return seq + 1


@numba.njit(cache=True, error_model="numpy")
def _rebalance_component(
    dirty: np.ndarray, used: int, on_ptr: np.ndarray, on_flows: np.ndarray, state: np.ndarray,
    path_of: np.ndarray, values: np.ndarray, order: np.ndarray, seq: int,
    listed: np.ndarray, start: np.ndarray, end: np.ndarray, capacity: np.ndarray, scratch: np.ndarray, now: float,
) -> int:  # fmt: skip
    """Recompute the max-min rates of every flow connected to a ``dirty`` link.

    ``on_ptr, on_flows``: per link, the flows on it in start order (:func:`_flows_on_links`,
    possibly from before some of them ended); ``listed[start[p]:end[p]]``: path ``p``'s links
    that can bind (:class:`sim.binding.BindingLinks`). The component is taken in the order
    its flows started, which is the order their completion times are set in: the order of
    a breadth-first search would depend on which links are left out. Returns the next
    completion-order number.
    ``scratch`` (one entry per link, all -1) is left as it was found.
    """
    comp = np.sort(
        _component(dirty, used, state, path_of, listed, start, end, on_ptr, on_flows, capacity.shape[0])
    )
    if comp.shape[0] == 0:
        return seq
    new_rate = _progressive_filling(comp, path_of, listed, start, end, capacity, scratch)
    for i in range(comp.shape[0]):  # start order: the order completion times are set in
        s = comp[i]
        rate = new_rate[i]
        if rate != values[RATE, s] or state[s] != RATED:  # else unchanged: its completion time stands
            seq = _set_rate(s, rate, now, state, values, order, seq)
    return seq


@numba.njit(cache=True)
def _flows_on_links(
    used: int, state: np.ndarray, path_of: np.ndarray, distinct: np.ndarray, start: np.ndarray, end: np.ndarray,
    n_links: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per link, the flows in progress on it (once each), in the order they started (CSR)."""
    on_count = np.zeros(n_links + 1, dtype=np.int64)
    for s in range(used):
        if state[s] != FREE:
            p = path_of[s]
            for k in range(start[p], end[p]):
                on_count[distinct[k] + 1] += 1
    on_ptr = np.cumsum(on_count)
    on_flows = np.empty(on_ptr[n_links], dtype=np.int64)
    fill = on_ptr[:-1].copy()
    for s in range(used):
        if state[s] != FREE:
            p = path_of[s]
            for k in range(start[p], end[p]):
                lid = distinct[k]
                on_flows[fill[lid]] = s
                fill[lid] += 1
    return on_ptr, on_flows


@numba.njit(cache=True)
def _component(
    dirty: np.ndarray, used: int, state: np.ndarray, path_of: np.ndarray, listed: np.ndarray, start: np.ndarray,
    end: np.ndarray, on_ptr: np.ndarray, on_flows: np.ndarray, n_links: int,
) -> np.ndarray:  # fmt: skip
    """The flows in progress connected to a ``dirty`` link: breadth first from them, a link's
    flows in start order (ended flows still listed in ``on_flows`` are passed over)."""
    in_comp = np.zeros(used, dtype=np.bool_)
    comp = np.empty(used, dtype=np.int64)
    m = 0
    link_seen = np.zeros(n_links, dtype=np.bool_)
    frontier = np.empty(n_links, dtype=np.int64)
    grown = np.empty(n_links, dtype=np.int64)
    nf = 0
    for lid in dirty:
        if not link_seen[lid]:
            link_seen[lid] = True
            frontier[nf] = lid
            nf += 1
    while nf:
        ng = 0
        for x in range(nf):
            lid = frontier[x]
            for y in range(on_ptr[lid], on_ptr[lid + 1]):
                s = on_flows[y]
                if not in_comp[s] and state[s] != FREE:
                    in_comp[s] = True
                    comp[m] = s
                    m += 1
                    p = path_of[s]
                    for k in range(start[p], end[p]):
                        other = listed[k]
                        if not link_seen[other]:
                            link_seen[other] = True
                            grown[ng] = other
                            ng += 1
        frontier, grown = grown, frontier
        nf = ng
    return comp[:m]


@numba.njit(cache=True, error_model="numpy")
def _progressive_filling(
    comp: np.ndarray, path_of: np.ndarray, listed: np.ndarray, start: np.ndarray, end: np.ndarray,
    capacity: np.ndarray, scratch: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """Max-min fair rates of the flows ``comp`` (one component), in that order.

    Path ``p`` lists the links ``listed[start[p]:end[p]]``.
    The component's links are numbered by first listing (flows in component order, each
    flow's links as listed); ``scratch`` maps link to number and is reset to -1 after.
    """
    m = comp.shape[0]
    n_local = 0
    local_links = np.empty(capacity.shape[0], dtype=np.int64)
    for i in range(m):
        p = path_of[comp[i]]
        for k in range(start[p], end[p]):
            lid = listed[k]
            if scratch[lid] < 0:
                scratch[lid] = n_local
                local_links[n_local] = lid
                n_local += 1
    count = np.zeros(n_local, dtype=np.int64)  # listings by flows not yet fixed
    cap = np.empty(n_local, dtype=np.float64)
    for j in range(n_local):
        cap[j] = capacity[local_links[j]]
    for i in range(m):
        p = path_of[comp[i]]
        for k in range(start[p], end[p]):
            count[scratch[listed[k]]] += 1
    users_ptr = np.zeros(n_local + 1, dtype=np.int64)
    users_ptr[1:] = np.cumsum(count)
    users = np.empty(users_ptr[n_local], dtype=np.int64)
    fill = users_ptr[:-1].copy()
    for i in range(m):
        p = path_of[comp[i]]
        for k in range(start[p], end[p]):
            j = scratch[listed[k]]
            users[fill[j]] = i
            fill[j] += 1
    new_rate = _fill(m, n_local, cap, count, users_ptr, users, comp, path_of, listed, start, end, scratch)
    for j in range(n_local):
        scratch[local_links[j]] = -1
    return new_rate


@numba.njit(cache=True, error_model="numpy")
def _fill(
    m: int, n_local: int, cap: np.ndarray, count: np.ndarray, users_ptr: np.ndarray, users: np.ndarray,
    comp: np.ndarray, path_of: np.ndarray, listed: np.ndarray, start: np.ndarray, end: np.ndarray,
    scratch: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """Raise every rate together; freeze the flows of the link that saturates first; repeat.

    A heap of (share, link): the tightest link first and, among equally tight ones, the
    first listed (what a scan of the links in order finds). Fixing a flow at the least
    share s leaves a link of capacity c and n flows (c / n >= s) the share
    (c - s) / (n - 1) >= c / n, so shares grow: an entry is refreshed lazily, when it
    reaches the top with an old share (once per link, not once per flow fixed). Rounding
    can make a share shrink by an ulp (c = n s): that entry moves up at once.
    """
    heap_share = np.empty(n_local, dtype=np.float64)
    heap_link = np.empty(n_local, dtype=np.int64)
    pos = np.empty(n_local, dtype=np.int64)  # each link's place in the heap
    for j in range(n_local):
        heap_share[j] = cap[j] / count[j]
        heap_link[j] = j
        pos[j] = j
    size = n_local
    for j in range(n_local // 2 - 1, -1, -1):
        _sift_down(heap_share, heap_link, pos, size, j)
    new_rate = np.full(m, -1.0)
    left_to_fix = m
    while left_to_fix:
        best = heap_link[0]
        if count[best] == 0:  # no flow left to fix on it
            size -= 1
            heap_share[0], heap_link[0] = heap_share[size], heap_link[size]
            pos[heap_link[0]] = 0
            _sift_down(heap_share, heap_link, pos, size, 0)
            continue
        share = cap[best] / count[best]
        if share != heap_share[0]:  # it grew since it was queued
            heap_share[0] = share
            _sift_down(heap_share, heap_link, pos, size, 0)
            continue
        for u in range(users_ptr[best], users_ptr[best + 1]):
            i = users[u]
            if new_rate[i] >= 0.0:
                continue
            new_rate[i] = share
            left_to_fix -= 1
            p = path_of[comp[i]]
            for k in range(start[p], end[p]):
                j = scratch[listed[k]]
                n = count[j] - 1
                count[j] = n
                if n:
                    left = cap[j] - share
                    cap[j] = left if left > 0.0 else 0.0
                    now_share = cap[j] / n
                    if now_share < heap_share[pos[j]]:
                        heap_share[pos[j]] = now_share
                        _sift_up(heap_share, heap_link, pos, pos[j])
    return new_rate


@numba.njit(cache=True)
def _before(share: np.ndarray, link: np.ndarray, a: int, b: int) -> bool:
    return share[a] < share[b] or (share[a] == share[b] and link[a] < link[b])


@numba.njit(cache=True)
def _swap(share: np.ndarray, link: np.ndarray, pos: np.ndarray, a: int, b: int) -> None:
    share[a], share[b] = share[b], share[a]
    link[a], link[b] = link[b], link[a]
    pos[link[a]] = a
    pos[link[b]] = b


@numba.njit(cache=True)
def _sift_down(share: np.ndarray, link: np.ndarray, pos: np.ndarray, size: int, i: int) -> None:
    """Restore the heap order of ``(share, link)`` below position ``i``."""
    while True:
        small = i
        for c in (2 * i + 1, 2 * i + 2):
            if c < size and _before(share, link, c, small):
                small = c
        if small == i:
            return
        _swap(share, link, pos, i, small)
        i = small


@numba.njit(cache=True)
def _sift_up(share: np.ndarray, link: np.ndarray, pos: np.ndarray, i: int) -> None:
    """Restore the heap order of ``(share, link)`` above position ``i``."""
    while i > 0:
        parent = (i - 1) // 2
        if not _before(share, link, i, parent):
            return
        _swap(share, link, pos, i, parent)
        i = parent
