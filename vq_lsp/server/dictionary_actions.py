"""Quick fixes that teach a word: add it to the workspace dictionary, to the user's, or to the document's;
and the dictionaries' words one edit away as replacements (a typo of the writer's own jargon).

Each is a standard code action whose `WorkspaceEdit` does the work, so Neovim and VS Code apply it
with no client-side command: creating the word list if needed (CreateFile, ignored if it exists)
and appending the word (a TextEdit at the file's end); for the document, a `vq-lsp-words:` comment
(hints/ignores.py). No command rides along (lsprotocol-based clients read any code action with a
`command` as a bare Command): the server learns the word when the word list changes, from the file
watcher or a save (VS Code saves files a workspace edit creates), or from the editor's buffer when
the editor opens the word list to apply the edit (Neovim), see workspace_files.py; every open
document is then re-hinted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from ..documents import textsync
from ..hints import ignores, markup, typos
from ..hints.lsp import SOURCE
from ..workspace import dictionaries

if TYPE_CHECKING:
    from .language_server import VQServer

TEACHABLE = ("typo", "surprise")  # diagnostic codes whose word can be added to a dictionary


def lsp_offsets(text: str, starts: list[int], rng: types.Range) -> tuple[int, int] | None:
    """The char offsets of an LSP range in `text` (`starts`: textsync.line_starts(text)), by text sync's rule
    (\\r\\n, \\r and \\n end a line; columns in UTF-16 units); None for a range outside the text (a client's
    stale diagnostic)."""
    try:
        return (
            textsync.offset_at(text, starts, rng.start.line, rng.start.character),
            textsync.offset_at(text, starts, rng.end.line, rng.end.character),
        )
    except textsync.TextSyncError:
        return None


def lsp_position(text: str, starts: list[int], offset: int) -> types.Position:
    """The LSP position of a char offset, by text sync's rule."""
    return types.Position(*textsync.position_at(text, starts, offset))


def _file_edit(path: Path, word: str, can_create: bool) -> types.WorkspaceEdit | None:
    """Append `word` to the word list at `path` (created first if missing); None if the client cannot."""
    add = dictionaries.append_edit(path, word)
    uri = path.as_uri()
    at = types.Position(add.line, add.character)
    edit = types.TextEdit(range=types.Range(at, at), new_text=add.text)
    if can_create:
        return types.WorkspaceEdit(
            document_changes=[
                types.CreateFile(uri=uri, options=types.CreateFileOptions(ignore_if_exists=True)),
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None), edits=[edit]
                ),
            ]
        )
    return types.WorkspaceEdit(changes={uri: [edit]}) if add.exists else None


def _can_create(ls: VQServer) -> bool:
    """Whether the client creates files in a WorkspaceEdit. Resource operations only exist in
    `documentChanges`, so announcing `create` implies them (Neovim announces no documentChanges flag)."""
    caps = ls.client_capabilities.workspace
    edit = caps.workspace_edit if caps is not None else None
    return bool(
        edit is not None and edit.resource_operations and types.ResourceOperationKind.Create in edit.resource_operations
    )


def actions(ls: VQServer, uri: str, diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
    """The three teaching fixes for each of our typo (and unlikely-word) diagnostics."""
    st = ls.docs.states.get(uri)
    ours = [d for d in diagnostics if d.source == SOURCE and d.code in TEACHABLE]
    if st is None or not ours:
        return []
    text, can_create = st.text, _can_create(ls)
    lists = [("your dictionary", dictionaries.user_dictionary_path())]
    if ls.workspace_files.root is not None:
        lists.insert(0, ("the workspace dictionary", dictionaries.workspace_dictionary_path(ls.workspace_files.root)))
    out, seen, starts = [], set(), textsync.line_starts(text)
    for d in ours:
        span = lsp_offsets(text, starts, d.range)
        word = "" if span is None else text[span[0] : span[1]].strip()
        if not word or " " in word or word in seen or typos.is_word(word):
            continue  # a dictionary word (a confusable, an unlikely word) has nothing to teach
        seen.add(word)
        own = ignores.find(text, markup.markup_of(st.language_id), st.language_id).words
        for near in ls.docs.conventions.dictionary.union(own).near(word):
            replace = types.TextEdit(range=d.range, new_text=near)
            out.append(
                types.CodeAction(
                    title=f"Replace {word!r} with {near!r} (a dictionary word)",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[d],
                    edit=types.WorkspaceEdit(changes={uri: [replace]}),
                )
            )
        for where, path in lists:
            edit = _file_edit(path, word, can_create)
            if edit is not None:
                out.append(
                    types.CodeAction(
                        title=f"Add {word!r} to {where}", kind=types.CodeActionKind.QuickFix, diagnostics=[d], edit=edit
                    )
                )
        at, insert = ignores.document_words_insert(text, st.language_id, word)
        pos = lsp_position(text, starts, at)
        out.append(
            types.CodeAction(
                title=f"Ignore {word!r} in this document",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[d],
                edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(range=types.Range(pos, pos), new_text=insert)]}),
            )
        )
    return out
