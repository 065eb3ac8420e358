"""Flow-level bandwidth sharing: max-min fair rates over directed links.

A flow is a transfer in progress: bytes left, the directed links it crosses, and a
rate. Whenever flows start or end, the rates of the flows connected to them (flows
that share a link, transitively) are recomputed by progressive filling: raise all
rates together, freeze the flows of the link that saturates first at its fair
share, repeat. Flows in other components keep their rates and their scheduled
completions.

Changes at one instant are batched: starting or ending a flow only marks links dirty,
and one rebalance runs after every other event of that instant (priority ``LATE``),
so a collective step that starts n flows at once recomputes rates once, not n times.
Completion events made stale by a rate change are recognised by a version number and
ignored (the heap cannot remove them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sim.clock import LATE, SimClock


class Flow:
    __slots__ = ("links", "remaining", "rate", "updated", "version", "on_done")

    def __init__(self, links: tuple[int, ...], nbytes: float, now: float, on_done: Callable[[], None]):
        self.links = links
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

    def start(self, links: tuple[int, ...], nbytes: float, on_done: Callable[[], None]) -> Flow:
        """Start moving ``nbytes`` over ``links`` (non-empty); ``on_done()`` runs when the last byte is through."""
        flow = Flow(links, nbytes, self.clock._now, on_done)
        flows_on = self.flows_on
        dirty = self._dirty
        for lid in links:
            flows_on[lid][flow] = None
            dirty[lid] = None
        if not self._rebalance_pending:
            self._rebalance_pending = True
            self.clock.call_later(0.0, self._rebalance, LATE)
        return flow

    def _finish(self, flow: Flow, version: int) -> None:
        if flow.version != version:
            return  # a stale completion: the rate changed after it was scheduled
        flows_on = self.flows_on
        dirty = self._dirty
        for lid in flow.links:
            del flows_on[lid][flow]
            dirty[lid] = None
        if not self._rebalance_pending:
            self._rebalance_pending = True
            self.clock.call_later(0.0, self._rebalance, LATE)
        flow.on_done()

    def _rebalance(self) -> None:
        self._rebalance_pending = False
        self.rebalances += 1
        flows_on = self.flows_on
        # The component: every flow reachable from a dirty link through shared links.
        comp_links: dict[int, None] = dict.fromkeys(self._dirty)
        comp_flows: dict[Flow, None] = {}
        self._dirty = {}
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
        rates = self._max_min(comp_links, comp_flows)
        now = self.clock._now
        call_at = self.clock.call_at
        finish = self._finish
        for f, rate in rates.items():
            if rate == f.rate and f.version:
                continue  # unchanged: its scheduled completion stands
            if f.version:
                f.remaining -= f.rate * (now - f.updated)
                if f.remaining < 0.0:
                    f.remaining = 0.0
            f.updated = now
            f.rate = rate
            f.version += 1
            call_at(now + f.remaining / rate, _Completion(finish, f, f.version))

    def _max_min(self, comp_links: dict[int, None], comp_flows: dict[Flow, None]) -> dict[Flow, float]:
        """Progressive filling; ties between equally tight links go to the lower link id."""
        flows_on = self.flows_on
        if len(comp_flows) == 1:
            (f,) = comp_flows
            return {f: min(self.capacity[lid] for lid in f.links)}
        cap = {lid: self.capacity[lid] for lid in sorted(comp_links)}
        count = {lid: len(flows_on[lid]) for lid in cap}
        rates: dict[Flow, float] = {}
        while len(rates) < len(comp_flows):
            best = -1
            share = float("inf")
            for lid, n in count.items():
                if n and cap[lid] / n < share:
                    share = cap[lid] / n
                    best = lid
            for f in flows_on[best]:
                if f in rates:
                    continue
                rates[f] = share
                for lid in f.links:
                    left = cap[lid] - share
                    cap[lid] = left if left > 0.0 else 0.0
                    count[lid] -= 1
        # Report in component order, so rescheduling order is deterministic.
        return {f: rates[f] for f in comp_flows}


class _Completion:
    """A scheduled flow completion, bound to the flow's version at scheduling time."""

    __slots__ = ("finish", "flow", "version")

    def __init__(self, finish: Callable[[Flow, int], None], flow: Flow, version: int) -> None:
        self.finish = finish
        self.flow = flow
        self.version = version

    def __call__(self) -> None:
        self.finish(self.flow, self.version)
