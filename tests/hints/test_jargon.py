"""The writer's words learned from the document (hints/jargon.py), raw HTML in Markdown, and the
stronger evidence a real-word hint needs in technical text (typos.Evidence)."""

from __future__ import annotations

import pytest

import inference
from vq_lsp.documents.textsync import TrackedText
from vq_lsp.hints import jargon, markup, typos
from vq_lsp.hints import lsp as hints
from vq_lsp.hints.caches import HintCaches
from vq_lsp.hints.material import HintMaterial
from vq_lsp.settings import DiagnosticSettings


@pytest.fixture(scope="module")
def model():
    return inference.load_model(None, device="cpu", context="paragraph")  # the server's default context


def typo_hints(model, text: str, language: str = "markdown") -> list[str]:
    tt = TrackedText(model.tokenizer, text)
    doc = inference.IncrementalDocument(model, tt.ids)
    mat = HintMaterial.of(tt, doc, 1, language, DiagnosticSettings(), caches=HintCaches())
    return [text[h.start : h.end] for h in hints.choose(tt, mat, DiagnosticSettings()) if h.code == "typo"]


def test_known_slips_are_never_the_writers_words():
    slips = ("teh", "recieve", "successs", "dtermine", "errros", "foth", "laso", "signatues")
    assert all(map(typos.misspelling, slips))
    assert not any(map(typos.misspelling, ("nats", "lints", "dtype", "opset")))
    assert typos.misspelling("stdio")  # "studio" less a letter: jargon that looks like a slip stays flagged


def test_a_consistent_word_is_the_writers_and_a_slip_or_near_miss_is_not():
    usage = jargon.Usage({"nats": 4, "dtype": 2, "dtype's": 1, "recieve": 3, "teh": 5, "colr": 2}, frozenset())
    assert jargon.writers_words(usage) == {"nats", "dtype", "dtype's"}  # forms count together
    twice = jargon.Usage({"nats": 2}, frozenset())
    assert jargon.writers_words(twice) == frozenset()  # a spelling used twice is still a typo
    crowded = jargon.Usage({"nats": 4}, frozenset({"nats"}))
    assert jargon.writers_words(crowded) == frozenset()  # beside the spelling the model likes best
    near = jargon.Usage({"dtype": 3, "dtipe": 5}, frozenset())
    assert jargon.writers_words(near) == {"dtipe"}  # the rarer of two near spellings is a slip
    plural = jargon.Usage({"lint": 3, "lints": 4}, frozenset())
    assert jargon.writers_words(plural) == {"lint", "lints"}  # a plural is no near-miss


def test_crowded_means_beside_the_models_best_fix():
    found = typos.WordFinding(0, 7, "recieve", 20.0, "non-word", 6.0, (("receive", -2.0),))
    lints = typos.WordFinding(10, 15, "lints", 18.0, "non-word", 9.0, (("lines", -3.0), ("hints", -4.0)))
    assert jargon.crowded_by([found, lints], ["recieve", "receive", "lints", "hints"]) == {"recieve"}


JARGON = (
    "# Scores\n\nEvery score is read from the logits, so that scores add up over a word's pieces.\n\n"
    "A word's surprise is a sum over its pieces of logits, and a fix must win by enough.\n\n"
    "The logits of the last layer were chosen on held-out text, as the other ones were.\n"
)


def test_a_word_used_consistently_in_the_document_gets_no_hint(model):
    assert "logits" not in typo_hints(model, JARGON)
    once = "# Scores\n\nEvery score is read from the logits, so that scores add up over a word's pieces.\n"
    assert typo_hints(model, once) == ["logits"]  # used once: nothing says it is the writer's word


def test_a_slip_repeated_three_times_is_still_flagged(model):
    text = (
        "We recieve the files every week.\n\nThey recieve them late, and we recieve the rest by mail.\n\n"
        "Then I went to teh store, and teh shop, and teh market.\n"
    )
    assert typo_hints(model, text, "plaintext").count("recieve") == 3
    assert typo_hints(model, text, "plaintext").count("teh") == 3


def test_raw_html_gets_no_word_hints(model):
    text = (
        '# Design\n\nThe load balancer spreads the requests <img src="images/lb.png"\n'
        '  alt="A diagrm of teh balancer"> over the web servers behind it.\n\n'
        '<p align="center">\n  <img src="images/x.png" alt="Anothr diagrm">\n</p>\n'
    )
    lay = markup.layout(text, markup.MARKDOWN)
    assert {text[a:b] for a, b in lay.words(text)} & {"alt", "img", "src", "diagrm", "teh", "Anothr"} == set()
    assert typo_hints(model, text) == []


def real_word(word: str, partner: str, gain: float) -> typos.WordFinding:
    return typos.WordFinding(0, len(word), word, 9.0, "real-word", gain, ((partner, -3.0),))


def test_a_real_word_hint_in_technical_text_needs_stronger_evidence():
    technical = typos.Evidence({}, frozenset({"sql"}), True, confusables={"write": 6, "right": 1, "off": 1})
    prose = typos.Evidence({}, frozenset(), False, confusables={"write": 6, "right": 1, "off": 1})
    weak = real_word("off", "of", 4.5)
    assert technical.excuse(weak, "off") and not prose.excuse(weak, "off")
    assert not technical.excuse(real_word("off", "of", 9.0), "off")  # strong evidence still shows
    # the evidence needed is the pair's: "form" has no technical sense that "from" is read for
    assert not technical.excuse(real_word("form", "from", 4.5), "form")
    assert typos.technical_gain("Off", "of") > typos.technical_gain("form", "from")
    # and only such a pair is the document's own word: using "then" often says nothing of "rather then use"
    common = typos.Evidence({}, frozenset({"sql"}), True, confusables={"then": 6, "than": 1})
    assert not common.excuse(real_word("then", "than", 4.5), "then")
    assert common.excuse(real_word("then", "than", -1.0), "then")  # a partner less likely than the word
    own = real_word("write", "right", 9.0)
    assert technical.excuse(own, "write").startswith("the document's own word")
    assert not prose.excuse(own, "write")


def test_writes_among_databases_and_work_off_the_event_loop_are_not_confusables(model):
    text = (
        "# Storage\n\nA database that takes many writes keeps a log, and each write is appended to it "
        "before the write returns.\n\nThe model runs on one engine thread, off the event loop, and "
        "writes its result to `results.db`.\n\nA write that fails is retried; reads never wait for a "
        "write.\n"
    )
    assert not {"write", "off", "writes"} & set(typo_hints(model, text))
    prose = "They could not recieve the letters, so they wrote to the office form the station.\n"
    assert "form" in typo_hints(model, "# Notes\n\nRun `zsh` first.\n\n" + prose)  # clear evidence still shows
