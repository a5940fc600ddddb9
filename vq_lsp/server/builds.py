"""The build queue: which document's missing engine state is built next, one window at a time.

A FIFO lock used to hand the build turn out in arrival order, and each document kept it for all
of its windows: a hover on a small note whose state had been dropped waited for every long
document queued before it (33 waiters, 78 s, and then the build did nothing because the note
could not be built). Now:
- a document with a request or an edit waiting for it (`urgent`) goes first, even between the
  windows of another document's build;
- among the rest, the document half built goes on (one build at a time: half-built states of
  many documents at once blew the memory budget), then the most recently used;
- a document closed while it waits is dropped from the queue, and one closed while it builds
  stops after the window in progress (`cancel`);
- a window is submitted only HOLD_AFTER_URGENT_S after the last interactive engine job: a
  request is several short jobs in a row (wait for edits, answer, publish), and a window
  submitted in the gap between two of them held the next one back for a whole window.

Each `want(uri)` gets a future that says True once the document has its state (or nothing is
left to build), False if it was cancelled. Nothing here knows LSP: the server hands in the
build step and the callbacks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

HOLD_AFTER_URGENT_S = 0.02

Step = Callable[[str], Awaitable[tuple[int, int]]]  # one window of a document: (windows built, windows in all)


@dataclass
class Wanted:
    """A document waiting for its state."""

    uri: str
    order: int  # arrival, to break ties
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    started: bool = False  # at least one window is built: a half-built state exists


class BuildQueue:
    def __init__(
        self,
        step: Step,
        urgent: Callable[[str], bool],
        last_use: Callable[[str], float],
        last_urgent_job: Callable[[], float],
        before_new_build: Callable[[str], Awaitable[None]],
        on_progress: Callable[[str, int, int], None],
        on_end: Callable[[str], None],
    ) -> None:
        self.step = step
        self.urgent = urgent
        self.last_use = last_use
        self.last_urgent_job = last_urgent_job
        self.before_new_build = before_new_build
        self.on_progress = on_progress
        self.on_end = on_end
        self.wanted: dict[str, Wanted] = {}
        self.order: deque[str] = deque(maxlen=4096)  # uris of the latest windows built, in order (for tests)
        self._count = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def want(self, uri: str) -> asyncio.Future:
        """The future of the document's state; queued if not already."""
        w = self.wanted.get(uri)
        if w is None:
            self._count += 1
            w = self.wanted[uri] = Wanted(uri, self._count)
        self.nudge()
        return w.done

    async def build(self, uri: str) -> bool:
        """Wait until the document has its state (True) or its build is cancelled (False)."""
        return await asyncio.shield(self.want(uri))

    def cancel(self, uri: str) -> None:
        """Drop the document from the queue (closed): its build stops after the window in progress."""
        w = self.wanted.pop(uri, None)
        if w is not None:
            self._finish(w, False)

    def nudge(self) -> None:
        """Something changed (a new wish, a request now waiting): re-pick before the next window."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        self._wake.set()

    def pick(self) -> Wanted | None:
        if not self.wanted:
            return None
        return min(
            self.wanted.values(), key=lambda w: (not self.urgent(w.uri), not w.started, -self.last_use(w.uri), w.order)
        )

    def _finish(self, w: Wanted, built: bool) -> None:
        if w.started:
            self.on_end(w.uri)
        if not w.done.done():
            w.done.set_result(built)

    async def _run(self) -> None:
        while (w := self.pick()) is not None:
            self._wake.clear()
            while (left := HOLD_AFTER_URGENT_S - (time.monotonic() - self.last_urgent_job())) > 0:
                await asyncio.sleep(left)
            if self.pick() is not w:
                continue  # a request came in meanwhile
            if not w.started:
                await self.before_new_build(w.uri)
                if self.wanted.get(w.uri) is not w or self.pick() is not w:
                    continue  # cancelled, or a request came in meanwhile
            try:
                done, total = await self.step(w.uri)
            except Exception as e:  # the engine is shut down, or the step failed: the waiters hear it
                if self.wanted.get(w.uri) is w:
                    del self.wanted[w.uri]
                if not w.done.done():
                    w.done.set_exception(e)
                    w.done.exception()  # retrieved here: a cancelled waiter must not log "never retrieved"
                continue
            self.order.append(w.uri)
            if self.wanted.get(w.uri) is not w:
                continue  # cancelled during the step
            if done >= total:
                del self.wanted[w.uri]
                self._finish(w, True)
            else:
                w.started = True
                self.on_progress(w.uri, done, total)
