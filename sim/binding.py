"""Which links of a flow network can ever limit a rate: the rest are left out of progressive filling.

A link L can never be full when its capacity exceeds the total capacity of the links that
feed it: for each link list through L, its narrowest link before L (the last of them, if
several are as narrow), which every flow of that list also crosses. The flows on L then
move at most the sum of those links' capacities, whatever else they share. The same holds
for the narrowest links after L. Such a constraint is implied by others, so the max-min
fair rates are the same with or without it (the feasible set is the same, and the max-min
fair point of a set is unique); progressive filling just has fewer links to walk. On a fat
tree this is most of a path: of a route across machines (GPU or host memory -> PCIe switch
-> NIC -> leaf -> spine -> leaf -> NIC -> PCIe switch -> GPU), the NIC, leaf and spine
links are fed by PCIe links narrower than they are, together, and are left out.

The bound is over every link list registered so far (a superset of the flows in progress,
so it only errs towards keeping a link). It is kept exactly:

- a link that bounds another is never left out (its constraint must hold), nor is any link
  of a list that names a link twice (a collective step's chunks: a flow then takes its
  rate once per listing, and the bound above counts it once); a list's first link has
  nothing before it, so only the links after it can bound it (and the last, before);
- a link is left out when first seen if it can be, and put back, for good, once a new
  link list through it breaks the bound (the bound only grows as lists are added);
- the bound must clear the capacity by a relative ``SLACK``: a link that can just fill up
  (bound equal to its capacity) may be the one whose share a filling freezes flows at,
  and a share computed on another link can differ from its in the last bit. With a link
  that keeps headroom left out, the filling freezes the same flows at the same shares in
  the same order, so the rates are the same to the bit: ``tests/sim/test_flows_oracle.py``
  checks that against the flow network without arrays, on fat-tree layers with links
  exactly as wide as their bound and within the slack of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# A link is left out only when its capacity exceeds its bound by this fraction: far above the
# rounding of a filling (about 1e-16 per flow fixed on a link, thousands of flows) and far below
# any real headroom between two link classes (a 25 GB/s NIC beside a 24 GB/s PCIe link is 4%).
SLACK = 1e-9


class BindingLinks:
    """Per registered link list, its links that can bind."""

    def __init__(self, capacity: np.ndarray) -> None:
        # Per link, as Python lists: a list is registered per new route, in Python, and numpy's
        # scalar indexing made that 18 us a list (262,000 routes of a 512-GPU all-to-all).
        n_links = capacity.shape[0]
        self._capacity: list[float] = capacity.tolist()
        self._pinned = [False] * n_links  # never left out
        self._left_out = [False] * n_links
        self._seen = [False] * n_links
        self._entries: list[set[int]] = [set() for _ in range(n_links)]  # its feeders (see _add_bounds)
        self._exits: list[set[int]] = [set() for _ in range(n_links)]
        self._entry_capacity = [0.0] * n_links
        self._exit_capacity = [0.0] * n_links
        self._lists_through: list[list[int]] = [[] for _ in range(n_links)]
        self._lists: list[tuple[int, ...]] = []
        # Per list, its kept links as listed (``kept[start[p]:end[p]]``) and each once
        # (``kept_distinct[distinct_start[p]:distinct_end[p]]``, and ``kept_of[p]``).
        self.kept = _Listing()
        self.kept_distinct = _Listing()
        self.kept_of: list[tuple[int, ...]] = []
        self.kept_set: list[frozenset[int]] = []
        # Per list, every link once in order of first listing; ``kept_of[p] is distinct_of[p]``
        # when none of its links is left out (the flow network's fast path).
        self.distinct_of: list[tuple[int, ...]] = []
        self.put_back = 0  # links put back so far

    @property
    def left_out(self) -> int:
        """How many links are left out now."""
        return sum(self._left_out)

    def add(self, links: Sequence[int]) -> None:
        """Register the next link list (ids in order of registration, from 0)."""
        pid = len(self._lists)
        self._lists.append(tuple(links))
        self.kept_of.append(())
        self.kept_set.append(frozenset())
        distinct = tuple(dict.fromkeys(links))
        self.distinct_of.append(distinct)
        for lid in distinct:
            self._lists_through[lid].append(pid)
        if len(distinct) < len(links):
            for lid in distinct:
                self._pinned[lid] = True
        else:
            self._add_bounds(links)
        put_back = []
        for lid in distinct:
            can_leave_out = self._can_leave_out(lid)
            if not self._seen[lid]:
                self._seen[lid] = True
                self._left_out[lid] = can_leave_out
            elif self._left_out[lid] and not can_leave_out:
                self._left_out[lid] = False
                put_back.append(lid)
                self.put_back += 1
        self._list(pid)
        for lid in put_back:
            for other in self._lists_through[lid]:
                if other != pid:
                    self._list(other)

    def _add_bounds(self, links: Sequence[int]) -> None:
        """Each link's feeder on this list (its narrowest link before, the nearest of equals) and
        drain (the narrowest after, the nearest of equals) join its bounds, and are pinned."""
        capacity, pinned = self._capacity, self._pinned
        # Nothing before a list's first link, nothing after its last: unbounded on that side.
        self._entry_capacity[links[0]] = math.inf
        self._exit_capacity[links[-1]] = math.inf
        for order, bounds, total in (
            (links, self._entries, self._entry_capacity),
            (links[::-1], self._exits, self._exit_capacity),
        ):
            best, best_capacity = -1, math.inf
            for i in range(1, len(order)):
                nearer = order[i - 1]
                if capacity[nearer] <= best_capacity:
                    best, best_capacity = nearer, capacity[nearer]
                seen = bounds[order[i]]
                if best not in seen:
                    seen.add(best)
                    total[order[i]] += best_capacity
                    pinned[best] = True

    def _can_leave_out(self, lid: int) -> bool:
        if self._pinned[lid]:
            return False
        bound = min(self._entry_capacity[lid], self._exit_capacity[lid])
        return bound < self._capacity[lid] * (1.0 - SLACK)

    def _list(self, pid: int) -> None:
        """(Re)write list ``pid``'s kept links (an old listing is left behind as garbage)."""
        kept = [lid for lid in self._lists[pid] if not self._left_out[lid]]
        distinct = self.distinct_of[pid]
        if len(kept) < len(self._lists[pid]):
            distinct = tuple(dict.fromkeys(kept))
        self.kept.put(pid, kept)
        self.kept_distinct.put(pid, distinct)
        self.kept_of[pid] = distinct
        self.kept_set[pid] = frozenset(distinct)


class _Listing:
    """Link ids per list, ``ids[start[p]:end[p]]``; rewriting a list appends it anew."""

    def __init__(self) -> None:
        self.ids = np.zeros(256, dtype=np.int64)
        self.start = np.zeros(64, dtype=np.int64)
        self.end = np.zeros(64, dtype=np.int64)
        self._size = 0

    def put(self, pid: int, ids: Sequence[int]) -> None:
        if pid >= self.start.shape[0]:
            n = max(pid + 1, 2 * self.start.shape[0])
            self.start = np.concatenate([self.start, np.zeros(n - self.start.shape[0], dtype=np.int64)])
            self.end = np.concatenate([self.end, np.zeros(n - self.end.shape[0], dtype=np.int64)])
        end = self._size + len(ids)
        if end > self.ids.shape[0]:
            grown = np.zeros(max(end, 2 * self.ids.shape[0]), dtype=np.int64)
            grown[: self._size] = self.ids[: self._size]
            self.ids = grown
        self.ids[self._size : end] = ids
        self.start[pid] = self._size
        self.end[pid] = end
        self._size = end
