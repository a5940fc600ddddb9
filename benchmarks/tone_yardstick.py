"""Tone hints on the project's yardstick: held-out opinion text in other styles, and neutral prose.

    python -m benchmarks.tone_yardstick --model MODEL [--model MODEL ...] [--reviews 400] [--sentences 1000]
        [--peps 60] [--seed 0] [--threads 1]

Reports on `$VQ_LSP_DATA/eval/` only, which no training or tuning run reads, so the figures say how the
tone hints generalise. Three sets, each a seeded random sample:

- reviews: Pang and Lee polarity v2.0 film reviews (full length, lowercased and tokenized), balanced;
- sentences: Pang and Lee sentence polarity v1.0 snippets, balanced;
- PEPs: the latest revision of Python Enhancement Proposals, each a whole document read as
  reStructuredText by the server's own markup rules (`vq_lsp.hints.markup`: no literal blocks, directives,
  tables or titles); the paragraphs counted are those with at least `toneMinWords` words, less the header
  fields at the top of each PEP; their right answer is "no tone".

Everything is scored as the server scores it with its default settings (`vq_lsp.settings.Settings`: its
`context` and `precision`, and `vq_lsp.hints.tone.shown` with the default `DiagnosticSettings`, the
document gate included). A review or a snippet is one paragraph (the files hold no blank lines), so its
score is the mean of its tokens' class scores; a PEP's paragraphs are its tone blocks, shown or not by
the rule over the whole document. Figures per set: accuracy and positive rate (opinion sets: of the
document score), the share of texts (PEPs: of paragraphs) with a shown tone hint, and the share of shown
hints that are right (opinion sets). Results: benchmarks/results/tone_yardstick.{md,json}.
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

import numpy as np
import torch

from benchmarks.common import REPO, data_dir, markdown_table, recorded_path, write_results
from vq_lsp.hints import markup, tone
from vq_lsp.hints.material import tone_blocks
from vq_lsp.settings import DiagnosticSettings, Settings

NAME = "tone_yardstick"
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
    units: int  # texts (opinion sets) or eligible paragraphs (PEPs) the shares are of
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


def peps(folder: Path, n: int, seed: int) -> list[Text]:
    """A seeded sample of whole PEPs (latest revision), as reStructuredText documents."""
    with gzip.open(folder / "python_peps.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["revisions"][-1]["text"] for line in f]
    chosen = random.Random(f"{seed}-peps").sample(texts, min(n, len(texts)))
    return [Text(t, None, count_words(t, markup.RST)) for t in chosen]


# ----------------------------------------------------------------------------------- scoring
def score(model, texts: list[Text], label: str, cfg: DiagnosticSettings) -> SetFigures:
    """Figures of one model on one set. Opinion texts: one paragraph each, judged by the document score.
    Neutral documents: every tone block, shown or not by the server's rule over the whole document."""
    import inference

    t0 = time.perf_counter()
    if "positive" not in model.config.labels:
        raise ValueError(f"the model's labels {model.config.labels} have no 'positive'")
    shown, right_shown, correct, positive, scored, units = 0, 0, 0, 0, 0, 0
    for t in texts:
        ids, offsets = model.tokenizer.encode_with_offsets(t.text)
        if not ids:
            continue
        doc = inference.IncrementalDocument(model, ids)
        scored += 1
        if t.label is not None:
            scores = doc.scores
            top = max(scores, key=scores.get)
            units += 1
            positive += top == "positive"
            correct += top == t.label
            hint = tone.shown([tone.Block(scores, t.n_words, len(ids))], cfg)[0]
            if hint is not None:
                shown += 1
                right_shown += hint[0] == t.label
            continue
        starts = np.asarray([a for a, _ in offsets], dtype=np.int64)
        blocks = tone_blocks(starts, doc, markup.layout(t.text, markup.RST))
        picks = tone.shown([b.block() for b in blocks], cfg)
        for (a, sc, n), pick in zip([(b.start, b.scores, b.words) for b in blocks], picks):
            if n >= cfg.tone_min_words and not PREAMBLE.match(t.text, a):
                units += 1
                positive += max(sc, key=sc.get) == "positive"
                shown += pick is not None
    opinion = texts[0].label is not None if texts else False
    return SetFigures(
        set=label,
        texts=scored,
        units=units,
        accuracy=correct / units if opinion and units else None,
        positive_rate=positive / units if units else 0.0,
        shown_share=shown / units if units else 0.0,
        shown_right=right_shown / shown if opinion and shown else None,
        seconds=round(time.perf_counter() - t0, 1),
    )


def run(args) -> dict:
    import inference

    torch.set_num_threads(args.threads)
    defaults = Settings()
    cfg = defaults.diagnostics
    folder = data_dir(args.data) / "eval"
    sets = {
        "movie reviews (lowercased, tokenized)": movie_reviews(folder, args.reviews, args.seed),
        "review sentences": sentence_snippets(folder, args.sentences, args.seed),
        "PEPs, whole documents (neutral), per paragraph": peps(folder, args.peps, args.seed),
    }
    names = args.name or [Path(m).name for m in args.model]
    if len(names) != len(args.model):
        raise SystemExit("give one --name per --model")
    models = []
    for path, name in zip(args.model, names):
        model = inference.load_model(path, device="cpu", dtype=defaults.precision, context=defaults.context)
        figures = [score(model, texts, label, cfg) for label, texts in sets.items()]
        models.append({"name": name, "sets": [asdict(f) for f in figures]})
        print(f"{name}: done", file=sys.stderr)
    return {
        "command": "python -m benchmarks.tone_yardstick " + shlex.join(shown_argv(args.argv, names)),
        "hardware": f"{'one CPU core' if args.threads == 1 else f'{args.threads} CPU cores'} "
        f"({platform.machine()}, shared with other jobs), {defaults.precision}",
        "rule": {
            "context": defaults.context,
            "sentiment_threshold": cfg.sentiment_threshold,
            "tone_min_words": cfg.tone_min_words,
            "tone_gate": cfg.tone_gate,
            "tone_short_threshold": cfg.tone_short_threshold,
            "short_text_words": tone.SHORT_TEXT_WORDS,
        },
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
        elif i > 0 and argv[i - 1] in ("--out", "--data"):
            out.append(recorded_path(arg))
        else:
            out.append(arg)
    return out


def percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def report(results: dict) -> str:
    rule = results["rule"]
    header = [
        "set",
        "model",
        "texts",
        "paragraphs",
        "accuracy",
        "positive rate",
        "tone hint shown on",
        "shown hints that are right",
    ]
    rows = [
        [
            s["set"],
            m["name"],
            str(s["texts"]),
            str(s["units"]) if s["accuracy"] is None else "-",
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
            "their sentence polarity snippets (balanced), and whole PEPs (latest revision, reStructuredText read by "
            "the server's markup rules; their paragraphs of at least "
            f"{rule['tone_min_words']} words, header fields left out, are counted; a tone hint on them is wrong). "
            "Everything is scored as the server does at its defaults: "
            f"`context: {rule['context']}`, a tone shown where the top class reaches {rule['sentiment_threshold']} "
            f"on a paragraph of at least {rule['tone_min_words']} words and the document's prose blocks together "
            f"reach {rule['tone_gate']} (`toneGate`); in a text of fewer than {rule.get('short_text_words', 60)} "
            f"words the top class must reach {rule.get('tone_short_threshold', 0.0)} (`toneShortThreshold`). A "
            "review or a snippet is one paragraph, so the gate never hides its tone, and most snippets are short "
            "texts; a PEP's paragraphs are judged within their document.",
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
    p.add_argument("--peps", type=int, default=60, help="whole PEPs")
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
