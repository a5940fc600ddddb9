"""textsync: UTF-16 positions, line endings, and token splices equal to tokenizing from scratch."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inference
from vq_lsp.documents.textsync import (
    Change,
    TextSyncError,
    TrackedText,
    apply_change,
    line_starts,
    offset_at,
    position_at,
    shift_line_starts,
    utf16_len,
)

# Characters that some editors or Python's str.splitlines count as line breaks, but LSP does not:
# the protocol ends lines at \n, \r\n and \r only, so these stay inside a line (and VS Code agrees).
NOT_LSP_BREAKS = ["\u2028", "\u2029", "\x85", "\f", "\v", "\x1c", "\x1d", "\x1e"]
LSP_BREAK = re.compile(r"\r\n|\r|\n")


def ref_line_starts(text: str) -> list[int]:
    """The protocol's line starts, by a regular expression: independent of textsync's scanner."""
    return [0] + [m.end() for m in LSP_BREAK.finditer(text)]


def ref_position(text: str, offset: int) -> tuple[int, int]:
    """LSP (line, UTF-16 column) of a char offset, counted directly: breaks before it, then the
    UTF-16 code units since the last one. Offsets inside a \r\n have no position (caller avoids)."""
    before = text[:offset]
    breaks = list(LSP_BREAK.finditer(before))
    line_start = breaks[-1].end() if breaks else 0
    return len(breaks), len(before[line_start:].encode("utf-16-le")) // 2


def not_inside_crlf(text: str, offset: int) -> int:
    return offset - 1 if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n" else offset


def rng(l0, c0, l1, c1):
    return (l0, c0, l1, c1)


def test_utf16_positions_and_crlf():
    text = "a😀b\r\nsecond 😀 line\rthird\n"
    assert line_starts(text) == [0, 5, 19, 25]
    # the emoji takes two UTF-16 units: character 3 is just before "b"
    new, a, b, e = apply_change(text, Change("X", rng(0, 3, 0, 4)))
    assert new.startswith("a😀X\r\n")
    # replacing across the CRLF joins the lines
    new, *_ = apply_change(text, Change("-", rng(0, 4, 1, 0)))
    assert new.startswith("a😀b-second")
    # a character past the line's end means the end of the line (not into the next line)
    new, *_ = apply_change(text, Change("!", rng(2, 99, 2, 99)))
    assert "third!\n" in new
    # appending on the line after the final newline
    new, *_ = apply_change(text, Change("tail", rng(4, 0, 4, 0)))
    assert new.endswith("third\ntail")
    assert position_at(text, line_starts(text), text.index("b")) == (0, 3)


@pytest.mark.parametrize("bad", [rng(9, 0, 9, 1), rng(0, 4, 0, 4), rng(1, 0, 0, 0), rng(-1, 0, 0, 0)])
def test_bad_ranges_raise_and_leave_the_text_alone(gpt2, bad):
    tt = TrackedText(gpt2, "a😀b\nline two\n")
    before = (tt.text, list(tt.ids))
    with pytest.raises(TextSyncError):
        tt.apply([Change("ok", rng(0, 0, 0, 0)), Change("x", bad)])
    assert (tt.text, tt.ids) == before


def test_multi_change_and_full_replacement(gpt2):
    tt = TrackedText(gpt2, "The movie was great.\n\nI loved it.")
    res = tt.apply([Change("film", rng(0, 4, 0, 9)), Change(" truly", rng(2, 1, 2, 1)), Change("!", rng(0, 18, 0, 19))])
    assert tt.text == "The film was great!\n\nI truly loved it."
    assert tt.ids == gpt2.encode(tt.text)
    assert 0 < len(res.splices) <= 3 and not res.full
    res = tt.apply([Change("Completely new text.")])
    assert res.full and tt.ids == gpt2.encode("Completely new text.")


def test_a_keystroke_retokenizes_only_nearby_text(gpt2):
    words = " ".join(f"word{i % 50}" for i in range(3000))
    tt = TrackedText(gpt2, words)
    res = tt.apply([Change("x", rng(0, 5000, 0, 5000))])
    assert res.retokenized_chars < 40
    assert len(res.splices) == 1 and res.splices[0].end - res.splices[0].start <= 2
    assert tt.ids == gpt2.encode(tt.text)
    assert list(tt.token_starts) == [o[0] for o in gpt2.encode_with_offsets(tt.text)[1]]


ALPHABET = st.sampled_from(
    list("ab cdé'.,!?-0123\n\n\r\t")
    + ["\r\n", "😀", "  ", "don't", "ing", " the", "'s", "Ω", "\u00a0"]
    + NOT_LSP_BREAKS
)
snippets = st.lists(ALPHABET, max_size=8).map("".join)


@st.composite
def edit_sequences(draw):
    text = draw(snippets)
    edits = []
    for _ in range(draw(st.integers(1, 12))):
        if draw(st.integers(0, 15)) == 0:
            edits.append([Change(draw(snippets))])
            continue
        batch = []
        for _ in range(draw(st.integers(1, 3))):
            batch.append((draw(st.floats(0, 1)), draw(st.floats(0, 1)), draw(snippets)))
        edits.append(batch)
    return text, edits


def to_change(text, frac_a, frac_b, new):
    """A valid LSP change between two fractions of the text, in UTF-16 positions (the reference's)."""
    a, b = sorted(not_inside_crlf(text, int(f * len(text))) for f in (frac_a, frac_b))
    return Change(new, (*ref_position(text, a), *ref_position(text, b)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edit_sequences())
def test_any_edit_sequence_matches_tokenizing_from_scratch(gpt2, case):
    text, edits = case
    tt = TrackedText(gpt2, text)
    for batch in edits:
        if isinstance(batch[0], Change):
            changes = batch
            expected = batch[0].text
        else:
            changes, expected = [], tt.text
            for fa, fb, new in batch:
                ch = to_change(expected, fa, fb, new)
                changes.append(ch)
                expected = apply_change(expected, ch)[0]
        old_ids = list(tt.ids)
        res = tt.apply(changes)
        assert tt.text == expected
        ids, offsets = gpt2.encode_with_offsets(expected)
        assert tt.ids == ids
        assert list(tt.token_starts) == [o[0] for o in offsets]
        assert inference.apply_splices(old_ids, res.splices) == ids
        assert utf16_len(tt.text) >= len(tt.text)
        assert tt.lines == line_starts(tt.text) == ref_line_starts(tt.text)  # kept change by change, never rescanned


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=["a", "b", "\r", "\n", *NOT_LSP_BREAKS], max_size=30), st.data())
def test_line_starts_follow_any_replacement(text, data):
    """CR, LF and CRLF that an edit joins or splits: the shifted starts equal a rescan and the reference."""
    a = data.draw(st.integers(0, len(text)))
    b = data.draw(st.integers(a, len(text)))
    new = data.draw(st.text(alphabet=["x", "\r", "\n", *NOT_LSP_BREAKS], max_size=6))
    out = text[:a] + new + text[b:]
    assert shift_line_starts(line_starts(text), out, a, b, a + len(new)) == line_starts(out) == ref_line_starts(out)


LINE_TEXT = st.lists(
    st.sampled_from(["a", "é", "😀", "\U0001d11e", " ", "\t", "\r", "\n", "\r\n", *NOT_LSP_BREAKS]), max_size=40
).map("".join)


@settings(max_examples=300, deadline=None)
@given(LINE_TEXT, st.data())
def test_positions_match_an_independent_count(text, data):
    """Every char offset's (line, UTF-16 column) equals the reference's, and the reference's position
    maps back to the same offset; the other line-break characters never start a line."""
    offset = not_inside_crlf(text, data.draw(st.integers(0, len(text))))
    starts = line_starts(text)
    assert starts == ref_line_starts(text)
    pos = ref_position(text, offset)
    assert position_at(text, starts, offset) == pos
    assert offset_at(text, starts, *pos) == offset
    assert len(starts) == 1 + len(LSP_BREAK.findall(text))


@settings(max_examples=200, deadline=None)
@given(LINE_TEXT, st.data(), st.text(alphabet=["z", "\n", *NOT_LSP_BREAKS], max_size=4))
def test_a_change_at_reference_positions_edits_those_characters(text, data, new):
    a = not_inside_crlf(text, data.draw(st.integers(0, len(text))))
    b = not_inside_crlf(text, data.draw(st.integers(a, len(text))))
    b = max(a, b)
    out, *_ = apply_change(text, Change(new, (*ref_position(text, a), *ref_position(text, b))))
    assert out == text[:a] + new + text[b:]
