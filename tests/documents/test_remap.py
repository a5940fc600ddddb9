"""remap: hints moved through edits still point at the same characters (words) or stay inside
one paragraph (tone), whatever the edits; hints whose characters an edit touched are dropped."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from vq_lsp.documents.remap import move
from vq_lsp.documents.textsync import Change, apply_change, line_starts, position_at
from vq_lsp.hints.lsp import Hint
from vq_lsp.hints.paragraphs import PARAGRAPH

WORDS = st.lists(st.sampled_from(["film", "good", "😀", "a", "\n", "\n\n", "\r\n", "  "]), min_size=1, max_size=30)


def hints_of(text: str) -> list[Hint]:
    out = [
        Hint(m.start(), m.end(), f"word {i}", "hint", "surprise") for i, m in enumerate(re.finditer(r"\w+|😀", text))
    ]
    out += [
        Hint(
            m.start(),
            m.start() + len(m.group().rstrip()),
            f"para {i}",
            "information",
            "sentiment",
        )
        for i, m in enumerate(PARAGRAPH.finditer(text))
    ]
    return out


@st.composite
def edits(draw):
    text = "".join(draw(WORDS))
    changes, cur = [], text
    for _ in range(draw(st.integers(1, 5))):
        a = draw(st.integers(0, len(cur)))
        b = draw(st.integers(a, min(len(cur), a + 6)))
        if 0 < a < len(cur) and cur[a - 1] == "\r" and cur[a] == "\n":
            a -= 1  # LSP positions cannot point between CR and LF
        if 0 < b < len(cur) and cur[b - 1] == "\r" and cur[b] == "\n":
            b += 1
        s = line_starts(cur)
        ch = Change(
            "".join(draw(st.lists(st.sampled_from(["x", " ", "\n", "😀", "word"]), max_size=3))),
            (*position_at(cur, s, a), *position_at(cur, s, b)),
        )
        changes.append(ch)
        cur = apply_change(cur, ch)[0]
    return text, changes, cur


@settings(max_examples=400, deadline=None)
@given(edits())
def test_moved_hints_point_at_the_same_characters(case):
    text, changes, expected = case
    before = {h.message: h for h in hints_of(text)}
    new_text, starts, alive = move(text, line_starts(text), list(before.values()), changes)
    assert new_text == expected and starts == line_starts(expected)
    for h in alive:
        old = before[h.message]
        assert 0 <= h.start < h.end <= len(new_text)
        if h.code == "surprise":
            assert new_text[h.start : h.end] == text[old.start : old.end]
        else:  # a paragraph's tone stays on one paragraph: no blank line inside its range
            lines = new_text[h.start : h.end].split("\n")
            assert all(line.strip() for line in lines), (text, new_text, h)


def test_typing_moves_later_hints_and_drops_touched_ones():
    text = "good film\n\nbad film"
    hints = hints_of(text)
    _, _, alive = move(text, line_starts(text), hints, [Change("very ", (0, 0, 0, 0)), Change("", (0, 10, 0, 14))])
    assert {h.message for h in alive} == {"word 0", "word 2", "word 3", "para 0", "para 1"}  # "film": touched
    moved = {h.message: h for h in alive}
    assert (moved["word 0"].start, moved["word 3"].start) == (5, 16)
    assert (moved["para 0"].start, moved["para 0"].end) == (5, 9)  # the paragraph shrank with its text


def test_a_full_replacement_cannot_be_moved_through():
    assert move("abc", [0], hints_of("abc"), [Change("new")]) is None
