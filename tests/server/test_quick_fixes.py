"""End to end, with the bundled model: a typo hint in Markdown prose (none in its table, code
or URL), its hover saying why, and a quick fix whose edit spells the word the model expects."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import client_capabilities

from .lsp_helpers import CONFIG, actions_for, diagnostics_for, model_loaded, open_doc

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT = """# Notes

I went to teh store because the milk was gone, and then I walked back home again.

| colum | valeu |
|-------|-------|
| teh   | recieve |

Run `pip install teh` or see https://example.com/teh for more.

```
teh recieve
```
"""


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: pytest_lsp.LanguageClient):
    lsp_client.init_result = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"), initialization_options={"device": "cpu"}
        )
    )
    await model_loaded(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def open_text(client, uri: str) -> types.PublishDiagnosticsParams:
    """Open TEXT as Markdown under `uri` and wait for its first hints."""
    open_doc(client, uri, TEXT, version=1, language="markdown")
    return await diagnostics_for(client, uri, 1)


def typo_diagnostic(line: int, start: int, end: int, source: str) -> types.Diagnostic:
    """A typo diagnostic on `line` from character `start` to `end`, as a client would send it back."""
    at = types.Range(types.Position(line, start), types.Position(line, end))
    return types.Diagnostic(range=at, message="x", source=source, code="typo")


async def test_capabilities_advertise_quick_fixes(client):
    caps = client.init_result.capabilities
    assert caps.code_action_provider is not None
    assert types.CodeActionKind.QuickFix in caps.code_action_provider.code_action_kinds


async def test_typo_hint_hover_and_quick_fix(client):
    uri = "file:///tmp/vq/quickfix.md"
    got = await open_text(client, uri)
    typos = [d for d in got.diagnostics if d.code == "typo"]
    # the one typo in prose, none in the table, inline code, URL or fenced code
    assert [(d.range.start.line, d.range.start.character) for d in typos] == [(2, 10)], typos
    typo = typos[0]
    assert "'teh' is unlikely here" in typo.message and "'the'" in typo.message
    assert not [d for d in got.diagnostics if d.code == "sentiment" and d.range.start.line != 2]

    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(2, 11))
    )
    assert "'teh' is unlikely here:" in hover.contents.value and "nats; likely: 'the'" in hover.contents.value

    actions = await actions_for(client, uri, typo)
    assert actions and all(a.kind == types.CodeActionKind.QuickFix for a in actions)
    best = actions[0]
    assert best.is_preferred and "'the'" in best.title
    (edit,) = best.edit.changes[uri]
    assert edit.new_text == "the" and edit.range == typo.range


async def test_no_quick_fix_without_our_diagnostic(client):
    uri = "file:///tmp/vq/quickfix2.md"
    await open_text(client, uri)
    other = typo_diagnostic(2, 10, 13, source="someone-else")
    actions = await actions_for(client, uri, other)
    assert not actions


async def test_quick_fixes_for_bad_input_answer_with_an_error(client):
    uri = "file:///tmp/vq/quickfix3.md"
    await open_text(client, uri)
    far = typo_diagnostic(400, 0, 3, source="vq-lsp")
    for target, diag in ((uri, far), ("file:///tmp/vq/never-opened.md", far)):
        with pytest.raises(JsonRpcException):
            await actions_for(client, target, diag)
    hover = await client.text_document_hover_async(
        types.HoverParams(  # the server still answers
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(2, 11)
        )
    )
    assert "'teh' is unlikely here" in hover.contents.value
