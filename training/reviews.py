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

NEUTRAL = -1  # the label of a text without an opinion: its target is uniform over the classes


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
        r = r[: max(max_tokens - len(c), max_tokens // 2)] or [PAD_ID]
        c = c[len(c) - (max_tokens - len(r)) :] if len(c) + len(r) > max_tokens else c
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
        scored[i, 1 : 1 + context_tokens(ex)] = False
    return scored


def doc_probs(cls_logits: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Document class probabilities (B, C) as the engine reports them (``inference.document.span_probs``):
    the mean over non-BOS valid tokens of the class log-probabilities, renormalised."""
    tok = valid.clone()
    tok[:, 0] = False  # BOS is not part of the document
    logp = cls_logits.float().log_softmax(-1) * tok[..., None]  # (B, T, C)
    return (logp.sum(1) / tok.sum(1, keepdim=True).clamp(min=1)).softmax(-1)  # (B, C)


def target_distribution(labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """(B, C) targets: one-hot for a class label, uniform for ``NEUTRAL`` (no tone)."""
    target = torch.full((labels.shape[0], n_classes), 1.0 / n_classes, device=labels.device)
    opinion = labels != NEUTRAL
    target[opinion] = torch.nn.functional.one_hot(labels[opinion], n_classes).float()
    return target


def document_nll(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of document probabilities (B, C) against ``target_distribution``: the
    usual NLL for a labelled review, and for a neutral text -mean_c log p_c, smallest (log C)
    when the document sits at 1/C for every class."""
    target = target_distribution(labels, probs.shape[-1])
    return -(target * probs.clamp(min=1e-8).log()).sum(-1).mean()


def opinion_accuracy(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Accuracy over the documents that have a class label (neutral ones have no right answer)."""
    opinion = labels != NEUTRAL
    if not bool(opinion.any()):
        return probs.new_zeros(())
    return (probs[opinion].argmax(-1) == labels[opinion]).float().mean()


def token_cross_entropy(cls_logits: torch.Tensor, valid: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over documents of the mean over non-BOS tokens of the cross-entropy against the
    document's ``target_distribution`` (-log p_token(label) for a review, uniform for neutral text)."""
    tok = valid.clone()
    tok[:, 0] = False
    logp = cls_logits.float().log_softmax(-1)  # (B, T, C)
    target = target_distribution(labels, logp.shape[-1])  # (B, C)
    nll = -(logp * target[:, None, :]).sum(-1)  # (B, T)
    return ((nll * tok).sum(1) / tok.sum(1).clamp(min=1)).mean()


def balanced_pick(by_label: list[list[int]], batch: int, g: torch.Generator) -> list[int]:
    """Training rows with every label equally often: a lopsided small batch drags the head's bias
    back and forth (the per-token loss makes every token of a review vote the same way)."""
    return [
        c[int(torch.randint(0, len(c), (1,), generator=g))] for k in range(batch) for c in [by_label[k % len(by_label)]]
    ]


def rows_by_label(labels: list[int]) -> tuple[list[list[int]], list[int]]:
    """(row indices of each class label, in label order; row indices of neutral texts)."""
    classes = sorted({y for y in labels if y != NEUTRAL})
    neutral = [i for i, y in enumerate(labels) if y == NEUTRAL]
    return [[i for i, y in enumerate(labels) if y == c] for c in classes], neutral


def pick_batch(
    by_label: list[list[int]], neutral: list[int], batch: int, neutral_share: float, g: torch.Generator
) -> list[int]:
    """``balanced_pick`` over the class labels, with ``round(batch * neutral_share)`` of the rows
    drawn from the neutral texts (none when there are none): the share of "no tone" evidence per
    step is fixed, and the classes stay balanced among the rest."""
    n_neutral = round(batch * neutral_share) if neutral else 0
    picked = balanced_pick(by_label, batch - n_neutral, g)
    return picked + [neutral[int(torch.randint(0, len(neutral), (1,), generator=g))] for _ in range(n_neutral)]


def param_groups(net, head_lr_mult: float) -> list[dict]:
    """The fresh classification head learns ``head_lr_mult`` times faster than the body."""
    head = [p for p in net.score_head.parameters() if p.requires_grad]
    ids = {id(p) for p in head}
    body = [p for p in net.parameters() if p.requires_grad and id(p) not in ids]
    return [{"params": body, "lr_mult": 1.0}, {"params": head, "lr_mult": head_lr_mult}]


@torch.no_grad()
def document_scores(net, examples, positions_for, batch: int = 16) -> torch.Tensor:
    """Document class probabilities (N, C) on the CPU, as the engine reports them for each
    example's own tokens (its context, if any, is read but not scored); length-sorted batches."""
    net.eval()
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    scores = torch.empty(len(examples), net.config.num_labels)
    for a in range(0, len(order), batch):
        idx = order[a : a + batch]
        chosen = [examples[i] for i in idx]
        out, valid = forward_padded(net, chosen, positions_for)
        scores[idx] = doc_probs(out.cls_logits, scored_rows(chosen, valid)).float().cpu()
    return scores


def predict(net, examples, positions_for, batch: int = 16) -> torch.Tensor:
    """Predicted labels (N,) on the CPU: the top class of ``document_scores``."""
    return document_scores(net, examples, positions_for, batch).argmax(-1)


def accuracy(net, examples, positions_for, batch: int = 16) -> dict:
    """Accuracy, F1 (positive class) and the share predicted positive, from ``predict``."""
    return accuracy_of(predict(net, examples, positions_for, batch), torch.tensor([ex[1] for ex in examples]))


def accuracy_of(pred: torch.Tensor, gold: torch.Tensor) -> dict:
    """Accuracy, F1 (positive class) and the share predicted positive of predicted labels."""
    tp = int(((pred == 1) & (gold == 1)).sum())
    fp = int(((pred == 1) & (gold == 0)).sum())
    fn = int(((pred == 0) & (gold == 1)).sum())
    f1 = 2 * tp / max(1, 2 * tp + fp + fn)
    return {
        "accuracy": float((pred == gold).float().mean()),
        "f1": f1,
        "positive_rate": float((pred == 1).float().mean()),
        "n": len(gold),
    }
