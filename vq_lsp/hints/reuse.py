"""Hint material paragraph by paragraph, reused where an edit changed nothing: a publish costs
what the edit costs, not what the document costs.

A paragraph (a run of non-blank lines) is keyed by its text, where its tokens start in it and
where its prose and tone blocks lie (the layout); its entry keeps what choosing hints needs
from it: its prose words, the detector's findings, its spellings' counts, the words outside
its prose, its tone blocks' scores, and the surprise of its tokens they were computed from. A
later publish reuses the entry while no token's surprise moved by more than
`REUSE_TOLERANCE_NATS` from the stored one, and recomputes it otherwise: the paragraphs an edit
touched and those whose scores it moved (an edit nudges the scores of the tokens after it in
its window, mostly by hundredths of a nat). A reused entry's word surprises, and so its
findings' gains, are read from the current scores; only its fixes' scores and its tone may be
stale, by about as little. Entries are kept per model (`HintCaches.of_model`), least recently
used dropped beyond a limit.

A paragraph that is examined again is examined from its first changed word on: the words
before it (the same text, tokens and scores within the tolerance as in the paragraph's last
material, `reusable_prefix`) keep their findings. Typing at the end of a paragraph then
examines the word being typed, not the paragraph's every suspect word on each keystroke.
"""

from __future__ import annotations

import bisect
import re
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

import inference

from . import jargon, markup, tone, typos
from .recent import Recent

REUSE_TOLERANCE_NATS = 0.25
PARAGRAPH = re.compile(r"[^\n]*\S[^\n]*(?:\n[^\n]*\S[^\n]*)*")
_CODE_WORD = re.compile(r"[A-Za-z]+")

# text, its first token's start (relative), its token count, the gaps between their starts, prose, tone blocks
Key = tuple[str, int, int, bytes, tuple, tuple]


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


class WordSurprises(Sequence):
    """(start, end, whole-word surprise) of the prose words, kept as arrays: a long document has
    10,000s of words, and only unlikely-word hints (off by default) and the writer's dictionary
    read them one by one, so a publish does not make a tuple per word."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, surprise: np.ndarray) -> None:
        self.starts, self.ends, self.surprise = starts, ends, surprise

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return int(self.starts[i]), int(self.ends[i]), float(self.surprise[i])

    def __iter__(self):
        return zip(self.starts.tolist(), self.ends.tolist(), self.surprise.tolist())

    def at_least(self, threshold: float) -> list[tuple[int, int, float]]:
        """The words whose surprise reaches `threshold`, in text order."""
        keep = np.flatnonzero(self.surprise >= threshold)
        return list(zip(self.starts[keep].tolist(), self.ends[keep].tolist(), self.surprise[keep].tolist()))


@dataclass(frozen=True)
class DocumentMaterial:
    """The per-paragraph material of one version of a text, put together (absolute offsets)."""

    words: Sequence  # (start, end, whole-word surprise): a WordSurprises
    findings: list  # typos.WordFinding, in text order, before the document's evidence is applied
    tones: list[tone.ToneBlock]
    evidence: typos.Evidence
    usage: jargon.Usage = jargon.Usage({}, frozenset())  # its spellings missing from the dictionary


class ParagraphCache:
    """ParagraphMaterial by paragraph key, least recently used first; a key holds up to
    `variants` entries, for a paragraph repeated in different contexts (a heading, a list item)."""

    def __init__(self, limit: int = 16384, variants: int = 4) -> None:
        self.limit = limit
        self.variants = variants
        self._entries: OrderedDict[Key, list[ParagraphMaterial]] = OrderedDict()
        self.reused = 0
        self.computed = 0
        self.words_kept = 0  # words of recomputed paragraphs whose findings were kept (reusable_prefix)
        # the server's build worker fills the cache for a freshly built document while the engine
        # thread reads it for another one (HintPublisher.warm_hints)
        self._lock = threading.Lock()

    def get(
        self, key: Key, exact: bytes, surprise: np.ndarray, ta: int, tb: int, tolerance: float
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

    def latest(self, key: Key) -> ParagraphMaterial | None:
        """The entry of `key` stored last, whatever scores it was computed from (a paragraph whose
        scores moved: the words before the move keep their findings, `reusable_prefix`)."""
        with self._lock:
            hits = self._entries.get(key)
            return hits[0] if hits else None

    def put(self, key: Key, value: ParagraphMaterial) -> None:
        with self._lock:
            self._entries[key] = [value] + self._entries.get(key, [])[: self.variants - 1]
            self._entries.move_to_end(key)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)


class LastMaterial:
    """Each document's paragraphs (key and material by start offset) as its last publish found
    them: an edited paragraph's new text has no cache entry, but the words before the edit read
    as they did in the version before it (`reusable_prefix`). Weakly keyed by the engine state,
    so a dropped state takes its entry with it; two threads publish (the engine thread and the
    build worker's first hints), hence the lock."""

    def __init__(self) -> None:
        self._by_doc: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, doc: inference.IncrementalDocument) -> dict[int, tuple[Key, ParagraphMaterial]]:
        with self._lock:
            return self._by_doc.get(doc, {})

    def put(self, doc: inference.IncrementalDocument, parts: dict[int, tuple[Key, ParagraphMaterial]]) -> None:
        with self._lock:
            self._by_doc[doc] = parts

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


def reusable_prefix(prior_key: Key, prior: ParagraphMaterial, key: Key, surprise: np.ndarray, tolerance: float) -> int:
    """How many leading tokens of a paragraph (`key`, its tokens' `surprise`) read as they did
    when `prior` was computed: the same text and token boundaries, the same two characters after
    them (a word's end depends on them, markup.WORD), and scores within `tolerance`. A word made
    of such tokens has the finding it had then: the model read the same prefix, and the
    paragraph cache trusts the same tolerance for a whole paragraph."""
    if prior_key[1] != key[1] or not len(prior.surprise) or not len(surprise):
        return 0
    chars = _common_prefix(prior_key[0], key[0])
    old_gaps, new_gaps = np.frombuffer(prior_key[3], np.int64), np.frombuffer(key[3], np.int64)
    n = min(len(old_gaps), len(new_gaps))
    differ = np.flatnonzero(old_gaps[:n] != new_gaps[:n])
    same = int(differ[0]) if len(differ) else n
    ends = key[1] + np.cumsum(new_gaps[:same])  # token t's end: the next token's start
    tokens = int(np.searchsorted(ends, chars - 2, "right"))
    n = min(tokens, len(prior.surprise), len(surprise))
    moved = np.flatnonzero(np.abs(prior.surprise[:n] - surprise[:n]) > tolerance)
    return int(moved[0]) if len(moved) else n


def _clipped(ranges: tuple, lo: int, a: int, b: int) -> tuple:
    """Sorted disjoint (start, end) `ranges` from index `lo` on, cut to [a, b), relative to a (a
    docstring's prose runs over several paragraphs; each paragraph keeps its own part)."""
    out = []
    for p, q in ranges[lo:]:
        if p >= b:
            break
        if q > a:
            out.append((max(p, a) - a, min(q, b) - a))
    return tuple(out)


@dataclass(frozen=True)
class ParagraphSpans:
    """The paragraphs of one version of a text and the prose in each, relative to its start:
    what the material (here) and the grammar lints (grammar.py) are keyed and placed by."""

    bounds: list[tuple[int, int]]  # (start, end) of each paragraph
    prose: list[tuple]  # per paragraph: its part of the layout's prose ranges, relative to its start


def paragraph_spans(text: str, lay: markup.Layout, kept: Recent[ParagraphSpans]) -> ParagraphSpans:
    """The paragraphs of `text` with their prose; the last few are `kept` (HintCaches.spans), a
    publish asks twice."""

    def make() -> ParagraphSpans:
        bounds = [(m.start(), m.end()) for m in PARAGRAPH.finditer(text)]
        prose_starts = [a for a, _ in lay.prose]
        prose = [_clipped(lay.prose, max(bisect.bisect_left(prose_starts, a) - 1, 0), a, b) for a, b in bounds]
        return ParagraphSpans(bounds, prose)

    return kept.get((text, lay.prose), make)


@dataclass(frozen=True)
class MaterialCaches:
    """What `document_material` reads and fills, handed in by its caller (HintCaches.material): the
    model's paragraph material, each version's paragraph spans, the writer's words of the last few
    usages and each document's last publish."""

    paragraphs: ParagraphCache
    spans: Recent[ParagraphSpans]
    writers_words: Recent[frozenset[str]]
    last_material: LastMaterial


def document_material(
    text: str,
    starts: np.ndarray,
    surprise: np.ndarray,
    lay: markup.Layout,
    doc: inference.IncrementalDocument,
    detector: typos.Detector,
    continuation=None,
    tolerance: float = 0.0,
    *,
    kept: MaterialCaches,
) -> DocumentMaterial:
    """Every paragraph's material, reused from the cache where it is current, computed where not
    (the missing paragraphs' suspect words in one batched LM-head call). With `tolerance` 0 (what
    `vq-lsp score` uses) a paragraph is reused only when its tokens' surprise is exactly the
    stored one, so the result is a function of the text alone; the server passes
    REUSE_TOLERANCE_NATS. `kept`: what earlier publishes left (HintCaches.material)."""
    cache = kept.paragraphs
    starts = np.asarray(starts, dtype=np.int64)
    n = len(surprise)
    starts = starts[:n]
    spans = paragraph_spans(text, lay, kept.spans)
    paras = spans.bounds
    if not paras or not n:
        none = WordSurprises(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
        return DocumentMaterial(none, [], [], typos.Evidence({}, frozenset(), False))
    bounds = np.asarray(paras, dtype=np.int64)
    first = np.maximum(np.searchsorted(starts, bounds[:, 0], "right") - 1, 0)
    last = np.searchsorted(starts, bounds[:, 1], "left")
    tone_starts = np.asarray([a for a, _, _ in lay.tone], dtype=np.int64)
    tone_lo, tone_hi = np.searchsorted(tone_starts, bounds[:, 0]), np.searchsorted(tone_starts, bounds[:, 1])
    parts: list[tuple[int, int, ParagraphMaterial | None, Key]] = []
    missing = []
    # a paragraph's tokenization as its first token's start and the gaps between starts: bytes
    # sliced from one array, not an array made per paragraph
    gaps = np.diff(starts).tobytes()
    lead = (starts[first] - bounds[:, 0]).tolist()
    exact = surprise.tobytes()
    size = surprise.itemsize
    lay_tone = lay.tone
    for (pa, pb), ta, tb, prose, t0, t1, lead_k in zip(
        paras, first.tolist(), last.tolist(), spans.prose, tone_lo.tolist(), tone_hi.tolist(), lead
    ):
        tones = tuple((a - pa, b - pa, w) for a, b, w in lay_tone[t0:t1]) if t0 < t1 else ()
        key = (text[pa:pb], lead_k, tb - ta, gaps[ta * 8 : max(ta, tb - 1) * 8], prose, tones)
        hit = cache.get(key, exact[ta * size : tb * size], surprise, ta, tb, tolerance)
        parts.append((pa, ta, hit, key))
        if hit is None:
            missing.append(len(parts) - 1)
    cache.reused += len(parts) - len(missing)
    if missing:
        cache.computed += len(missing)
        priors = _priors(kept.last_material.get(doc), parts, missing, cache) if tolerance > 0 else {}
        reading = _Reading(text, starts, surprise, doc, detector, continuation, tolerance)
        _compute(reading, paras, first, last, parts, missing, cache, priors)
    if tolerance > 0:
        kept.last_material.put(doc, {pa: (key, m) for pa, _, m, key in parts})
    cumulative = np.concatenate([[0.0], np.cumsum(surprise)])
    words, word_at, spots, spot_at, tones, uses, code, technical = [], [], [], [], [], Counter(), set(), False
    crowded: set[str] = set()
    for pa, ta, m, _ in parts:
        if len(m.words):
            words.append(m.words)
            word_at.append((pa, ta, len(m.words)))
        if m.findings:
            spots.append(m.finding_index)
            spot_at.append((ta, len(m.findings)))
        if m.tones:
            tones.extend((a + pa, b + pa, i + ta, j + ta, w) for a, b, i, j, _, w in m.tones)
        if m.uses:
            uses.update(m.uses)
            crowded |= m.crowded
        if m.code_words:
            code |= m.code_words
        technical = technical or m.has_code
    # a tone block's scores are read afresh: the class scores follow its tokens' positions and context,
    # which an edit elsewhere may move while the surprise stays the same (all blocks in one read)
    scores = doc.spans_scores([(i, j) for _, _, i, j, _ in tones])
    tones = [tone.ToneBlock(a, b, i, j, sc, w) for (a, b, i, j, w), sc in zip(tones, scores)]
    if words:  # each paragraph's rows moved to its place, all at once
        rows = np.concatenate(words)
        at = np.asarray(word_at, dtype=np.int64)
        rows = rows + np.repeat(at[:, [0, 0, 1, 1]], at[:, 2], axis=0)
    else:
        rows = np.zeros((0, 4), dtype=np.int64)
    usage = jargon.Usage(dict(uses), frozenset(crowded))
    if spots:
        at = np.asarray(spot_at, dtype=np.int64)
        spots = [np.concatenate(spots) + np.repeat(at[:, 0], at[:, 1])[:, None]]
    found = _placed(parts, spots, cumulative)
    return DocumentMaterial(
        WordSurprises(rows[:, 0], rows[:, 1], cumulative[rows[:, 3]] - cumulative[rows[:, 2]]),
        found,
        tones,
        typos.Evidence(
            dict(uses),
            frozenset(code),
            technical,
            jargon.writers_words(usage, kept.writers_words),
            _confusables(parts, found, technical),
            uncased=_CAPITAL.search(text) is None,
        ),
        usage,
    )


_CAPITAL = re.compile(r"[A-Z]")


def _confusables(parts, found: list[typos.WordFinding], technical: bool) -> dict[str, int]:
    """How often the document uses the words the technical-text rule asks about (a real-word
    finding of a technical pair that its gain lets through, and its partner): only those are counted, so a publish
    sums a few counts, not every paragraph's (typos.Evidence._real_word_excuse)."""
    if not technical:
        return {}
    asked = set()
    for f in found:
        if (
            f.kind == "real-word"
            and f.fixes
            and typos.technical_pair(f.word, f.fixes[0][0])
            and f.gain >= typos.technical_gain(f.word, f.fixes[0][0])
        ):
            asked |= {f.word, f.fixes[0][0].lower()}
    return {w: sum(m.confusables.get(w, 0) for _, _, m, _ in parts) for w in asked}


def _priors(
    last: dict[int, tuple[Key, ParagraphMaterial]], parts, missing, cache: ParagraphCache
) -> dict[int, tuple[Key, ParagraphMaterial]]:
    """For each missing paragraph (index into `parts`), an earlier material of it whose leading
    words may still hold: its own key's latest entry (same text, scores moved), else the paragraph
    the document's last publish (`last`) had at the same offset (an edit inside it)."""
    out = {}
    for k in missing:
        pa, _, _, key = parts[k]
        latest = cache.latest(key)
        if latest is not None:
            out[k] = (key, latest)
        elif pa in last:
            out[k] = last[pa]
    return out


def _placed(parts, spots: list[np.ndarray], cumulative: np.ndarray) -> list[typos.WordFinding]:
    """The paragraphs' findings at their place now, their surprise (and so gain) read from the
    current scores (all at once: a document holds hundreds of suspect words)."""
    if not spots:
        return []
    index = np.concatenate(spots)
    now = (cumulative[index[:, 1]] - cumulative[index[:, 0]]).tolist()
    out, k = [], 0
    finding = typos.WordFinding
    for pa, _, m, _ in parts:
        for f in m.findings:
            s, k = now[k], k + 1
            gain = f.gain - f.surprise + s
            out.append(finding(f.start + pa, f.end + pa, f.word, s, f.kind, gain, f.fixes, f.excused))
    return out


@dataclass(frozen=True)
class _Reading:
    """One version of a text as its missing paragraphs' material is computed from it."""

    text: str
    starts: np.ndarray  # each token's first char
    surprise: np.ndarray  # each token's surprise
    doc: inference.IncrementalDocument
    detector: typos.Detector
    continuation: Callable | None  # material.continuation: scores of candidates' further pieces
    tolerance: float  # see document_material


def _compute(r: _Reading, paras, first, last, parts, missing, cache, priors) -> None:
    """Material of the paragraphs `missing` (indices into `parts`), filled in and cached. Where
    `priors` has an earlier material of a paragraph, the words of its unchanged start keep their
    findings and only the rest are examined (typing at the end of a paragraph examines the word
    typed, not the whole paragraph again); a confusable, read with the words after it, keeps its
    finding only when those are unchanged too."""
    text, starts, surprise, doc, tolerance = r.text, r.starts, r.surprise, r.doc, r.tolerance
    per_para = []
    all_spans = []
    found = []
    for k in missing:
        pa, pb = paras[k]
        ta, tb = int(first[k]), int(last[k])
        _, _, _, key = parts[k]
        prose = [(a + pa, b + pa) for a, b in key[4]]
        spans = typos.word_tokens(
            text,
            starts,
            len(surprise),
            [(m.start(), m.end()) for a, b in prose for m in markup.WORD.finditer(text, a, b)],
        )
        per_para.append((k, pa, pb, ta, tb, prose, spans))
        fresh = spans
        if k in priors:
            prior_key, prior = priors[k]
            tokens = reusable_prefix(prior_key, prior, key, surprise[ta:tb], tolerance)
            if tokens:
                known = set(map(tuple, prior.words[prior.words[:, 3] <= tokens].tolist()))
                same = [
                    (a - pa, b - pa, i - ta, j - ta) in known
                    and (j - ta + typos.WORDS_AFTER_TOKENS <= tokens or not typos.reads_on(text[a:b]))
                    for a, b, i, j in spans
                ]
                fresh = [s for s, kept in zip(spans, same) if not kept]
                cache.words_kept += len(spans) - len(fresh)
                kept = {(a - pa, b - pa) for (a, b, _, _), k in zip(spans, same) if k}
                found += [
                    replace(f, start=f.start + pa, end=f.end + pa) for f in prior.findings if (f.start, f.end) in kept
                ]
        all_spans.extend(fresh)
    found += r.detector.examine(
        text, starts, surprise, all_spans, doc.next_token_logprobs, resolved=True, continuation=r.continuation
    )
    found.sort(key=lambda f: f.start)
    para_starts = [pa for _, pa, *_ in per_para]
    by_para: list[list[typos.WordFinding]] = [[] for _ in per_para]
    for f in found:
        by_para[bisect.bisect_right(para_starts, f.start) - 1].append(f)
    for (k, pa, pb, ta, tb, prose, spans), fs in zip(per_para, by_para):
        words = np.asarray([(a - pa, b - pa, i - ta, j - ta) for a, b, i, j in spans], dtype=np.int64).reshape(-1, 4)
        token_of = {a: (i - ta, j - ta) for a, b, i, j in spans}
        spelled = [text[a:b] for a, b, *_ in spans]
        uses = Counter(w.lower() for w in spelled if not typos.is_word(w))
        lowered = [w.lower() for w in spelled]
        crowded = jargon.crowded_by(fs, lowered) if uses else set()
        confusables = Counter(w for w in spelled if typos.reads_on(w))
        code, cur = set(), pa
        for a, b in prose + [(pb, pb)]:
            if a > cur:
                code.update(w.lower() for w in _CODE_WORD.findall(text, cur, a))
            cur = max(cur, b)
        has_code = bool(code)
        code = {w for w in code if not typos.is_word(w)}
        tones = []
        for a, b, w in parts[k][3][5]:
            ba, bb = int(np.searchsorted(starts, a + pa, "left")), int(np.searchsorted(starts, b + pa, "left"))
            if ba < bb:
                tones.append((a, b, ba - ta, bb - ta, doc.span_scores(ba, bb), w))
        value = ParagraphMaterial(
            surprise[ta:tb].copy(),
            words,
            tuple(replace(f, start=f.start - pa, end=f.end - pa) for f in fs),
            tuple(token_of[f.start] for f in fs),
            uses,
            frozenset(code),
            has_code,
            tuple(tones),
            np.asarray([token_of[f.start] for f in fs], dtype=np.int64).reshape(-1, 2),
            crowded=frozenset(crowded),
            confusables=confusables,
        )
        cache.put(parts[k][3], value)
        parts[k] = (pa, ta, value, parts[k][3])
