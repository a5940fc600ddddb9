"""Training-time vector quantization: k-means init, EMA codebooks, Gumbel pseudo-gradient.

The forward value is always the hard nearest code (the same numbers the engine computes), in
the bit-exact form ``hard.detach() + (soft - soft.detach())``, so a trained model behaves at
inference exactly as it did in training. Only the backward differs: the gradient flows through
a Gumbel-softmax over code distances (the paper's pseudo-gradient), or plain straight-through.

Codebooks are not trained by gradient: they follow an exponential moving average of the
vectors assigned to them, and codes that fall out of use are re-seeded from recent vectors.
A collapsed codebook fakes locality (few codes in use, so few flips), so usage is tracked and reported.
A layer refitted to fewer codes on purpose (``kmeans_init`` with ``live``) keeps the rest parked,
neither averaged nor re-seeded; whether its fewer codes still carry the tone is for the evaluation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from inference import kernels


def chunks(s: torch.Tensor, heads: int) -> torch.Tensor:
    """(..., d) -> (N, h, d/h): every row's VQ-head chunks."""
    return s.reshape(-1, heads, s.shape[-1] // heads)


def distances(x: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """Squared distances (N, h, K) from chunks x (N, h, w) to codebook (h, K, w)."""
    proj = torch.einsum("nhw,hkw->nhk", x, codebook)  # (N, h, K)
    return x.pow(2).sum(-1, keepdim=True) - 2 * proj + codebook.pow(2).sum(-1)[None]  # (N, h, K)


@torch.no_grad()
def kmeans(x: torch.Tensor, k: int, iters: int = 20, generator: torch.Generator | None = None) -> torch.Tensor:
    """Per-head k-means: x (N, h, w) -> centroids (h, k, w); empty clusters re-seeded from data."""
    n, h, w = x.shape
    idx = torch.stack([torch.randperm(n, generator=generator)[:k] for _ in range(h)]).to(x.device)  # (h, k)
    cent = x.permute(1, 0, 2)[torch.arange(h, device=x.device)[:, None], idx].clone()  # (h, k, w)
    for _ in range(iters):
        assign = distances(x, cent).argmin(-1)  # (N, h)
        onehot = F.one_hot(assign, k).to(x.dtype)  # (N, h, k)
        counts = onehot.sum(0)  # (h, k)
        sums = torch.einsum("nhk,nhw->hkw", onehot, x)  # (h, k, w)
        new = sums / counts.clamp(min=1)[..., None]
        empty = counts == 0
        if empty.any():
            refill = x[torch.randint(0, n, (int(empty.sum()),), generator=generator).to(x.device)]  # (E, h, w)
            heads = empty.nonzero()[:, 0]
            new[empty] = refill[torch.arange(len(heads), device=x.device), heads]
        cent = new
    return cent


class TrainQuantizer:
    """The ``quantizer`` hook for ``VQOPT.forward`` during training, one EMA state per layer.

    Call order per step: forward (collects each layer's chunks), backward, ``update()``.
    """

    def __init__(
        self,
        net,
        decay: float = 0.99,
        pseudo_grad: str = "gumbel",
        tau: float = 1.0,
        dead_threshold: float = 0.03,
        generator: torch.Generator | None = None,
    ):
        self.net, self.decay, self.pseudo_grad, self.tau = net, decay, pseudo_grad, tau
        self.dead_threshold = dead_threshold
        self.generator = generator
        self.layers = list(net.layers)
        for layer in self.layers:
            layer.vq.codebook.requires_grad_(False)  # EMA, not gradient
        h, k = net.config.vq_heads, net.config.vq_codes
        dev = self.layers[0].vq.codebook.device
        self.count = [torch.full((h, k), 1.0, device=dev) for _ in self.layers]  # EMA assignment counts
        self.sums = [layer.vq.codebook.detach().clone() for layer in self.layers]  # EMA sums (h, k, w)
        self.seen: dict[int, list[torch.Tensor]] = {}
        self.training = True
        self.reseeded = 0

    def reset_ema(self) -> None:
        """Start the EMA from the current codebooks (after k-means)."""
        for i, layer in enumerate(self.layers):
            self.count[i] = torch.ones_like(self.count[i])
            self.sums[i] = layer.vq.codebook.detach().clone()

    def __call__(self, i: int, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        book = self.layers[i].vq.codebook.detach()  # (h, K, w)
        h = book.shape[0]
        x = chunks(s, h)  # (N, h, w)
        dist = distances(x, book)  # (N, h, K)
        codes = dist.argmin(-1)  # (N, h)
        hard = kernels.gather_codes(book, codes).reshape(s.shape)  # (..., d)
        if self.training:
            self.seen.setdefault(i, []).append(x.detach())
        if self.pseudo_grad == "gumbel" and s.requires_grad:
            # Temperature relative to each row's spread of distances: scale-free across layers.
            logits = -dist / (self.tau * dist.detach().std(-1, keepdim=True) + 1e-6)  # (N, h, K)
            y = F.gumbel_softmax(logits, tau=1.0, hard=False)  # (N, h, K)
            soft = torch.einsum("nhk,hkw->nhw", y, book).reshape(s.shape)  # (..., d)
            z = hard.detach() + (soft - soft.detach())
        else:
            z = kernels.straight_through(s, hard)
        return z, codes.reshape(*s.shape[:-1], h)

    @torch.no_grad()
    def update(self) -> None:
        """EMA step for every layer seen since the last call, then dead-code re-seeding."""
        for i, xs in self.seen.items():
            x = torch.cat(xs)  # (N, h, w)
            book = self.layers[i].vq.codebook
            h, k, _ = book.shape
            onehot = F.one_hot(distances(x, book).argmin(-1), k).to(x.dtype)  # (N, h, K)
            self.count[i].mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
            self.sums[i].mul_(self.decay).add_(torch.einsum("nhk,nhw->hkw", onehot, x), alpha=1 - self.decay)
            parked = kernels.parked_codes(book)  # (h, K): stay parked, neither averaged nor re-seeded
            book.copy_(self.sums[i] / self.count[i].clamp(min=1e-5)[..., None])
            book[parked] = kernels.PARKED_CODE
            mean_count = self.count[i].mean(-1, keepdim=True)  # (h, 1)
            dead = (self.count[i] < self.dead_threshold * mean_count) & ~parked  # (h, K)
            if dead.any():
                heads = dead.nonzero()[:, 0]
                pick = torch.randint(0, x.shape[0], (len(heads),), generator=self.generator).to(x.device)
                fresh = x[pick, heads]  # (E, w)
                book[dead] = fresh
                self.sums[i][dead] = fresh
                self.count[i][dead] = mean_count.expand_as(dead)[dead]
                self.reseeded += len(heads)
        self.seen.clear()

    def state_dict(self) -> dict:
        return {"count": self.count, "sums": self.sums, "reseeded": self.reseeded}

    def load_state_dict(self, state: dict) -> None:
        dev = self.layers[0].vq.codebook.device
        self.count = [c.to(dev) for c in state["count"]]
        self.sums = [x.to(dev) for x in state["sums"]]
        self.reseeded = state["reseeded"]


class RefitCodesError(ValueError):
    """--refit-codes names a layer or a code count the model does not have: the CLI says so."""


def check_live_codes(live: dict[int, int] | None, cfg) -> None:
    """Refuse a ``--refit-codes`` setting that does not fit the model, before any work."""
    for layer, codes in (live or {}).items():
        if layer >= cfg.num_hidden_layers or codes > cfg.vq_codes:
            raise RefitCodesError(
                f"--refit-codes {layer}={codes}: the model has layers 0-{cfg.num_hidden_layers - 1} "
                f"and {cfg.vq_codes} codes per VQ head"
            )


@torch.no_grad()
def kmeans_init(
    net, batches, k_iters: int = 20, generator: torch.Generator | None = None, live: dict[int, int] | None = None
) -> list[dict]:
    """Initialise codebooks one layer at a time, earlier layers already quantised.

    ``batches``: list of (ids, positions) or (ids, positions, valid) used to collect each layer's
    attention sums (with ``valid``, only its rows: padding is not text).
    ``live``: refit only these layers, each with that many codes; the rest of its K are parked
    (``kernels.PARKED_CODE``), so no sum ever picks them. Why fewer codes: a one-token edit moves a shallow row's
    sum by a large share of it, and the fewer and wider a layer's cells, the fewer of those moves
    cross a boundary (layer 0 of the bundled model flips most; see training/README.md).
    Default: every layer, every code. Returns per-layer usage after init (codes used per head).
    """
    cfg = net.config
    report = []
    for i, k in sorted((live or dict.fromkeys(range(cfg.num_hidden_layers), cfg.vq_codes)).items()):
        use = [j < i for j in range(cfg.num_hidden_layers)]  # layers before i quantised
        rows = []
        for ids, pos, *valid in batches:
            s = net(ids, pos, *valid, vq=use).pre_vq[i]  # (B, T, d)
            rows.append(s[valid[0]] if valid else s.reshape(-1, cfg.hidden_size))
        x = chunks(torch.cat(rows), cfg.vq_heads)  # (N, h, w)
        book = net.layers[i].vq.codebook
        book.fill_(kernels.PARKED_CODE)
        book[:, :k] = kmeans(x, k, k_iters, generator)
        used = distances(x, book).argmin(-1)  # (N, h)
        report.append({"layer": i, "codes_used": [int(used[:, j].unique().numel()) for j in range(cfg.vq_heads)]})
    return report


def code_stats(codes: torch.Tensor, k: int) -> dict:
    """Usage of codes (N, h): codes used of k and perplexity exp(entropy), per VQ head."""
    out = {"codes_used": [], "perplexity": []}
    for j in range(codes.shape[-1]):
        p = torch.bincount(codes[:, j], minlength=k).double()
        p = p / p.sum()
        ent = -(p[p > 0] * p[p > 0].log()).sum()
        out["codes_used"].append(int((p > 0).sum()))
        out["perplexity"].append(round(float(ent.exp()), 2))
    return out
