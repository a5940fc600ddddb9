"""Quill delta -> LSP content changes (benchmarks/typing_replay.py). Quill counts in UTF-16 code
units, as LSP does; the changes apply in order. Each case is checked twice: against the delta
applied directly to UTF-16 code units (`apply_delta`) and by applying the LSP changes with the
server's own text sync (`vq_lsp.documents.textsync.apply_change`), which shares no code with the converter."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.typing_replay import EMBED, apply_delta, delta_changes, prepare
from vq_lsp.documents.textsync import Change, apply_change


def via_lsp(text: str, changes: list[dict]) -> str:
    for c in changes:
        r = c["range"]
        rng = (r["start"]["line"], r["start"]["character"], r["end"]["line"], r["end"]["character"])
        text = apply_change(text, Change(c["text"], rng))[0]
    return text


def check(text: str, ops: list[dict]) -> tuple[list[dict], str]:
    changes, new = delta_changes(text, ops)
    assert new == apply_delta(text, ops)
    assert via_lsp(text, changes) == new
    return changes, new


def rng(l0, c0, l1, c1):
    return {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}


def test_typing_at_the_end_and_on_a_new_line():
    changes, new = check("Hi\n", [{"retain": 2}, {"insert": "!\nYo"}])
    assert new == "Hi!\nYo\n" and changes == [{"range": rng(0, 2, 0, 2), "text": "!\nYo"}]
    changes, _ = check(new, [{"retain": 4}, {"insert": "x"}])
    assert changes[0]["range"] == rng(1, 0, 1, 0)


def test_delete_at_the_end_and_of_everything():
    changes, new = check("abc\n", [{"retain": 2}, {"delete": 2}])
    assert new == "ab" and changes == [{"range": rng(0, 2, 1, 0), "text": ""}]
    assert check("abc", [{"delete": 3}])[1] == ""


def test_several_ops_in_one_event_apply_in_order():
    text = "one two three\nfour\n"
    ops = [
        {"retain": 4},
        {"delete": 3},
        {"insert": "2"},
        {"retain": 6},
        {"insert": "!"},
        {"retain": 1},
        {"delete": 4},
        {"insert": "4"},
    ]
    changes, new = check(text, ops)
    assert new == "one 2 three!\n4\n"
    assert [c["range"]["start"] for c in changes] == [{"line": 0, "character": 4}] * 2 + [
        {"line": 0, "character": 11},
        {"line": 1, "character": 0},
        {"line": 1, "character": 0},
    ]


def test_non_bmp_characters_count_two_units():
    text = "a😀b\n"  # 😀 is U+1F600: two UTF-16 code units
    changes, new = check(text, [{"retain": 3}, {"insert": "🎉"}])  # after a😀
    assert new == "a😀🎉b\n" and changes[0]["range"] == rng(0, 3, 0, 3)
    changes, new = check(new, [{"retain": 1}, {"delete": 4}, {"retain": 1}, {"insert": "é"}])
    assert new == "abé\n" and changes[0]["range"] == rng(0, 1, 0, 5)
    changes, new = check("x\n😀y", [{"retain": 2}, {"retain": 2}, {"delete": 1}])  # column counts units too
    assert new == "x\n😀" and changes[0]["range"] == rng(1, 2, 1, 3)


def test_impossible_deltas_are_refused():
    with pytest.raises(ValueError, match="surrogate"):
        delta_changes("a😀b", [{"retain": 2}, {"insert": "x"}])
    with pytest.raises(ValueError, match="past the end"):
        delta_changes("ab", [{"retain": 1}, {"delete": 5}])
    with pytest.raises(ValueError, match="unknown"):
        delta_changes("ab", [{"move": 1}])


def test_an_embed_takes_one_unit():
    _, new = check("ab\n", [{"retain": 1}, {"insert": {"image": "data:..."}}])
    assert new == "a" + EMBED + "b\n"
    assert check(new, [{"retain": 2}, {"delete": 1}])[1] == "a" + EMBED + "\n"


ALPHABET = st.sampled_from(["a", "b", " ", "\n", "é", "😀", "𝔘", "字"])


@st.composite
def text_and_deltas(draw):
    """A start text and deltas valid for it in turn (retains and deletes cover whole characters)."""
    start = text = "".join(draw(st.lists(ALPHABET, max_size=12)))
    deltas = []
    for _ in range(draw(st.integers(1, 6))):
        ops, pos = [], 0  # pos: char index in the current text that the ops have reached
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["retain", "insert", "delete"]))
            if kind == "insert":
                ops.append({"insert": "".join(draw(st.lists(ALPHABET, min_size=1, max_size=4)))})
                continue
            take = draw(st.integers(0, len(text) - pos))
            if take:
                ops.append({kind: len(text[pos : pos + take].encode("utf-16-le")) // 2})
                pos += take
        deltas.append(ops)
        text = apply_delta(text, ops)
    return start, deltas


@settings(max_examples=300, deadline=None)
@given(text_and_deltas())
def test_random_deltas_agree_with_the_server_text_sync(case):
    text, deltas = case
    for ops in deltas:
        changes, new = delta_changes(text, ops)
        assert new == apply_delta(text, ops) and via_lsp(text, changes) == new
        text = new


def test_real_sessions_replay_to_the_same_text(data_dir):
    """Whole dev sessions: every event converted and applied through the server's text sync."""
    with gzip.open(data_dir / "typing" / "coauthor_sessions.jsonl.gz", "rt") as f:
        rows = [json.loads(next(f)) for _ in range(3)]
    for row in rows:
        text = oracle = row["prompt"]
        for _, _, ops in row["events"]:
            text = delta_changes(text, ops)[1]
            oracle = apply_delta(oracle, ops)
        assert text == oracle
        rep = prepare(row, max_events=300, start="random", pause_cap=1.0, seed=3)
        replayed = rep.open_text
        for ks in rep.keystrokes:
            replayed = via_lsp(replayed, ks.changes)
        assert replayed == rep.final_text
        gaps = [b.at - a.at for a, b in zip(rep.keystrokes, rep.keystrokes[1:])]
        assert all(0 <= g <= 1.0 * (1 + rep.skipped) + 1e-9 for g in gaps)  # a skipped event's time still passes
        assert len(rep.keystrokes) + rep.skipped == min(300, len(row["events"]))
