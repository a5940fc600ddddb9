"""Writing-style variants, unrelated context, and the mix that fine-tuning draws from."""

from __future__ import annotations

import random

import pytest

from training import augment

REVIEW = (
    "I didn't like it at first. The acting (by Smith) was \"awful\", wasn't it? Still, it's 3 stars!\n"
    "We'll see what the sequel brings."
)


def test_lowercase_and_respace_follow_the_tokenized_corpora():
    assert augment.lowercase("The END.") == "the end."
    assert augment.respace(REVIEW) == (
        "I did n't like it at first . The acting ( by Smith ) was \" awful \" , was n't "
        "it ? Still , it 's 3 stars !\nWe 'll see what the sequel brings ."
    )
    assert augment.respace("Wait... what?") == "Wait ... what ?"
    assert augment.respace("plain words") == "plain words"


def test_sentences_split_at_ends_and_line_breaks():
    assert augment.sentences(REVIEW) == [
        "I didn't like it at first.",
        'The acting (by Smith) was "awful", wasn\'t it?',
        "Still, it's 3 stars!",
        "We'll see what the sequel brings.",
    ]
    assert augment.sentences("Mr. smith came. He left.") == ["Mr. smith came.", "He left."]  # lower case: no split
    assert augment.first_sentence(REVIEW) == "I didn't like it at first."
    assert augment.first_sentence("no end mark") == "no end mark"


def test_one_sentence_and_truncate_are_seeded_and_bounded():
    picks = {augment.one_sentence(REVIEW, random.Random(s)) for s in range(20)}
    assert picks <= set(augment.sentences(REVIEW)) and len(picks) > 1
    assert augment.one_sentence("Too short. Tiny.", random.Random(0)) == "Too short."  # none has 5 words: the longest
    cut = augment.truncate(REVIEW, random.Random(3), 4, 8)
    assert REVIEW.startswith(cut) and 4 <= len(cut.split(" ")) <= 8
    assert augment.truncate(REVIEW, random.Random(3), 4, 8) == cut


def test_unrelated_context_is_a_table_code_or_another_review():
    rng = random.Random(0)
    table = augment.markdown_table(rng)
    lines = table.split("\n")
    assert lines[0].startswith("| ") and set(lines[1]) <= {"|", "-"} and len(lines) >= 4
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    assert augment.code_block(rng).startswith("```") and augment.code_block(rng).endswith("```")
    prefixes = [augment.unrelated_prefix(random.Random(s), ["Another review about a boring film."]) for s in range(30)]
    assert any("```" in p for p in prefixes) and any("|---" in p for p in prefixes)
    assert any("boring film" in p for p in prefixes)


def test_mix_draws_variants_with_their_weights_and_marks_the_context():
    rows = [(REVIEW, i % 2) for i in range(600)]
    mix = augment.parse_mix("original=1,lowercase=1,after_context=2")
    assert mix == {"original": 0.25, "lowercase": 0.25, "after_context": 0.5}
    items = augment.augmented_reviews(rows, mix, seed=1)
    assert items == augment.augmented_reviews(rows, mix, seed=1)  # seeded
    kinds = [k for *_, k in items]
    assert 250 <= kinds.count("after_context") <= 350 and kinds.count("lowercase") > 100
    assert [y for _, _, y, _ in items] == [y for _, y in rows]  # labels stay with their reviews
    for prefix, text, _, kind in items:
        assert (prefix != "") == (kind == "after_context")
        assert text in (REVIEW, REVIEW.lower())
        if kind == "lowercase":
            assert text == REVIEW.lower()


@pytest.mark.parametrize(
    "spec, message",
    [
        ("shouting=1", "unknown variant 'shouting'"),
        ("original=x", "not a number"),
        ("original=-1", "negative"),
        ("original=0", "no positive weight"),
        ("", "no positive weight"),
    ],
)
def test_bad_mix_is_a_clear_error(spec, message):
    with pytest.raises(ValueError, match=message):
        augment.parse_mix(spec)


def test_bad_mix_on_the_command_line_exits_naming_the_flag(capsys, data_dir, distilled, tmp_path):
    from tests.training.conftest import run_cli

    with pytest.raises(SystemExit) as e:
        run_cli("finetune", "--data", data_dir, "--model", distilled, "--out", tmp_path, "--augment", "loud=1")
    assert e.value.code == 2
    assert "--augment" in capsys.readouterr().err
