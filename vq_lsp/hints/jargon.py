"""The writer's words, learned from the document (or the workspace): a spelling missing from the
dictionaries that the writer uses consistently is their jargon, not a typo.

`nats`, `lints`, `dtype` are words to a writer of technical prose and near-misses of common
words to a dictionary (`cats`, `lines`, `type`); the model, reading them once each, finds the
common word likelier at every use. A spelling is the writer's word, and gets no typo hint, when
the document (for `vq-lsp check` over a folder: the files checked together) uses it

- at least JARGON_MIN_USES times, its forms together ("dtype", "dtype's"; a typo repeated
  twice is still flagged: writers slip the same way twice, rarely three times);
- never in a paragraph that also spells the fix the model likes best there ("recieve" beside
  "receive": the writer knows the word and slipped), `Usage.crowded`;
- and it is no known misspelling: not one edit from a very common word ("teh"), nor one slip of
  the hand (a swap, a doubled, dropped or neighbouring-key letter) from a long or common
  dictionary word ("recieve", "successs", "laso"), `typos.misspelling`;
- and it is no near-miss of another such spelling the document uses as often or more
  ("signatues" beside "signatures" when neither is in the dictionary).

Only lower-case spellings are asked about here: a capitalised one inside a sentence is a name,
which `typos.deliberate` already excuses once used twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from . import typos
from .dictionary import one_edit_apart
from .recent import Recent

JARGON_MIN_USES = 3


@dataclass(frozen=True)
class Usage:
    """How a document (or a workspace) uses the spellings missing from the dictionary."""

    uses: dict  # lower-cased prose spelling -> uses
    crowded: frozenset  # those used in a paragraph that also holds a close dictionary spelling of it

    @classmethod
    def merged(cls, usages: Iterable[Usage]) -> Usage:
        """The usage of several documents read together (`vq-lsp check` over a folder)."""
        uses: Counter = Counter()
        crowded: set[str] = set()
        for u in usages:
            uses.update(u.uses)
            crowded |= u.crowded
        return cls(dict(uses), frozenset(crowded))


def crowded_by(findings: Iterable[typos.WordFinding], words: Iterable[str]) -> set[str]:
    """The non-words among one paragraph's `findings` whose likeliest fix (by the model, at that
    use) the paragraph also spells (`words`, lower-cased): "recieve" beside "receive". Only the
    model's best fix counts: "lints" beside "hints" is no slip when the model reads "lines"."""
    present = set(words)
    return {f.word.lower() for f in findings if f.kind == "non-word" and f.fixes and f.fixes[0][0].lower() in present}


def near_miss(lower: str, uses: dict) -> bool:
    """Whether another spelling missing from the dictionary, used as often or more, is one edit
    from it (its plural or singular aside: "lint" beside "lints")."""
    n = uses.get(lower, 0)
    for other, m in uses.items():
        if m >= n and abs(len(other) - len(lower)) <= 1 and other != lower and one_edit_apart(lower, other):
            if other != lower + "s" and lower != other + "s":
                return True
    return False


def stem(lower: str) -> str:
    """The spelling without a possessive or plural ending, or an -ed: "dtype's", "lints", "linted"."""
    for ending in ("'s", "s", "ed"):
        if lower.endswith(ending) and len(lower) - len(ending) >= 3:
            return lower[: -len(ending)]
    return lower


def family_uses(usage: Usage) -> Counter:
    """Uses by stem: "dtype", "dtype's" and "dtypes" are one word used three times."""
    out: Counter = Counter()
    for w, n in usage.uses.items():
        out[stem(w)] += n
    return out


def writers_word(word: str, usage: Usage, families: Counter | None = None) -> bool:
    """Whether a lower-case spelling missing from the dictionary is the writer's word (see the module)."""
    if not word.islower():
        return False
    lower = word.replace("’", "'")
    families = family_uses(usage) if families is None else families
    return (
        families.get(stem(lower), 0) >= JARGON_MIN_USES
        and lower not in usage.crowded
        and not typos.misspelling(lower)
        and not near_miss(lower, usage.uses)
    )


def writers_words(usage: Usage, kept: Recent[frozenset[str]] | None = None) -> frozenset[str]:
    """Every spelling `usage` makes the writer's word (the document's evidence; `vq-lsp check` over
    a folder adds the workspace's to the run's dictionary). `kept`: the last few usages' results
    (HintCaches.writers_words): a publish asks on every keystroke, and a keystroke seldom changes
    them."""

    def make() -> frozenset[str]:
        families = family_uses(usage)
        many = [w for w in usage.uses if families[stem(w)] >= JARGON_MIN_USES]
        return frozenset(w for w in many if writers_word(w, usage, families))

    if kept is None:
        return make()
    return kept.get((frozenset(usage.uses.items()), usage.crowded), make)
