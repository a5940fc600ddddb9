"""The hints' kept results as the memory budget counts them (HintCaches.bytes): a paragraph's
material counts once however many documents keep it, a result that never changes is walked once
and then looked up, and a freed one is forgotten."""

from __future__ import annotations

import gc
from collections import Counter

import numpy as np

from vq_lsp.hints import caches
from vq_lsp.hints.caches import HintCaches, SizeWalk
from vq_lsp.hints.paragraph_cache import ParagraphKey, ParagraphMaterial

MIB = 2**20


class Engine:
    """Stands for a document's engine state: LastMaterial keys its entries weakly by it."""


def material(seed: int) -> ParagraphMaterial:
    """A paragraph's material holding 2 MiB: 1 MiB of scores and the same as bytes."""
    surprise = np.random.default_rng(seed).random(MIB // 8)
    none = np.zeros((0, 2), dtype=np.int64)
    return ParagraphMaterial(surprise, np.zeros((0, 4), np.int64), (), (), Counter(), frozenset(), False, (), none)


def key(text: str) -> ParagraphKey:
    return ParagraphKey(text, 0, 3, b"", ((0, len(text)),), ())


def test_a_paragraph_kept_by_two_documents_counts_once():
    kept, empty = HintCaches(), HintCaches().bytes()
    shared, own = material(1), material(2)
    a, b = Engine(), Engine()
    kept.last_material.put(a, {0: (key("Same words."), shared), 20: (key("Only here."), own)})
    kept.last_material.put(b, {0: (key("Same words."), shared)})
    first = kept.bytes()
    assert 4 * MIB <= first - empty < 4.1 * MIB  # counted twice, `shared` would make it 6
    assert kept.bytes() == first  # sizes looked up, not walked, give the same count


def test_an_unchanging_result_is_walked_once(monkeypatch):
    kept, doc = HintCaches(), Engine()
    kept.last_material.put(doc, {k * 20: (key(f"Paragraph {k}."), material(k)) for k in range(3)})
    first = kept.bytes()
    walked = []
    original = SizeWalk.fields
    monkeypatch.setattr(SizeWalk, "fields", lambda walk, obj: walked.append(type(obj)) or original(walk, obj))
    assert kept.bytes() == first
    assert ParagraphMaterial not in walked and caches.KeptParagraphs not in walked
    kept.last_material.put(doc, {0: (key("Paragraph 0."), material(7))})  # the next publish's paragraphs
    assert kept.bytes() < first - 3.9 * MIB and walked.count(ParagraphMaterial) == 1


def test_a_freed_result_is_forgotten():
    kept, doc = HintCaches(), Engine()
    kept.last_material.put(doc, {0: (key("Gone soon."), material(3))})
    kept.bytes()
    assert len(kept._sizes) == 2  # the document's paragraphs and their one material
    del doc
    gc.collect()
    assert kept.bytes() < MIB and len(kept._sizes) == 0
