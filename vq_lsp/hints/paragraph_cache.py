"""Each paragraph's hint material, kept by its key: what lets a publish reuse the paragraphs an
edit did not touch (reuse.py), and the words before an edit inside a paragraph keep their
findings (`reusable_prefix`)."""

from __future__ import annotations

import threading
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

import inference

from . import typos


class ParagraphKey(NamedTuple):
    """What a paragraph's material depends on besides its tokens' surprise: its text, its
    tokenization and its layout, all relative to its first character (or first token). A named
    tuple rather than a frozen dataclass: a publish builds and looks up one key per paragraph of
    the document, and a tuple's hash and equality run in C."""

    text: str
    lead: int  # its first token's start, relative to the paragraph (negative: a token begun before it)
    tokens: int  # its token count
    gaps: bytes  # the gaps between its tokens' starts, as int64 bytes
    prose: tuple  # (start, end) of its prose ranges
    tones: tuple  # (start, end, words) of its tone blocks


@dataclass(frozen=True)
class ParagraphMaterial:
    """What hints are chosen from in one paragraph, offsets relative to its first character and
    token indices relative to its first token."""

    surprise: np.ndarray  # of its tokens, as computed from
    words: np.ndarray  # (k, 4): start, end, first token, end token of its prose words (int64)
    findings: tuple[typos.WordFinding, ...]
    finding_tokens: tuple[tuple[int, int], ...]  # (first token, end token) of each finding
    uses: Counter  # lower-cased prose spellings missing from the dictionary (the only ones evidence is asked about)
    code_words: frozenset  # lower-cased words outside its prose missing from the dictionary
    has_code: bool  # any word outside its prose
    tones: tuple  # (start, end, token start, token end, scores, words) per tone block
    finding_index: np.ndarray  # (k, 2) int64: finding_tokens as an array, to read their surprise at once
    surprise_bytes: bytes = b""  # `surprise` as bytes: the exact comparison a reuse asks first
    crowded: frozenset = frozenset()  # of `uses`, those beside the spelling the model likes best for them (jargon.py)
    confusables: Counter = field(default_factory=Counter)  # lower-case confusable words of its prose

    def __post_init__(self) -> None:
        if not self.surprise_bytes:
            object.__setattr__(self, "surprise_bytes", self.surprise.tobytes())


class ParagraphCache:
    """ParagraphMaterial by paragraph key, least recently used first; a key holds up to
    `variants` entries, for a paragraph repeated in different contexts (a heading, a list item)."""

    def __init__(self, limit: int = 16384, variants: int = 4) -> None:
        self.limit = limit
        self.variants = variants
        self._entries: OrderedDict[ParagraphKey, list[ParagraphMaterial]] = OrderedDict()
        self.reused = 0
        self.computed = 0
        self.words_kept = 0  # words of recomputed paragraphs whose findings were kept (reusable_prefix)
        # the server's build worker fills the cache for a freshly built document while the engine
        # thread reads it for another one (HintPublisher.warm_hints)
        self._lock = threading.Lock()

    def get(
        self, key: ParagraphKey, exact: bytes, surprise: np.ndarray, ta: int, tb: int, tolerance: float
    ) -> ParagraphMaterial | None:
        """The entry of `key` computed from surprise[ta:tb] (`exact`: those as bytes), or from
        scores within `tolerance` of them."""
        with self._lock:
            hits = self._entries.get(key)
            if not hits:
                return None
            for hit in hits:
                if (
                    hit.surprise_bytes == exact
                    or (  # the common case: the edit was in another window
                        tolerance > 0
                        and len(hit.surprise) == tb - ta
                        and float(np.max(np.abs(hit.surprise - surprise[ta:tb]), initial=0.0)) <= tolerance
                    )
                ):
                    self._entries.move_to_end(key)
                    return hit
            return None

    def latest(self, key: ParagraphKey) -> ParagraphMaterial | None:
        """The entry of `key` stored last, whatever scores it was computed from (a paragraph whose
        scores moved: the words before the move keep their findings, `reusable_prefix`)."""
        with self._lock:
            hits = self._entries.get(key)
            return hits[0] if hits else None

    def put(self, key: ParagraphKey, value: ParagraphMaterial) -> None:
        with self._lock:
            self._entries[key] = [value] + self._entries.get(key, [])[: self.variants - 1]
            self._entries.move_to_end(key)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)


@dataclass(frozen=True, eq=False)
class KeptParagraphs:
    """One document's paragraphs (key and material by start offset) as a publish found them;
    never changed once kept, so the memory budget takes its size once (HintCaches.bytes)."""

    by_start: dict[int, tuple[ParagraphKey, ParagraphMaterial]]


class LastMaterial:
    """Each document's paragraphs as its last publish found them (KeptParagraphs): an edited
    paragraph's new text has no cache entry, but the words before the edit read as they did in
    the version before it (`reusable_prefix`). Weakly keyed by the engine state, so a dropped
    state takes its entry with it; two threads publish (the engine thread and the build worker's
    first hints), hence the lock."""

    def __init__(self) -> None:
        self._by_doc: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, doc: inference.IncrementalDocument) -> dict[int, tuple[ParagraphKey, ParagraphMaterial]]:
        with self._lock:
            kept = self._by_doc.get(doc)
        return kept.by_start if kept is not None else {}

    def put(self, doc: inference.IncrementalDocument, parts: dict[int, tuple[ParagraphKey, ParagraphMaterial]]) -> None:
        with self._lock:
            self._by_doc[doc] = KeptParagraphs(parts)

    def drop(self, doc: inference.IncrementalDocument) -> None:
        with self._lock:
            self._by_doc.pop(doc, None)


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (halving: a paragraph is compared in a
    few slice comparisons, not char by char)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def reusable_prefix(
    prior_key: ParagraphKey, prior: ParagraphMaterial, key: ParagraphKey, surprise: np.ndarray, tolerance: float
) -> int:
    """How many leading tokens of a paragraph (`key`, its tokens' `surprise`) read as they did
    when `prior` was computed: the same text and token boundaries, the same two characters after
    them (a word's end depends on them, markup.WORD), and scores within `tolerance`. A word made
    of such tokens has the finding it had then: the model read the same prefix, and the
    paragraph cache trusts the same tolerance for a whole paragraph."""
    if prior_key.lead != key.lead or not len(prior.surprise) or not len(surprise):
        return 0
    chars = _common_prefix(prior_key.text, key.text)
    old_gaps, new_gaps = np.frombuffer(prior_key.gaps, np.int64), np.frombuffer(key.gaps, np.int64)
    n = min(len(old_gaps), len(new_gaps))
    differ = np.flatnonzero(old_gaps[:n] != new_gaps[:n])
    same = int(differ[0]) if len(differ) else n
    ends = key.lead + np.cumsum(new_gaps[:same])  # token t's end: the next token's start
    tokens = int(np.searchsorted(ends, chars - 2, "right"))
    n = min(tokens, len(prior.surprise), len(surprise))
    moved = np.flatnonzero(np.abs(prior.surprise[:n] - surprise[:n]) > tolerance)
    return int(moved[0]) if len(moved) else n
