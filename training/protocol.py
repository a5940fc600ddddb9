"""The paper's protocol in a small configuration, for the model card: the engine's wall clock
against a paragraph cache on real revisions.

Why in the card: re-running only the changed paragraphs is what prose linters do, so this ratio
says whether incremental computation earns its keep with this model on a CPU; it moves with the
flip rate of the model's codes, which ``evaluate``'s single-token edits report next to it.

The full protocol is ``benchmarks/paper_table.py`` (PEP revisions under eval/, hundreds of pairs,
dense and prefix-KV baselines too). Here: consecutive commit pairs of the revision histories in
``$VQ_LSP_DATA/revisions`` (the Rust book's chapters and a long README), both versions 1,536-2,048
tokens with BOS (the paper's range: one window), drawn seeded. The trunk never read revisions/
(distillation reads Gutenberg and IMDB text) and post-vq fine-tuning, which saw paragraphs of
their newest versions, changes no code. Two scenarios as in the paper table: the entire revision
applied to the old version's state, and one single-token edit at a random changed place (the
changes before it applied first). Baseline: a float32 dense pass over each paragraph touching the
change, each paragraph alone. The engine runs in float32 on the CPU with the stage's threads.
Reported per scenario: medians over pairs of (paragraph cache / engine), wall clock and MACs.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .data import read_jsonl_gz

HISTORIES = ("rust_book_chapters.jsonl.gz", "art_of_command_line_README_en.jsonl.gz")
LENGTHS = (1536, 2048)  # tokens with BOS, both versions of a pair


@dataclass(frozen=True)
class EditCost:
    """One measured edit: the engine's cost and the paragraph cache's."""

    engine_s: float
    engine_macs: int
    paragraph_s: float
    paragraph_macs: int


def revision_pairs(
    data_dir: Path, encode, n: int, seed: int, lengths: tuple[int, int] = LENGTHS
) -> tuple[list[tuple[list[int], list[int]]], int]:
    """``n`` seeded consecutive (old, new) token pairs of the revision histories whose versions both
    have ``lengths`` tokens with BOS, and how many there were to draw from. ``encode`` maps a list of
    texts to a list of id lists."""
    lo, hi = lengths
    pairs = []
    for name in HISTORIES:
        for row in read_jsonl_gz(Path(data_dir) / "revisions" / name):
            ids = encode([r["text"] for r in row["revisions"]])
            pairs += [
                (a, b) for a, b in zip(ids, ids[1:]) if a != b and lo <= len(a) + 1 <= hi and lo <= len(b) + 1 <= hi
            ]
    return random.Random(seed).sample(pairs, min(n, len(pairs))), len(pairs)


def paragraph_runs(model, ids: list[int]) -> list[tuple[int, int]]:
    """Token paragraphs: maximal runs ending where a blank line ends (as the paper table cuts them)."""
    from inference.tokenizer import paragraph_breaks

    runs, start = [], 0
    for i in np.nonzero(paragraph_breaks(ids, model.paragraph_ids, model.newline_end_ids))[0].tolist():
        runs.append((start, i + 1))
        start = i + 1
    if start < len(ids):
        runs.append((start, len(ids)))
    return runs


def touching(model, ids: list[int], lo: int, hi: int) -> list[tuple[int, int]]:
    """The paragraphs a change of tokens [lo, hi) touches (a deletion touches the one it sits in)."""
    runs = paragraph_runs(model, ids)
    return [(a, b) for a, b in runs if a < max(hi, lo + 1) and b > lo] or [runs[-1]]


@torch.no_grad()
def dense_seconds(model, ids: list[int]) -> float:
    """Wall clock of one dense pass over BOS + ``ids`` (both heads), what a paragraph cache re-runs."""
    from inference.positions import spread_positions

    x = torch.tensor([[model.config.bos_token_id, *ids]])
    pos = spread_positions(x.shape[1], model.config.position_pool).unsqueeze(0)
    t0 = time.perf_counter()
    out = model.net(x, pos)
    model.net.lm_logits(out.hidden)
    return time.perf_counter() - t0


def paragraph_cost(model, ids: list[int], paragraphs: list[tuple[int, int]], engine_s: float, engine_macs: int):
    from inference import dense_macs

    return EditCost(
        engine_s,
        engine_macs,
        sum(dense_seconds(model, ids[a:b]) for a, b in paragraphs),
        sum(dense_macs(model.config, b - a + 1) for a, b in paragraphs),
    )


def entire_revision(model, old: list[int], new: list[int]) -> EditCost:
    from inference import IncrementalDocument, diff

    doc = IncrementalDocument(model, old)
    splices = diff(old, new)
    res = doc.apply(splices)
    regions, shift = [], 0  # changed regions in the new version's coordinates
    for sp in splices:
        regions.append((sp.start + shift, sp.start + shift + len(sp.new_ids)))
        shift += len(sp.new_ids) - (sp.end - sp.start)
    paragraphs = sorted({p for lo, hi in regions for p in touching(model, new, lo, hi)})
    return paragraph_cost(model, new, paragraphs, res.cost.seconds, res.cost.incremental_macs)


def one_token_edit(model, old: list[int], new: list[int], rng: random.Random) -> EditCost:
    """The paper table's atomic edit: changes before a random changed place, then one token there."""
    from inference import IncrementalDocument, Splice, apply_splices, diff

    doc = IncrementalDocument(model, old)
    splices = diff(old, new)
    k = rng.randrange(len(splices))
    before = apply_splices(old, splices[:k])
    sp = splices[k]
    at = sp.start + len(before) - len(old)
    edit = Splice(at, at + (sp.end > sp.start), sp.new_ids[:1]) if sp.new_ids else Splice(at, at + 1, [])
    if len(before) == 1 and not edit.new_ids:
        edit = Splice(0, 1, [new[0]])
    if k:
        doc.apply(splices[:k])
    res = doc.apply([edit])
    ids = doc.token_ids
    lo = min(edit.start, len(ids) - 1)
    paragraphs = touching(model, ids, lo, lo + len(edit.new_ids))
    return paragraph_cost(model, ids, paragraphs, res.cost.seconds, res.cost.incremental_macs)


def protocol_report(
    net, tok_path: Path, data_dir: Path, pairs: int, seed: int, lengths: tuple[int, int] = LENGTHS
) -> dict:
    """Medians over ``pairs`` revision pairs of (paragraph cache / engine), per scenario."""
    from inference import LoadedModel, Tokenizer

    model = LoadedModel.from_net(net, Tokenizer.from_file(tok_path), device="cpu", dtype=torch.float32)
    try:
        encode = model.tokenizer.encode
        chosen, available = revision_pairs(data_dir, lambda texts: [encode(t) for t in texts], pairs, seed, lengths)
        if not chosen:
            raise SystemExit(f"no revision pairs of {lengths[0]}-{lengths[1]} tokens under {data_dir}/revisions")
        dense_seconds(model, chosen[0][1])  # warm-up: the first pass of a process pays for allocations
        rng = random.Random(seed)
        costs: dict[str, list[EditCost]] = {"one-token edit": [], "entire revision": []}
        for old, new in chosen:
            costs["entire revision"].append(entire_revision(model, old, new))
            costs["one-token edit"].append(one_token_edit(model, old, new, rng))
    finally:
        net.float()  # LoadedModel may have cast the shared net
    report = {
        scenario: {
            "paragraph_cache_over_engine_seconds_median": statistics.median(c.paragraph_s / c.engine_s for c in cs),
            "paragraph_cache_over_engine_macs_median": statistics.median(
                c.paragraph_macs / max(1, c.engine_macs) for c in cs
            ),
            "engine_seconds_median": statistics.median(c.engine_s for c in cs),
        }
        for scenario, cs in costs.items()
    }
    report["data"] = (
        f"{len(chosen)} of {available} consecutive revision pairs of {lengths[0]}-{lengths[1]} tokens "
        f"(revisions/: {', '.join(HISTORIES)}), seed {seed}; float32, {torch.get_num_threads()} thread(s)"
    )
    return report
