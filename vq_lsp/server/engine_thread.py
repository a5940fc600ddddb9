"""The one thread that runs all engine work, interactive jobs before long builds.

Engine states are touched by this thread only, so jobs never run concurrently. Jobs come in
two lanes: URGENT (edits of documents that have a state, requests, hints) and BUILD (one
window's dense pass of a document being built). The worker always takes the oldest urgent job
before any build job, and a build is submitted one window at a time, so an edit or a request
waits for at most one window of someone else's build, however many documents are building (with
one FIFO queue it would wait for one window of every building document, in turn).

Nothing here knows LSP or the engine: `submit(fn, *args)` returns an awaitable future.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

URGENT, BUILD = 0, 1
_STOP = (2, 0, None, (), None)  # sorts after every job


class EngineThread:
    def __init__(self, name: str = "vq-engine") -> None:
        self._jobs: queue.PriorityQueue = queue.PriorityQueue()
        self._seq = itertools.count()
        self._closed = False
        self.idle = threading.Event()  # no job is running (cleared while one runs)
        self.idle.set()
        self.jobs_run = 0  # for statistics and tests
        self.last_urgent_done = float("-inf")  # time.monotonic() when the last urgent job ended
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(self, fn: Callable, *args: Any, lane: int = URGENT) -> asyncio.Future:
        """Run fn(*args) on the engine thread; await the result (or its exception)."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        if self._closed:
            fut.set_exception(RuntimeError("the engine thread is shut down"))
        else:
            self._jobs.put((lane, next(self._seq), fn, args, fut))
        return asyncio.wrap_future(fut)

    def shutdown(self) -> None:
        """Cancel queued jobs (nobody will answer them) and stop after the running one."""
        self._closed = True
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job[4] is not None:
                job[4].cancel()
        self._jobs.put(_STOP)

    def _work(self) -> None:
        while True:
            lane, _, fn, args, fut = self._jobs.get()
            if fn is None:
                return
            if not fut.set_running_or_notify_cancel():
                continue
            self.idle.clear()
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # handed to the awaiting coroutine
                fut.set_exception(e)
            finally:
                self.jobs_run += 1
                if lane == URGENT:
                    self.last_urgent_done = time.monotonic()
                # let the job go before blocking on the next get(): a build window's `fn` is its
                # builder's bound step, and the builder's windows are the finished state's, so the
                # last book built stayed alive through this frame after it was dropped and written
                fn = args = fut = None
                self.idle.set()
