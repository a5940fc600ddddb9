"""Fairness under load, by order of events (never by wall time): a long build does not hold
other documents hostage, a document too big for the memory budget is refused once, a settings
change re-chooses hints without engine work, and hints published during a burst of edits point
at the right characters of the version they state."""

from __future__ import annotations

import asyncio
import threading

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from vq_lsp.documents.textsync import Change, apply_change, line_starts
from vq_lsp.server.engine_thread import BUILD, URGENT, EngineThread

from .lsp_helpers import (
    CLIENTS,
    CONFIG,
    change,
    diagnostics_for,
    every_tone_hint,
    initialize,
    message_matching,
    open_doc,
    scores,
    wait_until,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPTIONS = every_tone_hint(max_surprise_hints=20)
PARA = "This paragraph talks about a film that many people liked a lot. " * 6


@pytest_lsp.fixture(config=CONFIG, scope="module", params=CLIENTS)
async def client(lsp_client: pytest_lsp.LanguageClient, request, model_dir):
    await initialize(lsp_client, request.param, {"modelPath": str(model_dir), **OPTIONS})
    yield
    await lsp_client.shutdown_session()


def build_progress(client) -> list:
    return [
        rs
        for rs in client.progress_reports.values()
        if rs and isinstance(rs[0], types.WorkDoneProgressBegin) and "building" in rs[0].title
    ]


async def test_a_request_is_answered_while_another_document_builds(client):
    small = "file:///tmp/vq/fair-small.txt"
    open_doc(client, small, "A short note about a lovely film.", version=1)
    await diagnostics_for(client, small, 1)
    big = "file:///tmp/vq/fair-big.txt"
    builds = len(build_progress(client))
    open_doc(client, big, "\n\n".join([PARA] * 80), version=1)  # about 22 windows of 256 tokens
    await wait_until(client, types.PROGRESS, lambda: len(build_progress(client)) > builds)  # the build runs
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=small), position=types.Position(0, 3))
    )
    assert "document:" in hover.contents.value
    assert big not in client.published, "the hover waited for the whole build of another document"
    await diagnostics_for(client, big, 1)
    reports = build_progress(client)[-1]
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert any(isinstance(r, types.WorkDoneProgressReport) for r in reports)


async def test_a_document_over_the_whole_budget_is_refused_once(client):
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"vqLsp": {**OPTIONS, "memoryBudgetMb": 1}})
    )
    uri = "file:///tmp/vq/fair-over.txt"
    open_doc(client, uri, "\n\n".join([PARA] * 10), version=1)
    msg = await message_matching(client, "fair-over.txt")
    assert "more than the whole memory budget (memoryBudgetMb = 1)" in msg.message
    assert not (await diagnostics_for(client, uri, 1)).diagnostics
    change(client, uri, 2, (0, 0, 0, 0, "Still too big. "))
    await diagnostics_for(client, uri, 2)
    with pytest.raises(JsonRpcException, match="over budget"):
        await scores(client, uri)
    assert sum("fair-over.txt" in m.message for m in client.messages) == 1  # said once, not per edit
    n = len(client.published[uri])
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"vqLsp": OPTIONS}))
    await wait_until(
        client,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
        lambda: len(client.published[uri]) > n and client.published[uri][-1].diagnostics,
    )


async def test_settings_that_only_choose_hints_need_no_engine_work(client):
    uri = "file:///tmp/vq/fair-settings.txt"
    open_doc(client, uri, "A fine film.\n\nA dull one, sadly.", version=1)
    first = await diagnostics_for(client, uri, 1)
    before = await scores(client, uri)
    n = len(client.published[uri])
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"vqLsp": {**OPTIONS, "diagnostics": {**OPTIONS["diagnostics"], "surprise": False}}}
        )
    )
    await wait_until(client, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda: len(client.published[uri]) > n)
    latest = client.published[uri][-1]
    assert latest.version == 1 and {d.code for d in latest.diagnostics} == {"sentiment"}
    assert len(latest.diagnostics) == sum(d.code == "sentiment" for d in first.diagnostics)
    after = await scores(client, uri)
    assert (after["updates"], after["rebuilds"], after["cost"]) == (
        before["updates"],
        before["rebuilds"],
        before["cost"],
    )
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"vqLsp": OPTIONS}))


async def test_hints_published_during_a_burst_point_at_their_characters(client):
    uri = "file:///tmp/vq/fair-burst.txt"
    text = "\n\n".join([PARA] * 8)
    open_doc(client, uri, text, version=1)
    await diagnostics_for(client, uri, 1)
    texts = {1: text}
    for v in range(2, 150):  # type at the start of the second paragraph, far faster than the engine
        line = 2
        ch = Change("word " if v % 7 else "\n", (line, 0, line, 0))
        change(client, uri, v, (*ch.range, ch.text))
        text = apply_change(text, ch)[0]
        texts[v] = text
        if v % 10 == 0:
            await asyncio.sleep(0.02)
    await diagnostics_for(client, uri, 149)
    published = [p for p in client.published[uri] if p.version in texts]
    assert [p.version for p in published] == sorted(p.version for p in published)
    for p in published:
        t = texts[p.version]
        starts = line_starts(t)

        def chars(r: types.Range, t: str = t, starts: list[int] = starts) -> str:
            return t[starts[r.start.line] + r.start.character : starts[r.end.line] + r.end.character]

        for d in p.diagnostics:
            assert d.data["version"] <= p.version
            if d.code == "surprise":
                assert d.message.startswith(f"unexpected {chars(d.range)!r}"), (p.version, d)
            else:
                assert chars(d.range).strip() and "\n\n" not in chars(d.range), (p.version, d)


async def test_urgent_jobs_go_before_queued_build_steps():
    engine = EngineThread("test-engine")
    gate, order = threading.Event(), []
    first = engine.submit(gate.wait)  # holds the thread while the rest queue up
    builds = [engine.submit(order.append, f"build {i}", lane=BUILD) for i in range(3)]
    urgent = engine.submit(order.append, "urgent", lane=URGENT)
    gate.set()
    await asyncio.gather(first, *builds, urgent)
    engine.shutdown()
    assert order == ["urgent", "build 0", "build 1", "build 2"]
