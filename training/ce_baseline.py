"""A fresh student trained on next-token cross-entropy alone: the line a distillation run must beat.

    python -m training.ce_baseline --teacher runs/smollm2_teacher/model \\
        --tokens-file runs/smollm2_pack/tokens_train.npy.xz --out runs/ce_baseline --steps 400 \\
        [--d 128 --layers 2 --seq 256 --batch 4]

Why: a student distilled from a pretrained teacher (`vq-train distill --teacher FOLDER`) that ends
with a next-token loss above its tokens' unigram entropy has learned token frequencies and little
else, and the question is then whether the student (its shape, learning rate, order-only start)
or the distillation's objective holds it back. This trains the same fresh student as distillation
starts from (`training.student.build_student`: the teacher's embeddings, projected and scaled), on
the same batches (`training.distill.pool_batch`: BOS and a chunk of the token file at sampled pool
positions), with the same optimiser and step loop (`training.common.train_steps`: warm-up, then
cosine decay over `--steps`), but on cross-entropy alone, without VQ and
without the teacher's forward pass (which is what makes a CPU comparison affordable). It prints the
mean loss of every `--every` steps and the unigram entropy of the token file beside it, and
writes every step's loss to OUT/log.jsonl.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import common
from .distill import pool_batch
from .order_only import freeze_order_only
from .student import StudentShape, build_student
from .teacher_pretrained import DOCUMENT_ID, load_teacher
from .token_file import read_token_file


def unigram_entropy(tokens: torch.Tensor) -> float:
    """Nats per token of the token file's own frequencies: what a model of frequencies alone reaches."""
    counts = np.bincount(tokens.numpy().astype(np.int64))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def train(args) -> list[dict]:
    """The run (common.train_steps, as distillation's: warm-up and cosine learning rate, gradients
    clipped); one record per `--every` steps (step, mean loss over them, seconds so far)."""
    out = common.start_run(args)
    embeddings = load_teacher(args.teacher).input_embeddings().detach()
    shape = StudentShape(
        d=args.d, layers=args.layers, heads=args.heads, ffn=args.ffn, vq_heads=2, window=args.seq, scale=args.scale
    )
    net, _ = build_student(shape, embeddings, DOCUMENT_ID)
    if args.order_only:
        freeze_order_only(net)
    tokens = read_token_file(args.tokens_file)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    logged: list[dict] = []  # one record a step
    t0 = time.monotonic()

    def batch_terms(step: int):
        ids, pos = pool_batch(tokens, args.batch, args.seq, step, args.seed, net.config.position_pool)
        logits = net.lm_logits(net(ids, pos, vq=False).hidden)
        return {"loss": F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())}, ids.numel()

    def log_record(step: int, shown: dict) -> dict:
        logged.append({"stage": "ce_baseline", "step": step, "ce": shown["loss"], "seconds": time.monotonic() - t0})
        return logged[-1]

    args.stop_after, args.log_every, args.ckpt_every = None, 1, args.steps  # every step logged, nothing saved
    bar = common.Progress(out, args.steps, 0, "ce_baseline", disable=True)
    common.train_steps(args, opt, params, 0, bar, batch_terms, save=lambda step: None, log_record=log_record)
    windows = [logged[i : i + args.every] for i in range(0, len(logged), args.every)]
    return [
        {"step": w[-1]["step"], "ce": sum(r["ce"] for r in w) / len(w), "seconds": w[-1]["seconds"]} for w in windows
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", required=True, help="the pretrained teacher folder (its embeddings start the student)")
    ap.add_argument("--tokens-file", type=Path, required=True, help="`vq-train tokens` output")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--scale", type=float, default=1 / 1024, help="fixed GELU attention scale, as distillation's")
    ap.add_argument("--order-only", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--every", type=int, default=25, help="steps per reported mean")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True, help="folder for log.jsonl (every step's loss)")
    args = ap.parse_args(argv)
    print(f"unigram entropy of the token file: {unigram_entropy(read_token_file(args.tokens_file)):.2f} nats")
    records = train(args)
    for r in records:
        print(f"step {r['step']}: cross-entropy {r['ce']:.3f} nats ({r['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
