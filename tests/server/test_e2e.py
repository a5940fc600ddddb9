"""End to end: the real `vq-lsp` process over stdio, driven by pytest-lsp under the Neovim and
VS Code client capabilities. One server per client kind for this module; tests use their own
document uris."""

from __future__ import annotations

import statistics
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .lsp_helpers import (
    CLIENTS,
    CONFIG,
    change,
    computed,
    diagnostics_for,
    every_tone_hint,
    initialize,
    message_matching,
    open_doc,
    scores,
    utf16_position,
    verify,
    wait_until,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPTIONS = every_tone_hint(max_surprise_hints=4)
TEXT = "The film was a delight from start to finish.\r\n\r\nI hated the ending 😀, though.\r\nThe cast was fine."


@pytest_lsp.fixture(config=CONFIG, scope="module", params=CLIENTS)
async def client(lsp_client: pytest_lsp.LanguageClient, request, model_dir):
    await initialize(lsp_client, request.param, {"modelPath": str(model_dir), **OPTIONS})
    yield
    await lsp_client.shutdown_session()


def counts(params):
    sev = [d.severity for d in params.diagnostics]
    return sev.count(types.DiagnosticSeverity.Information), sev.count(types.DiagnosticSeverity.Hint)


async def test_model_load_reports_progress(client):
    reports = [r for rs in client.progress_reports.values() for r in rs]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and "loading model" in reports[0].title
    assert isinstance(reports[-1], types.WorkDoneProgressEnd) and "loaded" in reports[-1].message


async def test_open_publishes_versioned_diagnostics(client):
    uri = "file:///tmp/vq/open.txt"
    open_doc(client, uri, TEXT, version=7)
    got = await diagnostics_for(client, uri, 7)
    assert counts(got) == (2, 4)  # two paragraphs (threshold 0: every paragraph), four surprise hints
    para = next(d for d in got.diagnostics if d.code == "sentiment")
    assert para.range.start == types.Position(0, 0) and para.range.end == types.Position(0, 44)
    assert para.message.split()[0] in ("negative", "positive") and "tone (" in para.message
    res = await scores(client, uri)
    assert res["version"] == 7 and len(res["paragraphs"]) == 2
    assert abs(sum(res["scores"].values()) - 1) < 1e-6


async def test_many_incremental_edits_end_exact(client, gpt2):
    uri = "file:///tmp/vq/typing.md"
    text = TEXT
    open_doc(client, uri, text, version=1, language="markdown")
    await diagnostics_for(client, uri, 1)
    typed = " Honestly, it was 😀 wonderful.\r\nNew line\there."
    version, offset = 1, 0
    for i, ch in enumerate(typed):  # type at the end of the first line, one notification per keystroke
        offset = text.index("\r\n") if i == 0 else offset + len(typed[i - 1])
        line, col = utf16_position(text, offset)
        version += 1
        change(client, uri, version, (line, col, line, col, ch))
        text = text[:offset] + ch + text[offset:]
    # a multi-change notification (applied in order) and a deletion spanning a CRLF
    a = text.index("hated")
    l0, c0 = utf16_position(text, a)
    text = text[:a] + "loved" + text[a + 5 :]
    b = text.index("\r\nThe cast")
    l1, c1 = utf16_position(text, b)
    l2, c2 = utf16_position(text, b + 2)
    text = text[:b] + " " + text[b + 2 :]
    version += 1
    change(client, uri, version, (l0, c0, l0, c0 + 5, "loved"), (l1, c1, l2, c2, " "))
    got = await diagnostics_for(client, uri, version)
    assert counts(got)[0] == 2
    res = await scores(client, uri)
    assert res["version"] == version
    assert res["tokens"] == len(gpt2.encode(text))
    assert res["rebuilds"] == 0  # every update was incremental and checked against the text
    published = [p.version for p in client.published[uri]]
    own = [p.version for p in client.published[uri] if computed(p)]  # not moved through newer edits
    assert published == sorted(published) and own == sorted(set(own)) and own[-1] == version  # never stale
    print(f"\n{version - 1} change notifications -> {res['updates']} engine updates, {len(published)} publishes")
    cost = res["cost"]
    assert cost["incremental_macs"] > 0 and cost["dense_macs"] > cost["incremental_macs"]
    check = await verify(client, uri)
    assert check["codesEqual"] and check["tokensMatchText"] and not check["rebuilt"]
    assert check["maxAbsDiff"] < 1e-6


async def test_full_replacement_and_keystroke_latency(client, gpt2):
    uri = "file:///tmp/vq/latency.txt"
    text = "\n\n".join(["The acting was superb and the story moved me deeply."] * 6)
    open_doc(client, uri, text, version=1)
    await diagnostics_for(client, uri, 1)
    change(client, uri, 2, "Short.")
    await diagnostics_for(client, uri, 2)
    text = "Short."
    times, version = [], 2
    for word in ["  It", " was", " a", " good", " film", "."] * 3:
        for ch in word:
            version += 1
            line, col = utf16_position(text, len(text))
            t0 = time.perf_counter()
            change(client, uri, version, (line, col, line, col, ch))
            await diagnostics_for(client, uri, version)
            times.append(time.perf_counter() - t0)
            text += ch
    res = await scores(client, uri)
    assert res["tokens"] == len(gpt2.encode(text))
    median = statistics.median(times)
    print(
        f"\nper-keystroke latency (edit -> diagnostics), {len(times)} keystrokes: "
        f"median {median * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"
    )
    assert median < 1.0


async def test_hover_and_code_lens(client):
    uri = "file:///tmp/vq/hover.txt"
    open_doc(client, uri, TEXT, version=1)
    await diagnostics_for(client, uri, 1)
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(2, 3))
    )
    assert "document:" in hover.contents.value and "paragraph:" in hover.contents.value
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert len(lenses) == 1 and lenses[0].command.command == "vqLsp.verify"
    res = await scores(client, uri)
    label = max(res["scores"], key=res["scores"].get)
    assert f"{label} {res['scores'][label]:.2f}" in lenses[0].command.title


async def lens_and_hover(client, uri: str) -> tuple[list[str], str | None]:
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 0))
    )
    return [lens.command.title for lens in lenses], hover.contents.value if hover else None


async def test_a_document_with_no_text_has_no_score(client):
    uri = "file:///tmp/vq/empty.md"
    open_doc(client, uri, "", version=1)
    assert not (await diagnostics_for(client, uri, 1)).diagnostics
    assert await lens_and_hover(client, uri) == ([], None)  # nothing to score: nothing shown
    change(client, uri, 2, (0, 0, 0, 0, "The film was a delight from start to finish."))
    await diagnostics_for(client, uri, 2)
    (title,), hover = await lens_and_hover(client, uri)
    assert title.endswith("(document) · verify") and "no text" not in title and "document: " in hover
    change(client, uri, 3, (0, 0, 0, 44, " \n\n "))  # all of its words deleted
    assert not (await diagnostics_for(client, uri, 3)).diagnostics
    assert await lens_and_hover(client, uri) == (["vq-lsp: no text · verify"], "**vq-lsp** document: no text")
    assert (await scores(client, uri))["scores"] == {}


async def test_configuration_change_and_invalid_setting(client):
    uri = "file:///tmp/vq/config.txt"
    open_doc(client, uri, TEXT, version=1)
    assert counts(await diagnostics_for(client, uri, 1)) == (2, 4)
    before = len(client.published[uri])
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"vqLsp": {"diagnostics": {"surprise": False, "sentimentThreshold": 2.5}}}
        )
    )
    msg = await message_matching(client, "sentimentThreshold")
    assert msg.type == types.MessageType.Warning and "default" in msg.message

    await wait_until(client, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda: len(client.published[uri]) > before)
    latest = client.published[uri][-1]
    assert latest.version == 1
    # surprise off; the invalid threshold fell back to its default (0.75), so a random model's
    # near-even paragraphs get no sentiment diagnostic
    assert counts(latest)[1] == 0
    assert all(d.code == "sentiment" and float(d.message.split("(")[1][:-1]) >= 0.75 for d in latest.diagnostics)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"vqLsp": OPTIONS}))
    n = len(client.published[uri])
    await wait_until(client, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda: len(client.published[uri]) > n)
    assert counts(client.published[uri][-1]) == (2, 4)


async def test_bad_input_is_reported_and_other_documents_keep_working(client):
    good, bad = "file:///tmp/vq/good.txt", "file:///tmp/vq/bad.txt"
    open_doc(client, good, TEXT, version=1)
    open_doc(client, bad, TEXT, version=1)
    await diagnostics_for(client, bad, 1)
    change(client, bad, 2, (40, 0, 40, 1, "x"))  # far past the last line
    msg = await message_matching(client, "rejected a change to " + bad)
    assert msg.type == types.MessageType.Error and "line 40 is out of range" in msg.message
    change(client, bad, 3, (0, 0, 0, 0, "ignored "))  # out of sync: incremental changes are ignored
    change(client, good, 2, (0, 0, 0, 0, "Truly, "))
    assert counts(await diagnostics_for(client, good, 2))[0] == 2
    with pytest.raises(JsonRpcException, match="out of range"):
        await scores(client, bad)
    change(client, bad, 4, "Fresh text after the editor resent everything.")  # full text resyncs
    assert counts(await diagnostics_for(client, bad, 4))[0] == 1
    assert (await verify(client, bad))["tokensMatchText"]

    # unknown documents: a change gets a message, a request gets an error response
    change(client, "file:///tmp/vq/never-opened.txt", 2, (0, 0, 0, 0, "x"))
    await message_matching(client, "never-opened.txt, which is not open")
    with pytest.raises(JsonRpcException, match="unknown document"):
        await scores(client, "file:///tmp/vq/never-opened.txt")
    with pytest.raises(JsonRpcException):
        await client.protocol.send_request_async("vqLsp/documentScores", {"nothing": 1})

    # binary and undecodable text: a warning, no hints, and the server carries on
    binary = "file:///tmp/vq/binary.txt"
    open_doc(client, binary, "PK\x03\x04\x00\x00" + "\x01\x02" * 20, version=1)
    assert len((await diagnostics_for(client, binary, 1)).diagnostics) == 0
    await message_matching(client, "binary content")
    change(client, binary, 2, "Now it is prose.")
    assert counts(await diagnostics_for(client, binary, 2))[0] == 1
    surrogate = "file:///tmp/vq/surrogate.txt"
    open_doc(client, surrogate, "broken \ud800 text", version=1)
    await message_matching(client, "unpaired surrogate")
    assert len((await diagnostics_for(client, surrogate, 1)).diagnostics) == 0

    # an empty document has no state and no diagnostics; typing into it starts one
    empty = "file:///tmp/vq/empty.txt"
    open_doc(client, empty, "", version=1)
    assert len((await diagnostics_for(client, empty, 1)).diagnostics) == 0
    change(client, empty, 2, (0, 0, 0, 0, "Hello there."))
    assert counts(await diagnostics_for(client, empty, 2))[0] == 1
    change(client, good, 3, (0, 0, 0, 7, ""))
    assert counts(await diagnostics_for(client, good, 3))[0] == 2


async def test_documents_far_beyond_the_window_and_memory_budget(client, gpt2):
    para = "This paragraph talks about a film that many people liked a lot. " * 6
    long_text = "\n\n".join([para] * 40)  # about 14 windows of 256 tokens
    n_tokens = len(gpt2.encode(long_text))
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"vqLsp": {**OPTIONS, "maxDocumentTokens": n_tokens // 2}})
    )
    huge = "file:///tmp/vq/huge.txt"
    open_doc(client, huge, long_text, version=1)
    assert len((await diagnostics_for(client, huge, 1)).diagnostics) == 0
    await message_matching(client, f"{n_tokens} tokens, more than maxDocumentTokens")
    with pytest.raises(JsonRpcException, match="too long"):
        await scores(client, huge)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"vqLsp": OPTIONS}))
    await wait_until(client, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda: client.published[huge][-1].diagnostics)
    res = await scores(client, huge)
    assert res["windows"] >= 10 and res["tokens"] == n_tokens
    one = res["memory"]["bytes"] / res["memory"]["live_states"]

    # a budget that holds about one such state: older states are dropped, then rebuilt on demand
    budget_mb = max(1.0, 1.5 * res["memory"]["bytes"] / 2**20)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"vqLsp": {**OPTIONS, "memoryBudgetMb": budget_mb}})
    )
    other = "file:///tmp/vq/huge2.txt"
    open_doc(client, other, long_text.replace("film", "movie"), version=1)
    await diagnostics_for(client, other, 1)
    res2 = await scores(client, other)
    assert res2["memory"]["bytes"] <= budget_mb * 2**20
    again = await scores(client, huge)  # rebuilt from its text
    assert again["scores"] == pytest.approx(res["scores"], abs=1e-9)
    assert again["memory"]["bytes"] <= budget_mb * 2**20 and one > 0
    assert (await scores(client, other))["evictions"] >= 1
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"vqLsp": OPTIONS}))
