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

The cache and its keys are in paragraph_cache.py, the paragraphs' bounds in paragraph_spans.py,
the material of paragraphs not in the cache in fresh_material.py; this module puts a version's
material together from them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import inference

from . import jargon, markup, tone, typos
from .fresh_material import Part, Reading, compute
from .paragraph_cache import (  # noqa: F401 (importable from here, as before)
    LastMaterial,
    ParagraphCache,
    ParagraphKey,
    ParagraphMaterial,
    reusable_prefix,
)
from .paragraph_spans import PARAGRAPH, ParagraphSpans, paragraph_spans  # noqa: F401 (as above)
from .recent import Recent

REUSE_TOLERANCE_NATS = 0.25
_CAPITAL = re.compile(r"[A-Z]")


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
    starts = np.asarray(starts, dtype=np.int64)[: len(surprise)]
    spans = paragraph_spans(text, lay, kept.spans)
    if not spans.bounds or not len(surprise):
        none = WordSurprises(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
        return DocumentMaterial(none, [], [], typos.Evidence({}, frozenset(), False))
    parts = _looked_up(text, starts, surprise, lay, spans, cache, tolerance)
    missing = [k for k, part in enumerate(parts) if part.material is None]
    cache.reused += len(parts) - len(missing)
    if missing:
        cache.computed += len(missing)
        priors = _priors(kept.last_material.get(doc), parts, missing, cache) if tolerance > 0 else {}
        compute(Reading(text, starts, surprise, doc, detector, continuation, tolerance), parts, missing, cache, priors)
    if tolerance > 0:
        kept.last_material.put(doc, {p.start: (p.key, p.material) for p in parts})
    return _assembled(text, surprise, doc, parts, kept.writers_words)


def _looked_up(
    text: str,
    starts: np.ndarray,
    surprise: np.ndarray,
    lay: markup.Layout,
    spans: ParagraphSpans,
    cache: ParagraphCache,
    tolerance: float,
) -> list[Part]:
    """Each paragraph keyed and placed, with its cache entry where one is current."""
    bounds = np.asarray(spans.bounds, dtype=np.int64)
    first = np.maximum(np.searchsorted(starts, bounds[:, 0], "right") - 1, 0)
    last = np.searchsorted(starts, bounds[:, 1], "left")
    tone_starts = np.asarray([a for a, _, _ in lay.tone], dtype=np.int64)
    tone_lo, tone_hi = np.searchsorted(tone_starts, bounds[:, 0]), np.searchsorted(tone_starts, bounds[:, 1])
    # a paragraph's tokenization as its first token's start and the gaps between starts: bytes
    # sliced from one array, not an array made per paragraph
    gaps = np.diff(starts).tobytes()
    lead = (starts[first] - bounds[:, 0]).tolist()
    exact = surprise.tobytes()
    size = surprise.itemsize
    lay_tone = lay.tone
    parts = []
    for (pa, pb), ta, tb, prose, t0, t1, lead_k in zip(
        spans.bounds, first.tolist(), last.tolist(), spans.prose, tone_lo.tolist(), tone_hi.tolist(), lead
    ):
        tones = tuple((a - pa, b - pa, w) for a, b, w in lay_tone[t0:t1]) if t0 < t1 else ()
        key = ParagraphKey(text[pa:pb], lead_k, tb - ta, gaps[ta * 8 : max(ta, tb - 1) * 8], prose, tones)
        hit = cache.get(key, exact[ta * size : tb * size], surprise, ta, tb, tolerance)
        parts.append(Part(pa, pb, ta, tb, key, hit))
    return parts


def _assembled(
    text: str,
    surprise: np.ndarray,
    doc: inference.IncrementalDocument,
    parts: list[Part],
    writers_words: Recent[frozenset[str]],
) -> DocumentMaterial:
    """The paragraphs' material put together at their place in the text."""
    cumulative = np.concatenate([[0.0], np.cumsum(surprise)])
    uses, crowded, code, technical = Counter(), set(), set(), False
    for p in parts:
        m = p.material
        if m.uses:
            uses.update(m.uses)
            crowded |= m.crowded
        if m.code_words:
            code |= m.code_words
        technical = technical or m.has_code
    rows = _word_rows(parts)
    usage = jargon.Usage(dict(uses), frozenset(crowded))
    found = _placed(parts, cumulative)
    return DocumentMaterial(
        WordSurprises(rows[:, 0], rows[:, 1], cumulative[rows[:, 3]] - cumulative[rows[:, 2]]),
        found,
        _tone_blocks(parts, doc),
        typos.Evidence(
            dict(uses),
            frozenset(code),
            technical,
            jargon.writers_words(usage, writers_words),
            _confusables(parts, found, technical),
            uncased=_CAPITAL.search(text) is None,
        ),
        usage,
    )


def _word_rows(parts: list[Part]) -> np.ndarray:
    """(start, end, first token, end token) of every prose word, each paragraph's rows moved to
    its place all at once."""
    with_words = [p for p in parts if len(p.material.words)]
    if not with_words:
        return np.zeros((0, 4), dtype=np.int64)
    rows = np.concatenate([p.material.words for p in with_words])
    at = np.asarray([(p.start, p.token_start, len(p.material.words)) for p in with_words], dtype=np.int64)
    return rows + np.repeat(at[:, [0, 0, 1, 1]], at[:, 2], axis=0)


def _tone_blocks(parts: list[Part], doc: inference.IncrementalDocument) -> list[tone.ToneBlock]:
    """The tone blocks at their place. Their scores are read afresh: the class scores follow the
    block's tokens' positions and context, which an edit elsewhere may move while the surprise
    stays the same (all blocks in one read)."""
    blocks = [
        (a + p.start, b + p.start, i + p.token_start, j + p.token_start, w)
        for p in parts
        for a, b, i, j, _, w in p.material.tones
    ]
    scores = doc.spans_scores([(i, j) for _, _, i, j, _ in blocks])
    return [tone.ToneBlock(a, b, i, j, sc, w) for (a, b, i, j, w), sc in zip(blocks, scores)]


def _confusables(parts: list[Part], found: list[typos.WordFinding], technical: bool) -> dict[str, int]:
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
    return {w: sum(p.material.confusables.get(w, 0) for p in parts) for w in asked}


def _priors(
    last: dict[int, tuple[ParagraphKey, ParagraphMaterial]],
    parts: list[Part],
    missing: list[int],
    cache: ParagraphCache,
) -> dict[int, tuple[ParagraphKey, ParagraphMaterial]]:
    """For each missing paragraph (index into `parts`), an earlier material of it whose leading
    words may still hold: its own key's latest entry (same text, scores moved), else the paragraph
    the document's last publish (`last`) had at the same offset (an edit inside it)."""
    out = {}
    for k in missing:
        part = parts[k]
        latest = cache.latest(part.key)
        if latest is not None:
            out[k] = (part.key, latest)
        elif part.start in last:
            out[k] = last[part.start]
    return out


def _placed(parts: list[Part], cumulative: np.ndarray) -> list[typos.WordFinding]:
    """The paragraphs' findings at their place now, their surprise (and so gain) read from the
    current scores (all at once: a document holds hundreds of suspect words)."""
    with_findings = [p for p in parts if p.material.findings]
    if not with_findings:
        return []
    at = np.asarray([(p.token_start, len(p.material.findings)) for p in with_findings], dtype=np.int64)
    index = np.concatenate([p.material.finding_index for p in with_findings]) + np.repeat(at[:, 0], at[:, 1])[:, None]
    now = (cumulative[index[:, 1]] - cumulative[index[:, 0]]).tolist()
    out, k = [], 0
    finding = typos.WordFinding
    for p in with_findings:
        pa = p.start
        for f in p.material.findings:
            s, k = now[k], k + 1
            gain = f.gain - f.surprise + s
            out.append(finding(f.start + pa, f.end + pa, f.word, s, f.kind, gain, f.fixes, f.excused))
    return out
