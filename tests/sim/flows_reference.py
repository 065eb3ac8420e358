"""The flow network before its array rewrite: per-flow heap entries and Python progressive filling.

Kept only as the oracle of ``tests/sim/test_flows_oracle.py``: ``sim.flows`` must end every
flow at the same time, to the bit, and in the same order. Not imported by the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from sim.clock import LATE, SimClock

MEMO_LIMIT = 100_000  # memoised components kept before the memo starts afresh


class _Path:
    """A link list's distinct links (as dict keys) and their flow sets, found once per list."""

    __slots__ = ("marks", "sets", "pairs", "alone")

    def __init__(self, links: tuple[int, ...], flows_on: list[dict[Flow, None]]) -> None:
        self.alone: float | None = None  # the max-min rate of one flow alone on these links
        self.marks = dict.fromkeys(links)
        self.sets = [flows_on[lid] for lid in self.marks]
        self.pairs = list(zip(self.marks, self.sets, strict=True))


class Flow:
    __slots__ = ("links", "path", "remaining", "rate", "updated", "version", "on_done", "number")

    def __init__(
        self, links: tuple[int, ...], path: _Path, nbytes: float, now: float, on_done: Callable[[], None],
        number: int,
    ):  # fmt: skip
        self.number = number  # flows started before it
        self.links = links
        self.path = path
        self.remaining = float(nbytes)
        self.rate = 0.0
        self.updated = now
        self.version = 0
        self.on_done = on_done


class FlowNetwork:
    """The set of flows in progress on a topology's directed links."""

    def __init__(self, clock: SimClock, capacity: Sequence[float]) -> None:
        self.clock = clock
        self.capacity = list(capacity)
        # Per directed link, its flows in insertion order (dicts, not sets: iteration
        # order must not depend on object addresses, or traces would not repeat).
        self.flows_on: list[dict[Flow, None]] = [{} for _ in self.capacity]
        self._dirty: dict[int, None] = {}
        self._rebalance_pending = False
        self.rebalances = 0
        self._memo: dict[tuple[tuple[int, ...], ...], tuple[float, ...]] = {}
        self._paths: dict[tuple[int, ...], _Path] = {}
        self._last: Flow | None = None  # the flow started last
        self._last_alone = False  # it found its links empty
        self._started = 0  # flows started since the last rebalance
        self._flows_started = 0

    def start(self, links: tuple[int, ...], nbytes: float, on_done: Callable[[], None]) -> Flow:
        """Start moving ``nbytes`` over ``links`` (non-empty); ``on_done()`` runs when the last byte is through."""
        path = self._paths.get(links)
        if path is None:
            path = self._paths[links] = _Path(links, self.flows_on)
        flow = self._last = Flow(links, path, nbytes, self.clock.now, on_done, self._flows_started)
        self._flows_started += 1
        self._last_alone = not any(path.sets)
        self._started += 1
        for on_link in path.sets:
            on_link[flow] = None
        self._dirty.update(path.marks)
        if not self._rebalance_pending:
            self._rebalance_pending = True
            self.clock.call_later(0.0, self._rebalance, LATE)
        return flow

    def close(self) -> None:
        """Forget the last flow started (its ``on_done`` may be bound to the caller: a cycle)."""
        self._last = None

    def _finish(self, flow: Flow, version: int) -> None:
        if flow.version != version:
            return  # a stale completion: the rate changed after it was scheduled
        dirty = self._dirty
        for lid, on_link in flow.path.pairs:  # each link once, in order of first listing
            del on_link[flow]
            if on_link:  # a link left idle has nobody to speed up
                dirty[lid] = None
        if dirty and not self._rebalance_pending:
            self._rebalance_pending = True
            self.clock.call_later(0.0, self._rebalance, LATE)
        flow.on_done()

    def _rebalance(self) -> None:
        self._rebalance_pending = False
        self.rebalances += 1
        flows_on = self.flows_on
        # The component: every flow reachable from a dirty link through shared links.
        comp_links = self._dirty
        comp_flows: dict[Flow, None] = {}
        self._dirty = {}
        last = self._last
        started = self._started
        self._started = 0
        if started == 1 and self._last_alone and comp_links.keys() == last.path.marks.keys():  # type: ignore[union-attr]
            # The common case of a flow that just started alone (a collective step, say):
            # the only flow started since the last rebalance found its links empty (so
            # it is the only flow on them now), and the dirty links are its links.
            path = last.path  # type: ignore[union-attr]
            rate = path.alone
            if rate is None:
                rate = path.alone = self._max_min([last])[0]  # type: ignore[list-item]
            self._reschedule(last, rate)  # type: ignore[arg-type]
            return
        frontier = list(comp_links)
        while frontier:
            grown = []
            for lid in frontier:
                for f in flows_on[lid]:
                    if f not in comp_flows:
                        comp_flows[f] = None
                        for other in f.links:
                            if other not in comp_links:
                                comp_links[other] = None
                                grown.append(other)
            frontier = grown
        if not comp_flows:
            return
        flows = sorted(comp_flows, key=lambda f: f.number)
        rates = self._max_min(flows)
        reschedule = self._reschedule
        for f, rate in zip(flows, rates, strict=True):  # start order: deterministic rescheduling
            if rate != f.rate or not f.version:  # else unchanged: its scheduled completion stands
                reschedule(f, rate)

    def _reschedule(self, f: Flow, rate: float) -> None:
        """Give ``f`` its new rate from now on and queue its completion at that rate."""
        clock = self.clock
        now = clock.now
        if f.version:
            f.remaining -= f.rate * (now - f.updated)
            if f.remaining < 0.0:
                f.remaining = 0.0
        f.updated = now
        f.rate = rate
        f.version += 1
        clock.call_at(now + f.remaining / rate, partial(self._finish, f, f.version))

    def _max_min(self, flows: list[Flow]) -> tuple[float, ...]:
        """Max-min fair rates of ``flows`` (one connected component), in the same order.

        The result depends only on the flows' link lists, in order (links are visited in
        order of first appearance, and ties between equally tight links go to the first),
        so it is memoised on them: collective steps and recurring copy patterns repeat
        the same component many times.
        """
        key = tuple([f.links for f in flows])
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        capacity = self.capacity
        count: dict[int, int] = {}
        users: dict[int, list[int]] = {}
        for i, links in enumerate(key):
            for lid in links:
                if lid in count:
                    count[lid] += 1
                    users[lid].append(i)
                else:
                    count[lid] = 1
                    users[lid] = [i]
        cap = {lid: capacity[lid] for lid in count}
        rates = [-1.0] * len(key)
        left_to_fix = len(key)
        while left_to_fix:
            best = -1
            share = float("inf")
            for lid, n in count.items():
                s = cap[lid] / n
                if s < share:
                    share = s
                    best = lid
            for i in users[best]:
                if rates[i] >= 0.0:
                    continue
                rates[i] = share
                left_to_fix -= 1
                for lid in key[i]:
                    n = count[lid] - 1
                    if n:
                        count[lid] = n
                        left = cap[lid] - share
                        cap[lid] = left if left > 0.0 else 0.0
                    else:
                        del count[lid]  # no unfixed flow left on it: out of the scan
        result = tuple(rates)
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = result
        return result
