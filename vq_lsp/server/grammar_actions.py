"""Quick fixes for grammar hints: Harper's suggestions for the lint under a diagnostic, best first.

The lints are found again for the document's current text (cached per paragraph in hints/grammar.py,
so this costs nothing after a publish), on the engine thread: Harper's linter is not thread-safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from ..documents import textsync
from ..hints import conventions, ignores
from ..hints.lsp import SOURCE
from .dictionary_actions import lsp_offsets, lsp_position

if TYPE_CHECKING:
    from .language_server import VQServer


def _lints(ls: VQServer, uri: str):
    st = ls.docs.states.get(uri)
    if st is None:
        return "", []
    cfg = ls.docs.settings.diagnostics
    own = ignores.find(st.text, conventions.markup_kind(st.language_id, cfg), st.language_id).words
    words = ls.docs.conventions.dictionary.union(own)
    return st.text, conventions.grammar_lints(st.text, st.language_id, cfg, words, caches=ls.docs.hint_caches)


async def actions(ls: VQServer, uri: str, diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
    ours = [d for d in diagnostics if d.source == SOURCE and d.code == "grammar"]
    if not ours or not ls.docs.settings.diagnostics.grammar:
        return []
    text, lints = await ls.on_engine(_lints, ls, uri)
    out, starts = [], textsync.line_starts(text)
    for d in ours:
        span = lsp_offsets(text, starts, d.range)
        for lint in (lint for lint in lints if (lint.start, lint.end) == span):
            for i, fix in enumerate(lint.fixes):
                edit = types.TextEdit(
                    range=types.Range(lsp_position(text, starts, fix.start), lsp_position(text, starts, fix.end)),
                    new_text=fix.text,
                )
                shown = f"{fix.text!r}" if fix.text else "nothing"
                out.append(
                    types.CodeAction(
                        title=f"Replace {text[fix.start : fix.end]!r} with {shown}"
                        if fix.start < fix.end
                        else f"Insert {fix.text!r}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[d],
                        is_preferred=i == 0,
                        edit=types.WorkspaceEdit(changes={uri: [edit]}),
                    )
                )
    return out
