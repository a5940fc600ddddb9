"""Harper's lints as hints: prose only, dictionary words passed to Harper, one hint per span (a
word the model flags gets no grammar hint), ignore comments, and the setting that turns them off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vq_lsp import settings
from vq_lsp.hints import conventions, grammar, ignores, lsp, markup
from vq_lsp.hints.caches import HintCaches
from vq_lsp.hints.material import HintMaterial
from vq_lsp.settings import DiagnosticSettings
from vq_lsp.workspace import config_file

TEXT = (
    "# Notes\n\nHe go to the market every morning.\n\n```\nhe go\n```\n\n"
    "This is a example of a sentence.\n\n| he go | a example |\n|---|---|\n| x | y |\n"
)

CACHES = HintCaches()  # one Harper linter for the module's tests (it takes seconds to build)


def lints_of(text: str, words=frozenset()) -> list[tuple[str, str]]:
    lay = markup.layout(text, markup.MARKDOWN)
    return [(lint.kind, text[lint.start : lint.end]) for lint in CACHES.grammar.lints(text, lay, words)]


def test_only_prose_is_linted_and_suggestions_are_edits():
    assert lints_of(TEXT) == [("Agreement", "go"), ("Miscellaneous", "a")]  # not in code, not in the table
    lint = CACHES.grammar.lints(TEXT, markup.layout(TEXT, markup.MARKDOWN))[0]
    assert lint.fixes[0] == grammar.Replacement(lint.start, lint.end, "goes")


def test_the_blanked_markup_makes_no_lint_of_its_own():
    text = "Run `pip install x` and then the `vq-lsp check` command.\n"
    assert lints_of(text) == []  # the spaces left where inline code was are not a "Formatting" lint


def test_dictionary_words_reach_harper():
    assert "Zorblax" not in CACHES.grammar.linter().export_words()
    assert CACHES.grammar.linter(frozenset({"Zorblax"})).export_words() == ["Zorblax"]
    assert CACHES.grammar.linter(frozenset()).export_words() == []  # back to no words for the other tests


def test_harper_spends_no_time_on_the_spelling_lints_it_would_drop():
    text = "The Zorblax engine is fast.\n"
    assert not any(str(lint.lint_kind) == "Spelling" for lint in CACHES.grammar.linter().lint(text))
    assert CACHES.grammar.lints(text, markup.layout(text, markup.PLAIN)) == []


def test_one_hint_per_span_and_ignore_comments():
    text = "He go to the market.\n"
    lints = CACHES.grammar.lints(text, markup.layout(text, markup.PLAIN))
    word = lsp.Hint(3, 5, "possible typo", "hint", "typo")
    assert [h.start for h in conventions.grammar_hints(text, lints, [], ignores.Ignores())] == [3]
    assert conventions.grammar_hints(text, lints, [word], ignores.Ignores()) == []
    silenced = ignores.find("vq-lsp-disable-next-line grammar\n" + text, markup.PLAIN)
    shifted = [lint.shifted(len("vq-lsp-disable-next-line grammar\n")) for lint in lints]
    assert conventions.grammar_hints("vq-lsp-disable-next-line grammar\n" + text, shifted, [], silenced) == []


class _Text:
    def __init__(self, text: str) -> None:
        self.text, self.token_starts = text, np.zeros(0, dtype=np.int64)

    def position(self, offset: int) -> tuple[int, int]:
        return 0, offset


def test_the_setting_turns_grammar_off_and_sets_its_severity():
    text = "He go to the market.\n"
    empty = HintMaterial(None, [], [], [])
    on = conventions.choose(
        _Text(text), empty, DiagnosticSettings(sentiment=False), conventions.Conventions(), caches=CACHES
    )
    assert [(h.code, h.severity) for h in on] == [("grammar", "hint")]
    loud = DiagnosticSettings(sentiment=False, grammar_severity="error")
    assert conventions.choose(_Text(text), empty, loud, conventions.Conventions(), caches=CACHES)[0].severity == "error"
    off = DiagnosticSettings(sentiment=False, grammar=False)
    assert conventions.choose(_Text(text), empty, off, conventions.Conventions(), caches=CACHES) == []


# What the markup handling takes out of a sentence reaches Harper as a placeholder word, never as
# a gap: "an `Err` value" is not "an value". One case per kind of markup; each sentence is right as written.
MARKUP_CASES = [
    ("inline code", markup.MARKDOWN, "It returns an `Err` value when the file is missing.\n"),
    ("code at a line's end", markup.MARKDOWN, "It returns an `Err`\nvalue when the file is missing.\n"),
    ("link target", markup.MARKDOWN, "See an [example](https://example.org/a) of it.\n"),
    ("reference link", markup.MARKDOWN, "See an [example][ex] of it.\n\n[ex]: https://example.org\n"),
    ("emphasis", markup.MARKDOWN, "This is an *important* point and a __big__ one.\n"),
    ("inline HTML", markup.MARKDOWN, "It is an <kbd>Enter</kbd> key press.\n"),
    ("autolink", markup.MARKDOWN, "Write to an <mailto:a@example.org> address.\n"),
    ("URL", markup.PLAIN, "Open an https://example.org/x page in the browser.\n"),
    ("rst literal", markup.RST, "It returns an ``Err`` value when the file is missing.\n"),
    ("rst role", markup.RST, "Use an :class:`Option` value here.\n"),
    ("rst hyperlink", markup.RST, "See an `example <https://example.org>`_ of it.\n"),
]


@pytest.mark.parametrize("name, kind, text", MARKUP_CASES, ids=[c[0] for c in MARKUP_CASES])
def test_no_lint_where_the_markup_handling_changed_the_sentence(name, kind, text):
    lay = markup.layout(text, kind)
    every = grammar.Rules.of(dict.fromkeys(grammar.KINDS, True))
    assert CACHES.grammar.lints(text, lay, rules=every) == []


def test_blanked_markup_would_have_drawn_the_lint_the_placeholder_avoids():
    text = "It returns an `Err` value when the file is missing.\n"
    prose = markup.layout(text, markup.MARKDOWN).prose
    assert grammar.PLACEHOLDER * 5 in grammar.masked(text, prose)
    blank = text.replace("`Err`", "     ")
    assert [lint.lint_kind for lint in CACHES.grammar.linter().lint(blank)] != []  # "an value"


CLASSIC = "We could of won. It was a example. It was the the best. This are the results. He go home.\n"


def test_the_default_rules_find_the_classic_errors():
    found = {(lint.rule, CLASSIC[lint.start : lint.end]) for lint in CACHES.grammar.lints(CLASSIC, _plain(CLASSIC))}
    assert found == {
        ("ModalOf", "could of"),
        ("AnA", "a"),
        ("RepeatedWords", "the the"),
        (grammar.DEMONSTRATIVE_RULE, "This are"),
        ("PronounVerbAgreement", "go"),
    }


def test_style_and_formatting_are_off_by_default_and_on_by_name():
    text = "the value is 3-4  ms long, and it is a really very long sentence.\n"
    assert CACHES.grammar.lints(text, _plain(text)) == []
    on = grammar.Rules.of({"Formatting": True, "SentenceCapitalization": True})
    rules = {lint.rule for lint in CACHES.grammar.lints(text, _plain(text), rules=on)}
    assert {"Spaces", "NumericRangeEnDash", "SentenceCapitalization"} <= rules


def test_a_rule_named_wins_over_its_kind():
    rules = grammar.Rules.of({"Repetition": False, "RepeatedWords": True})
    assert [lint.rule for lint in CACHES.grammar.lints(CLASSIC, _plain(CLASSIC), rules=rules)].count(
        "RepeatedWords"
    ) == 1
    off = grammar.Rules.of({"AnA": False, grammar.DEMONSTRATIVE_RULE: False})
    kept = {lint.rule for lint in CACHES.grammar.lints(CLASSIC, _plain(CLASSIC), rules=off)}
    assert "AnA" not in kept and grammar.DEMONSTRATIVE_RULE not in kept and "ModalOf" in kept


def test_a_lint_on_a_whole_sentence_hidden_by_the_rules_does_not_hide_the_error_inside_it():
    long = "It was " + ", ".join(["the the best of times"] + ["a time of change"] * 12) + ".\n"
    assert any(lint.rule == "RepeatedWords" for lint in CACHES.grammar.lints(long, _plain(long)))


def test_demonstrative_agreement_spares_relative_that_and_the_subjunctive():
    text = "The files that are read stay. If this were so, these are fine and those were too.\n"
    assert grammar.demonstrative_lints(text) == []
    bad = "These is wrong and those was too.\n"
    assert [(lint.start, lint.fixes[0].text) for lint in grammar.demonstrative_lints(bad)] == [
        (0, "These are"),
        (19, "those were"),
    ]


def test_unknown_rule_names_are_reported():
    assert grammar.Rules.of({"AnA": False, "Formatting": True, "NoSuchRule": True}).unknown() == ["NoSuchRule"]
    assert "AnA" in grammar.rule_names() and len(grammar.rule_names()) > 500


def test_configure_sets_the_rules_the_hints_use():
    text = "The  value is fine.\n"
    try:
        CACHES.grammar.configure(grammar.Rules.of({"Spaces": True}))
        assert [lint.rule for lint in CACHES.grammar.lints(text, _plain(text))] == ["Spaces"]
    finally:
        CACHES.grammar.configure(grammar.Rules())
    assert CACHES.grammar.lints(text, _plain(text)) == []


def _plain(text: str) -> markup.Layout:
    return markup.layout(text, markup.PLAIN)


def test_grammar_rules_setting_from_the_editor_and_from_vq_lsp_toml(tmp_path):
    parsed, warnings = settings.parse({"vqLsp": {"grammar": {"rules": {"AnA": False, "Formatting": True}}}})
    assert warnings == [] and parsed.grammar.rules == {"AnA": False, "Formatting": True}
    _, bad = settings.parse({"grammar": {"rules": {"AnA": "off"}}})
    assert len(bad) == 1 and bad[0].startswith("grammar.rules")
    (tmp_path / "vq-lsp.toml").write_text("[grammar.rules]\nLongSentences = true\nRepetition = false\n")
    config = config_file.load(tmp_path)
    assert config.problems == ()
    rules = grammar.Rules.of(config.apply(settings.Settings()).grammar.rules)
    assert rules.keeps("LongSentences", "Readability") and not rules.keeps("RepeatedWords", "Repetition")
    assert ("LongSentences", True) in rules.harper_switches()


def test_the_rule_list_in_the_docs_is_the_installed_harpers():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "grammar-rules.md").read_text(encoding="utf-8")
    assert doc == grammar.rules_markdown(), "docs/grammar-rules.md is out of date: regenerate it (see its head)"
