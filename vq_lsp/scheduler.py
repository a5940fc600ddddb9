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
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Hashable

log = logging.getLogger(__name__)

Run = Callable[[Hashable, list[Any], Callable[[], bool]], Awaitable[None]]


class Coalescer:
    def __init__(self, run: Run, delay: float = 0.0) -> None:
        self.run = run
        self.delay = delay
        self.pending: dict[Hashable, list[Any]] = {}
        self.tasks: dict[Hashable, asyncio.Task] = {}
        self.batches = 0  # calls of `run` so far (for statistics and tests)

    def submit(self, key: Hashable, *events: Any) -> None:
        self.pending.setdefault(key, []).extend(events)
        if key not in self.tasks:
            self.tasks[key] = asyncio.get_running_loop().create_task(self._drain(key))

    def busy(self, key: Hashable) -> bool:
        return key in self.tasks

    async def idle(self, key: Hashable | None = None) -> None:
        """Wait until the key (or every key) has no queued or running work."""
        while True:
            tasks = [self.tasks[key]] if key is not None and key in self.tasks else (
                list(self.tasks.values()) if key is None else [])
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _drain(self, key: Hashable) -> None:
        try:
            while self.pending.get(key):
                if self.delay:
                    await asyncio.sleep(self.delay)
                events = self.pending.pop(key)
                self.batches += 1
                try:
                    await self.run(key, events, lambda: bool(self.pending.get(key)))
                except Exception:  # one document's failure must not stop the others
                    log.exception("work for %s failed", key)
        finally:
            self.tasks.pop(key, None)
