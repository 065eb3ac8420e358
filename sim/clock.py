"""The simulation clock: simpy's Environment with a fast path for plain callbacks.

The executor drives tasks with plain callbacks instead of generator processes: a
simpy ``Event`` costs about 4 us to create, schedule and fire here, a bare callback
in the same heap about 1.5 us, and a 100,000-task plan fires several events per task.
``SimClock`` keeps simpy's queue and its ordering, ``(time, priority, insertion
counter)``, so same-time events run in a deterministic order, and it still runs
ordinary simpy events and processes scheduled in the same environment. Only
:meth:`step` is overridden (simpy's hook for "fire the next queue entry").

Everything else in the simulator goes through this class's methods (:meth:`call_at`,
:meth:`call_later`, :attr:`now`, :meth:`run_all`, :meth:`entries`) and never through
simpy's private attributes, so a change inside simpy has one place to be met.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.core import EmptySchedule
from simpy.events import NORMAL, URGENT

# Rate recomputation runs after every other event of the same instant, so flows that
# start or end together are rebalanced once.
LATE = NORMAL + 1

__all__ = ["LATE", "NORMAL", "URGENT", "SimClock"]


class SimClock(simpy.Environment):
    """A simpy Environment whose queue may also hold plain callables and bare ints.

    An ``int`` entry is handed to the ``on_int`` callback of :meth:`run_all`: a caller
    with one frequent kind of event (the executor's compute ends) saves building a
    callable per entry.
    """

    def call_later(self, delay: float, fn: Callable[[], Any] | int, priority: int = NORMAL) -> None:
        """Call ``fn()`` ``delay`` seconds from now (after earlier entries of the same time and priority)."""
        heappush(self._queue, (self._now + delay, priority, next(self._eid), fn))

    def call_at(self, when: float, fn: Callable[[], Any] | int, priority: int = NORMAL) -> None:
        heappush(self._queue, (when, priority, next(self._eid), fn))

    def entries(self) -> int:
        """How many entries have been queued so far (events, callbacks, ints).

        Takes one insertion number itself; order only needs them increasing.
        """
        return next(self._eid)

    def step(self) -> None:
        try:
            self._now, _, _, item = heappop(self._queue)
        except IndexError:
            raise EmptySchedule() from None
        if isinstance(item, simpy.Event):
            self._fire_event(item)
        else:
            item()

    @staticmethod
    def _fire_event(event: simpy.Event) -> None:
        """simpy's own step body, for events and processes sharing this environment."""
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
        for callback in callbacks:  # type: ignore[union-attr]
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc

    def run_all(self, on_int: Callable[[int], Any] | None = None) -> float:
        """Run until the queue is empty; return the time of the last entry (the fast loop)."""
        queue = self._queue
        is_event = simpy.Event
        while queue:
            self._now, _, _, item = heappop(queue)
            if item.__class__ is int:
                on_int(item)  # type: ignore[misc]
            elif isinstance(item, is_event):
                self._fire_event(item)
            else:
                item()
        return self._now
