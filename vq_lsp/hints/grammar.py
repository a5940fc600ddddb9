"""Grammar and word choice from Harper (harper-py, offline, a Rust wheel), beside the model's hints.

The model sees typos and confused words; Harper's rules see agreement (`he go`), articles (`a
example`), repeated words, capitalization and word choice, which the model has no hint kind for.
Only prose is linted, as for every hint: the text is handed to Harper with everything that is not
prose (code, tables, URLs, front matter) blanked to spaces, so offsets stay those of the text.

- Harper's spelling lints (`Spelling`, and `Typo` rules such as teh -> the) are left out: the
  model's typo detector is the spelling source. On the typo benchmark's injected non-word errors
  (`python -m benchmarks.harper_typos --books 8 --excerpts 2`, one CPU core) Harper's spelling had
  precision 0.23 at recall 0.87, the model 0.83 at 0.94; the union only adds false alarms
  (precision 0.24, recall 0.96);
- a lint overlapping a word the model already flags is dropped (hints/conventions.py);
- the writer's dictionary words are imported into Harper, so its other rules accept them too.

Harper's `Linter` takes about two seconds to build and its first lints warm it up: one is built
per process (the server starts building it while its model loads), and each paragraph's lints are
cached by the paragraph's text (and its prose), relative to its start, so a publish after an edit
lints only the edited paragraph and shifts no lint it keeps. A `Linter` is not thread-safe, and
two server threads lint: the engine thread (edits and requests) and the build worker (the first
hints of a freshly built document, HintPublisher.warm_hints). Each thread lints with a linter of its
own, and only the caches are shared (behind a lock never held while Harper lints): with one
linter behind one lock, the build worker linting a book's paragraphs back to back starved the
engine thread, and an edited note's hints waited seconds for a book's.
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property, lru_cache

from .markup import Layout
from .recent import Recent
from .reuse import ParagraphSpans, paragraph_spans

log = logging.getLogger(__name__)

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
_DEMONSTRATIVE = re.compile(r"\b(?:(this)[ \t]+(are)|(these|those)[ \t]+(is|was|has))\b", re.IGNORECASE)
CACHE_PARAGRAPHS = 32768  # a dozen books restored in tabs, so that a state read back needs no lints
_PARAGRAPH = re.compile(r"[^\n]*\S[^\n]*(?:\n[^\n]*\S[^\n]*)*")
_NOT_NEWLINE = re.compile(r"[^\n]")
PLACEHOLDER = "\ue000"  # a private-use character: what stands in for markup taken out of a sentence (`masked`)


@dataclass(frozen=True)
class Replacement:
    """Replace text[start:end] with `text` (Harper's replace, remove and insert-after suggestions)."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class GrammarLint:
    """One Harper lint, in char offsets of the text."""

    start: int
    end: int
    kind: str  # Harper's lint kind: Agreement, Repetition, WordChoice, Capitalization, ...
    message: str
    fixes: tuple[Replacement, ...]  # best first
    rule: str = ""  # the rule that found it (Harper's name, e.g. AnA, or DEMONSTRATIVE_RULE): what grammar.rules names

    def shifted(self, by: int) -> GrammarLint:
        return GrammarLint(
            self.start + by,
            self.end + by,
            self.kind,
            self.message,
            tuple(Replacement(r.start + by, r.end + by, r.text) for r in self.fixes),
            self.rule,
        )


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


def demonstrative_lints(text: str) -> list[GrammarLint]:
    """ "this are", "these is", "those was": a demonstrative and a verb of the other number, next
    to each other (DEMONSTRATIVE_RULE). Not "that are" ("the files that are read") nor "this
    were" ("if this were so")."""
    out = []
    for m in _DEMONSTRATIVE.finditer(text):
        if m.group(1):
            a, b = m.start(1), m.end(2)
            word, verb = m.group(1), m.group(2)
            fixes = (word[0] + "hese " + verb, word + " is")
        else:
            a, b = m.start(3), m.end(4)
            word, verb = m.group(3), m.group(4)
            plural = {"is": "are", "was": "were", "has": "have"}[verb.lower()]
            singular = word[0] + ("his" if word.lower() == "these" else "hat")
            fixes = (word + " " + plural, singular + " " + verb)
        message = f"`{word}` and `{verb}` disagree in number: did you mean `{fixes[0]}`?"
        out.append(
            GrammarLint(a, b, "Agreement", message, tuple(Replacement(a, b, f) for f in fixes), DEMONSTRATIVE_RULE)
        )
    return out


def masked(text: str, prose: tuple[tuple[int, int], ...]) -> str:
    """`text` as Harper reads it: the prose as written; what the markup handling took out of a
    prose line (inline code, a role, a link's target, inline HTML, a URL) as a run of the same
    length of PLACEHOLDER, a character of no script that Harper reads as a word it can say
    nothing about (blanked to spaces, "an `Err` value" read as "an value" and drew "a"; a code
    span of the same length reads as well but costs Harper's Markdown parser a third more time
    per paragraph); everything else outside the prose (code blocks, tables, markup lines)
    blanked to spaces. Newlines are kept: offsets do not move."""
    out, at = [], 0
    for a, b in (*prose, (len(text), len(text))):
        if a > at:
            out.append(_hole(text, at, a, touches_before=at > 0, touches_after=a < len(text)))
        out.append(text[a:b])
        at = b
    return "".join(out)


def _hole(text: str, a: int, b: int, touches_before: bool, touches_after: bool) -> str:
    """The non-prose text[a:b] between prose ranges, as Harper reads it (see `masked`): each of
    its lines' pieces that sits on a line with prose (it meets the prose before it on the same
    line, or the prose after it) becomes PLACEHOLDER of its length, the rest spaces."""
    pieces = text[a:b].split("\n")
    out = []
    for k, piece in enumerate(pieces):
        inline = (k == 0 and touches_before and text[a - 1] != "\n") or (k == len(pieces) - 1 and touches_after)
        if inline and piece.strip():
            out.append(PLACEHOLDER * len(piece))
        else:
            out.append(_NOT_NEWLINE.sub(" ", piece))
    return "\n".join(out)


class GrammarChecker:
    """Harper's linters, one per thread that lints, with the writer's words and per-paragraph caches."""

    def __init__(self, spans: Recent[ParagraphSpans] | None = None) -> None:
        # each version's paragraphs, shared with the material (HintCaches.spans)
        self._spans: Recent[ParagraphSpans] = Recent(keep=4) if spans is None else spans
        self._spare = None  # the linter `prepare` built, for the first thread that lints
        # thread id -> (its linter, its words, its Harper switches)
        self._linters: dict[int, tuple[object, frozenset[str], tuple]] = {}
        # both caches are keyed by the words imported too, so that threads with other words share them
        # by words, Harper switches, masked paragraph: every lint Harper and DEMONSTRATIVE_RULE make
        self._cache: OrderedDict[tuple, tuple[GrammarLint, ...]] = OrderedDict()
        # by words, rules, paragraph, prose: the lints shown
        self._placed: OrderedDict[tuple, tuple[GrammarLint, ...]] = OrderedDict()
        self.rules = Rules()  # which lints are shown (the grammar.rules setting, `configure`)
        self.unavailable: str | None = None  # why Harper cannot be used, once that is known
        self._building: threading.Thread | None = None
        self._lock = threading.Lock()  # the tables above; never held while Harper lints

    def configure(self, rules: Rules) -> list[str]:
        """Show the lints `rules` keep from now on (the server on a settings change, `vq-lsp
        check` at its start); returns the names it does not know, for a warning."""
        self.rules = rules
        return rules.unknown()

    def prepare(self) -> None:
        """Start building Harper's linter on a thread of its own (the server, while its model loads):
        the first lints then need not wait the two seconds. Nothing else touches it meanwhile."""
        if self._spare is None and not self._linters and self.unavailable is None and self._building is None:
            self._building = threading.Thread(target=self._build_spare, name="vq-harper", daemon=True)
            self._building.start()

    def _build_spare(self) -> None:
        self._spare = self._build()

    def _build(self):
        try:
            import harper
        except ImportError as e:  # a platform without harper-py's wheel
            self.unavailable = f"grammar hints need harper-py ({e}); pip install harper-py"
            log.warning(self.unavailable)
            return None
        linter = harper.Linter()
        _switch(linter, self.rules.harper_switches())
        linter.lint("He go to the market.")  # the first lint pays a warm-up of its own
        return linter

    def _ready(self, words: frozenset[str], switches: tuple | None = None):
        """This thread's linter with `words` imported and the rules `switches` on or off (default:
        those of `self.rules`), or None when harper-py is missing. The first thread gets the one
        `prepare` built; another builds its own (two seconds, once)."""
        switches = self.rules.harper_switches() if switches is None else switches
        me = threading.get_ident()
        with self._lock:
            building, self._building = self._building, None
        if building is not None:
            building.join()
        with self._lock:
            linter, current, switched = self._linters.get(me, (None, None, None))
            if linter is None:
                linter, self._spare = self._spare, None
        if linter is None and self.unavailable is None:
            linter = self._build()
        if linter is None:
            return None
        if words != current or switches != switched:  # None: a linter new to this thread
            if words != current:
                if current:
                    linter.clear_words()
                if words:
                    linter.import_words(sorted(words))
            if switches != switched:
                _switch(linter, switches)
            with self._lock:
                self._linters[me] = (linter, words, switches)
        return linter

    def linter(self, words: frozenset[str] = frozenset()):
        """This thread's Harper `Linter`, with `words` imported (None when harper-py is missing)."""
        return self._ready(words)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._placed.clear()

    def _kept(self, table: OrderedDict, key: tuple):
        with self._lock:
            found = table.get(key)
            if found is not None:
                table.move_to_end(key)
            return found

    def _keep(self, table: OrderedDict, key: tuple, value: tuple[GrammarLint, ...]) -> None:
        with self._lock:
            table[key] = value
            if len(table) > CACHE_PARAGRAPHS:
                table.popitem(last=False)

    def _paragraph(self, linter, words: frozenset[str], rules: Rules, paragraph: str) -> tuple[GrammarLint, ...]:
        """The lints of one masked paragraph that `rules` may show (the rules filter by rule name
        later), each with the rule that made it.

        dedup=False: Harper's own deduplication drops a lint overlapping another, and a lint on a
        whole sentence ("this sentence is 42 words long") that the rules then hide took the "the
        the" inside it along; the lints shown are deduplicated after the rules chose (`_shown`).
        Harper names a lint's rule only in `organized_lints`, a third slower than `lint`, so a
        paragraph is linted plainly first and again by rule only when a lint of a kind the rules
        may show came up (most paragraphs of edited prose have none)."""
        key = (words, rules.harper_switches(), rules.kinds_shown(), paragraph)
        found = self._kept(self._cache, key)
        if found is not None:
            return found
        out = []
        shown = rules.kinds_shown()
        if any(str(lint.lint_kind) in shown for lint in linter.lint(paragraph, dedup=False)):
            for rule, lints in linter.organized_lints(paragraph, dedup=False).items():
                for lint in lints:
                    kind = str(lint.lint_kind)
                    if kind in shown:
                        out.append(_lint(lint, kind, rule))
        out += demonstrative_lints(paragraph)
        found = tuple(sorted(out, key=lambda lint: (lint.start, lint.end, lint.rule)))
        self._keep(self._cache, key, found)
        return found

    def _prose_paragraph(
        self, linter, words: frozenset[str], rules: Rules, paragraph: str, prose: tuple[tuple[int, int], ...]
    ) -> tuple[GrammarLint, ...]:
        """The lints `rules` show of one paragraph of the text whose prose is `prose` (relative to
        it), offsets relative to it; kept by both, so an unchanged paragraph costs a lookup
        wherever it moved."""
        key = (words, rules, paragraph, prose)
        found = self._kept(self._placed, key)
        if found is not None:
            return found
        out = []
        for m in _PARAGRAPH.finditer(masked(paragraph, prose)):
            found = self._paragraph(linter, words, rules, m.group())
            out += [lint.shifted(m.start()) if m.start() else lint for lint in _shown(found, rules)]
        found = tuple(lint for lint in out if _inside(prose, lint.start, lint.end))
        self._keep(self._placed, key, found)
        return found

    def paragraph_lints(
        self, text: str, layout: Layout, words: frozenset[str] = frozenset(), rules: Rules | None = None
    ) -> list[tuple[int, tuple[GrammarLint, ...]]]:
        """(paragraph start, its lints relative to it) per paragraph of `text` with lints: Harper's
        lints of the prose; a lint reaching outside one prose range (onto blanked code or markup) is
        dropped. `rules`: which lints are shown (default: the configured ones, `configure`)."""
        rules = self.rules if rules is None else rules
        linter = self._ready(words, rules.harper_switches()) if layout.prose else None
        if linter is None:
            return []
        spans = paragraph_spans(text, layout, self._spans)
        out = []
        for (a, b), prose in zip(spans.bounds, spans.prose):
            if prose:
                found = self._prose_paragraph(linter, words, rules, text[a:b], prose)
                if found:
                    out.append((a, found))
        return out

    def lints(
        self, text: str, layout: Layout, words: frozenset[str] = frozenset(), rules: Rules | None = None
    ) -> list[GrammarLint]:
        """Harper's lints of the prose of `text`, in its offsets (see `paragraph_lints`)."""
        placed = self.paragraph_lints(text, layout, words, rules)
        return [lint.shifted(a) if a else lint for a, found in placed for lint in found]


def _lint(lint, kind: str, rule: str) -> GrammarLint:
    """One of Harper's lints as a GrammarLint, its suggestions as replacements."""
    a, b = lint.span.start, lint.span.end
    fixes = []
    for s in lint.suggestions:
        name = getattr(s.kind, "name", str(s.kind))
        if name == "INSERT_AFTER":
            fixes.append(Replacement(b, b, s.replacement_text))
        else:  # REPLACE, or REMOVE (an empty replacement)
            fixes.append(Replacement(a, b, s.replacement_text))
    return GrammarLint(a, b, kind, lint.message, tuple(dict.fromkeys(fixes)), rule)


def _shown(lints: tuple[GrammarLint, ...], rules: Rules) -> list[GrammarLint]:
    """The lints `rules` keep, none overlapping one before it (one hint per span; `lints` are
    sorted by start)."""
    out: list[GrammarLint] = []
    for lint in lints:
        if rules.keeps(lint.rule, lint.kind) and not (out and lint.start < out[-1].end):
            out.append(lint)
    return out


def _switch(linter, switches: tuple[tuple[str, bool], ...]) -> None:
    """Harper's default rules with SpellCheck off (its lints are dropped, SKIPPED_KINDS: not
    computing them makes each lint cheaper) and `switches` applied."""
    config = dict.fromkeys(linter.get_lint_config())  # None: Harper's default for the rule
    config["SpellCheck"] = False
    config.update((rule, on) for rule, on in switches if rule in config)
    linter.set_lint_config(config)


def _inside(prose: tuple[tuple[int, int], ...], a: int, b: int) -> bool:
    """Whether [a, b) lies inside one of the sorted, disjoint `prose` ranges."""
    i = bisect.bisect_right(prose, (a, float("inf"))) - 1
    return i >= 0 and prose[i][0] <= a and b <= prose[i][1]
