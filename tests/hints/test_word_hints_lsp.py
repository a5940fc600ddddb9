"""Word hints end to end, through the real `vq-lsp` process: a real-word hint's message, first
quick fix and hover name the same word; code actions at a cursor answer for that word only; a
common misspelling used twice is flagged twice."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types

from tests.server.lsp_helpers import CONFIG, code_actions, diagnostics_for, initialize, open_doc

pytestmark = pytest.mark.asyncio(loop_scope="module")

# A real-word threshold of 0 shows every confusable the model doubts, whatever the default is.
OPTIONS = {"device": "cpu", "diagnostics": {"realWordThreshold": 0.0}}


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: pytest_lsp.LanguageClient):
    await initialize(lsp_client, "visual-studio-code", OPTIONS)
    yield
    await lsp_client.shutdown_session()


def typo_hints(published, text: str) -> dict[str, list[types.Diagnostic]]:
    lines = text.split("\n")
    out: dict[str, list[types.Diagnostic]] = {}
    for d in published.diagnostics:
        if d.code == "typo":
            word = lines[d.range.start.line][d.range.start.character : d.range.end.character]
            out.setdefault(word, []).append(d)
    return out


async def test_a_real_word_hint_its_first_fix_and_its_hover_name_the_same_word(client):
    uri = "file:///tmp/vq/confusable.md"
    text = "# Notes\n\nSome people are more talented then the original author of the book.\n"
    open_doc(client, uri, text, language="markdown")
    got = typo_hints(await diagnostics_for(client, uri, 1), text)
    (hint,) = got["then"]
    assert "'then' may be a confusable of 'than'" in hint.message and hint.message.endswith("likely: 'than'")
    actions = await code_actions(client, uri, hint.range, [hint])
    assert actions[0].is_preferred and actions[0].edit.changes[uri][0].new_text == "than"
    assert all(a.edit.changes[uri][0].new_text == "than" for a in actions)  # the partner only, no "the", "them"
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=hint.range.start)
    )
    assert hint.message in hover.contents.value


async def test_code_actions_at_a_cursor_fix_only_the_word_there(client):
    uri = "file:///tmp/vq/cursor.md"
    text = "# Notes\n\nI went to teh store and bougth some milk, then walked hom again.\n"
    open_doc(client, uri, text, language="markdown")
    published = await diagnostics_for(client, uri, 1)
    got = typo_hints(published, text)
    assert {"teh", "bougth"} <= set(got)
    target = got["bougth"][0]
    cursor = types.Range(target.range.start, target.range.start)
    on_line = [d for d in published.diagnostics if d.code == "typo" and d.range.start.line == 2]
    assert len(on_line) >= 2  # an editor sends every diagnostic of the line
    actions = await code_actions(client, uri, cursor, on_line)
    assert actions and all(list(a.diagnostics) == [target] for a in actions)
    fixes = [a for a in actions if a.title.startswith("Replace") or a.is_preferred]  # not the teaching ones
    assert all(a.edit.changes[uri][0].range == target.range for a in fixes)
    assert actions[0] is fixes[0] and actions[0].is_preferred and actions[0].edit.changes[uri][0].new_text == "bought"
    assert any(a.title.startswith("Add 'bougth' to") for a in actions)  # then the teaching fixes, for this word only


async def test_a_common_misspelling_used_twice_is_flagged_twice(client):
    uri = "file:///tmp/vq/twice.md"
    text = (
        "# Mail\n\nWe recieve the letters every morning.\n\n"
        "- Most readers recieve them a day later.\n- Lys writes to Lys each week.\n"
    )
    open_doc(client, uri, text, language="markdown")
    got = typo_hints(await diagnostics_for(client, uri, 1), text)
    assert len(got.get("recieve", [])) == 2
    assert "Lys" not in got  # a capitalised name used twice is deliberate
