"""End to end: the real `vq-lsp` process writes a closed document's state to its cache folder
(VQ_LSP_CACHE_DIR) and, when the document is reopened, reads it back instead of rebuilding it;
the scores request says so (`restores`, `memory.snapshots`) and verify still passes."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types

from .lsp_helpers import VQ_LSP, diagnostics_for, initialize, make_client, open_doc, scores, verify

pytestmark = pytest.mark.asyncio(loop_scope="module")

CACHE = Path(tempfile.mkdtemp(prefix="vq-lsp-e2e-cache-"))
CONFIG = pytest_lsp.ClientServerConfig(
    server_command=[VQ_LSP], client_factory=make_client, server_env={**os.environ, "VQ_LSP_CACHE_DIR": str(CACHE)}
)
TEXT = "\n\n".join(f"Part {i}. The film was a delight, though the ending dragged on." for i in range(30))


@pytest.fixture(scope="module", autouse=True)
def remove_cache():
    yield
    shutil.rmtree(CACHE, ignore_errors=True)


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: pytest_lsp.LanguageClient, model_dir):
    await initialize(lsp_client, "visual-studio-code", {"modelPath": str(model_dir)})
    yield
    await lsp_client.shutdown_session()


async def test_close_and_reopen_restores_from_the_snapshot(client):
    uri = "file:///tmp/vq/snap.txt"
    open_doc(client, uri, TEXT, version=1)
    await diagnostics_for(client, uri, 1)
    first = await scores(client, uri)
    assert first["restores"] == 0 and first["windows"] >= 2
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    open_doc(client, uri, TEXT, version=2)
    await diagnostics_for(client, uri, 2)
    again = await scores(client, uri)
    assert again["restores"] == 1 and again["rebuilds"] == 0
    assert again["scores"] == first["scores"] and again["paragraphs"] == first["paragraphs"]
    snaps = again["memory"]["snapshots"]
    assert snaps["saved"] == 1 and snaps["restored"] == 1 and snaps["files"] == 1
    assert Path(snaps["folder"]) == CACHE / "snapshots" and len(list((CACHE / "snapshots").glob("*.vqsnap"))) == 1
    check = await verify(client, uri)
    assert check["codesEqual"] and not check["rebuilt"]


async def test_a_different_text_is_built_not_restored(client):
    uri = "file:///tmp/vq/snap2.txt"
    open_doc(client, uri, TEXT.replace("delight", "bore"), version=1)
    await diagnostics_for(client, uri, 1)
    res = await scores(client, uri)
    assert res["restores"] == 0 and res["memory"]["snapshots"]["misses"] >= 1
