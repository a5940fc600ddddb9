"""Fine-tune only what lies after the last quantiser, on cached features.

Why this scope: a VQ code depends on the embeddings and on every layer up to and including the
last layer's attention and codebook. Everything after that point (the last layer's FFN with its
LayerNorm, the final LayerNorm and the classification head) changes no code, so fine-tuning it
leaves the distilled model's locality, flip rate and exactness exactly as they were. End-to-end
fine-tuning of the VQ body on a CPU budget stayed near chance and eroded locality in our runs;
the scope here trains a per-token nonlinear reader of the residual stream, which
carries the token itself plus its quantised context.

Why cached features: the frozen part is most of the forward cost, and it is the same in every
epoch. The residual stream entering the last FFN (one ``hidden_size`` vector per token) is
computed once, with sampled pool positions as in training everywhere else, stored in float16
shards (resumable; bfloat16 where a shard's residual exceeds float16's range, as a briefly trained
student's can), and the trainable tail runs on it for several epochs.

The dense teacher (the comparison row) is fine-tuned by the same code: its "post-VQ" part is the
same set of modules after its last (softmax) attention.
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import common
from .reviews import (
    context_tokens,
    doc_probs,
    document_nll,
    opinion_accuracy,
    pad_batch,
    param_groups,
    pick_batch,
    rows_by_label,
    token_cross_entropy,
)


def tail_modules(net) -> list[torch.nn.Module]:
    """The modules downstream of the last quantiser, in the order the forward pass uses them."""
    last = net.layers[-1]
    return [last.final_layer_norm, last.fc1, last.fc2, net.decoder.final_layer_norm, net.score_head]


def copy_tail(source, net) -> None:
    """Start `net`'s tail from `source`'s (`finetune --tail-from`). Why: continuing a fine-tuned model's
    distillation (`distill --init`) retrains its tail for the language model and loses what fine-tuning
    taught it; the codes, and so locality, do not depend on the tail, so the source's fine-tuned tail can
    be put back on the new trunk and fine-tuned on from there, as the bundled recipe starts from the
    GPU-fine-tuned model's."""
    if source.config.hidden_size != net.config.hidden_size or source.config.ffn_dim != net.config.ffn_dim:
        raise SystemExit("--tail-from: the model's shape differs from --model's")
    for mine, theirs in zip(tail_modules(net), tail_modules(source)):
        mine.load_state_dict(theirs.state_dict())


def freeze_all_but_tail(net) -> list[torch.nn.Parameter]:
    """requires_grad only on the tail; returns the trainable parameters."""
    for p in net.parameters():
        p.requires_grad_(False)
    params = [p for m in tail_modules(net) for p in m.parameters()]
    for p in params:
        p.requires_grad_(True)
    return params


def tail_forward(net, x_mid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(hidden, cls_logits) from the residual after the last attention: the last FFN, then the heads.

    The same functions as ``VQOPT.forward`` (``DecoderLayer.finish`` minus its attention part, and
    ``VQOPT.heads``), so what is trained here is what the engine runs."""
    last = net.layers[-1]
    y = x_mid + last.fc2(F.relu(last.fc1(last.final_layer_norm(x_mid))))
    return net.heads(y)


@dataclass
class Features:
    """Cached residual rows of a set of reviews, concatenated (BOS row first in each review)."""

    x: torch.Tensor  # (N, d) float16 (bfloat16 beyond float16's range): residual entering the last FFN
    ids: torch.Tensor  # (N,) int32: the token of each row (next-token targets for the LM term)
    offsets: torch.Tensor  # (R+1,) int64: review r owns rows offsets[r]:offsets[r+1]
    labels: torch.Tensor  # (R,) int64
    context: torch.Tensor | None = None  # (R,) int64: unscored rows after BOS (text before the review)

    def __post_init__(self):
        if self.context is None:
            self.context = torch.zeros_like(self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def batch(
        self, reviews: list[int], device: torch.device, crop: int = 0, g: torch.Generator | None = None
    ) -> tuple[torch.Tensor, ...]:
        """(x (B, T, d) float32, ids (B, T), valid (B, T), scored (B, T), labels (B,)), right-padded.

        ``scored`` is ``valid`` without the context rows (text before the review: read, never
        scored). ``crop`` > 0 keeps a random run of that many rows of each longer review (its
        first row then plays BOS and is left out of the score): cheaper steps, and the head
        learns to score a passage as well as a whole review, which is what paragraph hints ask
        of it. A run of a review with context starts late enough to be at least half review
        (the features already saw the whole context; only the scored rows are chosen here)."""
        starts, lengths, skips = [], [], []
        for r in reviews:
            a, n, ctx = int(self.offsets[r]), int(self.offsets[r + 1] - self.offsets[r]), int(self.context[r])
            skip = ctx
            if 0 < crop < n:
                lo = min(n - crop, max(0, 1 + ctx - crop // 2))
                shift = lo + int(torch.randint(0, n - crop - lo + 1, (1,), generator=g))
                a, n, skip = a + shift, crop, max(0, 1 + ctx - shift - 1)  # context rows left after row 0
            starts.append(a)
            lengths.append(n)
            skips.append(skip)
        t = max(lengths)
        x = torch.zeros(len(reviews), t, self.x.shape[1])
        ids = torch.zeros(len(reviews), t, dtype=torch.long)
        valid = torch.zeros(len(reviews), t, dtype=torch.bool)
        for i, (a, n) in enumerate(zip(starts, lengths)):
            x[i, :n] = self.x[a : a + n].float()
            ids[i, :n] = self.ids[a : a + n].long()
            valid[i, :n] = True
        scored = valid.clone()
        for i, ctx in enumerate(skips):
            scored[i, 1 : 1 + ctx] = False
        return (x.to(device), ids.to(device), valid.to(device), scored.to(device), self.labels[reviews].to(device))


def feature_dtype(x: torch.Tensor) -> torch.dtype:
    """float16 (more precise) unless some value of x would overflow it, then bfloat16 (float32's range)."""
    fits = x.numel() == 0 or x.abs().max() <= torch.finfo(torch.float16).max
    return torch.float16 if fits else torch.bfloat16


@torch.no_grad()
def _shard_features(net, examples, positions_for, batch: int, device) -> Features:
    """Run the frozen model over ``examples`` and capture the last FFN's LayerNorm input."""
    captured: list[torch.Tensor] = []
    hook = net.layers[-1].final_layer_norm.register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))  # little padding
    rows: list[tuple[torch.Tensor, torch.Tensor]] = [None] * len(examples)  # type: ignore[list-item]
    try:
        for a in range(0, len(order), batch):
            idx = order[a : a + batch]
            ids, pos, valid, _ = pad_batch([examples[i] for i in idx], positions_for)
            captured.clear()
            net(ids.to(device), pos.to(device), valid.to(device))
            x_mid = captured[0].float().cpu()  # (B, T, d)
            for j, i in enumerate(idx):
                n = int(valid[j].sum())
                rows[i] = (x_mid[j, :n], ids[j, :n].int())
    finally:
        hook.remove()
    offsets = torch.zeros(len(examples) + 1, dtype=torch.long)
    offsets[1:] = torch.tensor([len(r[1]) for r in rows]).cumsum(0)
    x = torch.cat([r[0] for r in rows])
    return Features(
        x.to(feature_dtype(x)),
        torch.cat([r[1] for r in rows]),
        offsets,
        torch.tensor([ex[1] for ex in examples]),
        torch.tensor([context_tokens(ex) for ex in examples]),
    )


def weights_digest(net) -> str:
    """A hash of every weight the cached features depend on (all but the trainable tail): computed
    once per run, part of every shard's key. Two models that differ only in their tail (a model and
    its fine-tuned copy) share features."""
    tail = {id(p) for m in tail_modules(net) for p in m.parameters()}
    h = hashlib.sha1()
    for name, t in net.named_parameters():
        if id(t) in tail:
            continue
        h.update(name.encode())
        h.update(t.detach().float().cpu().numpy().tobytes())
    for name, t in net.named_buffers():
        h.update(name.encode())
        h.update(t.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def shard_key(weights: str, examples, seed: int) -> str:
    """What a shard's content depends on: the weights, the reviews (ids, labels) and the seed.
    A shard left by another model or data in the same folder is recomputed, never reused."""
    h = hashlib.sha1(f"{weights}:{seed}".encode())
    for ex in examples:
        h.update(np.asarray(ex[0], dtype=np.int32).tobytes())
        h.update(int(ex[1]).to_bytes(1, "little", signed=True))  # NEUTRAL is -1
        h.update(context_tokens(ex).to_bytes(4, "little"))
    return h.hexdigest()


def cache_features(
    net, examples, folder: Path, seed: int, shard: int = 1000, batch: int = 16, log=None
) -> tuple[Features, float]:
    """(features of all ``examples``, seconds spent computing them over all runs), computed in
    shards saved under ``folder`` (a rerun resumes).

    Each shard samples its pool positions from its own seeded generator, so its content does not
    depend on whether earlier shards were computed in this run or loaded from disk."""
    from inference.positions import sample_positions

    folder.mkdir(parents=True, exist_ok=True)
    device = next(net.parameters()).device
    pool = net.config.position_pool
    net.eval()
    parts, seconds = [], 0.0
    weights = weights_digest(net)
    for s, a in enumerate(range(0, len(examples), shard)):
        path = folder / f"shard_{s:04d}.pt"
        chunk = examples[a : a + shard]
        key = shard_key(weights, chunk, seed * 100_003 + s)
        if path.is_file():
            saved = torch.load(path)
            if saved.pop("key", None) == key:  # same model, reviews and positions: reuse
                seconds += saved.pop("seconds", 0.0)
                parts.append(Features(**saved))
                continue
        t0 = time.time()
        g = torch.Generator().manual_seed(seed * 100_003 + s)
        part = _shard_features(net, chunk, functools.partial(sample_positions, pool=pool, generator=g), batch, device)
        common.save_checkpoint(path, **part.__dict__, seconds=time.time() - t0, key=key)
        seconds += time.time() - t0
        parts.append(part)
        if log:
            log(
                stage="features",
                shard=s,
                reviews=len(chunk),
                rows=int(part.offsets[-1]),
                seconds=round(time.time() - t0, 1),
            )
    return join(parts), seconds


def join(parts: list[Features]) -> Features:
    """One Features from consecutive shards (offsets shifted)."""
    offsets = [torch.zeros(1, dtype=torch.long)]
    base = 0
    for p in parts:
        offsets.append(p.offsets[1:] + base)
        base += int(p.offsets[-1])
    dtypes = {p.x.dtype for p in parts}
    common = dtypes.pop() if len(dtypes) == 1 else torch.bfloat16  # a shard beyond float16's range: all wide
    return Features(
        torch.cat([p.x.to(common) for p in parts]),
        torch.cat([p.ids for p in parts]),
        torch.cat(offsets),
        torch.cat([p.labels for p in parts]),
        torch.cat([p.context for p in parts]),
    )


def tail_losses(net, batch: tuple[torch.Tensor, ...], args, g: torch.Generator) -> dict[str, torch.Tensor]:
    """The fine-tuning objective of ``finetune_losses`` on cached features: document NLL (the
    engine's aggregate; a uniform target for neutral text), per-token label cross-entropy, and an
    LM term on a random share of rows (the tied vocabulary projection is the costliest part, and
    the LM only needs to stay alive). The label terms read only the ``scored`` rows: text before a
    review is context, not evidence."""
    x, ids, valid, scored, labels = batch
    hidden, cls_logits = tail_forward(net, x)
    probs = doc_probs(cls_logits, scored)  # (B, C): the review's own tokens
    cls = document_nll(probs, labels)
    token_ce = token_cross_entropy(cls_logits, scored, labels)
    keep = valid[:, 1:] & (torch.rand(valid[:, 1:].shape, generator=g) < args.lm_fraction).to(valid.device)
    lm = (
        F.cross_entropy(net.lm_logits(hidden[:, :-1][keep]).float(), ids[:, 1:][keep])
        if keep.any()
        else hidden.new_zeros(())
    )
    loss = cls + args.w_token * token_ce + args.w_lm * lm
    return {"loss": loss, "cls": cls, "token_ce": token_ce, "lm": lm, "acc": opinion_accuracy(probs, labels)}


def train_tail(net, feats: Features, args, out: Path, device, probe=None) -> tuple[int, float]:
    """The fine-tuning loop over cached features; returns (steps done, seconds used).

    Seeded per step (batch choice and LM rows), checkpointed every ``--ckpt-every`` steps, so
    ``--resume`` continues exactly where an interrupted run stopped."""
    freeze_all_but_tail(net)
    opt = torch.optim.AdamW(param_groups(net, args.head_lr_mult), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    ckpt = out / "checkpoint.pt"
    step, t_used = 0, 0.0
    if args.resume and ckpt.is_file():
        state = common.load_checkpoint(ckpt)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, t_used = state["step"], state["seconds"]
    by_label, neutral = rows_by_label(feats.labels.tolist())
    neutral_share = getattr(args, "neutral_share", 0.0)
    bar = common.Progress(out, args.steps, step, "finetune-tail", disable=args.quiet)
    t0 = time.time()
    net.train()

    def batch_terms(step: int):
        g = torch.Generator().manual_seed(args.seed * 104_729 + step)
        batch = feats.batch(pick_batch(by_label, neutral, args.batch, neutral_share, g), device, args.crop, g)
        return tail_losses(net, batch, args, g), int(batch[2].sum())

    step = common.train_steps(
        args,
        opt,
        [p for p in net.parameters() if p.requires_grad],
        step,
        bar,
        batch_terms,
        bar_keys=("loss", "acc"),
        probe=probe,
        net=net,
        log_record=lambda step, shown: dict(
            stage="finetune", scope="post-vq", dense=args.dense, step=step, tok_s=bar.rate, **shown
        ),
        save=lambda step: common.save_checkpoint(
            ckpt, model=net.state_dict(), opt=opt.state_dict(), step=step, seconds=t_used + time.time() - t0
        ),
    )
    bar.close()
    for p in net.parameters():
        p.requires_grad_(True)
    return step, t_used + time.time() - t0
