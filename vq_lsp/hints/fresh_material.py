"""The material of the paragraphs a publish found no current cache entry for (reuse.py): their
words examined by the typo detector (all of them in one batched call), counted and placed
relative to the paragraph, and put in the cache.

A paragraph with an earlier material (`priors`) is examined from its first changed word on:
the words of its unchanged start keep their findings (typing at the end of a paragraph examines
the word typed, not the whole paragraph again); a confusable, read with the words after it,
keeps its finding only when those are unchanged too."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

import inference

from . import jargon, markup, typos
from .paragraph_cache import ParagraphCache, ParagraphKey, ParagraphMaterial, reusable_prefix

_CODE_WORD = re.compile(r"[A-Za-z]+")


@dataclass
class Part:
    """One paragraph of a text as reuse.document_material goes through it: where it lies in
    characters and tokens, its key, and its material once found in the cache or computed."""

    start: int
    end: int
    token_start: int
    token_end: int
    key: ParagraphKey
    material: ParagraphMaterial | None


@dataclass(frozen=True)
class Reading:
    """One version of a text as its missing paragraphs' material is computed from it."""

    text: str
    starts: np.ndarray  # each token's first char
    surprise: np.ndarray  # each token's surprise
    doc: inference.IncrementalDocument
    detector: typos.Detector
    continuation: Callable | None  # material.continuation: scores of candidates' further pieces
    tolerance: float  # see reuse.document_material


@dataclass(frozen=True)
class _Examined:
    """A missing paragraph's prose words, those the detector is to examine and the findings kept
    from its prior material (absolute offsets)."""

    prose: list[tuple[int, int]]
    spans: list  # (start, end, first token, end token) of every prose word
    fresh: list  # of `spans`, those examined afresh
    kept: list[typos.WordFinding]


def compute(
    r: Reading,
    parts: list[Part],
    missing: list[int],
    cache: ParagraphCache,
    priors: dict[int, tuple[ParagraphKey, ParagraphMaterial]],
) -> None:
    """Material of the paragraphs `missing` (indices into `parts`), filled in and cached; where
    `priors` has an earlier material of a paragraph, only the words after its unchanged start
    are examined."""
    examined = [_examined(r, parts[k], priors.get(k), cache) for k in missing]
    found = [f for e in examined for f in e.kept]
    found += r.detector.examine(
        r.text,
        r.starts,
        r.surprise,
        [s for e in examined for s in e.fresh],
        r.doc.next_token_logprobs,
        resolved=True,
        continuation=r.continuation,
    )
    found.sort(key=lambda f: f.start)
    para_starts = [parts[k].start for k in missing]
    by_para: list[list[typos.WordFinding]] = [[] for _ in missing]
    for f in found:
        by_para[bisect.bisect_right(para_starts, f.start) - 1].append(f)
    for k, e, fs in zip(missing, examined, by_para):
        part = parts[k]
        part.material = _material(r, part, e, fs)
        cache.put(part.key, part.material)


def _examined(
    r: Reading, part: Part, prior: tuple[ParagraphKey, ParagraphMaterial] | None, cache: ParagraphCache
) -> _Examined:
    """A paragraph's prose words, and which of them keep the finding they had in `prior`."""
    text, pa, ta = r.text, part.start, part.token_start
    prose = [(a + pa, b + pa) for a, b in part.key.prose]
    words = [(m.start(), m.end()) for a, b in prose for m in markup.WORD.finditer(text, a, b)]
    spans = typos.word_tokens(text, r.starts, len(r.surprise), words)
    if prior is None:
        return _Examined(prose, spans, spans, [])
    prior_key, before = prior
    tokens = reusable_prefix(prior_key, before, part.key, r.surprise[ta : part.token_end], r.tolerance)
    if not tokens:
        return _Examined(prose, spans, spans, [])
    known = set(map(tuple, before.words[before.words[:, 3] <= tokens].tolist()))
    same = [
        (a - pa, b - pa, i - ta, j - ta) in known
        and (j - ta + typos.WORDS_AFTER_TOKENS <= tokens or not typos.reads_on(text[a:b]))
        for a, b, i, j in spans
    ]
    fresh = [s for s, kept in zip(spans, same) if not kept]
    cache.words_kept += len(spans) - len(fresh)
    kept = {(a - pa, b - pa) for (a, b, _, _), k in zip(spans, same) if k}
    findings = [replace(f, start=f.start + pa, end=f.end + pa) for f in before.findings if (f.start, f.end) in kept]
    return _Examined(prose, spans, fresh, findings)


def _material(r: Reading, part: Part, e: _Examined, fs: list[typos.WordFinding]) -> ParagraphMaterial:
    """A paragraph's material from its words and findings `fs`, relative to its start."""
    text, pa, ta, spans = r.text, part.start, part.token_start, e.spans
    words = np.asarray([(a - pa, b - pa, i - ta, j - ta) for a, b, i, j in spans], dtype=np.int64).reshape(-1, 4)
    token_of = {a: (i - ta, j - ta) for a, b, i, j in spans}
    spelled = [text[a:b] for a, b, *_ in spans]
    uses = Counter(w.lower() for w in spelled if not typos.is_word(w))
    crowded = jargon.crowded_by(fs, [w.lower() for w in spelled]) if uses else set()
    code = _words_outside(text, e.prose, pa, part.end)
    return ParagraphMaterial(
        r.surprise[ta : part.token_end].copy(),
        words,
        tuple(replace(f, start=f.start - pa, end=f.end - pa) for f in fs),
        tuple(token_of[f.start] for f in fs),
        uses,
        frozenset(w for w in code if not typos.is_word(w)),
        bool(code),
        _tone_rows(r, part),
        np.asarray([token_of[f.start] for f in fs], dtype=np.int64).reshape(-1, 2),
        crowded=frozenset(crowded),
        confusables=Counter(w for w in spelled if typos.reads_on(w)),
    )


def _words_outside(text: str, prose: list[tuple[int, int]], pa: int, pb: int) -> set[str]:
    """The lower-cased words of text[pa:pb] outside its `prose` ranges (code, URLs, tables)."""
    code, cur = set(), pa
    for a, b in prose + [(pb, pb)]:
        if a > cur:
            code.update(w.lower() for w in _CODE_WORD.findall(text, cur, a))
        cur = max(cur, b)
    return code


def _tone_rows(r: Reading, part: Part) -> tuple:
    """(start, end, token start, token end, scores, words) of the paragraph's tone blocks that
    cover a token, relative to its start."""
    pa, ta, rows = part.start, part.token_start, []
    for a, b, w in part.key.tones:
        ba, bb = int(np.searchsorted(r.starts, a + pa, "left")), int(np.searchsorted(r.starts, b + pa, "left"))
        if ba < bb:
            rows.append((a, b, ba - ta, bb - ta, r.doc.span_scores(ba, bb), w))
    return tuple(rows)
