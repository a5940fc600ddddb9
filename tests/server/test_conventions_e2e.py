"""End to end through the real server, with the bundled model: a workspace's conventions.

A word in the configuration file's `words` is never flagged; the "Add 'X' to the workspace
dictionary" quick fix creates the word list and the hint then disappears in this and another open
document (read from the file, or from the editor's unsaved buffer of it); "Ignore 'X' in this
document" writes a comment that silences it there only; ignore comments silence hints inside their
region and only there; the configuration file's thresholds and excludes apply, without a restart,
when the client reports the file changed; a malformed file gives one message naming the file and
the key, and the server goes on; Harper's grammar lints come with quick fixes and go when turned off.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Union

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

from .lsp_helpers import (
    VQ_LSP,
    actions_for,
    diagnostics_for,
    make_client,
    message_matching,
    model_loaded,
    open_doc,
    wait_until,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(tempfile.mkdtemp(prefix="vq-lsp-workspace-"))
USER_WORDS = ROOT.parent / f"{ROOT.name}-user-words.txt"
(ROOT / "vq-lsp.toml").write_text('words = ["recieve"]\n')


def client_reading_code_actions_right():
    """The test client, but a code action carrying a command is read as a CodeAction: lsprotocol's
    own hook takes any object with a "command" key for a Command (a Command's is a string, a code
    action's an object), which Neovim and VS Code do not."""
    client = make_client()
    converter = client.protocol._converter

    def structure(obj, _):
        kind = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return converter.structure(obj, kind)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], structure)  # noqa: UP007 (the key)
    return client


CONFIG = ClientServerConfig(
    server_command=[VQ_LSP],
    client_factory=client_reading_code_actions_right,
    server_env={**os.environ, "VQ_LSP_USER_DICTIONARY": str(USER_WORDS)},
)
PUBLISH = types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: pytest_lsp.LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            initialization_options={"device": "cpu"},
            workspace_folders=[types.WorkspaceFolder(uri=ROOT.as_uri(), name="docs")],
        )
    )
    await model_loaded(lsp_client)
    yield
    await lsp_client.shutdown_session()
    shutil.rmtree(ROOT, ignore_errors=True)
    USER_WORDS.unlink(missing_ok=True)


def typo_words(client, uri: str, text: str) -> list[str]:
    """The words of the latest publish's typo hints."""
    out = []
    for d in client.published[uri][-1].diagnostics:
        if d.code == "typo":
            line = text.split("\n")[d.range.start.line]
            out.append(line[d.range.start.character : d.range.end.character])
    return sorted(out)


async def latest_typos(client, uri: str, text: str, want: list[str]) -> list[str]:
    """Wait until the latest publish for `uri` flags exactly the words `want`."""
    await wait_until(client, PUBLISH, lambda: uri in client.published and typo_words(client, uri, text) == want)
    return typo_words(client, uri, text)


def watched_change(client, path: Path, kind=types.FileChangeType.Changed) -> None:
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=path.as_uri(), type=kind)])
    )


def apply_file_edit(edit: types.WorkspaceEdit) -> None:
    """What an editor does with the dictionary fix: create the file, insert the text (one edit)."""
    for change in edit.document_changes:
        if isinstance(change, types.CreateFile):
            path = Path(change.uri.removeprefix("file://"))
            if not path.exists():
                path.write_text("")
        else:
            path = Path(change.text_document.uri.removeprefix("file://"))
            (e,) = change.edits
            lines = path.read_text().split("\n")
            lines[e.range.start.line] = (
                lines[e.range.start.line][: e.range.start.character]
                + e.new_text
                + lines[e.range.start.line][e.range.start.character :]
            )
            path.write_text("\n".join(lines))


async def open_markdown(client, *docs: tuple[str, str]) -> list[types.PublishDiagnosticsParams]:
    """Open each (uri, text) as Markdown, then wait for each one's first hints, in order."""
    for uri, text in docs:
        open_doc(client, uri, text, language="markdown")
    return [await diagnostics_for(client, uri, 1) for uri, _ in docs]


async def test_a_configuration_file_word_is_not_flagged(client):
    uri = (ROOT / "words.md").as_uri()
    text = "She said she would recieve the parcel tomorrow mornning at the office near the station.\n"
    await open_markdown(client, (uri, text))
    assert typo_words(client, uri, text) == ["mornning"]


async def test_adding_a_word_to_the_workspace_dictionary_clears_it_everywhere(client):
    first, second = (ROOT / "one.md").as_uri(), (ROOT / "two.md").as_uri()
    text_one = "They walked to the statoin in the rain and waited for the last train home.\n"
    text_two = "The old statoin clock had stopped years ago, and nobody in town could remeber why.\n"
    got, _ = await open_markdown(client, (first, text_one), (second, text_two))
    assert typo_words(client, first, text_one) == ["statoin"]
    assert typo_words(client, second, text_two) == ["remeber", "statoin"]
    typo = next(d for d in got.diagnostics if d.code == "typo")
    actions = await actions_for(client, first, typo)
    titles = [a.title for a in actions]
    assert {
        "Add 'statoin' to the workspace dictionary",
        "Add 'statoin' to your dictionary",
        "Ignore 'statoin' in this document",
    } <= set(titles), titles
    add = next(a for a in actions if a.title == "Add 'statoin' to the workspace dictionary")
    assert add.kind == types.CodeActionKind.QuickFix and list(add.diagnostics) == [typo]
    create, append = add.edit.document_changes
    assert isinstance(create, types.CreateFile) and create.uri == (ROOT / ".vq-lsp-words.txt").as_uri()
    assert create.options.ignore_if_exists
    assert append.edits[0].new_text == "statoin\n"
    assert not (ROOT / ".vq-lsp-words.txt").exists()
    apply_file_edit(add.edit)
    assert (ROOT / ".vq-lsp-words.txt").read_text() == "statoin\n"
    assert add.command is None  # a plain edit: the server learns the word from the changed file
    watched_change(client, ROOT / ".vq-lsp-words.txt", types.FileChangeType.Created)
    assert await latest_typos(client, first, text_one, []) == []
    assert await latest_typos(client, second, text_two, ["remeber"]) == ["remeber"]
    third = (ROOT / "three.md").as_uri()
    text_three = "They walked to the staton in the rain and waited for the last train home.\n"
    (got,) = await open_markdown(client, (third, text_three))
    assert typo_words(client, third, text_three) == ["staton"]
    typo = next(d for d in got.diagnostics if d.code == "typo")
    titles = [a.title for a in await actions_for(client, third, typo)]
    assert "Replace 'staton' with 'statoin' (a dictionary word)" in titles  # the dictionary's words are fixes


async def test_adding_to_the_user_dictionary_appends_to_its_file(client):
    uri = (ROOT / "user.md").as_uri()
    text = "We beleive the weather will be nice this afternoon, whatever the old almanac says.\n"
    (got,) = await open_markdown(client, (uri, text))
    typo = next(d for d in got.diagnostics if d.code == "typo")
    USER_WORDS.write_text("# my words\nfoo")  # no newline at the end: the fix adds one first
    actions = await actions_for(client, uri, typo)
    add = next(a for a in actions if a.title == "Add 'beleive' to your dictionary")
    apply_file_edit(add.edit)
    assert USER_WORDS.read_text() == "# my words\nfoo\nbeleive\n"
    watched_change(client, USER_WORDS)
    assert await latest_typos(client, uri, text, []) == []


async def test_a_word_list_open_in_the_editor_counts_unsaved(client):
    """Neovim applies the fix to a buffer it opens and does not save: the buffer's words count."""
    uri = (ROOT / "buffer.md").as_uri()
    text = "We think the forcast says rain for the whole of the coming week, sadly.\n"
    await open_markdown(client, (uri, text))
    assert typo_words(client, uri, text) == ["forcast"]
    words_uri = (ROOT / ".vq-lsp-words.txt").as_uri()
    on_disk = (ROOT / ".vq-lsp-words.txt").read_text()
    open_doc(client, words_uri, on_disk, language="plaintext")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=words_uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=on_disk + "forcast\n")],
        )
    )
    assert await latest_typos(client, uri, text, []) == []
    assert (ROOT / ".vq-lsp-words.txt").read_text() == on_disk  # unsaved
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=words_uri))
    )
    assert await latest_typos(client, uri, text, ["forcast"]) == ["forcast"]  # closed unsaved: the file counts


async def test_ignoring_a_word_in_the_document_writes_a_comment_there_only(client):
    uri, other = (ROOT / "ignore.md").as_uri(), (ROOT / "ignore-other.md").as_uri()
    text = "# Plans\n\nWe will leave for the coast tomorow if the trains are running again.\n"
    other_text = "The tomorow market opens at nine, and the bakery sells out of bread by ten.\n"
    got, _ = await open_markdown(client, (uri, text), (other, other_text))
    typo = next(d for d in got.diagnostics if d.code == "typo")
    actions = await actions_for(client, uri, typo)
    ignore = next(a for a in actions if a.title == "Ignore 'tomorow' in this document")
    (edit,) = ignore.edit.changes[uri]
    assert edit.new_text == "<!-- vq-lsp-words: tomorow -->\n" and edit.range.start == types.Position(0, 0)
    new_text = edit.new_text + text
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)],
        )
    )
    await diagnostics_for(client, uri, 2)
    assert typo_words(client, uri, new_text) == []
    assert typo_words(client, other, other_text) == ["tomorow"]


async def test_ignore_comments_silence_hints_inside_and_only_inside(client):
    uri = (ROOT / "regions.md").as_uri()
    text = (
        "I went to teh store because the milk was gone, and then I walked back home again.\n\n"
        "<!-- vq-lsp-disable typo -->\n"
        "She said she would recieve the parcel tomorrow mornning at the office.\n\n"
        "<!-- vq-lsp-enable -->\n"
        "We think the forecast realy says rain for the whole of the coming week, sadly.\n\n"
        "<!-- vq-lsp-disable-next-line -->\n"
        "Nobody could beleive how quickly the summer had passed by this year.\n"
        "The old statoin clock had stopped years ago at a quarter past three.\n"
    )
    await open_markdown(client, (uri, text))
    # 'statoin' is in the workspace dictionary (an earlier test), 'recieve' in the configuration file
    assert typo_words(client, uri, text) == ["realy", "teh"]


async def test_configuration_changes_apply_without_a_restart(client):
    uri, excluded = (ROOT / "config.md").as_uri(), (ROOT / "generated" / "out.md").as_uri()
    text = "The parcel will arrive tomorrow mornning at the office near the harbour wall.\n"
    await open_markdown(client, (uri, text), (excluded, text))
    assert typo_words(client, uri, text) == typo_words(client, excluded, text) == ["mornning"]
    config = ROOT / "vq-lsp.toml"
    config.write_text('words = ["recieve"]\nexclude = ["generated/**"]\n\n[diagnostics]\ntypo-severity = "warning"\n')
    watched_change(client, config)
    await wait_until(client, PUBLISH, lambda: not client.published[excluded][-1].diagnostics)
    await wait_until(
        client,
        PUBLISH,
        lambda: (
            [d.severity for d in client.published[uri][-1].diagnostics if d.code == "typo"]
            == [types.DiagnosticSeverity.Warning]
        ),
    )
    config.write_text('words = ["recieve"]\n[diagnostics]\ntypo-threshold = 99.0\n')
    watched_change(client, config)
    assert await latest_typos(client, uri, text, []) == []
    assert await latest_typos(client, excluded, text, []) == []  # no longer excluded, but the threshold
    config.write_text('words = ["recieve"]\n')
    watched_change(client, config)
    assert await latest_typos(client, uri, text, ["mornning"]) == ["mornning"]


async def test_a_malformed_configuration_file_names_the_file_and_key(client):
    config = ROOT / "vq-lsp.toml"
    config.write_text('words = ["recieve"]\n[diagnostics]\ntypo-threshold = "high"\nsentimentt = true\n')
    watched_change(client, config)
    bad = await message_matching(client, "diagnostics.typoThreshold = 'high' is invalid")
    assert str(config) in bad.message
    await message_matching(client, "diagnostics.sentimentt: unknown setting")
    config.write_text("words = [\n")
    watched_change(client, config)
    broken = await message_matching(client, "not valid TOML")
    assert str(config) in broken.message
    uri = (ROOT / "after.md").as_uri()
    text = "She said she would recieve the parcel tomorrow mornning at the office near the station.\n"
    await open_markdown(client, (uri, text))  # still serving; the broken file's words are not used
    assert typo_words(client, uri, text) == ["mornning", "recieve"]
    config.write_text('words = ["recieve"]\n')
    watched_change(client, config)


async def test_grammar_lints_come_with_quick_fixes_and_go_when_turned_off(client):
    uri = (ROOT / "grammar.md").as_uri()
    text = (
        "# Notes\n\nHe go to the market every morning before the shops open.\n\n"
        "```\nhe go\n```\n\nThis is a example of a sentence that the model reads well enough.\n"
    )
    (got,) = await open_markdown(client, (uri, text))
    grammar = sorted((d for d in got.diagnostics if d.code == "grammar"), key=lambda d: d.range.start.line)
    assert [(d.range.start.line, d.range.start.character) for d in grammar] == [(2, 3), (8, 8)], grammar
    assert all(d.severity == types.DiagnosticSeverity.Hint and "(harper: " in d.message for d in grammar)
    agreement = grammar[0]
    actions = await actions_for(client, uri, agreement)
    assert actions and actions[0].is_preferred and actions[0].title == "Replace 'go' with 'goes'"
    (edit,) = actions[0].edit.changes[uri]
    assert edit.new_text == "goes" and edit.range == agreement.range
    config = ROOT / "vq-lsp.toml"
    config.write_text('words = ["recieve"]\n[diagnostics]\ngrammar = false\n')
    watched_change(client, config)
    await wait_until(
        client, PUBLISH, lambda: not [d for d in client.published[uri][-1].diagnostics if d.code == "grammar"]
    )
    config.write_text('words = ["recieve"]\n')
    watched_change(client, config)
    await wait_until(
        client, PUBLISH, lambda: len([d for d in client.published[uri][-1].diagnostics if d.code == "grammar"]) == 2
    )
    config.write_text('words = ["recieve"]\n[grammar.rules]\nAnA = false\n')  # a rule turned off by name
    watched_change(client, config)
    await wait_until(
        client,
        PUBLISH,
        lambda: [d.range.start.line for d in client.published[uri][-1].diagnostics if d.code == "grammar"] == [2],
    )
    config.write_text('words = ["recieve"]\n')
    watched_change(client, config)
    await wait_until(
        client, PUBLISH, lambda: len([d for d in client.published[uri][-1].diagnostics if d.code == "grammar"]) == 2
    )


async def test_quick_fixes_land_in_place_in_files_with_lone_carriage_returns(client):
    """Lines ended by a lone \\r (old Mac files): the grammar fix and the word fixes are placed by text sync's
    rule, so each edit lands on the hint's own line, not on line 0 or past the text's end (where no hint's
    word was found, so no fix was offered)."""
    uri = (ROOT / "carriage-returns.txt").as_uri()
    lines = [
        "Notes",
        "",
        "He go to the market every morning before the shops open.",
        "",
        "We will leave for the coast tomorow if the trains are running again.",
    ]
    open_doc(client, uri, "\r".join(lines) + "\r", language="plaintext")
    got = await diagnostics_for(client, uri, 1)
    (grammar,) = [d for d in got.diagnostics if d.code == "grammar"]
    assert (grammar.range.start.line, grammar.range.start.character) == (2, 3)
    actions = await actions_for(client, uri, grammar)
    assert actions and actions[0].title == "Replace 'go' with 'goes'"
    assert actions[0].edit.changes[uri][0].range == grammar.range
    (typo,) = [d for d in got.diagnostics if d.code == "typo"]
    assert typo.range.start == types.Position(4, lines[4].index("tomorow"))
    assert "Ignore 'tomorow' in this document" in [a.title for a in await actions_for(client, uri, typo)]
