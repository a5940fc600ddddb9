"""The "no tone" target: neutral text is trained towards a uniform distribution over the classes.

Checked on the loss itself (its minimum, its gradient, its agreement with the plain NLL for
labelled reviews), on the batch sampler (a fixed neutral share, classes still balanced), on the
neutral paragraphs (the server's tone blocks, a document-level split, no dialogue), and on the
post-vq fine-tuning step: a tail trained on neutral features alone moves their scores to 0.5."""

from __future__ import annotations

import gzip
import json
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from training import neutral, post_vq
from training.reviews import (
    NEUTRAL,
    document_nll,
    opinion_accuracy,
    pick_batch,
    rows_by_label,
    target_distribution,
    token_cross_entropy,
)


def test_target_is_one_hot_for_labels_and_uniform_for_neutral():
    t = target_distribution(torch.tensor([0, 1, NEUTRAL]), 2)
    assert t.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]


def test_document_nll_equals_plain_nll_on_labelled_reviews():
    probs = torch.tensor([[0.2, 0.8], [0.7, 0.3], [0.5, 0.5]])
    labels = torch.tensor([1, 0, 1])
    assert document_nll(probs, labels) == pytest.approx(float(F.nll_loss(probs.log(), labels)))


def test_neutral_loss_is_smallest_at_one_half_and_pulls_towards_it():
    p = torch.linspace(0.05, 0.95, 19)
    losses = [float(document_nll(torch.tensor([[1 - x, x]]), torch.tensor([NEUTRAL]))) for x in p.tolist()]
    assert min(range(19), key=losses.__getitem__) == 9 and losses[9] == pytest.approx(torch.log(torch.tensor(2.0)))
    logit = torch.tensor([[0.0, 2.0]], requires_grad=True)  # confidently positive neutral text
    document_nll(logit.softmax(-1), torch.tensor([NEUTRAL])).backward()
    assert logit.grad[0, 1] > 0 > logit.grad[0, 0]  # descent lowers the positive logit, raises the other


def test_token_cross_entropy_uses_the_same_targets():
    logits = torch.randn(2, 5, 2)
    valid = torch.ones(2, 5, dtype=torch.bool)
    got = token_cross_entropy(logits, valid, torch.tensor([1, NEUTRAL]))
    logp = logits.log_softmax(-1)[:, 1:]  # BOS row left out
    want = (-logp[0, :, 1].mean() - logp[1].mean(-1).mean()) / 2
    assert got == pytest.approx(float(want), abs=1e-6)


def test_accuracy_counts_only_labelled_documents():
    probs = torch.tensor([[0.1, 0.9], [0.9, 0.1], [0.2, 0.8]])
    assert float(opinion_accuracy(probs, torch.tensor([1, 1, NEUTRAL]))) == pytest.approx(0.5)


def test_batches_hold_the_neutral_share_and_stay_balanced():
    labels = [0] * 50 + [1] * 50 + [NEUTRAL] * 30
    by_label, neutral_rows = rows_by_label(labels)
    assert [len(c) for c in by_label] == [50, 50] and len(neutral_rows) == 30
    pick = pick_batch(by_label, neutral_rows, 32, 0.25, torch.Generator().manual_seed(0))
    kinds = [labels[i] for i in pick]
    assert len(pick) == 32 and kinds.count(NEUTRAL) == 8 and kinds.count(0) == kinds.count(1) == 12
    no_neutral = pick_batch(by_label, [], 32, 0.25, torch.Generator().manual_seed(0))
    assert all(labels[i] != NEUTRAL for i in no_neutral) and len(no_neutral) == 32


def test_a_tail_trained_on_neutral_features_scores_them_near_one_half(distilled):
    """A head biased towards "positive" is pulled back to 0.5 on neutral text by the uniform target."""
    import inference
    from inference.positions import spread_positions

    net, _ = inference.load_model_folder(distilled)
    with torch.no_grad():
        net.score_head.bias.copy_(torch.tensor([-2.0, 2.0]))
    torch.manual_seed(0)
    examples = [(torch.randint(4, net.config.vocab_size, (12,)).tolist(), NEUTRAL) for _ in range(8)]
    feats = post_vq._shard_features(net, examples, lambda n: spread_positions(n, net.config.position_pool), 4, "cpu")
    args = SimpleNamespace(lm_fraction=0.0, w_token=0.0, w_lm=0.0)
    post_vq.freeze_all_but_tail(net)
    opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=0.05)
    batch = feats.batch(list(range(8)), torch.device("cpu"))

    def positive_share() -> float:
        with torch.no_grad():
            _, cls = post_vq.tail_forward(net, batch[0])
            from training.reviews import doc_probs

            return float(doc_probs(cls, batch[3])[:, 1].mean())

    assert positive_share() > 0.9
    for _ in range(60):
        opt.zero_grad()
        terms = post_vq.tail_losses(net, batch, args, torch.Generator().manual_seed(0))
        terms["loss"].backward()
        opt.step()
    assert abs(positive_share() - 0.5) < 0.05


def _write_gz(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


@pytest.fixture
def small_data(tmp_path):
    para = "The compiler checks every borrow at compile time so that no reference outlives the value it points to."
    chapter = "# Chapter {}\n\n" + para + "\n\n```rust\nfn main() {{}}\n```\n"
    chapters = [{"doc": f"ch{i}.md", "revisions": [{"text": chapter.format(i)}]} for i in range(60)]
    _write_gz(tmp_path / "revisions" / "rust_book_chapters.jsonl.gz", chapters)
    _write_gz(
        tmp_path / "revisions" / "art_of_command_line_README_en.jsonl.gz",
        [
            {
                "doc": "README.md",
                "revisions": [
                    {
                        "text": "Use the shell well, and learn how its pipes and "
                        "redirections work before you write longer scripts."
                    }
                ],
            }
        ],
    )
    _write_gz(
        tmp_path / "revisions" / "wiki_versions.jsonl.gz",
        [{"title": f"article {i}", "versions": ["old", para.lower()]} for i in range(60)],
    )
    narration = "The old road wound past the mill and down into the valley where the river ran slow and wide."
    speech = '"I never liked this valley," she said, and she turned away from the river and the mill.'
    _write_gz(
        tmp_path / "gutenberg" / "gutenberg_subset.jsonl.gz",
        [
            {
                "author": "A",
                "title": f"book {i}",
                "split": "valid" if i % 2 else "train",
                "text": f"{narration}\n\n{speech}",
            }
            for i in range(40)
        ],
    )
    return tmp_path


def test_neutral_paragraphs_split_by_document_and_leave_out_dialogue(small_data):
    parts = {p: neutral.neutral_paragraphs(small_data, p, 1000, gutenberg_share=0.25) for p in neutral.PARTS}
    docs = {p: {x.document for x in ps} for p, ps in parts.items()}
    assert all(docs[a].isdisjoint(docs[b]) for a in neutral.PARTS for b in neutral.PARTS if a < b)
    assert all(parts[p] for p in neutral.PARTS)
    everything = [x for ps in parts.values() for x in ps]
    assert all('"' not in x.text and "fn main" not in x.text and not x.text.startswith("#") for x in everything)
    assert all(x.words >= 12 for x in everything)
    assert {x.source for x in parts["train"]} >= {"rust_book", "wikipedia", "command_line_readme"}
    assert neutral.neutral_paragraphs(small_data, "test", 1000) == parts["test"]  # seeded


def test_neutral_paragraphs_refuse_an_unknown_part(small_data):
    with pytest.raises(ValueError):
        neutral.neutral_paragraphs(small_data, "eval", 10)
