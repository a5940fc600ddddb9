"""The steps of a document's build that the build queue (builds.py) runs, and the queue itself.

A build runs one window at a time on a build worker (a second EngineThread) beside the engine
thread: the window only reads the model and writes its own builder, while the engine thread
chooses and hands over each window in short jobs, so edits and requests of other documents never
wait for a window (about a second for 2048 tokens). A new build first makes room in the memory
budget and waits for the states it dropped to be written and released; a long build reports
$/progress (progress.py); the first hints' heavy part is worked out on the build worker too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from pygls.lsp.server import LanguageServer

from ..documents.heap import HeapTrimmer, resident_bytes
from ..documents.state import Level, Message
from ..documents.store import Documents
from .builds import BuildQueue
from .engine_thread import BUILD, EngineThread
from .progress import BUILD_PROGRESS_WINDOWS, BuildProgress

HINTS_WAIT_S = 120.0  # a build waits at most this long for the hints of a state it needs the room of

OnEngine = Callable[..., Awaitable]  # runs a function on the engine thread: on_engine(fn, *args)


class BuildSteps:
    """Builds the documents the queue (`queue`) picks, window by window on `worker`. `on_engine`
    runs a job on the engine thread; `in_use_now(uri)`: a request or an edit waits for the document;
    `notices`: what the document store's builds have to say, shown (`say`) after each step."""

    def __init__(
        self,
        server: LanguageServer,
        docs: Documents,
        on_engine: OnEngine,
        heap: HeapTrimmer,
        say: Callable[[Level, str], None],
        in_use_now: Callable[[str], bool],
        last_urgent_job: Callable[[], float],
        progress_token: Callable[[str], str],
        notices: list[Message],
    ) -> None:
        self.server, self.docs, self.on_engine, self.heap, self.say = server, docs, on_engine, heap, say
        self.in_use_now, self.progress_token, self.notices = in_use_now, progress_token, notices
        # build windows run here, beside the engine thread: a keystroke never waits for another document's window
        self.worker = EngineThread("vq-build")
        self._progress: dict[str, BuildProgress] = {}
        self.queue = BuildQueue(
            self.step,
            urgent=in_use_now,
            last_use=self._last_use,
            last_urgent_job=last_urgent_job,
            before_new_build=self._before_new_build,
            on_progress=self._build_progress,
            on_end=self._build_ended,
        )

    def _last_use(self, uri: str) -> float:
        st = self.docs.states.get(uri)
        return st.last_touch if st is not None else 0.0

    async def step(self, uri: str) -> tuple[int, int]:
        """One window: chosen and handed over on the engine thread (short jobs), built on the build
        worker. The window only reads the model and writes its own builder, so edits and requests
        of other documents run on the engine thread meanwhile instead of waiting for it (a window
        of 2048 tokens takes about a second)."""
        try:
            builder = await self.on_engine(self.docs.builder.next_window, uri)
            if isinstance(builder, tuple):
                return builder
            await self.worker.submit(self._build_window, builder, lane=BUILD)
            publisher = self.docs.publisher
            if builder.done and (inputs := await self.on_engine(publisher.hint_inputs, uri, builder)) is not None:
                # the first hints' heavy part too, off the engine thread
                await self.worker.submit(self._warm_hints, inputs, builder, lane=BUILD)
            return await self.on_engine(self.docs.builder.finish_window, uri, builder)
        finally:
            while self.notices:
                m = self.notices.pop(0)
                self.say(m.level, m.text)

    def _build_window(self, builder) -> None:
        """One window's dense pass (build worker), then its freed temporaries go back to the OS:
        kept in malloc's heap, they added up over a long document's windows, and the resident
        memory rose 140-250 MiB above the states until the build ended (a trim costs a few ms
        against a window's second)."""
        builder.step()
        self.heap.trim_now()

    def _warm_hints(self, inputs, builder) -> None:
        """The first hints' caches (build worker), then their temporaries go back to the OS."""
        self.docs.publisher.warm_hints(inputs, builder)
        self.heap.trim_now()

    async def _before_new_build(self, uri: str) -> None:
        """A new build makes room for its whole state first, and starts only once the states it
        dropped are written and released (their memory returned to the OS by `released`). When
        the room is held by a state just built whose hints are still being chosen, a build nobody
        waits for waits for those hints (at most HINTS_WAIT_S) instead of going over the budget
        with two long documents' states; one with a request or an edit waiting does not wait."""
        deadline = time.monotonic() + HINTS_WAIT_S
        while await self.on_engine(self.docs.builder.make_room, uri) and time.monotonic() < deadline:
            if any(self.in_use_now(u) for u in self.queue.wanted):
                break  # someone waits: the queue picks again
            await asyncio.sleep(0.1)
        await asyncio.to_thread(self.docs.snapshots.flush)
        # the dropped states are released now (and their pages returned): what the server holds beside
        # the states is its working memory, which the budget counts too; when it grew, room is made again
        await asyncio.to_thread(self.heap.trim_now)
        if await self.on_engine(lambda: self.docs.budget.observe_working_memory(resident_bytes())):
            await self.on_engine(self.docs.builder.make_room, uri)
            await asyncio.to_thread(self.docs.snapshots.flush)

    def _build_progress(self, uri: str, done: int, total: int) -> None:
        progress = self._progress.get(uri)
        if progress is None and total >= BUILD_PROGRESS_WINDOWS:
            progress = self._progress[uri] = BuildProgress(self.server, self.progress_token("build"), uri, total)
        if progress is not None:
            progress.report(done)

    def _build_ended(self, uri: str) -> None:
        progress = self._progress.pop(uri, None)
        if progress is not None:
            progress.end()
