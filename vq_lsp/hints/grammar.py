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

Which lints are shown is grammar_rules.py; the lint records, the text Harper is given and
vq-lsp's own rule are grammar_lints.py; this module runs Harper and keeps its lints.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from .grammar_lints import (  # noqa: F401 (importable from here, as before)
    PLACEHOLDER,
    GrammarLint,
    Replacement,
    demonstrative_lints,
    harper_lint,
    inside,
    masked,
    shown,
)
from .grammar_rules import (  # noqa: F401 (as above)
    DEFAULT_KINDS,
    DEFAULT_RULES,
    DEMONSTRATIVE_RULE,
    KINDS,
    SKIPPED_KINDS,
    Rules,
    rule_names,
    rules_markdown,
)
from .markup import Layout
from .paragraph_spans import ParagraphSpans, paragraph_spans
from .paragraphs import PARAGRAPH
from .recent import Recent

log = logging.getLogger(__name__)

CACHE_PARAGRAPHS = 32768  # a dozen books restored in tabs, so that a state read back needs no lints


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
        the" inside it along; the lints shown are deduplicated after the rules chose (`grammar_lints.shown`).
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
                        out.append(harper_lint(lint, kind, rule))
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
        for m in PARAGRAPH.finditer(masked(paragraph, prose)):
            found = self._paragraph(linter, words, rules, m.group())
            out += [lint.shifted(m.start()) if m.start() else lint for lint in shown(found, rules)]
        found = tuple(lint for lint in out if inside(prose, lint.start, lint.end))
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


def _switch(linter, switches: tuple[tuple[str, bool], ...]) -> None:
    """Harper's default rules with SpellCheck off (its lints are dropped, SKIPPED_KINDS: not
    computing them makes each lint cheaper) and `switches` applied."""
    config = dict.fromkeys(linter.get_lint_config())  # None: Harper's default for the rule
    config["SpellCheck"] = False
    config.update((rule, on) for rule, on in switches if rule in config)
    linter.set_lint_config(config)
