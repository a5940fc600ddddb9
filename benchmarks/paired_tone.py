"""Tone of two or more models on the same held-out texts, with each difference's paired uncertainty.

    python -m benchmarks.paired_tone REFERENCE CANDIDATE [CANDIDATE ...] [--label NAME ...]
        [--reviews 4000] [--skip 2000] [--neutral 2000] [--resamples 1000] [--threads 1]
        [--name paired_tone] [--out benchmarks/results]

Why: a model card reads tone on 500 held-out reviews per writing style, where one point of
accuracy is five reviews and the standard error of a difference between two models is about a
point. Whether a candidate reads tone "no worse" than the bundled model in every style cannot be
told from such samples. This script scores the same, larger sample with every model and reports
each candidate's difference from REFERENCE with a 95% interval from a paired bootstrap: the
texts are resampled, and each resample is scored for both models at once, so what the two
models share (hard reviews, easy ones) cancels out.

Texts (never eval/): IMDB test reviews of a seeded shuffle, rows --skip to --skip + --reviews
(the cards read the first 2,000, so by default these are reviews no choice has looked at), each
written in every style of training.robustness.STYLES; and --neutral held-out paragraphs without
an opinion (training.neutral, part 'test'). Each text is scored alone, as the server scores a
document of one paragraph, at the first 512 tokens.

Per set and model: accuracy, and the tone hints the server's defaults would show (share shown;
share of shown hints that are right), and the precision each candidate would have at the
reference's share of shown hints (its most confident texts, as many as the reference shows): a
precision difference that is only a matter of where a model's confidence sits then disappears.
On neutral paragraphs only the share shown means anything; fewer is better. A difference whose
whole interval lies on the losing side is marked "worse". REFERENCE and each CANDIDATE are model
folders, or `bundled` for the model in the package. `--cache DIR` keeps each model's readings
(keyed by its weights and the texts) so that a later run with another candidate reads only that one.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
import zlib
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import add_models, data_dir, labelled_models, markdown_table, recorded_path, write_results

SETS_NEUTRAL = "neutral paragraphs"
MAX_TOKENS = 512


@dataclass(frozen=True)
class Outcome:
    """One model's reading of one set of texts, per text."""

    correct: np.ndarray  # bool (n,): top class equals the label (all False for neutral texts)
    shown: np.ndarray  # bool (n,): a tone hint would be shown at the server's defaults
    confidence: np.ndarray  # float (n,): the top class's probability, -inf where too short for a hint


@dataclass(frozen=True)
class Figure:
    """A figure of one model on one set; for a candidate also its difference from the reference."""

    value: float | None
    diff: float | None = None
    low: float | None = None
    high: float | None = None
    worse: bool = False


FIGURES = ("accuracy", "shown_share", "shown_precision", "precision_at_reference_share")
LOWER_IS_BETTER = {(SETS_NEUTRAL, "shown_share")}


def figure_of(name: str, correct: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """A figure over the last axis, for one sample (n,) or many resamples (b, n) at once."""
    if name == "accuracy":
        return correct.mean(-1)
    if name == "shown_share":
        return shown.mean(-1)
    hits = (correct & shown).sum(-1)
    count = shown.sum(-1)
    return np.where(count > 0, hits / np.maximum(count, 1), np.nan)


def at_share(ref: Outcome, cand: Outcome, idx: np.ndarray) -> np.ndarray:
    """The candidate's shown precision had its threshold been set to show as many hints as the
    reference shows, per resample (rows of ``idx``): its most confident texts, as many as the
    reference shows there. What is left of a precision difference once the two models' thresholds
    (calibration) are matched: how well each ranks its right hints above its wrong ones."""
    shown_counts = ref.shown[idx].sum(-1)
    order = np.argsort(-cand.confidence[idx], axis=-1, kind="stable")
    right = np.take_along_axis(cand.correct[idx], order, -1).cumsum(-1)
    k = np.maximum(shown_counts, 1)
    return np.where(shown_counts > 0, right[np.arange(len(idx)), k - 1] / k, np.nan)


def paired_figure(name: str, ref: Outcome, cand: Outcome, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(reference, candidate) values of a figure per resample (rows of ``idx``)."""
    if name == "precision_at_reference_share":
        return figure_of("shown_precision", ref.correct[idx], ref.shown[idx]), at_share(ref, cand, idx)
    return figure_of(name, ref.correct[idx], ref.shown[idx]), figure_of(name, cand.correct[idx], cand.shown[idx])


def compare(ref: Outcome, cand: Outcome, name: str, set_name: str, rng: np.random.Generator, resamples: int) -> Figure:
    """The candidate's figure, its difference from the reference and a 95% paired bootstrap interval."""
    n = len(ref.correct)
    base, value = (float(x[0]) for x in paired_figure(name, ref, cand, np.arange(n)[None]))
    diff, diffs = value - base, []
    for start in range(0, resamples, 100):  # in chunks: (100, n) index arrays
        idx = rng.integers(0, n, (min(100, resamples - start), n))
        ref_values, cand_values = paired_figure(name, ref, cand, idx)
        diffs.append(cand_values - ref_values)
    low, high = np.nanpercentile(np.concatenate(diffs), [2.5, 97.5])
    worse = bool(low > 0) if (set_name, name) in LOWER_IS_BETTER else bool(high < 0)
    return Figure(value, diff, float(low), float(high), worse)


def resampler(seed: int, set_name: str, figure: str) -> np.random.Generator:
    """The bootstrap's random source for one figure of one set: every candidate is resampled with
    the same texts, whichever other models a run compares, so adding a model moves no interval."""
    return np.random.default_rng([seed, zlib.crc32(f"{set_name}/{figure}".encode())])


def texts(args) -> dict[str, list[tuple[str, int]]]:
    """Every set of (text, label) the models read: the reviews in each style, then neutral paragraphs."""
    from training.data import imdb_examples
    from training.neutral import neutral_paragraphs
    from training.reviews import NEUTRAL
    from training.robustness import STYLES

    root = data_dir(args.data)
    rows, _ = imdb_examples(root, "test", limit=args.skip + args.reviews, seed=args.seed)
    rows = rows[args.skip :]
    sets = {f"reviews, {style}": [(f(t), y) for t, y in rows] for style, f in STYLES.items()}
    if args.neutral:
        paragraphs = neutral_paragraphs(root, "test", args.neutral, seed=args.seed)
        sets[SETS_NEUTRAL] = [(p.text, NEUTRAL) for p in paragraphs]
    return sets


def read_sets(folder: Path, sets: dict[str, list[tuple[str, int]]]) -> dict[str, Outcome]:
    """One model's outcomes on every set, under the server's rule for showing a tone hint."""
    from inference import load_model_folder
    from inference.positions import spread_positions
    from training.reviews import document_scores, encode_reviews
    from training.tokenizer import load_tokenizer
    from training.tone_hints import DEFAULTS, word_count

    net, _ = load_model_folder(folder)
    tok = load_tokenizer(folder / "tokenizer.json")
    spread = functools.partial(spread_positions, pool=net.config.position_pool)
    out = {}
    for name, rows in sets.items():
        probs = document_scores(net, encode_reviews(tok, rows, MAX_TOKENS), spread)
        conf, pred = probs.max(-1)
        words = torch.tensor([word_count(t) for t, _ in rows])
        long_enough = words >= DEFAULTS.tone_min_words
        out[name] = Outcome(
            correct=(pred == torch.tensor([y for _, y in rows])).numpy(),
            shown=((conf >= DEFAULTS.sentiment_threshold) & long_enough).numpy(),
            confidence=torch.where(long_enough, conf.double(), -torch.inf).numpy(),
        )
    return out


def cached_read(folder: Path, sets: dict[str, list[tuple[str, int]]], cache: Path | None) -> dict[str, Outcome]:
    """``read_sets``, kept in ``cache`` under the model's weights and the texts' digests."""
    if cache is None:
        return read_sets(folder, sets)
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()[:16]
    texts_digest = hashlib.sha256(json.dumps([MAX_TOKENS, sets], sort_keys=True).encode()).hexdigest()[:16]
    path = cache / f"{digest}-{texts_digest}.npz"
    if path.is_file():
        saved = np.load(path)
        return {name: Outcome(**{f.name: saved[f"{f.name}/{name}"] for f in fields(Outcome)}) for name in sets}
    out = read_sets(folder, sets)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{f"{f.name}/{name}": getattr(o, f.name) for name, o in out.items() for f in fields(Outcome)})
    return out


def run(args) -> dict:
    torch.set_num_threads(args.threads)
    models = labelled_models(args)
    labels, folders = list(models), list(models.values())
    sets = texts(args)
    cache = Path(args.cache) if args.cache else None
    outcomes = [cached_read(f, sets, cache) for f in folders]
    table: dict[str, dict[str, dict[str, dict]]] = {}
    for set_name in sets:
        ref = outcomes[0][set_name]
        per_figure = {}
        for fig in FIGURES:
            if set_name == SETS_NEUTRAL and fig != "shown_share":
                continue
            own = "shown_precision" if fig == "precision_at_reference_share" else fig
            row = {labels[0]: asdict(Figure(float(figure_of(own, ref.correct, ref.shown))))}
            for label, outcome in zip(labels[1:], outcomes[1:]):
                rng = resampler(args.seed, set_name, fig)  # the same resamples for every candidate
                row[label] = asdict(compare(ref, outcome[set_name], fig, set_name, rng, args.resamples))
            per_figure[fig] = row
        table[set_name] = per_figure
    return {
        "models": {label: recorded_path(f) for label, f in zip(labels, folders)},
        "reference": labels[0],
        "texts": {name: len(rows) for name, rows in sets.items()},
        "reviews": f"imdb_test seeded shuffle (seed {args.seed}), rows {args.skip}-{args.skip + args.reviews}",
        "resamples": args.resamples,
        "command": "python -m benchmarks.paired_tone " + " ".join(args.argv),
        "figures": table,
    }


def _cell(fig: dict, reference: bool) -> str:
    if fig["value"] is None or np.isnan(fig["value"]):
        return "-"
    text = f"{100 * fig['value']:.1f}%"
    if reference:
        return text
    mark = " **worse**" if fig["worse"] else ""
    return f"{text} ({100 * fig['diff']:+.1f} [{100 * fig['low']:+.1f}, {100 * fig['high']:+.1f}]){mark}"


def report(results: dict) -> str:
    labels = list(results["models"])
    rows = []
    for set_name, per_figure in results["figures"].items():
        for fig, cells in per_figure.items():
            rows.append(
                [f"{set_name} ({results['texts'][set_name]})", fig.replace("_", " ")]
                + [_cell(cells[label], label == results["reference"]) for label in labels]
            )
    lines = [
        "# Tone of the same held-out texts, paired",
        "",
        f"`{results['command']}`",
        "",
        f"Reviews: {results['reviews']}, in every writing style; neutral paragraphs: held-out documentation, "
        "encyclopedia and narration. Each text scored alone; hints shown at the server's defaults. "
        f"Candidates: value (difference from {results['reference']} [95% paired bootstrap interval, "
        f"{results['resamples']} resamples]), in points.",
        "",
        markdown_table(["set (texts)", "figure"] + labels, rows),
        "",
        "Models: " + ", ".join(f"{k}: `{v}`" for k, v in results["models"].items()),
        "",
    ]
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_models(p, "REFERENCE then candidates: model folders")
    p.add_argument("--reviews", type=int, default=4000, help="IMDB test reviews per writing style")
    p.add_argument("--skip", type=int, default=2000, help="shuffled test rows skipped (what the cards read)")
    p.add_argument("--neutral", type=int, default=2000, help="held-out neutral paragraphs (0: none)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per difference")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--cache", help="folder keeping each model's readings for later runs")
    p.add_argument("--name", default="paired_tone", help="results file name (NAME.md, NAME.json)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = p.parse_args(argv)
    if len(args.models) < 2:
        p.error("give a reference model and at least one candidate")
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    results = run(args)
    write_results(args.out, args.name, results, report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
