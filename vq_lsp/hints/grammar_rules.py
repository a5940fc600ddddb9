"""Which grammar lints are shown: Harper's lint kinds, the defaults this server chose for its
rules (with the example that decided each), the writer's choices (the `grammar.rules` setting)
and the list of them written for docs/grammar-rules.md."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

SKIPPED_KINDS = frozenset({"Spelling", "Typo"})  # Harper's spelling: the model's typo detector decides
# Harper's lint kinds (harper-core's LintKind), the names `grammar.rules` accepts beside rule names
KINDS = (
    "Agreement",
    "BoundaryError",
    "Capitalization",
    "Eggcorn",
    "Enhancement",
    "Formatting",
    "Grammar",
    "Malapropism",
    "Miscellaneous",
    "Nonstandard",
    "Punctuation",
    "Readability",
    "Redundancy",
    "Regionalism",
    "Repetition",
    "Spelling",
    "Style",
    "Typo",
    "Usage",
    "WordChoice",
)
# The kinds shown by default: errors a writer wants fixed (agreement, repeated words, confused
# words and phrases such as "could of", words run together or split). Formatting (two spaces,
# dashes in number ranges), capitalization (title case in headings; a sentence "starting" lower
# case where markup was taken out), readability (long sentences), style (Oxford comma),
# enhancement, redundancy and usage are matters of house style, off until named in grammar.rules.
DEFAULT_KINDS = frozenset(
    {"Agreement", "BoundaryError", "Eggcorn", "Grammar", "Malapropism", "Nonstandard", "Repetition", "WordChoice"}
)
# Rules whose default differs from their kind's: rule -> (its kind, shown by default). A rule shown
# here is run even when Harper leaves it off by default; one not shown is not run at all (unless
# grammar.rules names it or its kind), so it costs no time. The rules turned off in kinds shown by
# default are those that were wrong on most of their lints on clean, edited prose (this
# repository's docs, Rust book chapters, the Art of Command Line README, Gutenberg and IMDB
# train texts; `python -m benchmarks.grammar_hints`), with the example that decided it.
DEFAULT_RULES: dict[str, tuple[str, bool]] = {
    "AnA": ("Miscellaneous", True),  # "a" / "an" before a vowel sound
    "CompoundNouns": ("WordChoice", False),  # "word list" -> "wordlist", "data type" -> "datatype"
    "ExpandMemoryShorthands": ("WordChoice", False),  # "MiB" -> "mebibytes": house style
    "ExpandTimeShorthands": ("WordChoice", False),  # "ms" -> "milliseconds": house style
    "MassNouns": ("Agreement", False),  # "from one finding", "a public trait"
    "MergeWords": ("WordChoice", False),  # "140,000 tokens/s on" -> "son"
    "WrongNegative": ("WordChoice", False),  # "not unsimilar" -> "dissimilar"
    "QuantifierNumeralConflict": ("Grammar", False),  # "of 7 letters or more"
    "SimplePastToPastParticiple": ("Grammar", False),  # "is bit-identical" -> "bitten"
    "AvoidCurses": ("WordChoice", False),  # a matter of taste
    "MultipleSequentialPronouns": ("Repetition", False),  # "lead Thou me on"
    "FindOut": ("WordChoice", False),  # "a way to find out the index": style
    "ThereToTheir": ("Grammar", False),  # "for there was, of course, no fire"
    "ItTimeAuxiliary": ("Grammar", False),  # "thought it time to retire"
    "NounVerbConfusion": ("WordChoice", False),  # "its effects have" -> "affects"
    "LetsConfusion": ("WordChoice", False),  # "if I could let down my hair"
    "PossessiveYour": ("WordChoice", False),  # "it's a change, you men"
    "MissingTo": ("WordChoice", False),  # "it doesn't free up disk space"
    "ToTwoToo": ("WordChoice", False),  # "would be too swift an adjective"
    "RedundantThat": ("Repetition", False),  # "that that human creature"
    # rules of kinds off by default that make most lints: not run, so they cost no time
    "LongSentences": ("Readability", False),
    "Spaces": ("Formatting", False),
    "Dashes": ("Formatting", False),
    "NumericRangeEnDash": ("Formatting", False),
    "OxfordComma": ("Style", False),
    "UseTitleCase": ("Capitalization", False),
    "SentenceCapitalization": ("Capitalization", False),
    "OrthographicConsistency": ("Capitalization", False),
}
# vq-lsp's own rule, beside Harper's: "this are", "these is" (Harper has no rule for them)
DEMONSTRATIVE_RULE = "DemonstrativeAgreement"


@dataclass(frozen=True)
class Rules:
    """Which lints are shown: the writer's choices (the `grammar.rules` setting: a Harper rule's
    name, as harper-ls's `linters` names them, or a lint kind's, to true or false), then the
    defaults (DEFAULT_RULES, then DEFAULT_KINDS). A rule named wins over its kind named. A kind
    turned on shows the rules of that kind Harper runs by default; a rule Harper leaves off runs
    only when named."""

    named: tuple[tuple[str, bool], ...] = ()  # sorted (name, on)

    @classmethod
    def of(cls, choices: dict[str, bool] | tuple | None) -> Rules:
        return cls(tuple(sorted(dict(choices or ()).items())))

    @cached_property
    def _named(self) -> dict[str, bool]:
        return dict(self.named)

    @cached_property
    def _kinds_shown(self) -> frozenset[str]:
        named = self._named
        out = {k for k in KINDS if named.get(k, k in DEFAULT_KINDS)}
        out |= {kind for rule, (kind, on) in DEFAULT_RULES.items() if named.get(rule, on)}
        if any(on for name, on in self.named if name not in KINDS):  # a rule named on: its kind is not known
            out |= set(KINDS)
        return frozenset(out - SKIPPED_KINDS)

    def kinds_shown(self) -> frozenset[str]:
        """The kinds a shown lint may have: those shown, and those of rules shown by name (every
        kind, when a rule whose kind is not known here is named on)."""
        return self._kinds_shown

    def keeps(self, rule: str, kind: str) -> bool:
        named = self._named
        if rule in named:
            return named[rule]
        if kind in named:
            return named[kind]
        if rule in DEFAULT_RULES:
            return DEFAULT_RULES[rule][1]
        return kind in DEFAULT_KINDS

    def harper_switches(self) -> tuple[tuple[str, bool], ...]:
        """The rules whose Harper switch differs from Harper's default config (SpellCheck aside):
        a rule named is run as named; a default rule, as its default says unless its kind is named."""
        return self._switches

    @cached_property
    def _switches(self) -> tuple[tuple[str, bool], ...]:
        named = self._named
        out = {}
        for rule, (kind, on) in DEFAULT_RULES.items():
            if rule not in named and kind not in named:
                out[rule] = on
        for name, on in named.items():
            if name not in KINDS and name != DEMONSTRATIVE_RULE:
                out[name] = on
        return tuple(sorted(out.items()))

    def unknown(self) -> list[str]:
        """The names that are neither a Harper rule, a kind nor DEMONSTRATIVE_RULE."""
        names = [name for name, _ in self.named if name not in KINDS and name != DEMONSTRATIVE_RULE]
        known = set(rule_names()) if names else set()  # Harper's list takes half a second to build
        return [name for name in names if name not in known]


@lru_cache(maxsize=1)
def rule_names() -> tuple[str, ...]:
    """Every rule Harper has (harper-py's default configuration), sorted; () without harper-py."""
    try:
        import harper
    except ImportError:
        return ()
    return tuple(sorted(harper.get_default_lint_config()))


def rules_markdown() -> str:
    """docs/grammar-rules.md: the names `grammar.rules` accepts, written from Harper's own list
    and descriptions and this module's defaults (tests/hints/test_grammar.py fails when the
    file differs from what the installed Harper gives)."""
    import harper

    descriptions = harper.Linter().get_lint_descriptions()
    harper_on = harper.get_default_lint_config()
    lines = [
        "# Grammar rules",
        "",
        "The names the `grammar.rules` setting accepts (editor settings, or `[grammar.rules]` in",
        "`vq-lsp.toml`): a lint kind or a rule, to `true` (shown) or `false` (hidden). A rule named",
        "wins over its kind. Written by `vq_lsp.hints.grammar.rules_markdown` from the installed",
        "harper-py; regenerate with",
        "`python -c \"from vq_lsp.hints.grammar import rules_markdown as m; print(m(), end='')\"`"
        " > docs/grammar-rules.md.",
        "",
        "## Kinds",
        "",
        "| kind | shown by default |",
        "|---|---|",
    ]
    lines += [f"| `{k}` | {'yes' if k in DEFAULT_KINDS else 'no'} |" for k in KINDS if k not in SKIPPED_KINDS]
    lines += [
        "",
        "`Spelling` and `Typo` lints are never shown: the model's typo hints are the spelling check.",
        "",
        "## Rules",
        "",
        "A rule's default is its kind's unless the table says otherwise; a rule Harper leaves off runs",
        "only when named.",
        "",
        "| rule | default | what it checks |",
        "|---|---|---|",
        f"| `{DEMONSTRATIVE_RULE}` | shown | vq-lsp's own: `this are`, `these is`, `those was` "
        "(a demonstrative and a verb of the other number). |",
    ]
    for name in sorted(harper_on):
        if name == "SpellCheck":
            default = "never run (the model's typo hints)"
        elif name in DEFAULT_RULES:
            default = "shown" if DEFAULT_RULES[name][1] else "hidden"
        else:
            default = "its kind's" if harper_on[name] else "hidden (off in Harper)"
        text = " ".join(descriptions.get(name, "").split()).replace("|", "\\|")
        lines.append(f"| `{name}` | {default} | {text} |")
    return "\n".join(lines) + "\n"
