"""The memory budget follows the user (documents/memory.py, builder.py), by order of events: an
edit counts as use, a document in use is never dropped, a build makes room for its whole state
before its first window and its half-built windows count, a document dropped and rebuilt over
and over is reported once, and a document over maxDocumentTokens keeps only its text (no
tokens, no counting per keystroke)."""

from __future__ import annotations

import pytest

from vq_lsp.documents import eligibility
from vq_lsp.documents.builder import THRASH_EVICTIONS
from vq_lsp.documents.events import Edited, Opened
from vq_lsp.documents.problems import Reason
from vq_lsp.documents.store import Documents
from vq_lsp.documents.textsync import Change
from vq_lsp.settings import Settings

TEXT = "\n\n".join(["A long paragraph about a film that went on and on and on."] * 60)


@pytest.fixture
def path_settings() -> dict:
    return {"snapshots": False}


@pytest.fixture
def path(path, model_dir):
    """The server with room for one state of TEXT, not two."""
    p = path
    p.process("mem://probe", [Opened(1, "plaintext", TEXT)])
    one = p.docs.states.pop("mem://probe").bytes()
    p.docs.settings = Settings(
        model_path=str(model_dir), device="cpu", snapshots=False, memory_budget_mb=1.5 * one / 2**20
    )  # room for one such state, not two
    return p


def build(docs: Documents, uri: str) -> None:
    while True:
        done, total = docs.builder.build_step(uri)
        if done >= total:
            return


def test_an_edit_counts_as_use(docs, path):
    path.process("mem://note", [Opened(1, "plaintext", TEXT)])
    docs.process("mem://note", [Edited(2, [Change("Typing. ", (0, 0, 0, 0))])])  # the user types in it
    path.process("mem://book", [Opened(1, "plaintext", TEXT.replace("film", "book"))])
    note, book = docs.states["mem://note"], docs.states["mem://book"]
    assert note.doc is not None and note.evictions == 0 and book.doc is not None  # spared, though older
    note.last_edit -= 60  # a minute later, nobody typed in it
    path.process("mem://third", [Opened(1, "plaintext", TEXT.replace("film", "song"))])
    assert note.doc is None and note.evictions == 1  # now it is the least recently used


def test_a_document_in_use_is_never_dropped(docs, path):
    path.process("mem://asked", [Opened(1, "plaintext", TEXT)])
    with path.server.in_use("mem://asked"):  # a hover waits for it
        path.process("mem://other", [Opened(1, "plaintext", TEXT.replace("film", "book"))])
    assert docs.states["mem://asked"].doc is not None


def test_a_build_makes_room_before_its_first_window_and_half_built_windows_count(docs, path):
    path.process("mem://old", [Opened(1, "plaintext", TEXT)])
    out = docs.process("mem://new", [Opened(1, "plaintext", TEXT.replace("film", "book"))])
    assert out.needs_build and docs.states["mem://old"].doc is not None
    done, total = docs.builder.build_step("mem://new")
    assert done < total
    assert docs.states["mem://old"].doc is None  # dropped before the new state took memory
    assert docs.states["mem://new"].bytes() > 0  # the half-built state counts
    build(docs, "mem://new")
    assert docs.budget.report()["bytes"] <= docs.shared.budget_bytes()


def test_thrashing_is_reported_once_with_the_setting(docs, path):
    path.process("mem://a", [Opened(1, "plaintext", TEXT)])
    path.process("mem://b", [Opened(1, "plaintext", TEXT.replace("film", "book"))])
    for _ in range(THRASH_EVICTIONS + 2):  # the two take turns: each build drops the other
        for uri in ("mem://a", "mem://b"):
            docs.process(uri, [Edited(None, [])])
            docs.states[uri].last_edit = float("-inf")
            build(docs, uri)
    notices = [m.text for m in path.server.notices if "rebuilt" in m.text]
    assert len(notices) == 2 and all("memoryBudgetMb" in n for n in notices)  # once per document


def test_a_document_over_the_token_limit_keeps_only_its_text(docs, gpt2, monkeypatch, path):
    docs.settings = Settings(
        model_path=docs.settings.model_path, device="cpu", snapshots=False, max_document_tokens=500
    )
    counts = []
    real = eligibility.count_tokens
    monkeypatch.setattr(eligibility, "count_tokens", lambda *a: counts.append(1) or real(*a))
    uri = "mem://huge"
    out = path.process(uri, [Opened(1, "plaintext", TEXT)])
    st = docs.states[uri]
    n = len(gpt2.encode(TEXT))
    assert st.problem.reason is Reason.TOO_LONG and st.tracked is None and st.doc is None
    assert out.diagnostics == [] and f"{n} tokens, more than maxDocumentTokens = 500" in out.messages[0].text
    text = TEXT
    for v in range(2, 40):  # keystrokes: the text moves on, nothing is tokenized or counted again
        out = path.process(uri, [Edited(v, [Change("x", (0, 0, 0, 0))])])
        text = "x" + text
        assert out.diagnostics == [] and not out.messages
    assert st.text == text and st.tracked is None and len(counts) == 1
    short = "A short text now."
    out = path.process(uri, [Edited(40, [Change(short)])])  # replaced by a short text: counted again
    assert st.problem is None and st.doc is not None and st.doc.token_ids == gpt2.encode(short)
    assert out.diagnostics is not None


def test_deleting_most_of_a_long_text_brings_its_hints_back(docs, gpt2, path):
    docs.settings = Settings(
        model_path=docs.settings.model_path, device="cpu", snapshots=False, max_document_tokens=500
    )
    uri = "mem://shrinks"
    path.process(uri, [Opened(1, "plaintext", TEXT)])
    assert docs.states[uri].problem.reason is Reason.TOO_LONG
    lines = TEXT.split("\n")
    out = path.process(uri, [Edited(2, [Change("", (2, 0, len(lines) - 1, len(lines[-1])))])])
    st = docs.states[uri]
    assert st.problem is None and st.doc.token_ids == gpt2.encode(st.text) and out.diagnostics is not None
