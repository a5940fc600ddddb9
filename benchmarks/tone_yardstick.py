"""Tone hints on the project's yardstick: held-out opinion text in other styles, and neutral prose.

    python -m benchmarks.tone_yardstick --model MODEL [--model MODEL ...] [--reviews 400] [--sentences 1000]
        [--paragraphs 600] [--seed 0] [--threads 1]

Reports on `$VQ_LSP_DATA/eval/` only, which no training or tuning run reads, so the figures say how the
tone hints generalise. Three sets, each a seeded random sample:

- reviews: Pang and Lee polarity v2.0 film reviews (full length, lowercased and tokenized), balanced;
- sentences: Pang and Lee sentence polarity v1.0 snippets, balanced;
- PEP paragraphs: prose paragraphs of the latest revision of each Python Enhancement Proposal, read as
  reStructuredText by the server's own markup rules (`vq_lsp.hints.markup`: no literal blocks, directives,
  tables or titles) and kept when they have at least `toneMinWords` words, i.e. the paragraphs the server
  could give a tone, less the header fields at the top of each PEP; their right answer is "no tone".

Each text is scored alone by a fresh `IncrementalDocument` (a dense pass; its score is the mean of the
per-token class scores, what the server shows for a one-paragraph text or with `context: paragraph`), at the
server's default precision. Whether a hint is shown is decided by the server's rule
(`vq_lsp.hints.selection.shown_tone` with the default `DiagnosticSettings`). Figures per set: accuracy and
positive rate (opinion sets), the share of texts with a shown tone hint, and the share of shown hints
that are right (opinion sets). Results: benchmarks/results/tone_yardstick.{md,json}.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import random
import re
import shlex
import sys
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from benchmarks.common import REPO, data_dir, markdown_table, write_results
from vq_lsp.hints import markup
from vq_lsp.hints.selection import shown_tone
from vq_lsp.settings import DiagnosticSettings

NAME = "tone_yardstick"
PRECISION = "float32"  # the server's default `precision`
PREAMBLE = re.compile(r"PEP: *\d+\s*\n")  # a PEP's header fields (Title:, Author:, ...): metadata, not prose


@dataclass(frozen=True)
class Text:
    """One text to score: its words as the server counts them, and its label (None: neutral prose)."""

    text: str
    label: str | None
    n_words: int


@dataclass(frozen=True)
class SetFigures:
    """What one model does on one set; None where a figure does not apply (no labels, no hint shown)."""

    set: str
    texts: int
    accuracy: float | None
    positive_rate: float
    shown_share: float
    shown_right: float | None
    seconds: float


# ----------------------------------------------------------------------------------- the eval sets
def count_words(text: str, kind: str) -> int:
    """Words of a text's tone blocks as the server counts them (prose words only)."""
    return sum(words for _, _, words in markup.layout(text, kind).tone)


def movie_reviews(folder: Path, n: int, seed: int) -> list[Text]:
    """n/2 positive and n/2 negative full-length reviews, a seeded sample."""
    out = []
    with zipfile.ZipFile(folder / "movie_reviews.zip") as z:
        for label, tag in (("negative", "neg"), ("positive", "pos")):
            names = sorted(x for x in z.namelist() if x.startswith(f"movie_reviews/{tag}/") and x.endswith(".txt"))
            for name in random.Random(f"{seed}-{tag}").sample(names, min(n // 2, len(names))):
                text = z.read(name).decode("utf-8", errors="replace").strip()
                out.append(Text(text, label, count_words(text, markup.PLAIN)))
    return out


def sentence_snippets(folder: Path, n: int, seed: int) -> list[Text]:
    """n/2 positive and n/2 negative snippets, a seeded sample (the files are Latin-1)."""
    out = []
    with zipfile.ZipFile(folder / "sentence_polarity.zip") as z:
        for label, tag in (("negative", "neg"), ("positive", "pos")):
            lines = [s.strip() for s in z.read(f"sentence_polarity/rt-polarity.{tag}").decode("latin-1").splitlines()]
            lines = [s for s in lines if s]
            for text in random.Random(f"{seed}-{tag}").sample(lines, min(n // 2, len(lines))):
                out.append(Text(text, label, count_words(text, markup.PLAIN)))
    return out


def pep_paragraphs(folder: Path, n: int, seed: int, min_words: int) -> list[Text]:
    """A seeded sample of the prose paragraphs (reStructuredText tone blocks of at least min_words
    words) of each PEP's latest revision."""
    pool = []
    with gzip.open(folder / "python_peps.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["revisions"][-1]["text"]
            for a, b, words in markup.layout(text, markup.RST).tone:
                if words >= min_words and not PREAMBLE.match(text, a):
                    pool.append(Text(text[a:b], None, words))
    return random.Random(f"{seed}-peps").sample(pool, min(n, len(pool)))


# ----------------------------------------------------------------------------------- scoring
def score(model, texts: list[Text], label: str, cfg: DiagnosticSettings) -> SetFigures:
    """Figures of one model on one set: each text scored alone by a dense pass."""
    import inference

    t0 = time.perf_counter()
    if "positive" not in model.config.labels:
        raise ValueError(f"the model's labels {model.config.labels} have no 'positive'")
    shown, right_shown, correct, positive, scored = 0, 0, 0, 0, 0
    for t in texts:
        ids = model.tokenizer.encode(t.text)
        if not ids:
            continue
        scores = inference.IncrementalDocument(model, ids).scores
        top = max(scores, key=scores.get)
        scored += 1
        positive += top == "positive"
        correct += t.label is not None and top == t.label
        hint = shown_tone(scores, t.n_words, cfg)
        if hint is not None:
            shown += 1
            right_shown += t.label is not None and hint[0] == t.label
    opinion = texts[0].label is not None if texts else False
    return SetFigures(
        set=label,
        texts=scored,
        accuracy=correct / scored if opinion and scored else None,
        positive_rate=positive / scored if scored else 0.0,
        shown_share=shown / scored if scored else 0.0,
        shown_right=right_shown / shown if opinion and shown else None,
        seconds=round(time.perf_counter() - t0, 1),
    )


def run(args) -> dict:
    import inference

    torch.set_num_threads(args.threads)
    cfg = DiagnosticSettings()
    folder = data_dir(args.data) / "eval"
    sets = {
        "movie reviews (lowercased, tokenized)": movie_reviews(folder, args.reviews, args.seed),
        "review sentences": sentence_snippets(folder, args.sentences, args.seed),
        "PEP prose paragraphs (neutral)": pep_paragraphs(folder, args.paragraphs, args.seed, cfg.tone_min_words),
    }
    names = args.name or [Path(m).name for m in args.model]
    if len(names) != len(args.model):
        raise SystemExit("give one --name per --model")
    models = []
    for path, name in zip(args.model, names):
        model = inference.load_model(path, device="cpu", dtype=PRECISION)
        figures = [score(model, texts, label, cfg) for label, texts in sets.items()]
        models.append({"name": name, "sets": [asdict(f) for f in figures]})
        print(f"{name}: done", file=sys.stderr)
    return {
        "command": "python -m benchmarks.tone_yardstick " + shlex.join(shown_argv(args.argv, names)),
        "hardware": f"{'one CPU core' if args.threads == 1 else f'{args.threads} CPU cores'} "
        f"({platform.machine()}, shared with other jobs), {PRECISION}",
        "rule": {"sentiment_threshold": cfg.sentiment_threshold, "tone_min_words": cfg.tone_min_words},
        "seed": args.seed,
        "models": models,
    }


def shown_argv(argv: list[str], names: list[str]) -> list[str]:
    """The arguments as the report shows them: a model folder outside the repository appears as
    <its label> (the n-th --model gets the n-th name), since a path on one machine means nothing to a reader."""
    out, models = [], 0
    for i, arg in enumerate(argv):
        if i > 0 and argv[i - 1] == "--model":
            outside = not Path(arg).resolve().is_relative_to(REPO)
            out.append(f"<{names[models]}>" if outside else arg)
            models += 1
        else:
            out.append(arg)
    return out


def percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def report(results: dict) -> str:
    rule = results["rule"]
    header = ["set", "model", "texts", "accuracy", "positive rate", "tone hint shown on", "shown hints that are right"]
    rows = [
        [
            s["set"],
            m["name"],
            str(s["texts"]),
            percent(s["accuracy"]),
            percent(s["positive_rate"]),
            percent(s["shown_share"]),
            percent(s["shown_right"]),
        ]
        for i in range(len(results["models"][0]["sets"]))
        for m in results["models"]
        for s in [m["sets"][i]]
    ]
    return "\n".join(
        [
            "# Tone hints on the yardstick (`$VQ_LSP_DATA/eval/`, never read by training or tuning)",
            "",
            "Seeded random samples: Pang and Lee film reviews (full length, lowercased and tokenized, balanced), "
            "their sentence polarity snippets (balanced), and prose paragraphs of the latest revision of each PEP "
            "(reStructuredText read by the server's markup rules, header fields left out, paragraphs of at least "
            f"{rule['tone_min_words']} words; a tone hint on them is wrong). Each text is scored alone by a dense "
            "pass (a fresh IncrementalDocument: the mean of the per-token class scores), which is the server's tone "
            "score for a one-paragraph text (reviews and snippets are one paragraph each) and, for a PEP paragraph, "
            "its score with the `context: paragraph` setting. A tone hint is shown where the "
            f"server's rule shows one: top class at least {rule['sentiment_threshold']} and at least "
            f"{rule['tone_min_words']} words.",
            "",
            f"Command: `{results['command']}` (a model folder outside the repository appears by its label in <>).",
            "",
            f"Hardware: {results['hardware']}.",
            "",
            markdown_table(header, rows),
            "",
        ]
    )


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", action="append", required=True, help="model folder (repeat to compare models)")
    p.add_argument("--name", action="append", help="label of each --model in the report (default: folder name)")
    p.add_argument("--reviews", type=int, default=400, help="film reviews, half positive")
    p.add_argument("--sentences", type=int, default=1000, help="sentence snippets, half positive")
    p.add_argument("--paragraphs", type=int, default=600, help="PEP prose paragraphs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"), help=f"folder for {NAME}.{{md,json}}")
    args = p.parse_args(argv)
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    results = run(args)
    write_results(args.out, NAME, results, report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
