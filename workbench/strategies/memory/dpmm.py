"""``dpmm``: ROC's dynamic-programming memory manager (paper 000, section 5, Algorithm 1).

States and cost, as in the paper. A state ``S`` is a set of executed operators closed
under dependencies (a valid state); ``A(S)`` are its active tensors (read or written
by ``S``, read again outside it: Table 3). ``COST(S, T)`` is the minimum number of
bytes loaded host -> GPU to execute ``S`` and end with the tensors ``T ⊆ A(S)``
cached; it is memoized over ``(S, T)`` and built from the last operator executed.
The answer is ``COST(all operators, ∅)``.

Where this differs from the printed pseudocode, and why. Algorithm 1 takes the cached
set before the last operator ``o`` to be ``T' = (T \\ OUT(o)) ∩ A(S')``: fixed by ``T``.
Read literally, that can never hold a tensor whose last reader is ``o`` (``w2`` from
③ to ⑤ in Fig. 3), never evicts a tensor while it is still active, and, started
from ``COST(G, ∅)``, gives ``T' = ∅`` at every step, i.e. streaming. The recursion
here enumerates the cached set as the text describes ("COST(S, T) computes the minimum
data transfers ... with T being the set of tensors cached"): from ``(S', T')``, running
``o`` costs ``size(IN(o) \\ T')`` and may lead to any ``T = (IO ∩ A(S)) ∪ K`` with
``IO = IN(o) ∪ OUT(o)`` and ``K ⊆ (T' ∩ A(S)) \\ IO`` (the cached tensors kept
through ``o``), subject to line 16's capacity test ``size(T ∪ IO) <= cap``. Two
facts make that exact while enumerating less: keeping ``o``'s own active inputs and
outputs costs no memory while ``o`` runs, and a larger cached set is never worse
later (eviction is free, the host keeps a copy); so only maximal ``K`` are tried, and
an ``(S, T)`` whose cost is matched by a cached superset of ``T`` is dropped
(dominance). It runs forwards, level by level (``|S|`` operators executed), which
is the same memoized recursion unrolled.

Bounding the state space for deep models. The number of valid states is the number
of dependency-closed operator sets; the number of cached sets per state is
exponential in the active tensors (a 16-layer residual GCN has ~50 active tensors in
the middle of its step, many of equal size, so equal-cost cached sets that do not
dominate each other abound: a plain search over maximal keep sets took 5 s and more
and, bounded, missed the optimum by up to 4% there). Three measures:

* One order (exact, no bound): when the graph has a single execution order (every
  training step :func:`~workbench.strategies.memory.graphs.operator_graph` builds is
  a chain) or the search keeps the graph's order, a transition that must drop cached
  tensors drops, among tensors of equal size, those needed last. Belady's exchange
  argument makes that safe: if a schedule drops ``x`` and keeps an equal-sized ``y``
  needed later, keeping ``x`` and dropping ``y`` instead holds the same bytes until
  ``x`` is read, saves ``x``'s load then, and costs at most ``y``'s load later. So a
  drop set is a count per size class, and only minimal counts are tried.
* ``max_states``: when the graph has more valid states than this, only the graph's
  own order is searched (its prefixes are the states).
* ``beam``: per state, at most ``beam`` cached sets survive, ranked by cost so far plus
  ``size(A(S) \\ T)`` (a lower bound: each active tensor not cached costs its size
  again), then by how soon the cached bytes are needed (Belady); each transition tries
  at most ``beam`` keep sets. ``beam=None`` removes the bound (exact, exponential).
  LRU's cached sets are kept in the search as an incumbent, so ``dpmm`` never loads
  more than ``lru``, bound or not.

``MemorySchedule.exact`` is true when no bound cut anything; ``stats`` counts the
cuts (``beam_cuts``, ``keep_cuts``) and says which ``orders`` were searched.

What the bounds cost, measured (``benchmarks/bench_memory.py``; the optimum comes
from the unbounded search, from a brute force over every order and every keep/drop
decision in the tests, and, for deep chains, from an integer program over the same
decisions):

* The GNN training steps: the beam never binds, and the result equals the integer
  program's optimum at every capacity tried (16-layer residual GCN, Reddit-sized,
  12 capacities from 2.0 to 16.4 GB: at most 0.012 s per schedule; 32 layers, 128
  operators: 0.03 s; 2-layer GCN, GIN, SAGE, CommNet, with halos: equal too).
* Small random graphs (hypothesis, up to 9 operators, several orders or one): equal
  to the brute force in every case.
* Where the beam does bind, 40 random DAGs of 16 operators with many execution
  orders: the default ``beam=64`` (and 16) found the optimum in all 40; ``beam=4``
  missed it in 3 (worst +14% loads), ``beam=1`` in 25 (worst +64%, mean +7.6%).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from workbench.errors import ConfigError
from workbench.registry import MEMORY_POLICIES
from workbench.strategies.memory.base import (
    MemoryPolicy,
    MemorySchedule,
    OperatorGraph,
    assemble_schedule,
    bits,
    check_capacity,
)
from workbench.strategies.memory.lru import lru_cached_sets

# (cost so far, previous state, previous cached set, operator index); the start has no previous.
Entry = tuple[int, int, int, int]
# With a beam, the keep-set enumeration of one transition visits at most this many search
# nodes per set it may return (maximal sets can be rare among the nodes it walks).
VISITS_PER_SET = 64


def count_valid_states(pred_masks: tuple[int, ...], limit: int) -> int:
    """The number of dependency-closed operator sets, counted up to just past ``limit``."""
    n = len(pred_masks)
    level = {0}
    total = 1
    for _ in range(n):
        nxt = {s | 1 << o for s in level for o in range(n) if not s >> o & 1 and not pred_masks[o] & ~s}
        total += len(nxt)
        if total > limit:
            break
        level = nxt
    return total


def maximal_keep_sets(
    items: list[int], sizes: tuple[int, ...], budget: int, limit: int | None
) -> tuple[list[int], bool]:
    """Maximal subsets of ``items`` (tensor indices, preferred first) whose bytes fit in ``budget``.

    Maximal: no left-out item would still fit. Found depth-first, including before
    excluding, so the first is the greedy keep set. Returns the sets (bitmasks) and
    whether ``limit`` stopped the enumeration before it was complete.
    """
    suffix = [0] * (len(items) + 1)
    for j in range(len(items) - 1, -1, -1):
        suffix[j] = suffix[j + 1] + sizes[items[j]]
    out: list[int] = []
    stopped = False
    visits = 0
    max_visits = None if limit is None else VISITS_PER_SET * limit

    def walk(j: int, chosen: int, room: int, smallest_out: int) -> None:
        nonlocal stopped, visits
        if stopped:
            return
        visits += 1
        if max_visits is not None and visits > max_visits:
            stopped = True
            return
        # Even taking every remaining item that fits leaves at least room - suffix[j]:
        # if an item already left out fits there, no completion is maximal.
        if smallest_out <= room - suffix[j]:
            return
        if j == len(items):
            if limit is not None and len(out) >= limit:
                stopped = True
                return
            out.append(chosen)
            return
        i = items[j]
        if sizes[i] <= room:
            walk(j + 1, chosen | 1 << i, room - sizes[i], smallest_out)
        walk(j + 1, chosen, room, min(smallest_out, sizes[i]))

    walk(0, 0, budget, budget + 1)
    return out, stopped


def drop_count_keep_sets(
    items: list[int], sizes: tuple[int, ...], budget: int, next_use: Callable[[int], int], limit: int | None
) -> tuple[list[int], bool]:
    """Maximal keep sets of ``items`` within ``budget`` when the execution order is fixed.

    Among cached tensors of equal size, dropping the one needed last is never worse than
    dropping one needed sooner (Belady's exchange argument: swap the two until the sooner
    one's next use, which then finds it cached, and the memory held is the same in
    between). So a drop set is decided by how many tensors of each size it drops, and
    those are the ones needed last. Enumerates the minimal drop counts (no dropped tensor
    could be kept instead), fewest dropped bytes first; ``limit`` bounds how many are
    returned (and says whether it cut any).
    """
    groups: dict[int, list[int]] = {}
    for i in items:
        groups.setdefault(sizes[i], []).append(i)
    classes = sorted(groups.items(), reverse=True)  # largest size first
    for _, members in classes:
        members.sort(key=lambda i: (-next_use(i), i))  # needed last first: dropped first
    need = sum(sizes[i] for i in items) - budget  # bytes that must go
    drops: list[tuple[int, tuple[int, ...]]] = []

    def walk(c: int, dropped: int, counts: tuple[int, ...], smallest: int) -> None:
        if dropped >= need:
            if dropped - smallest < need:  # minimal: keeping any one dropped tensor overflows
                drops.append((dropped, counts + (0,) * (len(classes) - c)))
            return
        if c == len(classes):
            return
        size, members = classes[c]
        for count in range(len(members), -1, -1):
            walk(c + 1, dropped + count * size, counts + (count,), size if count else smallest)

    walk(0, 0, (), budget + 1 + max(sizes[i] for i in items))
    drops.sort()
    cut = limit is not None and len(drops) > limit
    if cut:
        drops = drops[:limit]
    out = []
    everything = sum(1 << i for i in items)
    for _, counts in drops:
        gone = 0
        for (_, members), count in zip(classes, counts, strict=True):
            for i in members[:count]:
                gone |= 1 << i
        out.append(everything & ~gone)
    return out, cut


def dp_search(
    graph: OperatorGraph, capacity: int, beam: int | None, max_states: int
) -> tuple[list[int], list[int], bool, dict[str, Any]]:
    """Algorithm 1 (see the module docstring). Returns the order (operator indices), the
    cached set after each step, whether the result is proven optimal, and search figures."""
    t0 = time.perf_counter()
    search = _Search(graph, capacity, beam, max_states)
    levels: list[dict[int, dict[int, Entry]]] = [{0: {0: (0, -1, -1, -1)}}]
    stats = {"orders": "all" if search.all_orders else "given", "states": 1, "cached_sets": 1}
    for k in range(search.n):
        nxt = search.expand(levels[k], k)
        search.prune(nxt, k)
        levels.append(nxt)
        stats["states"] += len(nxt)
        stats["cached_sets"] += sum(len(b) for b in nxt.values())
    best, order, cached = _walk_back(levels, search.n)
    exact = search.all_orders and not search.beam_cut and not search.keep_cut
    stats.update(
        loads=best,
        beam_cuts=search.beam_cut,
        keep_cuts=search.keep_cut,
        seconds=round(time.perf_counter() - t0, 6),
    )
    return order, cached, exact, stats


class _Search:
    """One run of Algorithm 1, level by level: the graph's masks, the memo tables every level
    shares, the cuts the bounds made so far, and LRU's witness (the incumbent)."""

    def __init__(self, graph: OperatorGraph, capacity: int, beam: int | None, max_states: int) -> None:
        self.graph = graph
        self.capacity = capacity
        self.beam = beam
        self.n = n = len(graph.operators)
        self.reads, self.sizes, self.preds = graph.read_masks, graph.sizes, graph.pred_masks
        self.io_masks = [r | w for r, w in zip(graph.read_masks, graph.write_masks, strict=True)]
        num_states = count_valid_states(self.preds, max_states)
        self.all_orders = num_states <= max_states
        self.one_order = (
            not self.all_orders or num_states == n + 1
        )  # a chain, or the search keeps the graph's order
        self.readers = [[k for k in range(n) if self.reads[k] >> i & 1] for i in range(len(self.sizes))]
        self._size_memo: dict[int, int] = {}
        self._active_memo: dict[int, int] = {}
        self.beam_cut = 0
        self.keep_cut = 0
        # LRU's trajectory in graph order: the incumbent the search always keeps a witness of.
        self.lru_after = lru_cached_sets(graph, capacity)
        self.witness_t, self.witness_c = 0, 0  # a cached set before step k holding LRU's, at no more cost
        self.prefix = 0  # the first k operators in graph order: the state LRU's witness lives in

    def size(self, mask: int) -> int:
        s = self._size_memo.get(mask)
        if s is None:
            s = self._size_memo[mask] = sum(self.sizes[i] for i in bits(mask))
        return s

    def active(self, s: int) -> int:
        a = self._active_memo.get(s)
        if a is None:
            a = self._active_memo[s] = self.graph.active(s)
        return a

    def next_use(self, i: int, s: int) -> int:
        return next((k for k in self.readers[i] if not s >> k & 1), self.n)

    def expand(self, level: dict[int, dict[int, Entry]], k: int) -> dict[int, dict[int, Entry]]:
        """Every (state, cached set) one operator after ``level`` (``k`` operators executed),
        cheapest way in first; unpruned."""
        n, preds, reads = self.n, self.preds, self.reads
        nxt: dict[int, dict[int, Entry]] = {}
        for s, table in level.items():
            ready = [o for o in range(n) if not s >> o & 1 and not preds[o] & ~s] if self.all_orders else [k]
            for o in ready:
                s2 = s | 1 << o
                a2 = self.active(s2)
                io = self.io_masks[o]
                base = io & a2
                budget = self.capacity - self.size(io)
                bucket = nxt.setdefault(s2, {})
                by_keepable: dict[int, list[int]] = {}
                for t, entry in table.items():
                    cost = entry[0] + self.size(reads[o] & ~t)
                    keepable = t & a2 & ~io
                    keeps = by_keepable.get(keepable)
                    if keeps is None:
                        keeps = by_keepable[keepable] = self.keep_sets(keepable, s2, budget)
                    for keep in keeps:
                        t2 = base | keep
                        old = bucket.get(t2)
                        if old is None or cost < old[0]:
                            bucket[t2] = (cost, s, t, o)
        return nxt

    def keep_sets(self, keepable: int, s2: int, budget: int) -> list[int]:
        """The cached tensors worth keeping through a transition into state ``s2``: all of
        ``keepable`` when it fits in ``budget``, else its maximal subsets that do."""
        if self.size(keepable) <= budget:
            return [keepable]
        items = sorted(bits(keepable), key=lambda i: (self.next_use(i, s2), i))
        if self.one_order:
            keeps, stopped = drop_count_keep_sets(
                items, self.sizes, budget, lambda i: self.next_use(i, s2), self.beam
            )
        else:
            keeps, stopped = maximal_keep_sets(items, self.sizes, budget, self.beam)
        self.keep_cut += stopped
        return keeps

    def prune(self, nxt: dict[int, dict[int, Entry]], k: int) -> None:
        """Prune each state's cached sets in place (dominance, then the beam), and keep LRU's
        cached set after operator ``k`` reachable in the graph-order state at no more than LRU's cost."""
        prefix2 = self.prefix | 1 << k
        lru_t = self.lru_after[k]
        lru_cost = self.witness_c + self.size(self.reads[k] & ~self.witness_t)
        for s2, bucket in nxt.items():
            key_rank = _ranker(self.size, self.active(s2), lambda i, s2=s2: self.next_use(i, s2), self.n)
            kept, cut = _prune(bucket, self.beam, key_rank)
            self.beam_cut += cut
            if s2 == prefix2:
                found = next(
                    ((t, e[0]) for t, e in kept.items() if not lru_t & ~t and e[0] <= lru_cost), None
                )
                if found is None:
                    kept[lru_t] = (lru_cost, self.prefix, self.witness_t, k)
                    found = (lru_t, lru_cost)
                self.witness_t, self.witness_c = found
            nxt[s2] = kept
        self.prefix = prefix2


def _walk_back(levels: list[dict[int, dict[int, Entry]]], n: int) -> tuple[int, list[int], list[int]]:
    """Follow the cheapest entries back from (all operators, nothing cached): the minimum
    loads, the operator order, and the cached set after each step."""
    s, t = (1 << n) - 1, 0
    best = levels[n][s][t][0]
    order: list[int] = []
    cached: list[int] = []
    for k in range(n, 0, -1):
        _, prev_s, prev_t, o = levels[k][s][t]
        order.append(o)
        cached.append(t)
        s, t = prev_s, prev_t
    order.reverse()
    cached.reverse()
    return best, order, cached


def _ranker(
    size: Callable[[int], int],
    a: int,
    next_use: Callable[[int], int],
    n: int,
) -> Callable[[tuple[int, Entry]], tuple[int, int, int, int]]:
    """Beam order: cost so far plus the bytes of active tensors not cached (each costs at least
    its size again), then how soon the cached bytes are needed (Belady), then the set itself."""

    def rank(item: tuple[int, Entry]) -> tuple[int, int, int, int]:
        t, entry = item
        soon = sum(size(1 << i) * (n - next_use(i)) for i in bits(t))
        return (entry[0] + size(a & ~t), entry[0], -soon, t)

    return rank


def _prune(
    bucket: dict[int, Entry], beam: int | None, rank: Callable[[tuple[int, Entry]], Any]
) -> tuple[dict[int, Entry], int]:
    """Drop cached sets dominated by a superset at no more cost; then keep the ``beam`` best."""
    items = sorted(bucket.items(), key=lambda kv: (kv[1][0], -kv[0].bit_count(), kv[0]))
    kept: list[tuple[int, Entry]] = []
    for t, entry in items:
        if any(not t & ~t2 for t2, _ in kept):  # kept so far cost no more; t2 ⊇ t dominates
            continue
        kept.append((t, entry))
    cut = 0
    if beam is not None and len(kept) > beam:
        kept.sort(key=rank)
        kept = kept[:beam]
        cut = 1
    return dict(kept), cut


@MEMORY_POLICIES.register("dpmm")
class DynamicProgrammingPolicy(MemoryPolicy):
    """ROC's dynamic-programming memory manager (Algorithm 1): minimum host-to-GPU loads within the capacity."""

    HELP = {
        "beam": "cached sets kept per state and keep sets tried per transition; none = unbounded (exact, exponential)",
        "max_states": "search every execution order when the graph has at most this many valid states, else its own order",
    }

    def __init__(self, beam: int | None = 64, max_states: int = 4096) -> None:
        if beam is not None and (isinstance(beam, bool) or not isinstance(beam, int) or beam < 1):
            raise ConfigError(f"memory policy 'dpmm': beam must be an integer >= 1 or none, got {beam!r}")
        if isinstance(max_states, bool) or not isinstance(max_states, int) or max_states < 1:
            raise ConfigError(f"memory policy 'dpmm': max_states must be an integer >= 1, got {max_states!r}")
        self.beam = beam
        self.max_states = max_states

    def schedule(self, graph: OperatorGraph, capacity_bytes: int) -> MemorySchedule:
        cap = check_capacity(graph, capacity_bytes, "dpmm")
        order, cached, exact, stats = dp_search(graph, cap, self.beam, self.max_states)
        return assemble_schedule(graph, cap, order, cached, "dpmm", exact, stats)
