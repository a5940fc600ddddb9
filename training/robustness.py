"""How a model's sentiment holds up across writing styles and unrelated text before a paragraph.

Why here, from training data only: a user's notes are lowercased, tokenized, one sentence long,
or sit below a table or a code block, and the model must not change its mind for those reasons.
Both reports score held-out IMDB *training* reviews (the rows ``finetune --holdout`` kept apart,
never trained on), so they can guide training choices without touching the test split or
``eval/``.

* ``style_report``: accuracy, F1 and positive rate on the same reviews as written, lowercased,
  re-spaced (spaces around punctuation, split contractions as in Pang & Lee's corpora), both,
  their first sentence alone and cut off after 12-80 words; a balanced set should stay near 50%
  positive in every variant.
* ``context_report``: a review's opening paragraph scored alone and after a Markdown table, a
  code block or a paragraph of opposite tone; only the paragraph's own tokens are scored (what
  the editor's paragraph hint shows), and the flip rate counts changed labels.
"""

from __future__ import annotations

import random
import zlib

import torch

from .augment import (
    code_block,
    first_sentence,
    lowercase,
    markdown_table,
    respace,
    sentences,
    truncate,
)
from .reviews import (
    accuracy_of,
    document_scores,
    encode_reviews,
    encode_with_context,
    predict,
)

STYLES = {
    "original": lambda t: t,
    "lowercase": lowercase,
    "respaced": respace,
    "lower_respaced": lambda t: lowercase(respace(t)),
    "first_sentence": first_sentence,
    "truncated": lambda t: truncate(t, random.Random(zlib.crc32(t.encode()))),  # 12-80 words, seeded by the text
}
CONTEXTS = ("alone", "after_table", "after_code", "after_opposite_paragraph")


def style_report(
    net, tok, rows: list[tuple[str, int]], max_tokens: int, positions_for, scores: dict[str, torch.Tensor] | None = None
) -> dict:
    """Per style: accuracy, F1, positive rate, n; and each style's accuracy gap to the original.
    ``scores``: each style's document probabilities (N, C) where the caller has them already."""
    scores = scores or style_scores(net, tok, rows, max_tokens, positions_for)
    gold = torch.tensor([y for _, y in rows])
    report = {name: accuracy_of(scores[name].argmax(-1), gold) for name in STYLES}
    base = report["original"]["accuracy"]
    report["accuracy_gap_to_original"] = {k: v["accuracy"] - base for k, v in report.items() if k != "original"}
    report["gold_positive_rate"] = sum(y for _, y in rows) / max(1, len(rows))
    report["reviews"] = f"{len(rows)} held-out imdb_train reviews (finetune --holdout rows)"
    return report


def style_scores(net, tok, rows: list[tuple[str, int]], max_tokens: int, positions_for) -> dict[str, torch.Tensor]:
    """Document probabilities (N, C) of ``rows`` written in every style of ``STYLES``."""
    return {
        name: document_scores(net, encode_reviews(tok, [(f(t), y) for t, y in rows], max_tokens), positions_for)
        for name, f in STYLES.items()
    }


def opening_paragraph(text: str, min_words: int = 40) -> str:
    """The review's first sentences, up to at least ``min_words`` words: a paragraph a user might write."""
    out, words = [], 0
    for s in sentences(text):
        out.append(s)
        words += len(s.split())
        if words >= min_words:
            break
    return " ".join(out) or text


def context_examples(rows: list[tuple[str, int]], seed: int) -> dict[str, list[tuple[str, str, int]]]:
    """(context, paragraph, label) per context kind; the same paragraphs in every kind."""
    rng = random.Random(seed)
    paragraphs = [(opening_paragraph(t), y) for t, y in rows]
    by_label = {c: [p for p, y in paragraphs if y == c] for c in (0, 1)}
    out: dict[str, list[tuple[str, str, int]]] = {k: [] for k in CONTEXTS}
    for p, y in paragraphs:
        out["alone"].append(("", p, y))
        out["after_table"].append((markdown_table(rng) + "\n\n", p, y))
        out["after_code"].append((code_block(rng) + "\n\n", p, y))
        others = by_label[1 - y] or [p]
        out["after_opposite_paragraph"].append((rng.choice(others) + "\n\n", p, y))
    return out


def context_report(net, tok, rows: list[tuple[str, int]], max_tokens: int, positions_for, seed: int) -> dict:
    """Per context kind: accuracy, positive rate and the share of paragraphs whose label differs
    from the one they get alone."""
    report: dict = {}
    alone = None
    for kind, items in context_examples(rows, seed).items():
        examples = encode_with_context(tok, items, max_tokens)
        pred = predict(net, examples, positions_for)
        gold = [y for _, _, y in items]
        entry = {
            "accuracy": sum(int(p) == y for p, y in zip(pred.tolist(), gold)) / max(1, len(gold)),
            "positive_rate": float(pred.float().mean()),
            "n": len(gold),
        }
        if alone is None:
            alone = pred
        else:
            entry["flip_rate_vs_alone"] = float((pred != alone).float().mean())
        report[kind] = entry
    report["paragraphs"] = f"{len(rows)} opening paragraphs (>= 40 words) of held-out imdb_train reviews"
    return report


def paragraph_scores_after(model, context: str, paragraph: str) -> dict[str, float]:
    """The engine's score of ``paragraph`` (its own tokens, as the editor's paragraph hint) in a
    document where it follows ``context`` and a blank line; ``context`` "" scores it alone."""
    from inference import IncrementalDocument

    text = f"{context}\n\n{paragraph}" if context else paragraph
    ids, offsets = model.tokenizer.encode_with_offsets(text)
    start = len(text) - len(paragraph)
    first = next(i for i, (a, _) in enumerate(offsets) if a >= start)
    return IncrementalDocument(model, ids).span_scores(first, len(ids))
