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
hints of a freshly built document, Documents.warm_hints). Each thread lints with a linter of its
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

from .markup import Layout
from .reuse import paragraph_spans

log = logging.getLogger(__name__)

SKIPPED_KINDS = frozenset({"Spelling", "Typo"})  # Harper's spelling: the model's typo detector decides
CACHE_PARAGRAPHS = 32768  # a dozen books restored in tabs, so that a state read back needs no lints
_PARAGRAPH = re.compile(r"[^\n]*\S[^\n]*(?:\n[^\n]*\S[^\n]*)*")
_NOT_NEWLINE = re.compile(r"[^\n]")


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

    def shifted(self, by: int) -> GrammarLint:
        return GrammarLint(
            self.start + by,
            self.end + by,
            self.kind,
            self.message,
            tuple(Replacement(r.start + by, r.end + by, r.text) for r in self.fixes),
        )


def masked(text: str, prose: tuple[tuple[int, int], ...]) -> str:
    """`text` with everything outside the prose ranges blanked (newlines kept: offsets do not move)."""
    out, at = [], 0
    for a, b in prose:
        out.append(_NOT_NEWLINE.sub(" ", text[at:a]))
        out.append(text[a:b])
        at = b
    out.append(_NOT_NEWLINE.sub(" ", text[at:]))
    return "".join(out)


class GrammarChecker:
    """Harper's linters, one per thread that lints, with the writer's words and per-paragraph caches."""

    def __init__(self) -> None:
        self._spare = None  # the linter `prepare` built, for the first thread that lints
        self._linters: dict[int, tuple[object, frozenset[str]]] = {}  # thread id -> (its linter, its words)
        # both caches are keyed by the words imported too, so that threads with other words share them
        self._cache: OrderedDict[tuple, tuple[GrammarLint, ...]] = OrderedDict()  # by words, masked paragraph
        self._placed: OrderedDict[tuple, tuple[GrammarLint, ...]] = OrderedDict()  # by words, paragraph, prose
        self.unavailable: str | None = None  # why Harper cannot be used, once that is known
        self._building: threading.Thread | None = None
        self._lock = threading.Lock()  # the tables above; never held while Harper lints

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
        rules = linter.get_lint_config()
        if "SpellCheck" in rules:  # its lints are dropped (SKIPPED_KINDS): not computing them makes each lint cheaper
            linter.set_lint_config({**rules, "SpellCheck": False})
        linter.lint("He go to the market.")  # the first lint pays a warm-up of its own
        return linter

    def _ready(self, words: frozenset[str]):
        """This thread's linter with `words` imported, or None when harper-py is missing. The
        first thread gets the one `prepare` built; another builds its own (two seconds, once)."""
        me = threading.get_ident()
        with self._lock:
            building, self._building = self._building, None
        if building is not None:
            building.join()
        with self._lock:
            linter, current = self._linters.get(me, (None, None))
            if linter is None:
                linter, self._spare = self._spare, None
        if linter is None and self.unavailable is None:
            linter = self._build()
        if linter is None:
            return None
        if words != current:  # None: a linter new to this thread, with no words of the writer yet
            if current:
                linter.clear_words()
            if words:
                linter.import_words(sorted(words))
            with self._lock:
                self._linters[me] = (linter, words)
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

    def _paragraph(self, linter, words: frozenset[str], paragraph: str) -> tuple[GrammarLint, ...]:
        found = self._kept(self._cache, (words, paragraph))
        if found is not None:
            return found
        out = []
        for lint in linter.lint(paragraph):
            kind = lint.lint_kind
            if kind in SKIPPED_KINDS:
                continue
            a, b = lint.span.start, lint.span.end
            fixes = []
            for s in lint.suggestions:
                name = getattr(s.kind, "name", str(s.kind))
                if name == "INSERT_AFTER":
                    fixes.append(Replacement(b, b, s.replacement_text))
                else:  # REPLACE, or REMOVE (an empty replacement)
                    fixes.append(Replacement(a, b, s.replacement_text))
            out.append(GrammarLint(a, b, str(kind), lint.message, tuple(dict.fromkeys(fixes))))
        found = tuple(out)
        self._keep(self._cache, (words, paragraph), found)
        return found

    def _prose_paragraph(
        self, linter, words: frozenset[str], paragraph: str, prose: tuple[tuple[int, int], ...]
    ) -> tuple[GrammarLint, ...]:
        """Lints of one paragraph of the text whose prose is `prose` (relative to it), offsets
        relative to it; kept by both, so an unchanged paragraph costs a lookup wherever it moved."""
        key = (words, paragraph, prose)
        found = self._kept(self._placed, key)
        if found is not None:
            return found
        out = []
        for m in _PARAGRAPH.finditer(masked(paragraph, prose)):
            found = self._paragraph(linter, words, m.group())
            out += [lint.shifted(m.start()) if m.start() else lint for lint in found]
        found = tuple(lint for lint in out if _inside(prose, lint.start, lint.end))
        self._keep(self._placed, key, found)
        return found

    def paragraph_lints(
        self, text: str, layout: Layout, words: frozenset[str] = frozenset()
    ) -> list[tuple[int, tuple[GrammarLint, ...]]]:
        """(paragraph start, its lints relative to it) per paragraph of `text` with lints: Harper's
        lints of the prose; a lint reaching outside one prose range (onto blanked code or markup) is
        dropped."""
        linter = self._ready(words) if layout.prose else None
        if linter is None:
            return []
        spans = paragraph_spans(text, layout)
        out = []
        for (a, b), prose in zip(spans.bounds, spans.prose):
            if prose:
                found = self._prose_paragraph(linter, words, text[a:b], prose)
                if found:
                    out.append((a, found))
        return out

    def lints(self, text: str, layout: Layout, words: frozenset[str] = frozenset()) -> list[GrammarLint]:
        """Harper's lints of the prose of `text`, in its offsets (see `paragraph_lints`)."""
        placed = self.paragraph_lints(text, layout, words)
        return [lint.shifted(a) if a else lint for a, found in placed for lint in found]


def _inside(prose: tuple[tuple[int, int], ...], a: int, b: int) -> bool:
    """Whether [a, b) lies inside one of the sorted, disjoint `prose` ranges."""
    i = bisect.bisect_right(prose, (a, float("inf"))) - 1
    return i >= 0 and prose[i][0] <= a and b <= prose[i][1]


_CHECKER = GrammarChecker()


def checker() -> GrammarChecker:
    """The process's one checker (the server's engine thread, or `vq-lsp check`)."""
    return _CHECKER
