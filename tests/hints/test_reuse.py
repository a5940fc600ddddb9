"""Hints of unchanged paragraphs are reused (reuse.py) and Markdown is parsed chunk by chunk
(markup.py): both must give what computing everything afresh gives."""

from __future__ import annotations

import numpy as np
import pytest

import inference
from vq_lsp.documents.textsync import Change, TrackedText
from vq_lsp.hints import lsp as hints
from vq_lsp.hints import markup, markup_blocks, reuse
from vq_lsp.hints.caches import HintCaches
from vq_lsp.hints.material import HintMaterial
from vq_lsp.settings import DiagnosticSettings

from .test_markup import MARKDOWN

EDGE_CASES = [
    "---\ntitle: x\n\nmore: y\n---\n\nProse after front matter.\n\n---\n\nA thematic break above.\n",
    "Intro.\n\n```\ncode\n\nstill code\n```\n\nAfter the fence.\n\n~~~~\nopen fence\n\nto the end\n",
    "- item one\n\n  continued item\n\n      indented code in the item\n\nNext paragraph.\n",
    "<!-- a comment\n\nwith a blank line -->\n\nProse.\n\n<pre>\nraw\n\nraw too\n</pre>\n\nEnd.\n",
    "| a | b |\n|---|---|\n| c | d |\n\n> quote\n\n> another\n\nTitle\n=====\n\n    code block\n\nlast\n",
]


def whole_document_layout(text: str) -> tuple:
    return markup._masked(text, markup_blocks.markdown_blocks(text), markup._MD_INLINE)


@pytest.mark.parametrize("text", [MARKDOWN, MARKDOWN * 3] + EDGE_CASES)
def test_chunked_markdown_layout_is_the_whole_document_layout(text):
    lay = markup.layout(text, markup.MARKDOWN)
    assert (lay.prose, lay.tone) == whole_document_layout(text)
    chunks = markup.markdown_chunks(text)
    assert chunks[0][0] == 0 and chunks[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))


@pytest.fixture(scope="module")
def model():
    return inference.load_model(None, device="cpu")


PARAGRAPHS = [
    "I went to teh store because the milk was gone, and then I walked back home again.",
    "The weather was quiet and the streets were empty when we left the house that morning.",
    "Run `zsh` to start the shell; it reads its settings from a file in your home folder.",
    "They could not recieve the letters, so they wrote to the office form the station.",
    "Their friends arrived late, and nobody knew whether the train would leave on time.",
]


DOCSTRING = (
    'def f():\n    """I went to teh store because the milk was gone.\n\n'
    "    Their friends arrived late, and nobody knew whether the train would leave.\n\n"
    '    They could not recieve the letters."""\n    return 1\n\n'
)


@pytest.mark.parametrize(
    "language, text, edit_after",
    [
        ("markdown", "# Notes\n\n" + "\n\n".join(PARAGRAPHS * 3) + "\n", "the milk"),
        ("python", DOCSTRING * 4, "the milk"),  # a docstring's prose runs over several paragraphs
    ],
)
def test_reused_material_is_what_a_fresh_computation_gives(model, language, text, edit_after):
    tt = TrackedText(model.tokenizer, text)
    doc = inference.IncrementalDocument(model, tt.ids)
    cfg = DiagnosticSettings(sentiment_threshold=0.0)
    caches = HintCaches()
    HintMaterial.of(tt, doc, 1, language, cfg, caches=caches)
    cache = caches.of_model(model).paragraphs
    at = text.index(edit_after) + len("the")
    line, col = tt.position(at)
    res = tt.apply([Change(" cold", (line, col, line, col))])
    doc.apply(res.splices)
    before = (cache.reused, cache.computed)
    reused = HintMaterial.of(tt, doc, 2, language, cfg, caches=caches)
    computed = cache.computed - before[1]
    # the edited paragraph and the few whose scores it moved past the tolerance (up to six more in the
    # docstring case, whose 12 paragraphs of prose run on through one window); the rest reused
    assert 1 <= computed <= 7 and cache.reused - before[0] >= 5
    fresh = HintMaterial.of(tt, doc, 2, language, cfg, caches=HintCaches())  # everything computed again
    assert fresh.findings and reused.words

    # A reused paragraph's scores may differ from the current ones by the tolerance, so a finding
    # whose gain lies within it of zero (where a confusable is excused) may be kept on one side
    # only; it is far below any hint's threshold. Every other finding is the same on both sides.
    def clear(findings):
        return [f for f in findings if f.kind != "real-word" or abs(f.gain) > reuse.REUSE_TOLERANCE_NATS]

    assert [(f.start, f.end, f.kind, [w for w, _ in f.fixes]) for f in clear(reused.findings)] == [
        (f.start, f.end, f.kind, [w for w, _ in f.fixes]) for f in clear(fresh.findings)
    ]
    assert np.allclose(
        [f.gain for f in clear(reused.findings)],
        [f.gain for f in clear(fresh.findings)],
        atol=4 * reuse.REUSE_TOLERANCE_NATS,
    )
    assert [(p.start, p.end, p.token_start, p.token_end) for p in reused.paragraphs] == [
        (p.start, p.end, p.token_start, p.token_end) for p in fresh.paragraphs
    ]
    assert [(a, b) for a, b, _ in reused.words] == [(a, b) for a, b, _ in fresh.words]
    assert np.allclose([s for _, _, s in reused.words], [s for _, _, s in fresh.words])  # read from current scores
    chosen = [(h.start, h.end, h.code) for h in hints.choose(tt, reused, cfg)]
    assert chosen == [(h.start, h.end, h.code) for h in hints.choose(tt, fresh, cfg)]


def test_typing_at_the_end_of_a_paragraph_examines_only_the_words_typed(model):
    """Letter by letter at the end of a paragraph: the words before the edit keep their findings
    (the same text, tokens and scores as the last publish read), only the rest is examined, and
    the result is what a fresh computation gives."""
    text = "# Notes\n\n" + "\n\n".join(PARAGRAPHS * 2) + "\n"
    tt = TrackedText(model.tokenizer, text)
    doc = inference.IncrementalDocument(model, tt.ids)
    cfg = DiagnosticSettings(sentiment_threshold=0.0)
    caches = HintCaches()
    HintMaterial.of(tt, doc, 1, "markdown", cfg, caches=caches)
    cache = caches.of_model(model).paragraphs
    at = text.index("form the station.") + len("form the station.")
    for version, ch in enumerate(" They recieve it", start=2):
        res = tt.apply([Change(ch, (*tt.position(at), *tt.position(at)))])
        doc.apply(res.splices)
        at += 1
        kept = cache.words_kept
        typed = HintMaterial.of(tt, doc, version, "markdown", cfg, caches=caches)
        assert cache.words_kept - kept >= 12  # of the paragraph's 15 words before the edit
    assert {f.word for f in typed.findings} >= {"recieve", "teh", "form"}
    fresh = HintMaterial.of(tt, doc, version, "markdown", cfg, caches=HintCaches())
    assert [(f.start, f.end, f.kind, [w for w, _ in f.fixes]) for f in typed.findings] == [
        (f.start, f.end, f.kind, [w for w, _ in f.fixes]) for f in fresh.findings
    ]


LONG_MARKDOWN_PARTS = [
    "# Notes on the trip\n\nI went to teh store because the milk was gone, and then I walked back home again.",
    "He go to the market every morning, and they buys a example of each fruit there.",
    "Run `zsh` to start the shell; it reads its settings from a file in your home folder.",
    "```sh\nls -la ~/.zshrc\n```",
    "| word | meaning |\n|------|---------|\n| teh | the |\n\n- a list item with recieve in it\n- another item",
    "They could not recieve the letters, so they wrote to the office form the station.",
    "Their friends arrived late, and nobody knew whether the train would leave on time.",
    "The weather was quiet and the streets were empty when we left the house that morning.",
]


def _published(tt, doc, version, cfg, tolerance, caches: HintCaches):
    from vq_lsp.hints import conventions
    from vq_lsp.hints.material import layout_for

    lay = layout_for(tt.text, "markdown", cfg, caches)
    got = HintMaterial.with_layout(tt.text, tt.token_starts, doc, version, lay, tolerance, caches=caches)
    chosen = conventions.choose(tt, got, cfg, conventions.Conventions(), "markdown", caches=caches)
    return [h.lsp(tt.position, version) for h in chosen]


@pytest.mark.parametrize("tolerance", [0.0, reuse.REUSE_TOLERANCE_NATS])
def test_random_edits_publish_what_a_fresh_computation_publishes(model, tolerance):
    """After each random edit to a long Markdown document (typing, deleting, splitting and joining
    paragraphs, editing inside code and tables) the published diagnostics are those computed
    from scratch: exactly (messages and all) when only exact scores are reused, and the same hints
    at the same places with the server's tolerance."""
    rng = np.random.default_rng(7)
    text = "\n\n".join(LONG_MARKDOWN_PARTS * 6) + "\n"
    tt = TrackedText(model.tokenizer, text)
    doc = inference.IncrementalDocument(model, tt.ids)
    cfg = DiagnosticSettings(sentiment_threshold=0.0, surprise=True, surprise_threshold=9.0)
    caches = HintCaches()
    _published(tt, doc, 1, cfg, tolerance, caches)
    inserts = ["e", " ", "teh ", "\n\n", "recieve", "`", "| x |", "\n```\n", "He go there. "]
    for version in range(2, 14):
        at = int(rng.integers(0, len(tt.text)))
        if rng.random() < 0.3:  # a deletion, across a paragraph break now and then
            end = min(len(tt.text), at + int(rng.integers(1, 12)))
            change = Change("", (*tt.position(at), *tt.position(end)))
        else:
            change = Change(inserts[int(rng.integers(len(inserts)))], (*tt.position(at), *tt.position(at)))
        res = tt.apply([change])
        doc.apply(res.splices)
        reused = _published(tt, doc, version, cfg, tolerance, caches)
        caches = HintCaches()  # everything computed again (and kept for the next edit)
        fresh = _published(tt, doc, version, cfg, tolerance, caches)
        assert len(fresh) > 20
        if tolerance == 0:
            assert reused == fresh, f"edit {version}: {change}"
        else:
            assert [(d.range, d.code, d.severity) for d in reused] == [(d.range, d.code, d.severity) for d in fresh]
