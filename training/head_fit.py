"""Fit the classification head on frozen features before fine-tuning the whole model.

Why: the VQ body learns slowly through its pseudo-gradient (every layer's attention output is
snapped to a code), and a fresh head on top of it spends hundreds of noisy steps finding a
direction that a convex fit finds at once. With the body frozen, the document objective
(exactly what fine-tuning optimises and the engine reports) is logistic regression on the
mean of the final hidden states over a document's tokens, so L-BFGS over cached states
solves it in seconds. Fine-tuning then starts from a
head that already reads sentiment off the body's features, for the VQ model and the dense
teacher alike.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from .reviews import forward_padded


@torch.no_grad()
def mean_features(net, examples, positions_for, batch: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean over non-BOS tokens of the final hidden states (N, d), labels (N,)).

    The document probabilities are softmax(mean_t log_softmax(W h_t + b)); the log-sum-exp
    term of every token is the same for all classes, so this equals softmax(W mean_t(h_t) + b).
    """
    net.eval()
    means = []
    for a in range(0, len(examples), batch):
        out, valid = forward_padded(net, examples[a : a + batch], positions_for)
        hidden, valid = out.hidden.float().cpu(), valid.cpu()  # (B, T, d), (B, T)
        tok = valid.clone()
        tok[:, 0] = False  # BOS is not part of the document
        means.append((hidden * tok[..., None]).sum(1) / tok.sum(1, keepdim=True).clamp(min=1))
    return torch.cat(means), torch.tensor([ex[1] for ex in examples])


def doc_nll(weight: torch.Tensor, bias: torch.Tensor, means: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(means @ weight.T + bias, labels)


def fit_head(net, examples, positions_for, l2: float = 1e-3, iters: int = 100) -> dict:
    """Set ``net.score_head`` to the L-BFGS optimum of the document objective on ``examples``."""
    t0 = time.time()
    means, labels = mean_features(net, examples, positions_for)
    head = net.score_head
    w = head.weight.detach().float().cpu().clone().requires_grad_(True)
    b = head.bias.detach().float().cpu().clone().requires_grad_(True)
    with torch.no_grad():
        before = float(doc_nll(w, b, means, labels))
    opt = torch.optim.LBFGS([w, b], max_iter=iters, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = doc_nll(w, b, means, labels) + l2 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        head.weight.copy_(w.to(head.weight))
        head.bias.copy_(b.to(head.bias))
        after = float(doc_nll(w, b, means, labels))
    return {
        "reviews": len(examples),
        "l2": l2,
        "doc_nll_before": round(before, 4),
        "doc_nll_after": round(after, 4),
        "seconds": round(time.time() - t0, 1),
    }
