"""A missing or corrupt model folder: a clear error, the server keeps running, and a valid
modelPath sent later through workspace/didChangeConfiguration brings hints back."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .lsp_helpers import CONFIG, diagnostics_for, initialize, message_matching, open_doc, scores, wait_until

pytestmark = pytest.mark.asyncio


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: pytest_lsp.LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest.mark.parametrize("which", ["missing", "corrupt"])
async def test_bad_model_folder_then_recovery(client, which, tmp_path, corrupt_model_dir, model_dir):
    path = tmp_path / "no-such-model" if which == "missing" else corrupt_model_dir
    await initialize(client, "visual-studio-code", {"modelPath": str(path), "threads": 0})
    await message_matching(client, "threads = 0 is invalid")
    msg = await message_matching(client, "cannot load the model")
    assert msg.type == types.MessageType.Error
    assert ("model folder not found" if which == "missing" else "corrupt or truncated") in msg.message
    uri = "file:///tmp/vq/while-no-model.txt"
    open_doc(client, uri, "A pleasant little film.", version=1)
    with pytest.raises(JsonRpcException, match="cannot load the model"):
        await scores(client, uri)
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 1))
    )
    assert hover is None
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"vqLsp": {"modelPath": str(model_dir)}})
    )
    await wait_second_load(client)
    got = await diagnostics_for(client, uri, 1)
    assert (await scores(client, uri))["tokens"] == 5
    assert got.version == 1


async def wait_second_load(client):
    def two_ends():
        ends = [r for rs in client.progress_reports.values() for r in rs if isinstance(r, types.WorkDoneProgressEnd)]
        return len(ends) >= 2 and "loaded" in ends[-1].message

    await wait_until(client, types.PROGRESS, two_ends)
