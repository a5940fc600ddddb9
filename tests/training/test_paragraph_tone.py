"""A paragraph's tone is about the paragraph: unrelated text before it (a table, a code block, a
paragraph of the opposite tone) must not flip its label. Checked on the bundled model through the
engine's own paragraph score (``span_scores`` over the paragraph's tokens).

A model fine-tuned without context-prefixed reviews may call the positive paragraphs below
negative even on their own, so for such a model the check is an expected failure (strict: if it
starts passing, the marker must go); a model whose card says it was fine-tuned with
``after_context`` examples, as the bundled one was, must pass."""

from __future__ import annotations

import pytest

import inference
from training.robustness import paragraph_scores_after

POSITIVE = [
    "I really loved this film, the acting was wonderfull and the story moved me.",
    "What a delightful surprise. The cast is superb and I laughed from start to finish.",
    "A beautiful, moving story with a great score. I would happily watch it again.",
]
NEGATIVE = [
    "The plot was a mess and the dialogue was painfully bad. I was bored the whole time and left early.",
    "A dull, lifeless film. The jokes fall flat and the ending makes no sense at all.",
]
TABLE = "| Item | Price |\n|---|---|\n| Tickets | 12 |\n| Popcorn | 6 |"
CODE = "```python\nfor row in rows:\n    print(row)\n```"


def _trained_with_context(model) -> bool:
    augment = (model.card.get("finetune") or {}).get("augment") or {}
    return augment.get("reviews_per_variant", {}).get("after_context", 0) > 0


MODEL = inference.load_model(device="cpu")


@pytest.mark.xfail(
    not _trained_with_context(MODEL),
    strict=True,
    reason="a model fine-tuned without context-prefixed reviews",
)
def test_paragraph_label_survives_unrelated_text_before_it():
    wrong = []
    for paragraphs, label, opposite in ((POSITIVE, "positive", NEGATIVE), (NEGATIVE, "negative", POSITIVE)):
        for i, p in enumerate(paragraphs):
            for name, context in (
                ("alone", ""),
                ("table", TABLE),
                ("code", CODE),
                ("opposite paragraph", opposite[i % len(opposite)]),
            ):
                scores = paragraph_scores_after(MODEL, context, p)
                if max(scores, key=scores.get) != label:
                    wrong.append(f"{label} paragraph {i} after {name}: {scores}")
    assert not wrong, "\n".join(wrong)


def test_the_score_is_of_the_paragraphs_own_tokens():
    """The helper scores exactly the paragraph's tokens: alone it equals the whole document's score."""
    doc = inference.IncrementalDocument(MODEL, MODEL.tokenizer.encode(POSITIVE[1]))
    alone = paragraph_scores_after(MODEL, "", POSITIVE[1])
    assert alone == pytest.approx(doc.span_scores(0, doc.n_tokens))
    assert paragraph_scores_after(MODEL, TABLE, POSITIVE[1]) != pytest.approx(
        doc.span_scores(0, doc.n_tokens), abs=1e-6
    )
