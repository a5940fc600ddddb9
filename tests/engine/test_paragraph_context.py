"""Context "paragraph": every paragraph is its own window, so what the engine says about a
paragraph is a function of that paragraph alone (a table, a code block or an opposite
paragraph before it must not change its tone), and edits that make or remove paragraph breaks
keep the windows equal to the new text's paragraphs, with codes equal to a dense pass."""

import random

import numpy as np
import pytest

import inference
from inference.windowing import split_paragraphs

from .helpers import tiny_model

PARAGRAPH = "I really loved this film, the acting was wonderfull and the story moved me.\n"
BEFORE = {
    "table": "| Item | Price |\n|---|---|\n| Tickets | 12 |\n| Popcorn | 6 |\n\n",
    "code": "```python\nfor row in rows:\n    print(row)\n```\n\n",
    "opposite paragraph": "The plot was a mess and the dialogue was painfully bad. I left early.\n\n",
}


def test_split_paragraphs_cuts_after_every_break_and_splits_long_paragraphs():
    breaks = np.zeros(30, dtype=bool)
    breaks[[4, 9, 29]] = True  # the last token's flag makes no empty window
    assert split_paragraphs(30, 100, breaks) == [(0, 5), (5, 10), (10, 30)]
    bounds = split_paragraphs(30, 8, breaks)  # the 20-token paragraph outgrows an 8-token window
    assert bounds[:2] == [(0, 5), (5, 10)] and bounds[-1][1] == 30
    assert all(b - a <= 8 for a, b in bounds) and all(a == b0 for (_, b0), (a, _) in zip(bounds, bounds[1:]))


def test_paragraph_breaks_read_break_tokens_and_line_ends_in_a_row():
    from inference.tokenizer import members, paragraph_breaks

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 400, 2000)
    for chosen in (frozenset(), frozenset({7}), frozenset(rng.integers(0, 300, 40).tolist())):
        assert (members(ids, chosen) == np.isin(ids, list(chosen))).all()  # ids above every chosen one read False
    flags = paragraph_breaks([1, 628, 3, 198, 198, 4, 198, 5], frozenset({628}), frozenset({198, 628}))
    assert flags.tolist() == [False, True, False, False, True, False, False, False]


def assert_paragraph_windows(doc, model, ids):
    """Every paragraph break ends a window, no window outgrows its capacity, and a paragraph that
    fits one window is exactly one window (a longer one may be tiled any way)."""
    from inference.tokenizer import paragraph_breaks

    assert doc.token_ids == ids
    cap = model.config.window_tokens - 1
    bounds = doc.window_bounds
    assert all(0 < b - a <= cap for a, b in bounds)
    cuts = {b for _, b in bounds}
    flags = paragraph_breaks(ids, model.paragraph_ids, model.newline_end_ids)
    start = 0
    for end in (np.flatnonzero(flags[:-1]) + 1).tolist() + [len(ids)]:
        assert end in cuts, f"paragraph [{start}, {end}) does not end a window"
        if end - start <= cap:
            assert not any(start < c < end for c in cuts), f"paragraph [{start}, {end}) is cut: {bounds}"
        start = end


@pytest.fixture(scope="module")
def paragraph_model():
    return inference.load_model(device="cpu", context="paragraph")


@pytest.mark.parametrize("before", sorted(BEFORE))
def test_a_paragraphs_scores_do_not_depend_on_the_text_before_it(paragraph_model, before):
    m = paragraph_model
    alone = inference.IncrementalDocument(m, m.tokenizer.encode(PARAGRAPH))
    doc = inference.IncrementalDocument(m, m.tokenizer.encode(BEFORE[before] + PARAGRAPH))
    assert len(doc.windows) >= 2
    a, b = doc.window_bounds[-1]
    assert doc.token_ids[a:b] == alone.token_ids  # the paragraph is the last window, token for token
    assert doc.span_scores(a, b) == alone.span_scores(0, alone.n_tokens)  # bit for bit
    assert doc.surprise(a, b) == alone.surprise(0, alone.n_tokens)
    # with the paper's window context the same text leaks: the scores differ
    w = inference.load_model(device="cpu")
    leaky = inference.IncrementalDocument(w, w.tokenizer.encode(BEFORE[before] + PARAGRAPH))
    assert leaky.span_scores(a, b) != pytest.approx(alone.span_scores(0, alone.n_tokens), abs=1e-9)


def test_spans_read_at_once_are_each_paragraph_alone_and_cross_windows(paragraph_model):
    """spans_scores (a publish reads every tone block at once): each window's span, in any order, scores
    as its paragraph alone, bit for bit; a span across windows adds their pieces up (the whole text: the
    document's score); an empty or outside span is refused."""
    m = paragraph_model
    doc = inference.IncrementalDocument(m, m.tokenizer.encode("".join(BEFORE.values()) + PARAGRAPH))
    bounds = doc.window_bounds
    assert len(bounds) >= 4
    alone = [inference.IncrementalDocument(m, doc.token_ids[a:b]).span_scores(0, b - a) for a, b in bounds]
    assert doc.spans_scores(bounds[::-1]) == alone[::-1]
    whole, middle = doc.spans_scores([(0, doc.n_tokens), (bounds[0][1] - 2, bounds[2][0] + 2)])
    assert whole == pytest.approx(doc.scores, abs=1e-12) and middle not in alone
    for bad in [(3, 3), (0, doc.n_tokens + 1), (-1, 2)]:
        with pytest.raises(ValueError, match="not a non-empty range"):
            doc.spans_scores([bad])


def test_random_edits_with_paragraph_breaks_keep_paragraph_windows_and_exact_codes(gpt2_tokenizer, rust_book_revisions):
    model = tiny_model(11, tokenizer=gpt2_tokenizer, vocab_size=50257, window_tokens=96, position_pool=9600)
    model.context = "paragraph"
    ids = gpt2_tokenizer.encode(rust_book_revisions[-1])[:700]
    doc = inference.IncrementalDocument(model, ids)
    assert len(doc.windows) >= 5
    rng = random.Random(3)
    blank, newline = gpt2_tokenizer.encode("\n\n"), gpt2_tokenizer.encode("\n")
    kinds = {"break": 0, "join": 0}
    for step in range(120):
        n = len(ids)
        p = rng.randrange(n)
        roll = rng.random()
        if roll < 0.15:  # a new paragraph break (sometimes as two line breaks)
            sp = inference.Splice(p, p, blank if rng.random() < 0.5 else newline + newline)
            kinds["break"] += 1
        elif roll < 0.3:  # delete around a break, joining two paragraphs
            ends = [i for i, (a, b) in enumerate(doc.window_bounds[:-1])]
            a, b = doc.window_bounds[rng.choice(ends)] if ends else (0, n)
            sp = inference.Splice(max(0, b - 2), min(n, b + 1), [])
            kinds["join"] += 1
        else:  # replace, insert or delete a word
            sp = inference.Splice(p, min(n, p + rng.randrange(3)), [rng.randrange(50257)] * rng.randrange(3))
        if n - (sp.end - sp.start) + len(sp.new_ids) <= 0:
            continue
        doc.apply([sp])
        ids = inference.apply_splices(ids, [sp])
        assert_paragraph_windows(doc, model, ids)
        if step % 20 == 19:
            check = doc.verify()
            assert check.codes_equal, check
            assert check.max_abs_diff < 1e-6
    assert kinds["break"] >= 10 and kinds["join"] >= 10
    fresh = inference.IncrementalDocument(model, ids)
    assert_paragraph_windows(fresh, model, ids)


def test_a_paragraph_longer_than_a_window_keeps_its_tiles_while_typing(gpt2_tokenizer, rust_book_revisions):
    """No blank line in 600 tokens: the paragraph is tiled by windows; typing inside a tile updates
    it incrementally (no rebuild of the whole paragraph), a tile that outgrows its window is cut
    alone, and the codes stay exact."""
    model = tiny_model(12, tokenizer=gpt2_tokenizer, vocab_size=50257, window_tokens=96, position_pool=9600)
    model.context = "paragraph"
    text = rust_book_revisions[-1].replace("\n\n", "\n")
    ids = gpt2_tokenizer.encode(text)[:600]
    doc = inference.IncrementalDocument(model, ids)
    assert len(doc.windows) >= 7
    rng = random.Random(4)
    kept = 0
    for step in range(80):
        p = rng.randrange(len(ids))
        sp = inference.Splice(p, p + (step % 3 == 0), [rng.randrange(50257)] * (1 + (step % 5 == 0)))
        before = {id(w) for w in doc.windows}
        doc.apply([sp])
        ids = inference.apply_splices(ids, [sp])
        assert_paragraph_windows(doc, model, ids)
        kept += all(id(w) in before for w in doc.windows)  # every tile updated in place, none rebuilt
    assert kept >= 75  # only a tile that outgrows its window is cut again
    check = doc.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-6


def test_state_estimate_follows_the_paragraph_windows(paragraph_model):
    m = paragraph_model
    ids = m.tokenizer.encode("".join(f"Short paragraph number {i}.\n\n" for i in range(40)))
    doc = inference.IncrementalDocument(m, ids)
    assert len(doc.windows) == 40
    est = inference.estimate_state_bytes(m, ids)
    assert 0.95 * doc.state_bytes() <= est <= 1.05 * doc.state_bytes()
    assert est > inference.estimate_state_bytes(m, len(ids))  # a count alone assumes full windows


def test_context_is_checked_and_part_of_the_snapshot_fingerprint(paragraph_model):
    from inference.snapshot import fingerprint

    with pytest.raises(ValueError, match="context must be one of"):
        inference.load_model(device="cpu", context="sentence")
    window = inference.load_model(device="cpu")
    assert fingerprint(window) != fingerprint(paragraph_model)
