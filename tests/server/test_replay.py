"""A real revision history (a Rust book chapter, commit by commit) typed into the server as
incremental edits: every revision's line hunks go bottom-up as the content changes of one
didChange. At the end the server's state verifies against a full pass and its tokens equal
the tokenization of the final text."""

from __future__ import annotations

import difflib
import statistics

import pytest
import pytest_lsp

from tests.conftest import REPLAY_DOC

from .lsp_helpers import CONFIG, change, diagnostics_for, initialize, open_doc, scores, utf16_position, verify

pytestmark = pytest.mark.asyncio


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: pytest_lsp.LanguageClient, model_dir):
    await initialize(lsp_client, "neovim", {"modelPath": str(model_dir)})
    yield
    await lsp_client.shutdown_session()


def hunks(old: str, new: str):
    """Line-level replacements turning old into new, as (l0, c0, l1, c1, text), bottom-up so
    that each one's range is valid after the ones before it were applied."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    starts = [0]
    for line in a:
        starts.append(starts[-1] + len(line))
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append((starts[i1], starts[i2], "".join(b[j1:j2])))
    changes = []
    for s, e, text in reversed(out):
        changes.append((*utf16_position(old, s), *utf16_position(old, e), text))
    return changes


async def test_real_revision_history_replays_and_verifies(client, rust_book_revisions, gpt2):
    assert len(rust_book_revisions) >= 21
    uri = "file:///tmp/vq/ch12-02.md"
    open_doc(client, uri, rust_book_revisions[0], version=1, language="markdown")
    await diagnostics_for(client, uri, 1)
    version, ratios, seconds = 1, [], []
    for old, new in zip(rust_book_revisions, rust_book_revisions[1:]):
        changes = hunks(old, new)
        if not changes:
            continue
        version += 1
        change(client, uri, version, *changes)
        await diagnostics_for(client, uri, version)
        res = await scores(client, uri)
        assert res["version"] == version and res["rebuilds"] == 0
        if res["cost"] and "incremental_macs" in res["cost"]:
            ratios.append(res["cost"]["dense_macs"] / max(1, res["cost"]["incremental_macs"]))
            seconds.append(res["cost"]["seconds"])
    assert version >= 20
    final = await scores(client, uri)
    assert final["tokens"] == len(gpt2.encode(rust_book_revisions[-1]))
    assert final["windows"] >= 2  # the chapter spans several 256-token windows
    check = await verify(client, uri)
    assert check["codesEqual"] and check["tokensMatchText"] and not check["rebuilt"], check
    assert check["maxAbsDiff"] < 1e-4
    print(
        f"\nreplayed {version - 1} revisions of {REPLAY_DOC} ({final['tokens']} tokens, {final['windows']} windows): "
        f"median dense/incremental MACs {statistics.median(ratios):.1f}x, "
        f"median engine time {statistics.median(seconds) * 1000:.1f} ms"
    )
