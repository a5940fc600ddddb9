"""Options and dispatch for the stages that need the inference package.

distill, finetune, calibrate, evaluate and export import their own modules only when run, so
``vq-train tokenizer`` and ``vq-train teacher`` do not load them. Every flag's value is checked
by an ``inference.argtypes`` type while parsing.
"""

from __future__ import annotations

import argparse

from inference import argtypes as T

from .locality import MARGIN_UNITS


def mix_spec(value: str) -> str:
    """An ``--augment`` value, checked while parsing (argparse reports the ValueError's message)."""
    from .augment import parse_mix

    try:
        parse_mix(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def live_codes(value: str) -> dict[int, int]:
    """A ``--refit-codes`` value, LAYER=CODES[,LAYER=CODES...], e.g. ``0=8``: {layer: live codes}."""
    live: dict[int, int] = {}
    for part in value.split(","):
        layer, sep, codes = part.partition("=")
        if not (sep and layer.strip().isdigit() and codes.strip().isdigit() and int(codes) >= 2):
            raise argparse.ArgumentTypeError(f"expected LAYER=CODES with CODES >= 2 (e.g. 0=8), got {part!r}")
        live[int(layer)] = int(codes)
    return live


def add_locality_layers(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--locality-layers",
        type=T.non_negative_float,
        nargs="+",
        default=None,
        metavar="W",
        help="one weight per layer: each layer's share of the locality term (default: equal), scaled to "
        "keep --locality's meaning; e.g. 4 1 1 1 holds layer 0's codes four times harder",
    )


def add_margin(p: argparse.ArgumentParser) -> None:
    """--margin and its unit, for every stage with the locality term (distill, finetune --scope all)."""
    p.add_argument(
        "--margin",
        type=T.non_negative_float,
        default=0.05,
        help="how far from a code's boundary the locality term holds attention sums, in --margin-unit",
    )
    p.add_argument(
        "--margin-unit",
        choices=MARGIN_UNITS,
        default="norm",
        help="norm: a share of the batch's typical |s|^2; edit: the mean change an edit makes to a later "
        "row, measured as distance to the cell's nearest boundary (the same room early and late in a window)",
    )


def add_dead_threshold(p: argparse.ArgumentParser) -> None:
    """--dead-threshold, for every stage whose quantiser keeps EMA codebooks (distill, finetune --scope all)."""
    p.add_argument(
        "--dead-threshold",
        type=T.non_negative_float,
        default=0.03,
        help="re-seed a code whose EMA count falls below this share of its head's mean; 0 = never (continuing "
        "a trained model: its unused codes would all be re-seeded at once, and its codes move)",
    )


def add_parsers(sub, common, train_loop) -> None:
    p = sub.add_parser("distill", help="convert a dense OPT into VQ-OPT by distillation")
    common(p)
    train_loop(p, steps=300, lr=3e-4, batch=2, seq=1024)
    p.add_argument(
        "--teacher",
        required=True,
        help="Hugging Face OPT folder (save_pretrained), or a teacher of "
        "another architecture: smollm2, a .gguf file, or its folder from `vq-train teacher --pretrained`",
    )
    p.add_argument("--tokenizer", default=None, help="tokenizer.json (default: TEACHER/tokenizer.json)")
    p.add_argument("--vq-heads", type=int, default=2, choices=(1, 2, 4))
    p.add_argument("--scale", type=T.positive_float, default=1 / 1024, help="fixed GELU attention scale c")
    p.add_argument("--window", type=T.int_range(2), default=2048, help="tokens per window at inference")
    p.add_argument("--tokens", type=T.positive_int, default=2_000_000)
    p.add_argument(
        "--tokens-file",
        default=None,
        help="training ids from `vq-train tokens` (all of them; --tokens and --data are then not used)",
    )
    p.add_argument("--kmeans-batches", type=T.positive_int, default=4)
    p.add_argument("--ema-decay", type=T.float_range(0.0, 1.0, hi_open=True), default=0.99)
    add_dead_threshold(p)
    p.add_argument("--pseudo-grad", choices=("gumbel", "ste"), default="gumbel")
    p.add_argument("--tau", type=T.positive_float, default=1.0, help="Gumbel temperature (relative to distance spread)")
    p.add_argument("--temperature", type=T.positive_float, default=2.0, help="distillation softmax temperature")
    p.add_argument("--w-hidden", type=T.non_negative_float, default=1.0)
    p.add_argument("--w-ce", type=T.non_negative_float, default=0.5)
    p.add_argument("--locality", type=T.non_negative_float, default=1.0, help="locality weight; 0 = ablation (off)")
    add_margin(p)
    add_locality_layers(p)
    p.add_argument("--edit-batch", type=T.non_negative_int, default=1, help="sequences per batch given an edited copy")
    p.add_argument(
        "--init",
        default=None,
        help="continue from this VQ model folder (its weights and codebooks) instead of converting the teacher; "
        "an order-only model's position tables stay frozen",
    )
    p.add_argument(
        "--order-only",
        action="store_true",
        help="distil a model that reads only the order of its tokens: both position tables constant and frozen "
        "from the first step (what `vq-train order-only` does afterwards, but the codes trained are the model's)",
    )

    p = sub.add_parser("finetune", help="IMDB sentiment with the per-token head (mean score)")
    common(p)
    train_loop(p, steps=300, lr=1e-4, batch=8, seq=384)
    p.add_argument("--model", required=True, help="VQ model folder (from distill) or, with --dense, an OPT folder")
    p.add_argument("--dense", action="store_true", help="fine-tune a dense softmax OPT (the comparison row)")
    p.add_argument(
        "--tail-from",
        default=None,
        help="VQ model folder whose post-vq tail (what follows the last quantiser) starts the fine-tune: a "
        "fine-tuned model's tail on a trunk distilled on from it (codes and locality unchanged)",
    )
    p.add_argument("--tokenizer", default=None, help="tokenizer.json (default: MODEL/tokenizer.json)")
    p.add_argument(
        "--scope",
        choices=("all", "post-vq"),
        default="all",
        help="all: every parameter; post-vq: only what follows the last quantiser (codes unchanged), "
        "trained on cached features",
    )
    p.add_argument(
        "--w-lm", type=T.non_negative_float, default=0.2, help="weight of the LM loss kept during fine-tuning"
    )
    p.add_argument(
        "--crop",
        type=T.non_negative_int,
        default=0,
        help="post-vq: train on a random run of this many tokens of each longer review (0: whole)",
    )
    p.add_argument(
        "--lm-fraction",
        type=T.probability,
        default=0.125,
        help="post-vq: share of rows that get the LM term (the vocabulary projection is costly)",
    )
    p.add_argument(
        "--w-token", type=T.non_negative_float, default=1.0, help="weight of the per-token label cross-entropy"
    )
    p.add_argument(
        "--head-lr-mult", type=T.positive_float, default=10.0, help="learning-rate multiplier of the new head"
    )
    p.add_argument(
        "--head-fit",
        type=T.non_negative_int,
        default=0,
        help="first fit the head on frozen features of this many training reviews (0: no)",
    )
    p.add_argument(
        "--augment",
        type=mix_spec,
        default=None,
        help="writing-style mix, e.g. original=3,lowercase=1,respaced=1,lower_respaced=1,sentence=1,"
        "truncated=1,after_context=2: each training review becomes one variant drawn with these "
        "weights (after_context: unrelated text before it, not scored)",
    )
    p.add_argument(
        "--neutral",
        type=T.non_negative_int,
        default=0,
        help="neutral paragraphs (technical, encyclopedic, narration) trained towards a uniform target (0: none)",
    )
    p.add_argument(
        "--neutral-share",
        type=T.probability,
        default=0.25,
        help="share of every batch drawn from the neutral paragraphs (with --neutral)",
    )
    p.add_argument(
        "--eval-every", type=T.non_negative_int, default=0, help="log held-out accuracy every N steps (0: never)"
    )
    p.add_argument("--eval-reviews", type=T.positive_int, default=200, help="held-out reviews for --eval-every")
    p.add_argument("--holdout", type=T.non_negative_int, default=1000, help="IMDB train rows kept for validation")
    p.add_argument("--limit", type=T.positive_int, default=None, help="use only this many training reviews")
    p.add_argument("--pseudo-grad", choices=("gumbel", "ste"), default="gumbel")
    p.add_argument("--tau", type=T.positive_float, default=1.0)
    p.add_argument("--ema-decay", type=T.float_range(0.0, 1.0, hi_open=True), default=0.99)
    add_dead_threshold(p)
    p.add_argument("--locality", type=T.non_negative_float, default=1.0)
    add_margin(p)
    add_locality_layers(p)
    p.add_argument("--edit-batch", type=T.non_negative_int, default=1)
    p.add_argument(
        "--refit-codes",
        type=live_codes,
        default=None,
        metavar="LAYER=CODES",
        help="before the first step, refit these layers' codebooks by k-means with this many codes in use and "
        "park the rest (e.g. 0=8: fewer, wider cells where one-token edits flip codes most)",
    )

    p = sub.add_parser("order-only", help="make a model read only the order of its tokens (constant position tables)")
    p.add_argument("--model", required=True, help="model folder")
    p.add_argument("--out", required=True, help="output model folder")

    p = sub.add_parser(
        "average", help="one model whose tail is the mean of several tails fine-tuned on one trunk (a model soup)"
    )
    p.add_argument("--models", nargs="+", required=True, help="model folders: tails fine-tuned on one trunk")
    p.add_argument("--out", required=True, help="output model folder")

    p = sub.add_parser("calibrate", help="fit a temperature on held-out reviews in every style; fold it into the head")
    common(p)
    p.add_argument("--model", required=True, help="fine-tuned model folder")
    p.add_argument(
        "--holdout",
        type=T.non_negative_int,
        default=1000,
        help="the IMDB train rows fine-tuning held out (same --seed)",
    )
    p.add_argument(
        "--calibration-start",
        type=T.non_negative_int,
        default=500,
        help="first held-out row used (evaluate reports on the rows before it)",
    )
    p.add_argument("--calibration-reviews", type=T.positive_int, default=500)
    p.add_argument("--max-tokens", type=T.positive_int, default=512, help="review tokens scored (BOS excluded)")
    p.add_argument(
        "--centre-neutral",
        type=T.non_negative_int,
        default=0,
        help="then centre this many neutral paragraphs (part 'calibration'): half lean each way (0: off)",
    )

    p = sub.add_parser("evaluate", help="accuracy/F1, code usage, VQ gap, flip rate -> JSON")
    common(p)
    p.add_argument("--model", required=True, help="fine-tuned VQ model folder")
    p.add_argument("--dense-model", default=None, help="fine-tuned dense model folder (comparison row)")
    p.add_argument("--teacher", default=None, help="teacher folder (its teacher_report.json is copied)")
    p.add_argument("--no-imdb", action="store_true", help="skip accuracy (e.g. a model before fine-tuning)")
    p.add_argument("--test-limit", type=T.positive_int, default=2000, help="IMDB test reviews scored (seeded subset)")
    p.add_argument("--max-tokens", type=T.positive_int, default=512, help="review tokens scored (BOS excluded)")
    p.add_argument("--lm-batches", type=T.positive_int, default=4)
    p.add_argument(
        "--lm-seq", type=T.int_range(2), default=None, help="held-out LM sequence length (default: the model's window)"
    )
    p.add_argument("--edit-docs", type=T.positive_int, default=8, help="documents for flip rate and engine costs")
    p.add_argument("--edit-seq", type=T.int_range(2), default=1024)
    p.add_argument(
        "--robust-reviews",
        type=T.non_negative_int,
        default=500,
        help="held-out train reviews per writing-style variant (0: skip the robustness sections)",
    )
    p.add_argument(
        "--context-reviews",
        type=T.positive_int,
        default=200,
        help="held-out train paragraphs scored alone and after unrelated text",
    )
    p.add_argument(
        "--holdout",
        type=T.non_negative_int,
        default=1000,
        help="the IMDB train rows fine-tuning held out (same --seed): where robustness reviews come from",
    )
    p.add_argument(
        "--neutral-paragraphs",
        type=T.non_negative_int,
        default=1000,
        help="held-out neutral paragraphs (neutral.py, part 'test') for the tone-hint section (0: skip)",
    )
    p.add_argument(
        "--protocol-pairs",
        type=T.non_negative_int,
        default=8,
        help="revision pairs for the paper protocol's wall clock against a paragraph cache (protocol.py; 0: skip)",
    )

    p = sub.add_parser("export", help="write the model folder (config, weights, tokenizer, card)")
    p.add_argument("--model", required=True, help="fine-tuned VQ model folder")
    p.add_argument("--eval", default=None, help="evaluate's JSON, merged into card.json")
    p.add_argument("--out", required=True)
    p.add_argument("--fp16", action="store_true", help="store weights in float16 (smaller folder)")
    p.add_argument(
        "--commands",
        default=None,
        help="text file with the commands that produced the model (one a line), stored in card.json",
    )
    p.add_argument("--max-mb", type=T.positive_float, default=40.0)


def run(args) -> int:
    if args.cmd == "distill":
        from .distill import train_distill

        print(f"distilled -> {train_distill(args)}")
    elif args.cmd == "finetune":
        from .finetune import train_finetune

        print(f"fine-tuned -> {train_finetune(args)}")
    elif args.cmd == "order-only":
        from .order_only import run_order_only

        print(f"order-only -> {run_order_only(args)}")
    elif args.cmd == "average":
        from .average import run_average

        print(f"averaged -> {run_average(args)}")
    elif args.cmd == "calibrate":
        from .calibrate import run_calibrate

        print(f"calibrated -> {run_calibrate(args)}")
    elif args.cmd == "evaluate":
        from .evaluate import run_evaluate

        print(f"evaluation -> {run_evaluate(args)}")
    elif args.cmd == "export":
        from .export import export

        print(f"exported -> {export(args)}")
    else:
        raise SystemExit(f"unknown command {args.cmd}")
    return 0
