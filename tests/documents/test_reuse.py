"""A live state with the same tokens serves instead of a new build (documents/reuse.py): the same
text opened under another name gets a copy, a document opened again without a close keeps its
state; builds are counted."""

from __future__ import annotations

import pytest

from vq_lsp.documents import requests
from vq_lsp.documents.events import Edited, Opened
from vq_lsp.documents.textsync import Change
from vq_lsp.settings import Settings

TEXT = "\n\n".join(["A long paragraph about a film that went on and on, and it was lovely."] * 12)


@pytest.fixture
def path_settings() -> dict:
    return {"snapshots": False}


def test_the_same_text_under_another_name_is_copied_not_built(docs, path):
    path.process("mem://a", [Opened(1, "markdown", TEXT)])
    assert docs.builder.builds == 1
    path.process("mem://b", [Opened(1, "markdown", TEXT)])
    a, b = docs.states["mem://a"], docs.states["mem://b"]
    assert docs.builder.builds == 1 and docs.builder.reused == 1
    assert b.doc is not a.doc and b.doc.token_ids == a.doc.token_ids
    assert b.doc.scores == pytest.approx(a.doc.scores, abs=0) and "copy_seconds" in b.last_cost
    before = a.doc.scores
    path.process("mem://b", [Edited(2, [Change(" Terrible.", (0, 0, 0, 0))])])
    assert a.doc.scores == pytest.approx(before, abs=0)  # the copy is independent
    assert requests.verify(docs, "mem://b")["codesEqual"]  # and exact after an edit
    path.process("mem://a", [Edited(2, [Change(" Terrible.", (0, 0, 0, 0))])])
    assert b.doc.scores == pytest.approx(a.doc.scores, abs=0)  # the same edit gives the same state
    path.process("mem://c", [Opened(1, "markdown", TEXT + " More.")])  # other tokens: built
    assert docs.builder.builds == 2 and docs.builder.reused == 1


def test_a_document_opened_again_keeps_its_state(docs, path):
    path.process("mem://a", [Opened(1, "markdown", TEXT)])
    kept = docs.states["mem://a"].doc
    path.process("mem://a", [Opened(5, "markdown", TEXT)])  # no close in between
    st = docs.states["mem://a"]
    assert st.doc is kept and st.version == 5 and docs.builder.builds == 1 and docs.builder.reused == 1
    path.process("mem://a", [Opened(6, "markdown", TEXT + " Changed.")])  # other tokens: built again
    assert docs.builder.builds == 2 and docs.states["mem://a"].doc is not kept


def test_a_half_built_state_is_taken_over_when_opened_again(docs):
    docs.settings = Settings(model_path=docs.settings.model_path, device="cpu", snapshots=False)
    long_text = " ".join(["word"] * 2000)
    out = docs.process("mem://long", [Opened(1, "plaintext", long_text)])
    assert out.needs_build
    done, total = docs.builder.build_step("mem://long")
    assert 0 < done < total
    builder = docs.states["mem://long"].builder
    out = docs.process("mem://long", [Opened(2, "plaintext", long_text)])
    assert out.needs_build and docs.states["mem://long"].builder is builder
    while docs.builder.build_step("mem://long")[0] < total:
        pass
    assert docs.builder.builds == 1 and docs.states["mem://long"].doc.token_ids == docs.states["mem://long"].tracked.ids
