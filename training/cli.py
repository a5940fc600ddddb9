"""``vq-train SUBCOMMAND``: the pipeline that produces the bundled model.

tokenizer -> teacher -> distill -> finetune -> evaluate -> export. Each subcommand only parses
options and calls one module; the work lives in those modules.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .data import resolve_data_dir


def _common(p: argparse.ArgumentParser, out_default: str | None = None) -> None:
    p.add_argument("--data", default=None, help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--out", default=out_default, required=out_default is None, help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (background jobs: 1)")
    p.add_argument("--device", default=None, help="cpu / cuda (default: cuda when present)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _train_loop(p: argparse.ArgumentParser, steps: int, lr: float, batch: int, seq: int) -> None:
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps (default: 5%% of steps)")
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--seq", type=int, default=seq, help="tokens per sequence, BOS included")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--ckpt-every", type=int, default=50)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--stop-after", type=int, default=None,
                   help="stop after this many steps in this run (simulates an interruption)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vq-train", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("tokenizer", help="train a byte-level BPE (or reuse GPT-2's)")
    _common(p)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--chars", type=int, default=20_000_000, help="training text budget")
    p.add_argument("--reuse-gpt2", action="store_true", help="use DATA/gpt2_tokenizer instead")

    p = sub.add_parser("teacher", help="pre-train a small dense OPT")
    _common(p)
    _train_loop(p, steps=2000, lr=1e-3, batch=8, seq=512)
    p.add_argument("--tokenizer", required=True, help="tokenizer.json or its folder")
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--max-pos", type=int, default=2048, help="learned position table size")
    p.add_argument("--tokens", type=int, default=4_000_000, help="training tokens to tokenise")
    p.add_argument("--valid-tokens", type=int, default=100_000)

    _add_later_stages(sub)
    return ap


def _add_later_stages(sub) -> None:
    """distill / finetune / evaluate / export (they import the inference package lazily)."""
    from . import stages
    stages.add_parsers(sub, _common, _train_loop)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "warmup", 1) is None:
        args.warmup = max(1, args.steps // 20)
    needs_data = args.cmd in {"tokenizer", "teacher", "distill", "finetune", "evaluate"}
    if needs_data:
        args.data = resolve_data_dir(args.data)

    if args.cmd == "tokenizer":
        from .data import lm_texts
        from .tokenizer import gpt2_tokenizer, train_bpe
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        if args.reuse_gpt2:
            tok = gpt2_tokenizer(args.data / "gpt2_tokenizer")
        else:
            tok = train_bpe(lm_texts(args.data, "train", seed=args.seed), args.vocab, args.chars)
        tok.save(str(out / "tokenizer.json"))
        print(f"tokenizer with {tok.get_vocab_size()} tokens -> {out / 'tokenizer.json'}")
        return 0
    if args.cmd == "teacher":
        from .teacher import train_teacher
        print(f"teacher -> {train_teacher(args)}")
        return 0
    from . import stages
    return stages.run(args)


if __name__ == "__main__":
    sys.exit(main())
