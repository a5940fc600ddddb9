"""Harper's lints as hints: prose only, dictionary words passed to Harper, one hint per span (a
word the model flags gets no grammar hint), ignore comments, and the setting that turns them off."""

from __future__ import annotations

import numpy as np

from vq_lsp.hints import conventions, grammar, ignores, lsp, markup
from vq_lsp.hints.material import HintMaterial
from vq_lsp.settings import DiagnosticSettings

TEXT = (
    "# Notes\n\nHe go to the market every morning.\n\n```\nhe go\n```\n\n"
    "This is a example of a sentence.\n\n| he go | a example |\n|---|---|\n| x | y |\n"
)


def lints_of(text: str, words=frozenset()) -> list[tuple[str, str]]:
    lay = markup.layout(text, markup.MARKDOWN)
    return [(lint.kind, text[lint.start : lint.end]) for lint in grammar.checker().lints(text, lay, words)]


def test_only_prose_is_linted_and_suggestions_are_edits():
    assert lints_of(TEXT) == [("Agreement", "go"), ("Miscellaneous", "a")]  # not in code, not in the table
    lint = grammar.checker().lints(TEXT, markup.layout(TEXT, markup.MARKDOWN))[0]
    assert lint.fixes[0] == grammar.Replacement(lint.start, lint.end, "goes")


def test_the_blanked_markup_makes_no_lint_of_its_own():
    text = "Run `pip install x` and then the `vq-lsp check` command.\n"
    assert lints_of(text) == []  # the spaces left where inline code was are not a "Formatting" lint


def test_dictionary_words_reach_harper():
    assert "Zorblax" not in grammar.checker().linter().export_words()
    assert grammar.checker().linter(frozenset({"Zorblax"})).export_words() == ["Zorblax"]
    assert grammar.checker().linter(frozenset()).export_words() == []  # back to no words for the other tests


def test_harper_spends_no_time_on_the_spelling_lints_it_would_drop():
    text = "The Zorblax engine is fast.\n"
    assert not any(str(lint.lint_kind) == "Spelling" for lint in grammar.checker().linter().lint(text))
    assert grammar.checker().lints(text, markup.layout(text, markup.PLAIN)) == []


def test_one_hint_per_span_and_ignore_comments():
    text = "He go to the market.\n"
    lints = grammar.checker().lints(text, markup.layout(text, markup.PLAIN))
    word = lsp.Hint(3, 5, "possible typo", lsp.types.DiagnosticSeverity.Hint, "typo")
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
    on = conventions.choose(_Text(text), empty, DiagnosticSettings(sentiment=False), conventions.Conventions())
    assert [(h.code, h.severity) for h in on] == [("grammar", lsp.types.DiagnosticSeverity.Hint)]
    loud = DiagnosticSettings(sentiment=False, grammar_severity="error")
    assert conventions.choose(_Text(text), empty, loud, conventions.Conventions())[0].severity == 1
    off = DiagnosticSettings(sentiment=False, grammar=False)
    assert conventions.choose(_Text(text), empty, off, conventions.Conventions()) == []
