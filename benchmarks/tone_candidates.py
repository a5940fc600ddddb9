"""Which tone rule and `context` to serve: the candidates side by side, on data no tuning run reads as eval.

    python -m benchmarks.tone_candidates [--part calibration|test] [--docs 12] [--reviews 300] [--threads 1]
        [--dump FILE] [--model DIR --name NAME]

Every document is scored twice with the bundled model (or `--model`: a candidate model measured on the
same documents, the report named `--name`), at the server's default precision: once with
`context: window` (a paragraph's tokens see the text before it in their window) and once with
`context: paragraph` (each paragraph alone). The tone blocks are the server's (`vq_lsp.hints.markup`),
their scores the server's (`material.tone_blocks`); each candidate rule then decides which blocks show
a tone. Sets (none from `$VQ_LSP_DATA/eval/`):

- technical: Rust book chapters and Wikipedia articles of one part of `training/neutral.py`'s split by
  document (`--part`; the bundled model's neutral training read only the `train` part), the command-line
  README (its paragraphs were in neutral training), and the repository's own docs;
- narration: excerpts of about 1,500 words of Gutenberg `valid` books of that part, the narrator's
  paragraphs (no quotation marks, no play's speaker tag: speech may carry an opinion; all paragraphs are
  reported too);
- reviews: IMDB training reviews that fine-tuning held out (`--holdout 1000`, seed 0: the rows
  `training/data.py:imdb_examples` keeps apart), each a document; the calibration part is the first
  half of them, the test part the second;
- short: the first sentence of each of those reviews;
- alone: `--alone` neutral paragraphs of the part (`training/neutral.py`'s sample, technical, encyclopedic
  and narration), each a document of its own: a note that is one paragraph.

Figures: tone shown per eligible paragraph (neutral sets: all wrong), and for reviews the accuracy of the
document score, the share of reviews with a shown tone and the share of shown hints that are right.
Results: benchmarks/results/tone_candidates_{part}.{md,json} (`--name` for another name).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import REPO, command_line, data_dir, is_narration, markdown_table, write_results
from training.data import clean_imdb, imdb_examples, read_jsonl_gz
from training.neutral import neutral_paragraphs, part_of
from vq_lsp.hints import markup, tone
from vq_lsp.hints.material import tone_blocks
from vq_lsp.settings import DiagnosticSettings

NAME = "tone_candidates"
BUNDLED = "inference/default_model (the bundled model)"  # what `--model` left out measures
PRECISION = "float32"  # the server's default precision and state layout
LAYOUT = "auto"
REPO_DOCS = ("docs/server.md", "docs/engine.md", "docs/cli.md", "docs/configuration.md", "training/README.md")


@dataclass(frozen=True)
class Doc:
    """One document to score: its text, markup, set and (reviews) label."""

    text: str
    kind: str
    set: str
    label: str | None = None


@dataclass(frozen=True)
class Figures:
    set: str
    context: str
    rule: str
    paragraphs: int
    shown: float  # share of eligible paragraphs with a shown tone
    documents: int
    accuracy: float | None  # reviews: document score's top label right
    docs_with_tone: float | None  # reviews: share with at least one shown tone
    shown_right: float | None  # reviews: share of shown tones that match the label


# ----------------------------------------------------------------------------------- data
def excerpts(text: str, words: int, count: int, seed: str) -> list[str]:
    """`count` paragraph-aligned excerpts of about `words` words from a book, at seeded places."""
    paras = [p for p in text.split("\n\n") if p.strip()]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        i = rng.randrange(max(1, len(paras) - 200))
        got, n = [], 0
        while i < len(paras) and n < words:
            got.append(paras[i].strip())
            n += len(paras[i].split())
            i += 1
        out.append("\n\n".join(got) + "\n")
    return out


def load_sets(data: Path, part: str, docs: int, reviews: int, seed: int, alone: int = 300) -> dict[str, list[Doc]]:
    rev = data / "revisions"
    rng = random.Random(seed)
    rust = [
        Doc(r["revisions"][-1]["text"], markup.MARKDOWN, "technical")
        for r in read_jsonl_gz(rev / "rust_book_chapters.jsonl.gz")
        if part_of("rust_book/" + r["doc"]) == part
    ]
    wiki = [
        Doc(r["versions"][-1], markup.PLAIN, "encyclopedic")
        for r in read_jsonl_gz(rev / "wiki_versions.jsonl.gz")
        if part_of("wikipedia/" + r["title"]) == part
    ]
    readme = [
        Doc(r["revisions"][-1]["text"], markup.MARKDOWN, "technical")
        for r in read_jsonl_gz(rev / "art_of_command_line_README_en.jsonl.gz")
    ]
    own = [Doc((REPO / p).read_text(), markup.MARKDOWN, "technical") for p in REPO_DOCS]
    books = [
        r
        for r in read_jsonl_gz(data / "gutenberg" / "gutenberg_subset.jsonl.gz")
        if r.get("split") == "valid" and part_of(f"gutenberg/{r['author']}/{r['title']}", 0.5, 0.5) == part
    ]
    rng.shuffle(books)
    story = [
        Doc(t, markup.PLAIN, "narration")
        for b in books[: max(1, docs // 3)]
        for t in excerpts(b["text"], 1500, 3, f"{seed}-{b['title']}")
    ]
    _, held = imdb_examples(data, "train", seed=0, holdout=1000)
    half = held[: len(held) // 2] if part == "calibration" else held[len(held) // 2 :]
    half = half[:reviews]
    labels = ("negative", "positive")
    review_docs = [Doc(clean_imdb(t), markup.PLAIN, "reviews", labels[y]) for t, y in half]
    short = [
        Doc(s, markup.PLAIN, "short", labels[y])
        for t, y in half
        for s in [first_sentence(clean_imdb(t))]
        if len(s.split()) >= 3
    ]
    paragraphs = [Doc(p.text, markup.PLAIN, "alone") for p in neutral_paragraphs(data, part, alone, seed=seed)]
    rng.shuffle(rust)
    rng.shuffle(wiki)
    return {
        "technical (Rust book, command-line README, the repository's docs)": rust[:docs] + readme + own,
        "encyclopedic (Wikipedia)": wiki[: 2 * docs],
        "narration (Gutenberg excerpts)": story,
        "reviews (IMDB held-out, full)": review_docs,
        "short (first sentence of each review)": short,
        "alone (neutral paragraphs, each a document of its own)": paragraphs,
    }


def first_sentence(text: str) -> str:
    for end in (". ", "! ", "? "):
        at = text.find(end)
        if 0 < at:
            text = text[: at + 1]
    return text.split("\n")[0].strip()


# ----------------------------------------------------------------------------------- scoring
@dataclass(frozen=True)
class Scored:
    """A document's tone blocks as the server sees them, under one context."""

    doc: Doc
    blocks: tuple[tone.Block, ...]
    narration: tuple[bool, ...]  # per block: the narrator's (benchmarks.common.is_narration)
    top: str  # the whole document's top label
    tokens: int
    build_seconds: float  # the document's first build (dense pass), one thread
    state_bytes: int  # what its engine state holds


def score_doc(model, doc: Doc) -> Scored | None:
    import inference

    ids, offsets = model.tokenizer.encode_with_offsets(doc.text)
    if not ids:
        return None
    t0 = time.perf_counter()
    d = inference.IncrementalDocument(model, ids)
    seconds = time.perf_counter() - t0
    starts = np.asarray([a for a, _ in offsets], dtype=np.int64)
    lay = markup.layout(doc.text, doc.kind)
    got = tone_blocks(starts, d, lay)
    blocks = tuple(b.block() for b in got)
    narration = tuple(is_narration(doc.text[b.start : b.end]) for b in got)
    scores = d.scores
    return Scored(doc, blocks, narration, max(scores, key=scores.get), len(ids), seconds, d.state_bytes())


@dataclass(frozen=True)
class Rule:
    """A candidate: a change to the default settings, and whether a block of an opinion piece may
    show the other label than its document's (the gated rule before `tone.agrees`)."""

    change: Callable[[DiagnosticSettings], DiagnosticSettings]
    either_label: bool = False


def rules() -> dict[str, Rule]:
    """Candidate rules, as changes to the default settings (selection decides with them). The default
    was chosen on the calibration part as the one that shows a tone on the most reviews among those
    with at most 10% of technical and encyclopedic paragraphs and 15% of narration paragraphs showing
    one, and at least 90% of shown review tones right; the short-text threshold as the one of 0.9, 0.93,
    0.95 and 0.97 with the most of the first sentences' shown tones right (docs/server.md, Tone)."""
    d = DiagnosticSettings()

    def with_(either_label: bool = False, **kw) -> Rule:
        kw.setdefault("tone_short_threshold", 0.0)  # the candidates before the short-text threshold
        return Rule(lambda cfg: dataclasses.replace(cfg, **kw), either_label)

    out = {
        "threshold 0.75, no gate (the rule before)": with_(sentiment_threshold=0.75, tone_gate=0.0),
        "threshold 0.85, no gate": with_(sentiment_threshold=0.85, tone_gate=0.0),
        "threshold 0.75, document gate 0.6, either label": with_(True, sentiment_threshold=0.75, tone_gate=0.6),
        "threshold 0.75, document gate 0.6": with_(sentiment_threshold=0.75, tone_gate=0.6),
        "threshold 0.7, document gate 0.6": with_(sentiment_threshold=0.7, tone_gate=0.6),
        "threshold 0.7, document gate 0.62": with_(sentiment_threshold=0.7, tone_gate=0.62),
        "threshold 0.7, document gate 0.64": with_(sentiment_threshold=0.7, tone_gate=0.64),
        "threshold 0.7, document gate 0.66": with_(sentiment_threshold=0.7, tone_gate=0.66),
        "threshold 0.65, document gate 0.65": with_(sentiment_threshold=0.65, tone_gate=0.65),
    }
    out[f"defaults, no short-text threshold (threshold {d.sentiment_threshold}, gate {d.tone_gate})"] = with_(
        sentiment_threshold=d.sentiment_threshold, tone_gate=d.tone_gate
    )
    out[
        f"defaults (threshold {d.sentiment_threshold}, gate {d.tone_gate}, "
        f"{d.tone_short_threshold} under {tone.SHORT_TEXT_WORDS} words)"
    ] = with_(
        sentiment_threshold=d.sentiment_threshold, tone_gate=d.tone_gate, tone_short_threshold=d.tone_short_threshold
    )
    return out


def picks(blocks, cfg: DiagnosticSettings, either_label: bool) -> list[tuple[str, float] | None]:
    """What each block shows under a rule (`tone.shown`, or with `either_label` the gated rule
    that let a block of an opinion piece show either label)."""
    if not either_label:
        return tone.shown(blocks, cfg)
    if not tone.opinion_document(blocks, cfg):
        return [None] * len(blocks)
    threshold = tone.block_threshold(blocks, cfg)
    return [tone.block_tone(b.scores, b.words, cfg, threshold) for b in blocks]


def figures(
    set_name: str,
    context: str,
    rule: str,
    scored: list[Scored],
    cfg: DiagnosticSettings,
    narration_only: bool,
    either_label: bool = False,
) -> Figures:
    """One rule's figures on one set; `narration_only`: the narrator's paragraphs only
    (benchmarks.common.is_narration)."""
    paragraphs = shown = with_tone = right = correct = 0
    opinion = scored and scored[0].doc.label is not None
    for s in scored:
        any_shown = False
        for block, pick, narrated in zip(s.blocks, picks(s.blocks, cfg, either_label), s.narration):
            if block.words < cfg.tone_min_words or (narration_only and not narrated):
                continue
            paragraphs += 1
            if pick is not None:
                shown += 1
                any_shown = True
                right += pick[0] == s.doc.label
        with_tone += any_shown
        correct += s.doc.label is not None and s.top == s.doc.label
    n = len(scored)
    return Figures(
        set=set_name + (", narration paragraphs" if narration_only else ""),
        context=context,
        rule=rule,
        paragraphs=paragraphs,
        shown=shown / paragraphs if paragraphs else 0.0,
        documents=n,
        accuracy=correct / n if opinion and n else None,
        docs_with_tone=with_tone / n if opinion and n else None,
        shown_right=right / shown if opinion and shown else None,
    )


# The limits a default must meet on the calibration part, each with GRID_MARGIN to spare (a sample of a
# few dozen documents moves a share by a few points): tone on at most NEUTRAL_LIMIT of technical and
# encyclopedic paragraphs and NARRATION_LIMIT of narration paragraphs, at least RIGHT_MIN of shown review
# tones right. Among the grid points that meet them, the default shows a tone on the most reviews.
NEUTRAL_LIMIT, NARRATION_LIMIT, RIGHT_MIN, GRID_MARGIN = 0.10, 0.15, 0.90, 0.025
GRID_SHOWN = 12  # rows of the grid in the report
GRID_STEPS = [round(0.58 + 0.01 * i, 2) for i in range(18)]  # 0.58 ... 0.75


@dataclass(frozen=True)
class GridPoint:
    """One (threshold, gate) pair of the paragraph context: its figures and whether it meets the limits."""

    threshold: float
    gate: float
    technical: float
    encyclopedic: float
    narration: float
    reviews_with_tone: float
    right: float
    meets_limits: bool


def grid(scored: dict[str, list[Scored]]) -> list[GridPoint]:
    """Every (threshold, gate) of GRID_STEPS with the gate at most the threshold (the rule never asks
    more of a document than of a paragraph, so a higher gate is the same rule), best first."""
    base = DiagnosticSettings()
    sets = {name.split()[0]: docs for name, docs in scored.items()}
    out = []
    for t in GRID_STEPS:
        for g in (g for g in GRID_STEPS if g <= t):
            cfg = dataclasses.replace(base, sentiment_threshold=t, tone_gate=g)
            tech = figures("", "", "", sets["technical"], cfg, False).shown
            enc = figures("", "", "", sets["encyclopedic"], cfg, False).shown
            nar = figures("", "", "", sets["narration"], cfg, True).shown
            rev = figures("", "", "", sets["reviews"], cfg, False)
            right = rev.shown_right or 0.0
            meets = (
                max(tech, enc) <= NEUTRAL_LIMIT - GRID_MARGIN
                and nar <= NARRATION_LIMIT - GRID_MARGIN
                and right >= RIGHT_MIN + GRID_MARGIN
            )
            out.append(GridPoint(t, g, tech, enc, nar, rev.docs_with_tone or 0.0, right, meets))
    return sorted(out, key=lambda p: (p.meets_limits, p.reviews_with_tone, p.right), reverse=True)


SHORT_STEPS = (0.0, 0.9, 0.93, 0.95, 0.97)  # short-text thresholds tried (0: none)


def short_grid(scored: dict[str, list[Scored]]) -> list[dict]:
    """The paragraph context's figures at each short-text threshold of SHORT_STEPS, the other settings
    at their defaults: first sentences (tone shown, right), whole reviews (with a tone, right) and
    neutral paragraphs each alone (tone shown, all wrong). The default is the one with the most of
    the first sentences' shown tones right (with the bundled model none reaches RIGHT_MIN + GRID_MARGIN)."""
    base = DiagnosticSettings()
    sets = {name.split()[0]: docs for name, docs in scored.items()}
    out = []
    for t in SHORT_STEPS:
        cfg = dataclasses.replace(base, tone_short_threshold=t)
        short, reviews = (
            figures("", "", "", sets["short"], cfg, False),
            figures("", "", "", sets["reviews"], cfg, False),
        )
        alone = figures("", "", "", sets["alone"], cfg, False) if sets.get("alone") else None
        out.append(
            {
                "short_threshold": t,
                "short_shown": short.shown,
                "short_right": short.shown_right,
                "reviews_with_tone": reviews.docs_with_tone,
                "reviews_right": reviews.shown_right,
                "neutral_alone_shown": alone.shown if alone else None,
                "default": t == base.tone_short_threshold,
            }
        )
    return out


def is_default(point: dict) -> bool:
    """Whether a grid point is the server's default rule."""
    d = DiagnosticSettings()
    return (point["threshold"], point["gate"]) == (d.sentiment_threshold, min(d.tone_gate, d.sentiment_threshold))


def shown_grid(points: list[dict]) -> list[dict]:
    """The grid's first GRID_SHOWN rows, and the default's row wherever it is."""
    return [p for i, p in enumerate(points) if i < GRID_SHOWN or is_default(p)]


def run(args) -> dict:
    import inference

    torch.set_num_threads(args.threads)
    data = data_dir(args.data)
    sets = load_sets(data, args.part, args.docs, args.reviews, args.seed, args.alone)
    base = DiagnosticSettings()
    out, timing, costs, dumped, by_set = [], {}, {}, [], {}
    for context in ("window", "paragraph"):
        model = inference.load_model(args.model, device="cpu", dtype=PRECISION, context=context, layout=LAYOUT)
        t0 = time.perf_counter()
        for name, docs in sets.items():
            scored = [s for s in (score_doc(model, d) for d in docs) if s is not None]
            if context == "paragraph":
                by_set[name] = scored
            if args.dump:
                dumped.append({"context": context, "set": name, "docs": [dump(s) for s in scored]})
            if name.startswith("technical"):
                tokens = sum(s.tokens for s in scored)
                costs[context] = {
                    "tokens": tokens,
                    "build_ms_per_1k_tokens": round(1000 * sum(s.build_seconds for s in scored) / tokens * 1000, 1),
                    "state_bytes_per_token": round(sum(s.state_bytes for s in scored) / tokens),
                }
            for rule, r in rules().items():
                cfg = r.change(base)
                out.append(figures(name, context, rule, scored, cfg, False, r.either_label))
                if name.startswith("narration"):
                    out.append(figures(name, context, rule, scored, cfg, True, r.either_label))
            print(f"{context} {name}: {len(scored)} documents", file=sys.stderr)
        timing[context] = round(time.perf_counter() - t0, 1)
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumped))
    return {
        "command": command_line("tone_candidates", args.argv),
        "hardware": f"{'one CPU core' if args.threads == 1 else f'{args.threads} CPU cores'} "
        f"({platform.machine()}, shared with other jobs), {PRECISION}",
        "part": args.part,
        "model": args.model or BUNDLED,
        "seconds": timing,
        "costs": costs,
        "figures": [asdict(f) for f in out],
        "grid": [asdict(p) for p in grid(by_set)],
        "short_grid": short_grid(by_set),
    }


def dump(s: Scored) -> dict:
    """A scored document's blocks, for trying further rules without scoring again (--dump)."""
    return {
        "label": s.doc.label,
        "top": s.top,
        "blocks": [[b.scores, b.words, b.tokens, n] for b, n in zip(s.blocks, s.narration)],
    }


def percent(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def report(results: dict) -> str:
    header = ["set", "context", "rule", "paragraphs", "tone shown", "reviews", "accuracy", "reviews with tone", "right"]
    rows = [
        [
            f["set"],
            f["context"],
            f["rule"],
            str(f["paragraphs"]),
            percent(f["shown"]),
            str(f["documents"]),
            percent(f["accuracy"]),
            percent(f["docs_with_tone"]),
            percent(f["shown_right"]),
        ]
        for f in results["figures"]
    ]
    return "\n".join(
        [
            "# Tone rule and context candidates, side by side",
            "",
            f"Part `{results['part']}` of the split by document (`training/neutral.py`); nothing from "
            "`$VQ_LSP_DATA/eval/`. Each document scored with both contexts; each rule applied to the same scores. "
            "On the neutral sets every shown tone is wrong.",
            "",
            f"Command: `{results['command']}`.",
            "",
            f"Model: `{results.get('model', BUNDLED)}`. Hardware: {results['hardware']}.",
            "",
            markdown_table(header, rows),
            "",
            "The paragraph context's (threshold, gate) grid, best first: the limits (tone on at most "
            f"{percent(NEUTRAL_LIMIT - GRID_MARGIN)} of technical and encyclopedic paragraphs and "
            f"{percent(NARRATION_LIMIT - GRID_MARGIN)} of narration paragraphs, at least "
            f"{percent(RIGHT_MIN + GRID_MARGIN)} of shown review tones right: the targets with "
            f"{percent(GRID_MARGIN)} to spare), then the most reviews with a tone; the server's default is "
            "marked (docs/server.md, Tone, says why it is not the first row).",
            "",
            markdown_table(
                [
                    "threshold",
                    "gate",
                    "technical",
                    "encyclopedic",
                    "narration",
                    "reviews with tone",
                    "right",
                    "meets",
                    "default",
                ],
                [
                    [
                        str(p["threshold"]),
                        str(p["gate"]),
                        percent(p["technical"]),
                        percent(p["encyclopedic"]),
                        percent(p["narration"]),
                        percent(p["reviews_with_tone"]),
                        percent(p["right"]),
                        "yes" if p["meets_limits"] else "no",
                        "default" if is_default(p) else "",
                    ]
                    for p in shown_grid(results["grid"])
                ],
            ),
            "",
            *short_grid_report(results.get("short_grid", [])),
            "Cost of each context on the technical documents (the first build, a dense pass, and the engine state "
            f"it keeps, `{LAYOUT}` layout):",
            "",
            markdown_table(
                ["context", "tokens", "build ms per 1,000 tokens", "state bytes per token"],
                [
                    [c, f"{v['tokens']:,}", str(v["build_ms_per_1k_tokens"]), f"{v['state_bytes_per_token']:,}"]
                    for c, v in results["costs"].items()
                ],
            ),
            "",
        ]
    )


def short_grid_report(points: list[dict]) -> list[str]:
    """The report's lines on the short-text threshold (`short_grid`): one row per threshold tried."""
    header = ["short-text threshold", "first sentences: tone shown", "right", "reviews with tone", "right"]
    rows = [
        [str(p["short_threshold"])]
        + [percent(p[k]) for k in ("short_shown", "short_right", "reviews_with_tone", "reviews_right")]
        + [percent(p.get("neutral_alone_shown")), "default" if p["default"] else ""]
        for p in points
    ]
    return [
        "The paragraph context's short-text threshold (`toneShortThreshold`, for texts of fewer than "
        f"{tone.SHORT_TEXT_WORDS} words; 0: none), the other settings at their defaults:",
        "",
        markdown_table([*header, "neutral paragraphs alone: tone shown", "default"], rows),
        "",
    ]


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=("calibration", "test"), default="calibration")
    p.add_argument("--docs", type=int, default=12, help="Rust book chapters (and twice as many Wikipedia articles)")
    p.add_argument("--reviews", type=int, default=300, help="held-out IMDB reviews")
    p.add_argument("--alone", type=int, default=300, help="neutral paragraphs of the part, each scored alone")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--dump", help="also write every document's block scores to this JSON file")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--model", help="model folder to measure (default: the bundled model)")
    p.add_argument("--name", help="results file name (default: tone_candidates_PART)")
    args = p.parse_args(argv)
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    results = run(args)
    write_results(args.out, args.name or f"{NAME}_{args.part}", results, report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
