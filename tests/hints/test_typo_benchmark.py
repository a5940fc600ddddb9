"""The typo benchmark's error injection and scoring (benchmarks/typo_detection.py), without a model."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import typo_detection as td  # noqa: E402
from vq_lsp.hints import typos  # noqa: E402

PROSE = (
    "The house stood at the end of the road, and from its windows they could see their fields "
    "stretching away to the river. Nobody knew whether the weather would hold through the harvest. "
) * 6


def test_neighbour_keys():
    assert set(td.neighbours("s")) == {"a", "d", "q", "w", "e", "z", "x", "c"}
    assert set(td.neighbours("p")) == {"o", "l"}
    assert td.neighbours("1") == ""


def test_each_error_kind_is_one_edit_of_its_kind():
    rng = random.Random(0)
    for _ in range(50):
        assert sorted(td.corrupt("garden", "swap", rng)) == sorted("garden")
        assert len(td.corrupt("garden", "drop", rng)) == 5
        doubled = td.corrupt("garden", "double", rng)
        assert len(doubled) == 7 and any(doubled[i] == doubled[i + 1] for i in range(6))
        near = td.corrupt("garden", "neighbour", rng)
        diff = [(a, b) for a, b in zip("garden", near) if a != b]
        assert len(diff) == 1 and diff[0][1] in td.neighbours(diff[0][0])
    assert td.corrupt("their", "confusable", rng) in ("there", "they're")
    assert td.corrupt("garden", "confusable", rng) is None
    edit = td.corrupt("cat", "real-edit", rng)
    assert typos.is_word(edit) and edit not in typos.CONFUSABLE


def test_injected_errors_sit_where_the_benchmark_says():
    rng = random.Random(3)
    bad, errors = td.inject(PROSE, rng, 0.5)
    assert len(errors) >= 10 and {e.kind for e in errors} & set(td.NON_WORD) and bad != PROSE
    for e in errors:
        assert bad[e.start : e.end] == e.typo and e.typo != e.original
        if e.kind in td.NON_WORD:
            assert not typos.is_word(e.typo)
        else:
            assert typos.is_word(e.typo)


def test_evaluate_counts_hits_misses_and_false_alarms():
    errors = [
        td.Injected(0, 3, "swap", "the", "teh"),
        td.Injected(10, 15, "confusable", "their", "there"),
        td.Injected(20, 24, "drop", "frm", "frm"),
    ]

    def finding(a, b, kind, gain):
        return (a, b), kind, typos.WordFinding(a, b, "x", 5.0, kind, gain, ())

    preds = [
        finding(0, 3, "non-word", 4.0),
        finding(10, 15, "real-word", 1.0),
        finding(30, 33, "non-word", 9.0),
        ((20, 24), "non-word", None),
    ]
    res = td.evaluate([(errors, preds)], lambda f: f is not None and f.gain >= 3, lambda f: f.gain >= 3)
    assert res["non-word"] == td.prf(1, 1, 1)  # teh found, a false alarm at 30, the drop missed
    assert res["real-word"]["fn"] == 1 and res["real-word"]["tp"] == 0
    assert res["recall_by_class"]["swap"] == {"recall": 1.0, "errors": 1}
    spell = td.evaluate([(errors, preds)], lambda f: True, lambda f: False)
    assert spell["non-word"]["tp"] == 2 and spell["non-word"]["fp"] == 1
    threshold, best = td.choose_threshold([(errors, preds)], "non-word")
    assert threshold == 4.0 and best["tp"] == 1


def test_repeated_and_two_edit_errors():
    rng = random.Random(5)
    for _ in range(30):
        bad = td.corrupt("garden", "two-edit", rng)
        if bad is not None:
            assert not typos.is_word(bad) and "garden" not in typos.close_words(bad)
    text = PROSE + "The gardener and the gardener's wife kept the orchard. The orchard was old.\n"
    bad, errors = td.inject(text, random.Random(1), 0.0)
    repeated = [e for e in errors if e.kind == "repeated"]
    assert len(repeated) >= 2 and len({e.typo for e in repeated}) == 1 and len({e.original for e in repeated}) == 1
    for e in repeated:
        assert bad[e.start : e.end] == e.typo and not typos.is_word(e.typo)


def test_the_source_texts_own_errors_are_found_where_injection_moved_them():
    text = "Unfortuntately it was nothing more then a cheap action movie, and then the garden burned.\n"
    words = [(m.start(), m.end()) for m in td.markup.WORD.finditer(text)]
    own = td.source_errors(text, words)
    assert [text[a:b] for a, b in own] == ["Unfortuntately", "then"]  # not the second "then"
    bad = text.replace("it was", "it wass").replace("cheap", "chap")
    errors = [
        td.Injected(bad.index("wass"), bad.index("wass") + 4, "double", "was", "wass"),
        td.Injected(bad.index("chap"), bad.index("chap") + 4, "drop", "cheap", "chap"),
    ]
    assert [bad[a:b] for a, b in td.moved(own, errors)] == ["Unfortuntately", "then"]
    at = bad.index("then")
    swapped = [td.Injected(at, at + 4, "confusable", "then", "than")]
    assert td.moved([(at, at + 4)], swapped) == []  # an error put in a source error's place: no source error


def test_a_hint_on_a_source_error_counts_only_in_the_column_that_counts_them():
    errors = [td.Injected(0, 3, "swap", "the", "teh")]

    def finding(a, b, gain):
        return (a, b), "non-word", typos.WordFinding(a, b, "x", 5.0, "non-word", gain, ())

    preds = [finding(0, 3, 5.0), finding(10, 14, 5.0), finding(20, 25, 5.0)]
    res = td.evaluate([(errors, preds, 101, [(10, 14)])], lambda f: f is not None, lambda f: False)
    assert res["false_alarms"] == 2 and res["false_alarms_per_1000_words"] == 20.0
    assert res["false_alarms_source_errors_not_counted"] == 1 and res["source_errors"] == 1
    assert res["false_alarms_per_1000_words_source_errors_not_counted"] == round(1000 / 99, 2)


def test_the_real_word_threshold_leaves_hints_on_source_errors_out_of_its_precision():
    errors = [td.Injected(0, 5, "confusable", "their", "there")]

    def finding(a, b, gain):
        return (a, b), "real-word", typos.WordFinding(a, b, "x", 5.0, "real-word", gain, ())

    preds = [finding(0, 5, 2.0), finding(10, 14, 3.0)]
    # counted as wrong, the hint at 10 keeps precision at 50% or less at every threshold
    assert td.precise_threshold([(errors, preds, 100, [])], 0.8) == (None, None)
    # it is one of the text's own errors (a right hint where no error was put): neither right nor wrong
    threshold, res = td.precise_threshold([(errors, preds, 100, [(10, 14)])], 0.8)
    assert threshold == 2.0 and res == td.prf(1, 0, 0)


def test_the_model_reads_the_texts_as_the_server_does_unless_told_otherwise():
    """The benchmark's context and dtype default to the server's settings, and its report says
    which were used: a figure measured elsewhere than a writer meets it says so."""
    from vq_lsp.settings import Settings

    server = Settings()
    assert (td.SERVER.context, td.SERVER.precision) == (server.context, server.precision)
    assert td._settings_said(server.context, server.precision) == "the server's defaults"
    other = "window" if server.context == "paragraph" else "paragraph"
    said = td._settings_said(other, "float64")
    assert f"context: {server.context}" in said and server.precision in said
