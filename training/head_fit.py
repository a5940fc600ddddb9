"""Fit the classification head on frozen features before fine-tuning the whole model.

Why: the VQ body learns slowly through its pseudo-gradient (every layer's attention output is
snapped to a code), and a fresh head on top of it spends hundreds of noisy steps finding a
direction that a convex fit finds at once. With the body frozen, the document objective
(negative log of the mean token probability of the true label, exactly what fine-tuning
optimises and the engine reports) is a smooth function of the head's few hundred weights, so
L-BFGS over cached final hidden states solves it in seconds. Fine-tuning then starts from a
head that already reads sentiment off the body's features, for the VQ model and the dense
teacher alike.
"""

from __future__ import annotations

import time

import torch


@torch.no_grad()
def collect_features(net, examples, positions_for, batch: int = 16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(features (N, T, d) after the final LayerNorm, token mask (N, T) without BOS, labels (N,))."""
    from .finetune import pad_batch

    net.eval()
    width = 1 + max(len(x) for x, _ in examples)
    dev = next(net.parameters()).device
    feats = torch.zeros(len(examples), width, net.config.hidden_size)
    mask = torch.zeros(len(examples), width, dtype=torch.bool)
    for a in range(0, len(examples), batch):
        ids, pos, valid, _ = pad_batch(examples[a:a + batch], positions_for)
        out = net(ids.to(dev), pos.to(dev), valid.to(dev))
        t = ids.shape[1]
        feats[a:a + batch, :t] = out.hidden.float().cpu()
        mask[a:a + batch, :t] = valid
    mask[:, 0] = False  # BOS is not part of the document
    return feats, mask, torch.tensor([y for _, y in examples])


def doc_nll(weight: torch.Tensor, bias: torch.Tensor, feats: torch.Tensor, mask: torch.Tensor,
            labels: torch.Tensor) -> torch.Tensor:
    """Mean over documents of -log(mean over tokens of p_token(label))."""
    probs = (feats @ weight.T + bias).softmax(-1) * mask[..., None]  # (N, T, C)
    doc = probs.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)  # (N, C)
    return -doc.gather(1, labels[:, None]).clamp(min=1e-8).log().mean()


def fit_head(net, examples, positions_for, l2: float = 1e-3, iters: int = 100) -> dict:
    """Set ``net.score_head`` to the L-BFGS optimum of the document objective on ``examples``."""
    t0 = time.time()
    feats, mask, labels = collect_features(net, examples, positions_for)
    head = net.score_head
    w = head.weight.detach().float().cpu().clone().requires_grad_(True)
    b = head.bias.detach().float().cpu().clone().requires_grad_(True)
    with torch.no_grad():
        before = float(doc_nll(w, b, feats, mask, labels))
    opt = torch.optim.LBFGS([w, b], max_iter=iters, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = doc_nll(w, b, feats, mask, labels) + l2 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        head.weight.copy_(w.to(head.weight))
        head.bias.copy_(b.to(head.bias))
        after = float(doc_nll(w, b, feats, mask, labels))
    return {"reviews": len(examples), "l2": l2, "doc_nll_before": round(before, 4), "doc_nll_after": round(after, 4),
            "seconds": round(time.time() - t0, 1)}
