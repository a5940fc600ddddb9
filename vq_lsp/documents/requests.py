"""Requests answered from a document's built engine state: scores, verify, hover and quick fixes.

Each is one job on the engine thread: `StateBuilder.ready` (builder.py) builds (or rebuilds) what is missing,
or raises KeyError (not open) or LookupError (no state possible: no model, too long, ...),
which the server turns into LSP errors.
"""

from __future__ import annotations

import hashlib
import time

from ..hints import lsp as hint_lsp
from ..hints import material
from .state import DocumentState, Outcome
from .store import Documents

Range = tuple[int, int, int, int]  # LSP (line, character, line, character)


def built_state(docs: Documents, uri: str) -> DocumentState:
    """The document with its engine state built (code lenses read it as it is)."""
    return docs.builder.ready(uri)


def scores(docs: Documents, uri: str) -> dict:
    """vqLsp/documentScores: the document's and its paragraphs' scores, costs and memory."""
    st = docs.builder.ready(uri)
    paragraphs = material.paragraph_scores(st.tracked, st.doc)
    return {
        "uri": uri,
        "version": st.version,
        "scores": st.doc.scores if hint_lsp.has_text(st.text) else {},  # an empty document has no score
        "tokens": st.doc.n_tokens,
        "windows": st.doc.window_count,
        "paragraphs": [
            {"range": hint_lsp.lsp_range(st.tracked, a, b), "tokens": [ta, tb], "scores": sc}
            for a, b, ta, tb, sc in paragraphs
        ],
        "cost": st.last_cost,
        "updates": st.updates,
        "rebuilds": st.rebuilds,
        "evictions": st.evictions,
        "outputs_dropped": st.outputs_dropped,
        "state_layout": None if st.doc is None else "full" if st.doc.keeps_outputs else "lean",
        "restores": st.restores,
        "memory": docs.budget.report(),
    }


def verify(docs: Documents, uri: str) -> dict:
    """vqLsp.verify: the state against a dense pass and the tokens against the text, with a hash of
    the server's text (so a client can check it is its own); a state that fails is rebuilt."""
    st = docs.builder.ready(uri)
    t0 = time.perf_counter()
    check = st.doc.verify()
    tokens_ok = st.doc.token_ids == docs.model.tokenizer.encode(st.text)
    result = {
        "uri": uri,
        "version": st.version,
        "codesEqual": check.codes_equal,
        "maxAbsDiff": check.max_abs_diff,
        "mismatchedCodes": check.mismatched_codes,
        "windows": check.windows,
        "tokensMatchText": tokens_ok,
        "seconds": time.perf_counter() - t0,
        "rebuilt": False,
    }
    if not (check.codes_equal and result["tokensMatchText"]):
        st.mark_in_doubt(tokens_too=True)
        docs.builder.ensure(st, Outcome())
        result["rebuilt"] = True
    text = docs.states[uri].text
    return result | {"textSha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()}


def hover(docs: Documents, uri: str, line: int, character: int) -> str:
    st = docs.builder.ready(uri)
    return hint_lsp.hover_text(
        st.tracked,
        st.doc,
        st.tracked.offset(line, character),
        st.language_id,
        docs.settings.diagnostics,
        caches=docs.hint_caches,
    )


def quick_fixes(docs: Documents, uri: str, ranges: list[Range]) -> list[tuple[Range, list[hint_lsp.QuickFix]]]:
    """For each (line, character, line, character) range: the prose words there with their
    likeliest fixes (hints/material.py), as (range, its words)."""
    st = docs.builder.ready(uri)
    out = []
    for l0, c0, l1, c1 in ranges:
        a, b = st.tracked.offset(l0, c0), st.tracked.offset(l1, c1)
        found = material.quick_fixes(
            st.tracked, st.doc, a, b, st.language_id, docs.settings.diagnostics, caches=docs.hint_caches
        )
        out.append(
            (
                (l0, c0, l1, c1),
                [hint_lsp.QuickFix(f, st.tracked.position(f.start), st.tracked.position(f.end)) for f in found],
            )
        )
    return out
