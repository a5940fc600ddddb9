"""End to end, with the bundled model: a typo hint in Markdown prose (none in its table, code
or URL), its hover saying why, and a quick fix whose edit spells the word the model expects."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import client_capabilities

from .lsp_helpers import CONFIG, diagnostics_for, model_loaded, open_doc

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


async def test_capabilities_advertise_quick_fixes(client):
    caps = client.init_result.capabilities
    assert caps.code_action_provider is not None
    assert types.CodeActionKind.QuickFix in caps.code_action_provider.code_action_kinds


async def test_typo_hint_hover_and_quick_fix(client):
    uri = "file:///tmp/vq/quickfix.md"
    open_doc(client, uri, TEXT, version=1, language="markdown")
    got = await diagnostics_for(client, uri, 1)
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

    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=typo.range,
            context=types.CodeActionContext(diagnostics=[typo]),
        )
    )
    assert actions and all(a.kind == types.CodeActionKind.QuickFix for a in actions)
    best = actions[0]
    assert best.is_preferred and "'the'" in best.title
    (edit,) = best.edit.changes[uri]
    assert edit.new_text == "the" and edit.range == typo.range


async def test_no_quick_fix_without_our_diagnostic(client):
    uri = "file:///tmp/vq/quickfix2.md"
    open_doc(client, uri, TEXT, version=1, language="markdown")
    await diagnostics_for(client, uri, 1)
    other = types.Diagnostic(
        range=types.Range(types.Position(2, 10), types.Position(2, 13)), message="x", source="someone-else", code="typo"
    )
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=other.range,
            context=types.CodeActionContext(diagnostics=[other]),
        )
    )
    assert not actions


async def test_quick_fixes_for_bad_input_answer_with_an_error(client):
    uri = "file:///tmp/vq/quickfix3.md"
    open_doc(client, uri, TEXT, version=1, language="markdown")
    await diagnostics_for(client, uri, 1)
    far = types.Diagnostic(
        range=types.Range(types.Position(400, 0), types.Position(400, 3)), message="x", source="vq-lsp", code="typo"
    )
    for target, diag in ((uri, far), ("file:///tmp/vq/never-opened.md", far)):
        with pytest.raises(JsonRpcException):
            await client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=target),
                    range=diag.range,
                    context=types.CodeActionContext(diagnostics=[diag]),
                )
            )
    hover = await client.text_document_hover_async(
        types.HoverParams(  # the server still answers
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(2, 11)
        )
    )
    assert "'teh' is unlikely here" in hover.contents.value
