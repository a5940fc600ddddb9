"""End to end: the memory budget and the server's default state layout (`auto`), through the real
`vq-lsp` process over stdio. A server of its own: the states other tests leave open would share
the budget."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types

from .lsp_helpers import CLIENTS, CONFIG, diagnostics_for, every_tone_hint, initialize, open_doc, scores

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPTIONS = every_tone_hint(max_surprise_hints=4)


@pytest_lsp.fixture(config=CONFIG, scope="module", params=CLIENTS[:1])
async def client(lsp_client: pytest_lsp.LanguageClient, request, model_dir):
    await initialize(lsp_client, request.param, {"modelPath": str(model_dir), **OPTIONS})
    yield
    await lsp_client.shutdown_session()


async def test_a_state_is_built_full_and_thinned_under_a_small_budget(client):
    """stateLayout auto (the default): a state is built full, and the scores request says so. Under a
    budget too small for both documents full, the budget thins before it drops: a state it dropped
    was thinned first, and the states stay within the budget. (Which of thinning and dropping is
    enough depends on the server's measured working memory; tests/documents/test_states.py pins it.)"""
    para = "This paragraph talks about a film that many people liked a lot. " * 6
    text = "\n\n".join([para] * 12)
    first, second = "file:///tmp/vq/thin-1.txt", "file:///tmp/vq/thin-2.txt"
    open_doc(client, first, text, version=1)
    await diagnostics_for(client, first, 1)
    res = await scores(client, first)
    assert res["state_layout"] == "full" and res["memory"]["lean_states"] == 0 and res["outputs_dropped"] == 0
    budget = 1.5 * res["memory"]["bytes"]  # room for one full state and a half: the states get at most this
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"vqLsp": {**OPTIONS, "memoryBudgetMb": budget / 2**20}})
    )
    open_doc(client, second, text.replace("film", "movie"), version=1)
    await diagnostics_for(client, second, 1)
    now = await scores(client, second)
    assert now["memory"]["bytes"] <= budget
    thinned = await scores(client, first)  # rebuilt on demand if it was dropped
    assert thinned["outputs_dropped"] >= 1 and thinned["scores"] == pytest.approx(res["scores"], abs=1e-9)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"vqLsp": OPTIONS}))
    for uri in (first, second):
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
