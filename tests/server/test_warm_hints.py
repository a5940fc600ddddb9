"""The first hints of a freshly built state are worked out on the build worker (HintPublisher.warm_hints),
so that the engine thread, which serves every document's edits and requests, only reuses them."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from vq_lsp.documents import publisher
from vq_lsp.documents.events import Closed, Opened
from vq_lsp.documents.store import Documents
from vq_lsp.documents.textsync import Change
from vq_lsp.hints.caches import HintCaches
from vq_lsp.settings import Settings

PARAGRAPHS = [
    "I went to teh store because the milk was gone, and then I walked back home again.",
    "He go to the market every morning, and they buys bread there.",
    "They could not recieve the letters, so they wrote to the office from the station.",
    "The weather was quiet and the streets were empty when we left the house that morning.",
]
TEXT = "# Notes\n\n" + "\n\n".join(f"{PARAGRAPHS[k % 4]} Paragraph {k}." for k in range(40))


def settings() -> Settings:
    return dataclasses.replace(Settings(), threads=1, device="cpu")


def build(docs: Documents, uri: str, warm: bool) -> None:
    """Build the document window by window as the server does, warming its hints after the last one."""
    while not isinstance(b := docs.builder.next_window(uri), tuple):
        b.step()
        if warm and b.done:
            docs.publisher.warm_hints(docs.publisher.hint_inputs(uri, b), b)
        docs.builder.finish_window(uri, b)


class NoLinting:
    def lint(self, text):
        raise AssertionError(f"Harper was asked to lint on the engine thread: {text[:60]!r}")


def test_warmed_hints_are_reused_and_equal_to_hints_worked_out_afresh(monkeypatch):
    fresh = Documents(settings())
    fresh.load_model()
    fresh.process("file:///fresh.md", [Opened(1, "markdown", TEXT)])
    build(fresh, "file:///fresh.md", warm=False)  # worked out afresh on the engine thread
    expected = fresh.publisher.hints("file:///fresh.md").diagnostics

    docs = Documents(settings())
    docs.load_model()  # a store of its own: caches of its own
    uri = "file:///warm.md"
    docs.process(uri, [Opened(1, "markdown", TEXT)])
    build(docs, uri, warm=True)
    cache = docs.hint_caches.of_model(docs.model).paragraphs
    computed = cache.computed
    checker = docs.hint_caches.grammar
    if checker.unavailable is None:
        monkeypatch.setattr(checker, "_ready", lambda words, switches=None: NoLinting())
    hinted = docs.publisher.hints(uri).diagnostics
    assert cache.computed == computed, "the engine thread computed paragraph material the build worker had"
    assert hinted == expected
    assert any(d.code == "typo" for d in hinted)


@pytest.mark.parametrize("change", ["closed", "edited"])
def test_nothing_is_warmed_for_a_document_closed_or_edited_meanwhile(change):
    docs = Documents(settings())
    docs.load_model()
    uri = "file:///gone.md"
    docs.process(uri, [Opened(1, "markdown", TEXT)])
    b = docs.builder.next_window(uri)
    while not b.done:
        b.step()
    st = docs.states[uri]
    if change == "closed":
        del docs.states[uri]
    else:
        st.tracked.apply([Change("More words. ", (2, 0, 2, 0))])
    assert docs.publisher.hint_inputs(uri, b) is None


def test_a_copy_of_the_tracked_text_keeps_its_tokens_when_the_text_is_edited():
    docs = Documents(settings())
    docs.load_model()
    uri = "file:///copy.md"
    docs.process(uri, [Opened(1, "markdown", TEXT)])
    tracked = docs.states[uri].tracked
    twin = tracked.copy()
    before = list(twin.ids)
    tracked.apply([Change("Inserted words here. ", (2, 0, 2, 0))])
    assert twin.ids == before and twin.text == TEXT and tracked.ids != before


def test_each_thread_lints_with_a_linter_of_its_own():
    """The build worker linting a book paragraph after paragraph must not hold the engine thread's lints."""
    checker = HintCaches().grammar
    mine = checker.linter()
    if mine is None:
        pytest.skip(checker.unavailable)
    theirs = []
    worker = threading.Thread(target=lambda: theirs.append(checker.linter(frozenset({"Zorblax"}))))
    worker.start()
    worker.join()
    assert theirs[0] is not None and theirs[0] is not mine
    assert checker.linter() is mine


def test_a_failure_while_warming_loses_only_the_caches(monkeypatch, caplog):
    docs = Documents(settings())
    docs.load_model()
    uri = "file:///fails.md"
    docs.process(uri, [Opened(1, "markdown", TEXT + "\nOne more line.\n")])
    b = docs.builder.next_window(uri)
    while not b.done:
        b.step()
    inputs = docs.publisher.hint_inputs(uri, b)

    def broken(*args, **kwargs):
        raise RuntimeError("no material today")

    with monkeypatch.context() as m:
        m.setattr(publisher.HintMaterial, "of", broken)
        docs.publisher.warm_hints(inputs, b)  # no exception: the build goes on
    assert "no material today" in caplog.text
    docs.builder.finish_window(uri, b)
    assert any(d.code == "typo" for d in docs.publisher.hints(uri).diagnostics)


def test_closing_a_document_drops_what_its_publishes_kept():
    """The store owns the hints' caches: a document's last publish is kept for the next one's
    edit, and dropped when the document closes."""
    docs = Documents(dataclasses.replace(settings(), snapshots=False))  # a close writes no snapshot
    docs.load_model()
    uri = "file:///closed.md"
    docs.process(uri, [Opened(1, "markdown", TEXT)])
    build(docs, uri, warm=False)
    doc = docs.states[uri].doc
    assert docs.publisher.hints(uri).diagnostics
    assert docs.hint_caches.last_material.get(doc)
    docs.process(uri, [Closed()])
    assert uri not in docs.states and docs.hint_caches.last_material.get(doc) == {}
