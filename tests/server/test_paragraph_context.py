"""End to end: the `context` setting in the real server. With "paragraph", a paragraph's scores are
the same whatever comes before it (a table here), through typing that splits and joins
paragraphs; switching the setting reloads the model and the leak comes back."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types

from .lsp_helpers import CONFIG, change, diagnostics_for, initialize, open_doc, scores, verify, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")

TABLE = "| Item | Price |\n|---|---|\n| Tickets | 12 |\n| Popcorn | 6 |\n\n"
PARAGRAPH = "I really loved this film, the acting was wonderful and the story moved me."
OPTIONS = {"context": "paragraph", "diagnostics": {"sentimentThreshold": 0.0, "toneMinWords": 0}}


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: pytest_lsp.LanguageClient, model_dir):
    await initialize(lsp_client, "neovim", {"modelPath": str(model_dir), **OPTIONS})
    yield
    await lsp_client.shutdown_session()


async def last_paragraph(client, uri: str) -> dict:
    return (await scores(client, uri))["paragraphs"][-1]["scores"]


async def test_paragraph_scores_do_not_depend_on_a_table_before_it(client):
    alone, after = "file:///tmp/vq/alone.md", "file:///tmp/vq/after.md"
    open_doc(client, alone, PARAGRAPH, language="markdown")
    open_doc(client, after, TABLE + PARAGRAPH, language="markdown")
    await diagnostics_for(client, alone, 1)
    await diagnostics_for(client, after, 1)
    want = await last_paragraph(client, alone)
    assert await last_paragraph(client, after) == want  # bit for bit, through JSON

    # typing: a paragraph break in the table's last row, then joined again; the paragraph is untouched
    change(client, after, 2, (3, 3, 3, 3, "\n\n"))
    change(client, after, 3, (3, 3, 5, 0, ""))
    await diagnostics_for(client, after, 3)
    assert await last_paragraph(client, after) == want
    check = await verify(client, after)
    assert check["codesEqual"] and check["tokensMatchText"] and not check["rebuilt"]

    # the paper's window context: the same text, and the table now changes the paragraph's scores
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"vqLsp": {**OPTIONS, "context": "window"}})
    )
    n = len(client.published[after])
    await wait_until(client, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda: len(client.published[after]) > n)
    assert await last_paragraph(client, after) != want
