"""Distil a dense OPT teacher into VQ-OPT (the paper's conversion, plus locality training).

Conversion: keep every teacher weight (``inference.load_hf_opt``), switch attention to GELU
with a fixed scale and no normalisation, add h x 64-code VQ after attention. Codebooks start
from k-means one layer at a time (earlier layers already quantised), then follow EMA updates
with dead-code re-seeding; gradients pass VQ through a Gumbel-softmax pseudo-gradient.

Loss, as in DistilBERT: soft-target KL on the teacher's next-token logits (temperature T,
scaled by T^2), cosine alignment of every layer's residual stream with the teacher's, and the
plain LM loss; plus the locality term of ``locality.py`` (weight 0 = the ablation). Positions
are ordered random subsets of the pool, the same for teacher and student.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.nn.functional as F

from . import common
from .data import sample_chunks
from .locality import locality_loss, make_edits
from .teacher import load_or_collect_tokens
from .tokenizer import BOS_ID, load_tokenizer
from .vq import TrainQuantizer, kmeans_init


def pool_batch(tokens: torch.Tensor, batch: int, seq: int, step: int, seed: int, pool: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, positions) (B, seq): BOS + corpus chunk at sampled pool positions; pure in step."""
    from inference.positions import sample_positions

    body = sample_chunks(tokens, batch, seq - 1, step, seed)  # (B, seq-1)
    ids = torch.cat([torch.full((batch, 1), BOS_ID), body], dim=1)  # (B, seq)
    g = torch.Generator().manual_seed(seed * 7_919 + step)
    pos = torch.stack([sample_positions(seq, pool, g) for _ in range(batch)])  # (B, seq)
    return ids, pos


def load_teacher_pair(teacher: Path, vq_heads: int, scale: float, window: int):
    """(student VQ-OPT with GELU attention, frozen dense softmax teacher), both from one folder."""
    from inference import load_hf_opt

    student = load_hf_opt(teacher, vq_heads=vq_heads, attention="gelu", attention_scale=scale,
                          window_tokens=window, vq=True).train()
    dense = load_hf_opt(teacher, attention="softmax", vq=False).eval().requires_grad_(False)
    return student, dense


def distill_losses(student, dense, quant, ids, pos, args, step: int) -> dict[str, torch.Tensor]:
    """Every loss term for one batch; the locality copies ride in the same forward pass."""
    b = ids.shape[0]
    with torch.no_grad(), common.autocast(ids.device):  # mixed precision for the dense teacher only
        t_out = dense(ids, pos)
        t_logits = dense.lm_logits(t_out.hidden).float()  # (B, T, V)
    t_layers = [x.float() for x in t_out.layer_outputs]
    valid = torch.ones_like(ids, dtype=torch.bool)  # (B, T)
    n_edit = min(b, args.edit_batch) if args.locality > 0 else 0
    all_ids, all_pos = ids, pos
    if n_edit:
        g = torch.Generator().manual_seed(args.seed * 31 + step)
        edited, where = make_edits(ids[:n_edit], valid[:n_edit], student.config.vocab_size, g)
        all_ids = torch.cat([ids, edited])  # (B+E, T)
        all_pos = torch.cat([pos, pos[:n_edit]])  # (B+E, T)
    out = student(all_ids, all_pos, quantizer=quant)
    s_logits = student.lm_logits(out.hidden[:b])  # (B, T, V)
    temp = args.temperature
    kl = F.kl_div(F.log_softmax(s_logits / temp, -1).flatten(0, 1), F.log_softmax(t_logits / temp, -1).flatten(0, 1),
                  log_target=True, reduction="batchmean") * temp**2
    ce = F.cross_entropy(s_logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    hid = torch.stack([1 - F.cosine_similarity(so[:b], to, dim=-1).mean()
                       for so, to in zip(out.layer_outputs, t_layers)]).mean()
    terms = {"kl": kl, "ce": ce, "hidden": hid}
    if n_edit:
        terms["locality"] = locality_loss(
            student, [s[:n_edit] for s in out.pre_vq], [c[:n_edit] for c in out.codes],
            [s[b:] for s in out.pre_vq], where, valid[:n_edit], args.margin)
        later = torch.arange(ids.shape[1], device=ids.device)[None] > where[:, None]  # (E, T)
        flips = [(c[:n_edit] != c[b:]).any(-1)[later].float().mean() for c in out.codes]  # per layer
        terms["flip"] = torch.stack(flips).mean().detach()
    terms["loss"] = kl + args.w_hidden * hid + args.w_ce * ce + args.locality * terms.get("locality", 0.0)
    return terms


def train_distill(args) -> Path:
    """Run (or resume) distillation; writes OUT/model in the model-folder format."""
    from inference import Tokenizer, save_model_folder

    common.set_threads(args.threads)
    common.seed_everything(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    teacher = Path(args.teacher)
    tok = load_tokenizer(Path(args.tokenizer) if args.tokenizer else teacher)
    # The VQ student stays in fp32 even on CUDA: its code choices must match the fp32/fp64 engine.
    device = common.pick_device(args.device)
    student, dense = load_teacher_pair(teacher, args.vq_heads, args.scale, args.window)
    student, dense = student.to(device), dense.to(device)
    pool = student.config.position_pool
    tokens = load_or_collect_tokens(tok, args.data, "train", args.tokens, out / "tokens_train.pt", args.seed + 1)
    quant = TrainQuantizer(student, decay=args.ema_decay, pseudo_grad=args.pseudo_grad, tau=args.tau)
    opt = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=args.lr,
                            betas=(0.9, 0.95), weight_decay=0.01)
    ckpt = out / "checkpoint.pt"
    step, init_report, t_used = 0, None, 0.0
    if args.resume and ckpt.is_file():
        state = common.load_checkpoint(ckpt)
        student.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        quant.load_state_dict(state["quant"])
        torch.set_rng_state(state["rng"])
        step, init_report, t_used = state["step"], state["kmeans"], state["seconds"]
    else:
        # k-means on batches the training loop never draws (negative step numbers).
        init_batches = [tuple(t.to(device) for t in pool_batch(tokens, args.batch, args.seq, -1 - i, args.seed, pool))
                        for i in range(args.kmeans_batches)]
        student.eval()
        init_report = kmeans_init(student, init_batches)
        student.train()
        quant.reset_ema()

    bar = common.Progress(out, args.steps, step, "distill", disable=args.quiet)
    t0 = time.time()

    def batch_terms(step: int):
        ids, pos = (t.to(device) for t in pool_batch(tokens, args.batch, args.seq, step, args.seed, pool))
        return distill_losses(student, dense, quant, ids, pos, args, step), ids.numel()

    step = common.train_steps(
        args, opt, student.parameters(), step, bar, batch_terms, after_step=quant.update, bar_keys=("loss", "kl"),
        log_record=lambda step, shown: dict(stage="distill", step=step, tokens_seen=step * args.batch * args.seq,
                                            tok_s=bar.rate, reseeded=quant.reseeded, **shown),
        save=lambda step: common.save_checkpoint(
            ckpt, model=student.state_dict(), opt=opt.state_dict(), quant=quant.state_dict(), rng=torch.get_rng_state(),
            step=step, kmeans=init_report, seconds=t_used + time.time() - t0))
    bar.close()
    if step < args.steps:  # stopped early (--stop-after): the checkpoint is the result
        return ckpt

    card = {"distill": {
        "teacher": str(teacher), "steps": step, "tokens_seen": step * args.batch * args.seq, "seq": args.seq,
        "batch": args.batch, "vq_heads": args.vq_heads, "vq_codes": student.config.vq_codes,
        "attention_scale": args.scale, "locality_weight": args.locality, "margin": args.margin,
        "pseudo_grad": args.pseudo_grad, "kmeans_init": init_report, "codes_reseeded": quant.reseeded,
        "wall_seconds": round(t_used + time.time() - t0, 1), "data": "gutenberg train + imdb train text",
    }}
    folder = save_model_folder(student.cpu(), Tokenizer(tok), out / "model", card)
    return folder
