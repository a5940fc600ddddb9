"""The coalescing scheduler, without LSP: immediate when idle, merged while busy, ordered."""

from __future__ import annotations

import asyncio

import pytest

from vq_lsp.server.scheduler import Coalescer


class Recorder:
    def __init__(self):
        self.calls = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = asyncio.Event()
        self.superseded_seen = []

    async def run(self, key, events, superseded):
        self.calls.append((key, list(events)))
        self.started.set()
        await self.gate.wait()
        self.superseded_seen.append(superseded())


@pytest.mark.asyncio
async def test_idle_work_runs_at_once():
    rec = Recorder()
    co = Coalescer(rec.run)
    co.submit("a", 1)
    await asyncio.wait_for(rec.started.wait(), 1)  # no timer: the first loop turn runs it
    await co.idle()
    assert rec.calls == [("a", [1])]


@pytest.mark.asyncio
async def test_events_arriving_while_busy_are_merged_in_order():
    rec = Recorder()
    rec.gate.clear()
    co = Coalescer(rec.run)
    co.submit("a", 1)
    await rec.started.wait()
    for v in (2, 3, 4):
        co.submit("a", v)
    co.submit("b", "x")  # another document is not held up by "a"
    await asyncio.sleep(0)
    assert ("b", ["x"]) in rec.calls
    rec.gate.set()
    await co.idle()
    assert [c for c in rec.calls if c[0] == "a"] == [("a", [1]), ("a", [2, 3, 4])]
    assert rec.superseded_seen[0] is True  # the first batch learned that newer events waited
    assert not co.busy("a") and co.batches == 3


@pytest.mark.asyncio
async def test_a_failing_batch_does_not_stop_later_ones():
    seen = []

    async def run(key, events, superseded):
        seen.append(events)
        if events == ["boom"]:
            raise RuntimeError("boom")

    co = Coalescer(run)
    co.submit("a", "boom")
    await co.idle("a")
    co.submit("a", "ok")
    await co.idle("a")
    assert seen == [["boom"], ["ok"]]


@pytest.mark.asyncio
async def test_optional_debounce_delays():
    rec = Recorder()
    co = Coalescer(rec.run, delay=0.05)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    co.submit("a", 1)
    co.submit("a", 2)
    await co.idle()
    assert loop.time() - t0 >= 0.05
    assert rec.calls == [("a", [1, 2])]
