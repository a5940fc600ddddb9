"""A long text being opened is tokenized beside the engine thread (Eligibility.pretokenize, run by
the server on a worker thread): `process` then keeps those tokens instead of counting and
tokenizing the text again, and only for exactly that text under that model."""

from __future__ import annotations

import pytest

from vq_lsp.documents.events import Opened
from vq_lsp.documents.store import Documents
from vq_lsp.settings import Settings

TEXT = "\n\n".join(["A long paragraph about a film that went on and on, and it was lovely."] * 40)


@pytest.fixture
def docs(model_dir):
    d = Documents(Settings(model_path=str(model_dir), device="cpu", snapshots=False))
    d.load_model()
    return d


def test_the_tokens_found_beside_the_engine_are_kept(docs, gpt2):
    docs.eligibility.pretokenize("mem://a", TEXT)
    found = docs.eligibility.pretokenized_texts["mem://a"][2]
    docs.process("mem://a", [Opened(1, "markdown", TEXT)])
    st = docs.states["mem://a"]
    assert st.tracked is found and st.tracked.ids == gpt2.encode(TEXT) and not docs.eligibility.pretokenized_texts


def test_tokens_of_another_text_are_not_used(docs, gpt2):
    docs.eligibility.pretokenize("mem://b", TEXT)
    other = TEXT.replace("film", "book")
    docs.process("mem://b", [Opened(1, "markdown", other)])
    assert docs.states["mem://b"].tracked.ids == gpt2.encode(other) and not docs.eligibility.pretokenized_texts


def test_a_text_over_the_limit_is_left_to_the_counting(docs):
    docs.settings = Settings(model_path=docs.settings.model_path, device="cpu", snapshots=False, max_document_tokens=10)
    docs.eligibility.pretokenize("mem://c", TEXT)
    assert not docs.eligibility.pretokenized_texts
    out = docs.process("mem://c", [Opened(1, "markdown", TEXT)])
    assert docs.states["mem://c"].problem is not None and any("no hints" in m.text for m in out.messages)
