"""Pre-train a small dense OPT teacher (``transformers.OPTForCausalLM``).

The teacher is what the VQ model is distilled from. It is trained the way the VQ model will be
used: every sequence starts with BOS (id 2) at position 0 and the remaining tokens sit at an
ordered random subset of ``range(max_position_embeddings)``, so every row of the learned
position table is trained and the model learns to use only the order of positions. The output
is a Hugging Face folder (``save_pretrained``) plus ``tokenizer.json``, i.e. exactly what a user
with a real OPT checkpoint would pass as ``--teacher PATH``.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from . import common
from .data import collect_tokens, lm_texts, ordered_positions, sample_chunks
from .tokenizer import BOS_ID, EOS_ID, PAD_ID, batch_encoder, load_tokenizer

if TYPE_CHECKING:  # transformers (the [train] extra) is imported only when a teacher is built
    from transformers import OPTConfig, OPTForCausalLM


def make_config(vocab_size: int, d: int, layers: int, heads: int, ffn: int, max_pos: int) -> OPTConfig:
    """An OPT config with OPT-125M's conventions (pre-LN, ReLU, tied LM head, no dropout)."""
    from transformers import OPTConfig

    return OPTConfig(
        vocab_size=vocab_size,
        hidden_size=d,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        ffn_dim=ffn,
        max_position_embeddings=max_pos,
        word_embed_proj_dim=d,
        do_layer_norm_before=True,
        activation_function="relu",
        dropout=0.0,
        attention_dropout=0.0,
        layerdrop=0.0,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        enable_bias=True,
        layer_norm_elementwise_affine=True,
        tie_word_embeddings=True,
    )


def load_or_collect_tokens(
    tok, data_dir: Path, split: str, n_tokens: int, cache: Path | None, seed: int
) -> torch.Tensor:
    """Tokenise the first ``n_tokens`` of the LM text once and cache them for resumes (``cache`` None: no cache)."""
    if cache is not None and cache.is_file():
        t = torch.load(cache)
        if t.numel() == n_tokens:
            return t
    t = collect_tokens(batch_encoder(tok), lm_texts(data_dir, split, seed=seed), EOS_ID, n_tokens)
    if cache is None:
        return t
    cache.parent.mkdir(parents=True, exist_ok=True)
    torch.save(t, cache)
    return t


def make_batch(
    tokens: torch.Tensor, batch: int, seq: int, step: int, seed: int, max_pos: int, sampled_positions: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, positions), both (B, seq): BOS then seq-1 corpus tokens; a pure function of step."""
    body = sample_chunks(tokens, batch, seq - 1, step, seed)  # (B, seq-1)
    ids = torch.cat([torch.full((batch, 1), BOS_ID), body], dim=1)  # (B, seq)
    if sampled_positions:
        g = torch.Generator().manual_seed(seed * 7_919 + step)
        pos = ordered_positions(batch, seq, max_pos, g)  # (B, seq)
    else:
        pos = torch.arange(seq).expand(batch, seq).clone()  # (B, seq)
    return ids, pos


def lm_loss(model: OPTForCausalLM, ids: torch.Tensor, pos: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Next-token cross-entropy; position t predicts token t+1."""
    logits = model(input_ids=ids, position_ids=pos).logits  # (B, T, V)
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten(), reduction=reduction)


@torch.no_grad()
def context_report(
    model: OPTForCausalLM, valid: torch.Tensor, seq: int, max_pos: int, seed: int, batches: int = 4, batch: int = 4
) -> dict:
    """Does the teacher use context? Loss by position bucket, and loss with attention removed."""
    model.eval()
    per_tok = []
    for i in range(batches):
        ids, pos = make_batch(valid, batch, seq, 10_000 + i, seed, max_pos)
        per_tok.append(lm_loss(model, ids, pos, reduction="none").view(batch, seq - 1))
    per_tok = torch.cat(per_tok)  # (N, seq-1)
    edges = sorted({min(e, seq - 1) for e in (0, 4, 16, 64, 256, 1024, seq - 1)})
    buckets = {f"{a}-{b}": per_tok[:, a:b].mean().item() for a, b in zip(edges, edges[1:])}
    # Remove attention: zero every layer's attention output projection.
    hooks = [
        layer.self_attn.out_proj.register_forward_hook(lambda m, i, o: torch.zeros_like(o))
        for layer in model.model.decoder.layers
    ]
    no_attn = []
    for i in range(batches):
        ids, pos = make_batch(valid, batch, seq, 10_000 + i, seed, max_pos)
        no_attn.append(lm_loss(model, ids, pos).item())
    for h in hooks:
        h.remove()
    model.train()
    return {
        "valid_loss": per_tok.mean().item(),
        "loss_by_position": buckets,
        "valid_loss_without_attention": sum(no_attn) / len(no_attn),
    }


def _logged_seconds(log: Path) -> float:
    """Training time recorded by an older checkpoint's log (first to last teacher record)."""
    import json

    times = (
        [
            json.loads(line)["time"]
            for line in log.read_text().splitlines()
            if '"stage": "teacher"' in line and '"final"' not in line
        ]
        if log.is_file()
        else []
    )
    return times[-1] - times[0] if len(times) > 1 else 0.0


def train_teacher(args) -> Path:
    """Run (or resume) teacher pre-training; returns the saved HF folder."""
    out = common.start_run(args)
    device = common.pick_device(args.device)
    tok = load_tokenizer(args.tokenizer)
    train_tokens = load_or_collect_tokens(tok, args.data, "train", args.tokens, out / "tokens_train.pt", args.seed)
    valid_tokens = load_or_collect_tokens(
        tok, args.data, "valid", args.valid_tokens, out / "tokens_valid.pt", args.seed
    )

    from transformers import OPTForCausalLM

    config = make_config(tok.get_vocab_size(), args.d, args.layers, args.heads, args.ffn, args.max_pos)
    model = OPTForCausalLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    step, t_used = 0, 0.0
    ckpt = out / "checkpoint.pt"
    if args.resume and ckpt.is_file():
        state = common.load_checkpoint(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        t_used = state["seconds"] if "seconds" in state else _logged_seconds(out / "log.jsonl")
    elif args.resume:
        print(f"--resume: no checkpoint at {ckpt}, starting fresh")

    bar = common.Progress(out, args.steps, step, "teacher", disable=args.quiet)
    t_start = time.time()
    model.train()

    def batch_terms(step: int):
        ids, pos = make_batch(train_tokens, args.batch, args.seq, step, args.seed, args.max_pos)
        ids, pos = ids.to(device), pos.to(device)
        with common.autocast(device):
            return {"loss": lm_loss(model, ids, pos)}, ids.numel()

    step = common.train_steps(
        args,
        opt,
        model.parameters(),
        step,
        bar,
        batch_terms,
        log_record=lambda step, shown: dict(
            stage="teacher", step=step, loss=shown["loss"], tokens_seen=step * args.batch * args.seq, tok_s=bar.rate
        ),
        save=lambda step: common.save_checkpoint(
            ckpt, model=model.state_dict(), opt=opt.state_dict(), step=step, seconds=t_used + time.time() - t_start
        ),
    )
    seen = step * args.batch * args.seq
    bar.close()
    if step < args.steps:  # stopped early (--stop-after): the checkpoint is the result
        return ckpt

    final = out / "model"
    model.save_pretrained(final)
    shutil.copy(
        Path(args.tokenizer) / "tokenizer.json" if Path(args.tokenizer).is_dir() else args.tokenizer,
        final / "tokenizer.json",
    )
    report = context_report(
        model.cpu(), valid_tokens, min(args.seq, valid_tokens.numel() // 8), args.max_pos, args.seed
    )
    report.update(
        tokens_seen=seen,
        steps=step,
        seq=args.seq,
        batch=args.batch,
        wall_seconds=round(t_used + time.time() - t_start, 1),
        shape=dict(
            d=args.d, layers=args.layers, heads=args.heads, ffn=args.ffn, vocab=config.vocab_size, max_pos=args.max_pos
        ),
    )
    common.write_json(final / "teacher_report.json", report)
    bar.log(stage="teacher", final=True, **report)
    return final
