"""Text before a review is read but not scored: in training (the tail's loss), in evaluation
(``reviews.predict``), and the same way the engine scores a paragraph (``span_scores``)."""

from __future__ import annotations

import torch

import inference
from inference.positions import spread_positions
from training import post_vq
from training.reviews import doc_probs, encode_with_context, forward_padded, scored_rows


class CharTok:
    """A stand-in tokenizer: one id per character (batch_encoder only needs encode_batch)."""

    class _Enc:
        def __init__(self, text):
            self.ids = [4 + ord(c) % 200 for c in text]

    def encode_batch(self, texts, add_special_tokens=False):
        return [self._Enc(t) for t in texts]


def test_encode_with_context_marks_and_fits_the_context():
    items = [("ab\n\n", "great", 1), ("", "bad", 0), ("x" * 30, "fine film", 1), ("x" * 30, "a much longer review", 0)]
    out = encode_with_context(CharTok(), items, 20)
    assert out[0] == (CharTok._Enc("ab\n\ngreat").ids, 1, 4)
    assert out[1] == (CharTok._Enc("bad").ids, 0, 0)
    ids, label, ctx = out[2]  # too long: the context loses its start, the review stays whole
    assert len(ids) == 20 and ctx == 11 and ids[ctx:] == CharTok._Enc("fine film").ids
    ids, label, ctx = out[3]  # a long review keeps half the budget, the context the other half
    assert len(ids) == 20 and ctx == 10 and ids[ctx:] == CharTok._Enc("a much lon").ids


def test_paragraph_score_after_context_is_the_engines_span_score(distilled):
    model = inference.load_model(distilled, device="cpu")
    net, _ = inference.load_model_folder(distilled)
    ctx = model.tokenizer.encode("| a | b |\n|---|---|\n| 1 | 2 |\n\n")
    para = model.tokenizer.encode("The acting was wonderful and the story moved me.")
    example = (ctx + para, 1, len(ctx))
    pool = net.config.position_pool
    with torch.no_grad():
        out, valid = forward_padded(net, [example], lambda n: spread_positions(n, pool))
        ours = doc_probs(out.cls_logits, scored_rows([example], valid))[0]
        whole = doc_probs(out.cls_logits, valid)[0]
    model.net.config = model.config.replace(
        window_tokens=2 * (len(ctx) + len(para))
    )  # context and paragraph in one window
    doc = inference.IncrementalDocument(model, ctx + para)
    assert doc.window_count == 1
    engine = doc.span_scores(len(ctx), len(ctx) + len(para))
    torch.testing.assert_close(ours, torch.tensor([engine[k] for k in net.config.labels]), atol=2e-3, rtol=0)
    assert not torch.allclose(ours, whole, atol=1e-4)  # the context's tokens would have counted


def test_tail_batches_score_only_the_review_rows(distilled):
    net, _ = inference.load_model_folder(distilled)
    examples = [(list(range(100, 112)), 1, 5), ([6, 6, 8, 9, 10, 11, 12, 13], 0)]  # token 100 + k is row k + 1
    feats = post_vq._shard_features(net, examples, lambda n: spread_positions(n, net.config.position_pool), 2, "cpu")
    assert feats.context.tolist() == [5, 0]
    x, ids, valid, scored, labels = feats.batch([0, 1], torch.device("cpu"))
    assert scored[0].tolist() == [True] + [False] * 5 + [True] * 7  # BOS (left out by doc_probs), context, review
    assert torch.equal(scored[1], valid[1])
    starts = set()
    for seed in range(40):  # cropped runs: only review rows are scored, and at least half the run is review
        x, ids, valid, scored, labels = feats.batch(
            [0, 1], torch.device("cpu"), crop=6, g=torch.Generator().manual_seed(seed)
        )
        assert valid.sum(1).tolist() == [6, 6]
        rows = ids[0] - 100 + 1  # absolute row of each cropped row of the context example
        starts.add(int(rows[0]))
        assert all(bool(s) == (int(r) > 5) for r, s in zip(rows[1:], scored[0, 1:]))
        assert int((rows > 5).sum()) >= 3
    assert len(starts) > 1
    joined = post_vq.join([feats, feats])
    assert joined.context.tolist() == [5, 0, 5, 0]
