"""Temperature calibration of the document score, folded into the classification head.

Why: "negative tone (0.91)" should be right about 91% of the time. A head trained with the
document NLL on one style is over-confident on others; one temperature T, fitted by NLL on
held-out training reviews written in every style variant (``robustness.STYLES``), brings the
confidence in line with the accuracy.

Why folding is exact: the engine's document score is softmax(mean_t log_softmax(z_t)) with
z_t = W h_t + b. The log-sum-exp of each token is the same for every class, so this equals
softmax(mean_t z_t): dividing W and b by T divides the document logits by T, for every span and
after every edit, with no change to the engine, the server or the incremental update.

Rows: the IMDB training reviews that fine-tuning held out (``--holdout``), from
``--calibration-start`` on; ``evaluate`` reports on the rows before that, so the temperature is
never fitted on the rows it is judged on. Neutral paragraphs do not enter the temperature: their
target is "no hint", not a calibrated probability of a label.

``--centre-neutral N`` then moves the two classes' logits apart by one offset, folded into the
head's bias (as exact as the temperature: it adds the same constant to every token's logit
difference, so to every span's), chosen so that half of N paragraphs without an opinion (the
``calibration`` part of ``neutral.py``'s split by document, which neither fine-tuning nor the
benchmarks' test figures read) lean each way. Why: the server's document gate (``toneGate``)
hides the tones of a document whose paragraphs' opinions cancel out, and on clean prose they
cancel only if the model has no favourite label there. A model that calls most neutral
paragraphs mildly positive lets its document score through the gate, and with it every
paragraph that crosses the threshold on the same side.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from . import common
from .data import imdb_examples
from .robustness import style_scores
from .tone_hints import expected_calibration_error, scaled


@dataclass(frozen=True)
class Calibration:
    """A fitted temperature and what it did on the rows it was fitted on."""

    temperature: float
    nll_before: float
    nll_after: float
    ece_before: float
    ece_after: float
    ece_by_style_before: dict[str, float]
    ece_by_style_after: dict[str, float]
    accuracy_by_style: dict[str, float]
    rows: int
    data: str
    seconds: float


def nll(probs: torch.Tensor, labels: torch.Tensor) -> float:
    return float(F.nll_loss(probs.clamp(min=1e-12).log(), labels))


def fit_temperature(probs: torch.Tensor, labels: torch.Tensor, lo: float = 0.05, hi: float = 20.0) -> float:
    """The temperature minimising the NLL of ``scaled(probs, T)``: a log-spaced grid, then a
    golden-section search around its best point (the NLL is unimodal in log T)."""
    grid = torch.logspace(math.log10(lo), math.log10(hi), 200).tolist()
    losses = [nll(scaled(probs, t), labels) for t in grid]
    i = min(range(len(grid)), key=losses.__getitem__)
    a, b = math.log(grid[max(0, i - 1)]), math.log(grid[min(len(grid) - 1, i + 1)])
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if nll(scaled(probs, math.exp(c)), labels) <= nll(scaled(probs, math.exp(d)), labels):
            b = d
        else:
            a = c
    return math.exp((a + b) / 2)


@dataclass(frozen=True)
class NeutralCentre:
    """The logit offset that centres paragraphs without an opinion, and what it did to them."""

    offset: float  # added to the positive class's logit minus the negative class's
    positive_rate_before: float
    positive_rate_after: float
    paragraphs: int
    data: str


def neutral_offset(probs: torch.Tensor) -> float:
    """Minus the median logit difference (positive minus negative) of ``probs`` (N, 2): after
    adding it, half of the texts lean each way."""
    logits = probs.clamp(min=1e-12).log()
    return -float((logits[:, 1] - logits[:, 0]).median())


@torch.no_grad()
def fold_offset(net, offset: float) -> None:
    """Add ``offset`` to the head's positive-minus-negative logit difference, split evenly."""
    net.score_head.bias[1] += offset / 2
    net.score_head.bias[0] -= offset / 2


def centre_neutral(net, tok, texts: list[str], max_tokens: int, positions_for, data: str) -> NeutralCentre:
    """Fit and fold the neutral offset of a two-class model (see the module docstring)."""
    from .reviews import document_scores, encode_reviews

    if net.config.num_labels != 2:
        raise SystemExit(f"--centre-neutral needs a two-class head, not {net.config.num_labels} classes")
    probs = document_scores(net, encode_reviews(tok, [(t, 0) for t in texts], max_tokens), positions_for)
    offset = neutral_offset(probs)
    fold_offset(net, offset)
    logits = probs.clamp(min=1e-12).log()
    diff = logits[:, 1] - logits[:, 0]
    return NeutralCentre(
        offset=offset,
        positive_rate_before=float((diff > 0).float().mean()),
        positive_rate_after=float((diff + offset > 0).float().mean()),
        paragraphs=len(texts),
        data=data,
    )


@torch.no_grad()
def fold_temperature(net, temperature: float) -> None:
    """Divide the classification head by ``temperature`` in place (exact, see the module docstring)."""
    net.score_head.weight.div_(temperature)
    net.score_head.bias.div_(temperature)


def calibrate(net, tok, rows: list[tuple[str, int]], max_tokens: int, positions_for, data: str) -> Calibration:
    """Fit the temperature on ``rows`` in every style (pooled), fold it into ``net``, and report."""
    t0 = time.time()
    by_style = style_scores(net, tok, rows, max_tokens, positions_for)
    labels = torch.tensor([y for _, y in rows])
    pooled = torch.cat(list(by_style.values()))
    pooled_labels = labels.repeat(len(by_style))
    temperature = fit_temperature(pooled, pooled_labels)
    fold_temperature(net, temperature)
    after = scaled(pooled, temperature)
    return Calibration(
        temperature=temperature,
        nll_before=nll(pooled, pooled_labels),
        nll_after=nll(after, pooled_labels),
        ece_before=expected_calibration_error(pooled, pooled_labels),
        ece_after=expected_calibration_error(after, pooled_labels),
        ece_by_style_before={k: expected_calibration_error(v, labels) for k, v in by_style.items()},
        ece_by_style_after={k: expected_calibration_error(scaled(v, temperature), labels) for k, v in by_style.items()},
        accuracy_by_style={k: float((v.argmax(-1) == labels).float().mean()) for k, v in by_style.items()},
        rows=len(pooled),
        data=data,
        seconds=round(time.time() - t0, 1),
    )


def run_calibrate(args) -> Path:
    from inference import Tokenizer, load_model_folder, save_model_folder
    from inference.positions import spread_positions

    from .tokenizer import load_tokenizer

    common.set_threads(args.threads)
    common.seed_everything(args.seed)
    net, card = load_model_folder(args.model)
    if "calibration" in card:
        raise SystemExit(f"{args.model} is already calibrated (T = {card['calibration']['temperature']:.4f})")
    tok_path = Path(args.model) / "tokenizer.json"
    _, held = imdb_examples(args.data, "train", seed=args.seed, holdout=args.holdout)
    rows = held[args.calibration_start : args.calibration_start + args.calibration_reviews]
    if len(rows) < args.calibration_reviews:
        raise SystemExit(
            f"--holdout {args.holdout} leaves {len(rows)} rows from --calibration-start "
            f"{args.calibration_start}, fewer than --calibration-reviews {args.calibration_reviews}"
        )
    pool = net.config.position_pool
    data = (
        f"held-out imdb_train rows {args.calibration_start}-{args.calibration_start + len(rows)} of the "
        f"--holdout {args.holdout} (seed {args.seed}), in every style of robustness.STYLES, first "
        f"{args.max_tokens} tokens"
    )
    tok = load_tokenizer(tok_path)
    result = calibrate(net, tok, rows, args.max_tokens, lambda n: spread_positions(n, pool), data)
    card["calibration"] = asdict(result)
    if args.centre_neutral:
        from .neutral import neutral_paragraphs

        texts = [p.text for p in neutral_paragraphs(args.data, "calibration", args.centre_neutral, seed=args.seed)]
        where = f"neutral.neutral_paragraphs part 'calibration', {len(texts)} paragraphs (seed {args.seed})"
        centre = centre_neutral(net, tok, texts, args.max_tokens, lambda n: spread_positions(n, pool), where)
        card["calibration"]["neutral_centre"] = asdict(centre)
        print(
            f"neutral offset {centre.offset:+.4f}: paragraphs leaning positive "
            f"{centre.positive_rate_before:.1%} -> {centre.positive_rate_after:.1%}"
        )
    out = Path(args.out)
    save_model_folder(net.eval(), Tokenizer.from_file(tok_path), out, card)
    print(f"T = {result.temperature:.4f}: ECE {result.ece_before:.4f} -> {result.ece_after:.4f} on {result.rows} rows")
    return out
