"""The build queue (server/builds.py) by order of events, never by wall time: a document with a
request waiting goes first, even between another document's windows; otherwise one document
builds to the end before the next starts (half-built states of many documents blew the memory
budget); a closed document's queued build never runs and a running one stops."""

from __future__ import annotations

import asyncio

import pytest

from vq_lsp.server.builds import BuildQueue


class FakeEngine:
    """Windows per document; each step builds one, after the test lets it (`gate`)."""

    def __init__(self, windows: dict[str, int]) -> None:
        self.windows = dict(windows)
        self.built = {uri: 0 for uri in windows}
        self.urgent: set[str] = set()
        self.use: dict[str, float] = {}
        self.gate = asyncio.Semaphore(0)
        self.steps: list[str] = []
        self.ended: list[str] = []
        self.new_builds: list[int] = []

    async def step(self, uri: str) -> tuple[int, int]:
        await self.gate.acquire()
        self.steps.append(uri)
        self.built[uri] += 1
        return self.built[uri], self.windows[uri]

    async def before_new_build(self, uri: str) -> None:
        self.new_builds.append(len(self.steps))

    def queue(self) -> BuildQueue:
        return BuildQueue(
            self.step,
            urgent=lambda u: u in self.urgent,
            last_use=lambda u: self.use.get(u, 0.0),
            last_urgent_job=lambda: float("-inf"),
            before_new_build=self.before_new_build,
            on_progress=lambda u, d, t: None,
            on_end=self.ended.append,
        )

    async def run_steps(self, n: int) -> None:
        """Let n more windows be built, and wait until they are."""
        target = len(self.steps) + n
        for _ in range(n):
            self.gate.release()
        while len(self.steps) < target:
            await asyncio.sleep(0)
        for _ in range(5):  # the queue reacts to the last window (picks the next, resolves waiters)
            await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_a_request_overtakes_queued_builds_between_windows():
    eng = FakeEngine({"big1": 4, "big2": 4, "small": 1})
    q = eng.queue()
    big1, big2 = q.want("big1"), q.want("big2")
    await eng.run_steps(2)  # big1 is half built
    eng.urgent.add("small")  # a hover on the evicted small document
    small = asyncio.ensure_future(q.build("small"))
    await eng.run_steps(2)  # the window in progress ends, then the small document goes first
    assert eng.steps == ["big1", "big1", "big1", "small"]
    assert await small is True
    await eng.run_steps(5)
    await asyncio.gather(big1, big2)
    assert eng.steps.index("small") < eng.steps.index("big2")
    assert eng.steps.count("big1") == 4 and eng.steps.count("big2") == 4


@pytest.mark.asyncio
async def test_one_build_at_a_time_then_the_most_recently_used():
    eng = FakeEngine({"a": 3, "b": 2, "c": 2})
    eng.use = {"a": 1.0, "b": 2.0, "c": 3.0}
    q = eng.queue()
    futures = [q.want(u) for u in ("a", "b", "c")]
    await eng.run_steps(1)  # c, the most recently used, starts
    eng.use["b"] = 10.0  # b is used meanwhile: it goes next, but c is not left half built
    await eng.run_steps(6)
    await asyncio.gather(*futures)
    assert eng.steps == ["c", "c", "b", "b", "a", "a", "a"]
    assert eng.new_builds == [0, 2, 4]  # snapshots flushed before each new build, never in the middle of one


@pytest.mark.asyncio
async def test_a_closed_document_is_never_built_and_a_running_build_stops():
    eng = FakeEngine({"a": 3, "b": 3, "c": 1})
    q = eng.queue()
    a, b, c = q.want("a"), q.want("b"), q.want("c")
    await eng.run_steps(1)  # a starts
    q.cancel("b")  # closed while it waits
    q.cancel("a")  # closed while it builds: stops after the window in progress
    await eng.run_steps(2)  # the window of a under way when it was closed, then c
    assert (await a, await b, await c) == (False, False, True)
    assert eng.steps == ["a", "a", "c"] and eng.built["a"] == 2 and not q.wanted
    assert eng.ended == ["a"]  # its $/progress ends
