"""Labelled reviews as model input: encoding, padded batches, the document score and its losses.

Why a module of its own: fine-tuning (both scopes), the head fit, the post-vq feature cache and
evaluation all need the same batching and the same document score. Keeping them here, below all
of those stages, is what lets ``finetune -> post_vq, head_fit`` import them without a circle
back into ``finetune``. Every function that runs the model builds its inputs on the model's own
device (``model_device``), so a model on CUDA never meets a CPU index tensor.
"""

from __future__ import annotations

import torch

from .tokenizer import BOS_ID, PAD_ID, batch_encoder


def model_device(net) -> torch.device:
    """Where the model's weights live: every input built for it goes there."""
    return next(net.parameters()).device


def encode_reviews(tok, rows: list[tuple[str, int]], max_tokens: int) -> list[tuple[list[int], int]]:
    """(ids without BOS, truncated to max_tokens, label)."""
    ids = batch_encoder(tok)([t for t, _ in rows])
    return [(x[:max_tokens] or [PAD_ID], y) for x, (_, y) in zip(ids, rows)]


def encode_with_context(tok, items: list[tuple[str, str, int]], max_tokens: int) -> list[tuple[list[int], int, int]]:
    """(context ids + review ids, label, number of context tokens) from (context, review, label).

    The context (unrelated text before the review) is not scored; when both do not fit in
    ``max_tokens`` the review is cut first down to half the budget, then the context loses its start."""
    enc = batch_encoder(tok)
    ctx_ids, rev_ids = enc([c for c, _, _ in items]), enc([r for _, r, _ in items])
    out = []
    for c, r, (_, _, y) in zip(ctx_ids, rev_ids, items):
        r = r[:max(max_tokens - len(c), max_tokens // 2)] or [PAD_ID]
        c = c[len(c) - (max_tokens - len(r)):] if len(c) + len(r) > max_tokens else c
        out.append((c + r, y, len(c)))
    return out


def context_tokens(example) -> int:
    """Unscored tokens at the start of an example: (ids, label) has none, (ids, label, n) has n."""
    return example[2] if len(example) > 2 else 0


def pad_batch(examples: list[tuple], positions_for) -> tuple[torch.Tensor, ...]:
    """(ids, positions, valid, labels) on the CPU: BOS + tokens, right-padded; positions from a callback.

    ``examples`` are (ids, label) or (ids, label, context tokens); ``positions_for(n)`` gives the
    (n,) positions of an n-row sequence (BOS included).
    """
    t = 1 + max(len(ex[0]) for ex in examples)
    b = len(examples)
    ids = torch.full((b, t), PAD_ID, dtype=torch.long)  # (B, T)
    pos = torch.zeros((b, t), dtype=torch.long)  # (B, T)
    valid = torch.zeros((b, t), dtype=torch.bool)  # (B, T)
    for i, (x, *_) in enumerate(examples):
        n = 1 + len(x)
        ids[i, 0] = BOS_ID
        ids[i, 1:n] = torch.tensor(x)
        p = positions_for(n)  # (n,)
        pos[i, :n] = p
        pos[i, n:] = p[-1]  # padding: masked out by `valid`
        valid[i, :n] = True
    labels = torch.tensor([ex[1] for ex in examples])  # (B,)
    return ids, pos, valid, labels


def forward_padded(net, examples: list[tuple[list[int], int]], positions_for):
    """(model output, valid (B, T)) for a padded batch, every input on the model's device."""
    dev = model_device(net)
    ids, pos, valid, _ = pad_batch(examples, positions_for)
    ids, pos, valid = ids.to(dev), pos.to(dev), valid.to(dev)
    return net(ids, pos, valid), valid


def scored_rows(examples: list[tuple], valid: torch.Tensor) -> torch.Tensor:
    """``valid`` (B, T) without each example's context tokens: the rows its label is about."""
    scored = valid.clone()
    for i, ex in enumerate(examples):
        scored[i, 1:1 + context_tokens(ex)] = False
    return scored


def doc_probs(cls_logits: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Document class probabilities (B, C) as the engine reports them (``inference.document.span_probs``):
    the mean over non-BOS valid tokens of the class log-probabilities, renormalised."""
    tok = valid.clone()
    tok[:, 0] = False  # BOS is not part of the document
    logp = cls_logits.float().log_softmax(-1) * tok[..., None]  # (B, T, C)
    return (logp.sum(1) / tok.sum(1, keepdim=True).clamp(min=1)).softmax(-1)  # (B, C)


def token_cross_entropy(cls_logits: torch.Tensor, valid: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over documents of the mean over non-BOS tokens of -log p_token(label)."""
    tok = valid.clone()
    tok[:, 0] = False
    logp = cls_logits.float().log_softmax(-1)  # (B, T, C)
    nll = -logp.gather(-1, labels[:, None, None].expand(-1, logp.shape[1], 1))[..., 0]  # (B, T)
    return ((nll * tok).sum(1) / tok.sum(1).clamp(min=1)).mean()


def balanced_pick(by_label: list[list[int]], batch: int, g: torch.Generator) -> list[int]:
    """Training rows with every label equally often: a lopsided small batch drags the head's bias
    back and forth (the per-token loss makes every token of a review vote the same way)."""
    return [c[int(torch.randint(0, len(c), (1,), generator=g))] for k in range(batch)
            for c in [by_label[k % len(by_label)]]]


def param_groups(net, head_lr_mult: float) -> list[dict]:
    """The fresh classification head learns ``head_lr_mult`` times faster than the body."""
    head = [p for p in net.score_head.parameters() if p.requires_grad]
    ids = {id(p) for p in head}
    body = [p for p in net.parameters() if p.requires_grad and id(p) not in ids]
    return [{"params": body, "lr_mult": 1.0}, {"params": head, "lr_mult": head_lr_mult}]


@torch.no_grad()
def predict(net, examples, positions_for, batch: int = 16) -> torch.Tensor:
    """Predicted labels (N,) on the CPU from the mean score of each example's own tokens (its
    context, if any, is read but not scored, as a paragraph's span score); length-sorted batches."""
    net.eval()
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    pred = torch.empty(len(examples), dtype=torch.long)
    for a in range(0, len(order), batch):
        idx = order[a:a + batch]
        chosen = [examples[i] for i in idx]
        out, valid = forward_padded(net, chosen, positions_for)
        pred[idx] = doc_probs(out.cls_logits, scored_rows(chosen, valid)).argmax(-1).cpu()
    return pred


def accuracy(net, examples, positions_for, batch: int = 16) -> dict:
    """Accuracy, F1 (positive class) and the share predicted positive, from ``predict``."""
    pred = predict(net, examples, positions_for, batch)
    gold = torch.tensor([ex[1] for ex in examples])
    tp = int(((pred == 1) & (gold == 1)).sum())
    fp = int(((pred == 1) & (gold == 0)).sum())
    fn = int(((pred == 0) & (gold == 1)).sum())
    f1 = 2 * tp / max(1, 2 * tp + fp + fn)
    return {"accuracy": float((pred == gold).float().mean()), "f1": f1, "positive_rate": float((pred == 1).float().mean()),
            "n": len(examples)}
