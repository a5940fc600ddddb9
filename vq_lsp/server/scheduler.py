"""Per-document coalescing of work: process at once when idle, merge what arrives meanwhile.

Runs on one asyncio loop and knows nothing about LSP or the engine. `submit(key, events)`
queues events for a key (a document uri). If no work is running for that key, a drain task
starts right away and hands the events to `run`; events submitted while `run` is busy pile up
and are handed over together, in order, as soon as it returns. So a burst of keystrokes costs
one engine update per busy period instead of one per keystroke, and an idle engine adds no
delay. `run` gets a `superseded()` callable that says whether newer events are already
waiting (the newer version supersedes: e.g. skip publishing hints that are already stale).

An optional fixed debounce (`delay` seconds, 0 by default) waits before each drain; it only
adds latency and is kept as an option.

`caught_up(key)` waits until the events submitted *so far* are processed, not for events that
arrive later: a request sent in the middle of an edit storm is answered after at most the batch
in progress and the one holding its predecessors, instead of waiting for the storm to end
(waiting until no work is left would starve it for as long as edits come faster than the engine).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

log = logging.getLogger(__name__)

Run = Callable[[Hashable, list[Any], Callable[[], bool]], Awaitable[None]]


class Coalescer:
    def __init__(self, run: Run, delay: float = 0.0) -> None:
        self.run = run
        self.delay = delay
        self.pending: dict[Hashable, list[Any]] = {}
        self.tasks: dict[Hashable, asyncio.Task] = {}
        self.batches = 0  # calls of `run` so far (for statistics and tests)
        # events submitted per key and, of those, how many `run` has finished with; both only grow
        # (an int pair per document ever opened), so a waiter's target never refers to a reset count
        self.submitted: dict[Hashable, int] = {}
        self.processed: dict[Hashable, int] = {}
        self._tick = asyncio.Event()  # set (and replaced) whenever a batch finishes or a drain ends
        self._arrivals: dict[Hashable, asyncio.Future] = {}  # key -> resolved when its next event comes

    def submit(self, key: Hashable, *events: Any) -> None:
        self.pending.setdefault(key, []).extend(events)
        self.submitted[key] = self.submitted.get(key, 0) + len(events)
        arrival = self._arrivals.pop(key, None)
        if arrival is not None and not arrival.done():
            arrival.set_result(None)
        if key not in self.tasks:
            self.tasks[key] = asyncio.get_running_loop().create_task(self._drain(key))

    def busy(self, key: Hashable) -> bool:
        return key in self.tasks

    async def idle(self, key: Hashable | None = None) -> None:
        """Wait until the key (or every key) has no queued or running work."""
        while True:
            tasks = (
                [self.tasks[key]]
                if key is not None and key in self.tasks
                else (list(self.tasks.values()) if key is None else [])
            )
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    def next_arrival(self, key: Hashable) -> asyncio.Future:
        """A future resolved when the next event for `key` is submitted (a batch that waits for
        something long, such as a build, gives way to the events behind it)."""
        arrival = self._arrivals.get(key)
        if arrival is None or arrival.done():
            arrival = self._arrivals[key] = asyncio.get_running_loop().create_future()
        return arrival

    async def caught_up(self, key: Hashable) -> None:
        """Wait until every event submitted for `key` before this call has been processed."""
        target = self.submitted.get(key, 0)
        while key in self.tasks and self.processed.get(key, 0) < target:
            tick = self._tick
            await tick.wait()

    def _ticked(self) -> None:
        self._tick.set()
        self._tick = asyncio.Event()

    async def _drain(self, key: Hashable) -> None:
        try:
            while self.pending.get(key):
                if self.delay:
                    await asyncio.sleep(self.delay)
                events = self.pending.pop(key)
                upto = self.submitted[key]
                self.batches += 1
                try:
                    await self.run(key, events, lambda: bool(self.pending.get(key)))
                except Exception:  # one document's failure must not stop the others
                    log.exception("work for %s failed", key)
                self.processed[key] = upto
                self._ticked()
        finally:
            self.tasks.pop(key, None)
            self._ticked()
