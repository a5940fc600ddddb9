"""Typo detection measured: inject realistic errors at known places in held-out prose, then
compare the server's detector (vq_lsp/hints/typos.py: dictionary + the model's context) with a plain
spell checker (pyspellchecker: every word missing from its dictionary) and with the dictionary
plus close-word rule alone (no model), side by side on the same texts.

Prose: excerpts of the Gutenberg books of the *valid* split in $VQ_LSP_DATA (the bundled
model trained on the train split; eval/ is never read). Books alternate between a tuning split
(thresholds are chosen there, by best F1) and a report split (every figure in the table).
Error classes: letter swaps, drops, doubled letters, neighbour-key substitutions (each kept
only when the result is not a dictionary word: non-word errors), real-word errors from the
confusion sets the detector knows (their/there, form/from ...), and real-word errors from any
one-letter edit that happens to spell another word (which no confusion set covers).

    python -m benchmarks.typo_detection [--model DIR] [--books 12] [--excerpts 3]

Writes benchmarks/results/typo_detection.{json,md} and a precision-recall plot (.png) when
matplotlib is installed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import inference
from benchmarks import optional
from benchmarks.common import REPO, data_dir
from vq_lsp.hints import markup, typos
from vq_lsp.hints import material as hints
from vq_lsp.settings import DiagnosticSettings

NON_WORD = ("swap", "drop", "double", "neighbour")
REAL_WORD = ("confusable", "real-edit")
CLASSES = NON_WORD + REAL_WORD
KEYS = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]


def neighbours(ch: str) -> str:
    """Letters next to `ch` on a QWERTY keyboard (same row and the rows above and below)."""
    for r, row in enumerate(KEYS):
        c = row.find(ch)
        if c >= 0:
            near = {row[j] for j in (c - 1, c + 1) if 0 <= j < len(row)}
            for other in (r - 1, r + 1):
                if 0 <= other < len(KEYS):
                    near |= {KEYS[other][j] for j in (c - 1, c, c + 1) if 0 <= j < len(KEYS[other])}
            return "".join(sorted(near))
    return ""


def corrupt(word: str, kind: str, rng: random.Random) -> str | None:
    """One error of `kind` in a lower-case word, or None when this word cannot take it."""
    n = len(word)
    if kind == "swap":
        options = [i for i in range(n - 1) if word[i] != word[i + 1]]
        if not options:
            return None
        i = rng.choice(options)
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == "drop":
        i = rng.randrange(n)
        return word[:i] + word[i + 1:]
    if kind == "double":
        i = rng.randrange(n)
        return word[:i + 1] + word[i] + word[i + 1:]
    if kind == "neighbour":
        i = rng.randrange(n)
        near = neighbours(word[i])
        return word[:i] + rng.choice(near) + word[i + 1:] if near else None
    if kind == "confusable":
        partners = typos.CONFUSABLE.get(word)
        return rng.choice(partners) if partners else None
    if kind == "real-edit":
        options = [w for w in typos.close_words(word) if w not in typos.CONFUSABLE and w != word]
        return rng.choice(options) if options else None
    raise ValueError(kind)


@dataclass
class Injected:
    start: int
    end: int
    kind: str
    original: str
    typo: str


def inject(text: str, rng: random.Random, rate: float) -> tuple[str, list[Injected]]:
    """Corrupt about `rate` of the eligible words (lower-case, 3+ letters, in the dictionary;
    confusable words at twice the rate so that class has enough cases). Returns the new text
    and where each error now is."""
    out, errors, last = [], [], 0
    shift = 0
    for m in markup.WORD.finditer(text):
        word = m.group()
        if not (word.islower() and len(word) >= 3 and typos.is_word(word)) or "'" in word:
            continue
        confusable = word in typos.CONFUSABLE
        if rng.random() >= (2 * rate if confusable else rate):
            continue
        kinds = ["confusable"] if confusable and rng.random() < 0.7 else list(NON_WORD) + ["real-edit"]
        kind = rng.choice(kinds)
        bad = corrupt(word, kind, rng)
        if bad is None or bad == word:
            continue
        if kind in NON_WORD and typos.is_word(bad):
            continue  # spelled another word: not a non-word error
        out.append(text[last:m.start()])
        start = m.start() + shift
        out.append(bad)
        errors.append(Injected(start, start + len(bad), kind, word, bad))
        shift += len(bad) - len(word)
        last = m.end()
    out.append(text[last:])
    return "".join(out), errors


def excerpts(path: Path, books: int, per_book: int, chars: int) -> list[tuple[int, str, str]]:
    """(book index, title, excerpt) from the valid split: `per_book` excerpts of about `chars`
    characters each, spread over the book and cut at paragraph breaks."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    valid = [r for r in rows if r["split"] == "valid"][:books]
    for b, row in enumerate(valid):
        text = row["text"]
        for k in range(per_book):
            at = int(len(text) * (k + 1) / (per_book + 1))
            a = text.find("\n\n", at) + 2
            end = text.rfind("\n\n", a, a + chars)
            if a > 1 and end > a:
                out.append((b, row["title"], text[a:end]))
    return out


def findings_of(model, text: str) -> list[typos.WordFinding]:
    ids, offsets = model.tokenizer.encode_with_offsets(text)
    doc = inference.IncrementalDocument(model, ids)
    starts = np.asarray([a for a, _ in offsets], dtype=np.int64)
    lay = markup.layout(text, markup.PLAIN)
    return hints.analyse(text, starts, doc, lay)[2]


def prf(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else float("nan")
    r = tp / (tp + fn) if tp + fn else float("nan")
    f = 2 * p * r / (p + r) if tp else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4), "tp": tp, "fp": fp, "fn": fn}


def evaluate(cases, flag_nw, flag_rw) -> dict:
    """Per-class recall, and precision/recall/F1 of the non-word and real-word predictions.

    `cases`: (errors, findings, words) per excerpt; `flag_nw(finding_or_word)` says whether a
    non-word prediction is made, `flag_rw(finding)` a real-word one. A prediction is right when
    it covers an injected error exactly.
    """
    per_class = {c: [0, 0] for c in CLASSES}  # found, total
    totals = {"non-word": [0, 0, 0], "real-word": [0, 0, 0]}
    for errors, preds in cases:
        truth = {(e.start, e.end): e for e in errors}
        flagged_nw = {span for span, kind, item in preds if kind == "non-word" and flag_nw(item)}
        flagged_rw = {span for span, kind, item in preds if kind == "real-word" and flag_rw(item)}
        for e in errors:
            hit = (e.start, e.end) in (flagged_nw | flagged_rw)
            per_class[e.kind][0] += hit
            per_class[e.kind][1] += 1
        for group, flagged in (("non-word", flagged_nw), ("real-word", flagged_rw)):
            kinds = NON_WORD if group == "non-word" else REAL_WORD
            tp = sum(1 for s in flagged if s in truth and truth[s].kind in kinds)
            totals[group][0] += tp
            totals[group][1] += len(flagged) - tp
            totals[group][2] += sum(1 for e in errors if e.kind in kinds) - tp
    out = {g: prf(*v) for g, v in totals.items()}
    out["recall_by_class"] = {c: {"recall": round(f / t, 4) if t else None, "errors": t}
                              for c, (f, t) in per_class.items()}
    return out


def choose_threshold(cases, kind: str) -> tuple[float, dict]:
    """The gain threshold with the best F1 on these cases, for one kind of prediction."""
    gains = sorted({round(item.gain, 2) for _, preds in cases for _, k, item in preds
                    if k == kind and item is not None and np.isfinite(item.gain)})
    best = (float("-inf"), None, None)
    for t in gains:
        res = evaluate(cases, lambda f: f is not None and f.gain >= t, lambda f: f.gain >= t) if kind == "non-word" \
            else evaluate(cases, lambda f: False, lambda f: f.gain >= t)
        if res[kind]["f1"] > best[0]:
            best = (res[kind]["f1"], t, res[kind])
    return best[1], best[2]


def curve(cases, kind: str) -> list[dict]:
    gains = sorted({round(item.gain, 1) for _, preds in cases for _, k, item in preds
                    if k == kind and item is not None and np.isfinite(item.gain)})
    out = []
    for t in gains[:: max(1, len(gains) // 60)]:
        res = evaluate(cases, (lambda f: f is not None and f.gain >= t) if kind == "non-word" else (lambda f: False),
                       (lambda f: f.gain >= t) if kind == "real-word" else (lambda f: False))
        out.append({"threshold": t, **res[kind]})
    return out


def predictions(model, errors, text):
    """(span, kind, finding or None) for the detector's findings and every word pyspellchecker
    calls unknown (a plain spell checker's predictions: finding None when the detector made none)."""
    found = findings_of(model, text)
    by_span = {(f.start, f.end): f for f in found}
    preds = [((f.start, f.end), f.kind, f) for f in found]
    spell = typos.dictionary()
    for m in markup.WORD.finditer(text):
        span = (m.start(), m.end())
        if span not in by_span and spell.unknown([m.group()]):  # plain pyspellchecker: no extra rules
            preds.append((span, "non-word", None))
    return preds


def hint_cost(model, tokens: int = 2000, repeat: int = 10) -> dict:
    """What choosing hints costs per publish on a ~2,000-token Markdown document (this project's
    README, cut at a paragraph): the Markdown parse alone and all hint material (surprise, words,
    typo findings, tone blocks), beside what a publish computed before (token surprise and
    blank-line paragraph scores)."""
    from vq_lsp.documents.textsync import TrackedText

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ids, offsets = model.tokenizer.encode_with_offsets(readme)
    cut = readme.rfind("\n\n", 0, offsets[min(tokens, len(ids) - 1)][0])
    text = readme[:cut + 1]
    tt = TrackedText(model.tokenizer, text)
    doc = inference.IncrementalDocument(model, tt.ids)

    def median_ms(fn) -> float:
        fn()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return round(1000 * float(np.median(times)), 2)

    def before():  # the material without markup and typos: token surprise and paragraph scores
        doc.surprise(0, doc.n_tokens)
        hints.paragraph_scores(tt, doc)

    return {"tokens": len(tt.ids),
            "markdown_layout_ms": median_ms(lambda: markup.layout(text, markup.MARKDOWN)),
            "hint_material_ms": median_ms(lambda: hints.HintMaterial.of(tt, doc, 1, "markdown")),
            "previous_material_ms": median_ms(before)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="model folder (default: the bundled model)")
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--books", type=int, default=12, help="valid-split books used (alternating tune/report)")
    ap.add_argument("--excerpts", type=int, default=3, help="excerpts per book")
    ap.add_argument("--chars", type=int, default=6000, help="characters per excerpt (about 1,500 tokens)")
    ap.add_argument("--rate", type=float, default=0.02, help="share of eligible words given an error")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "typo_detection"))
    args = ap.parse_args(argv)
    plot = optional.can_plot("typo_detection.py")
    torch.set_num_threads(args.threads)
    model = inference.load_model(args.model, device="cpu")
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    split = {"tune": [], "report": []}
    n_words = {"tune": 0, "report": 0}
    for b, title, text in excerpts(data_dir(args.data) / "gutenberg" / "gutenberg_subset.jsonl.gz",
                                   args.books, args.excerpts, args.chars):
        bad_text, errors = inject(text, rng, args.rate)
        name = "tune" if b % 2 == 0 else "report"
        split[name].append((errors, predictions(model, errors, bad_text)))
        n_words[name] += sum(1 for _ in markup.WORD.finditer(bad_text))
        print(f"{name:6} {title[:40]:40} {len(errors):3} errors", file=sys.stderr)
    seconds = time.perf_counter() - t0

    cost = hint_cost(model)
    defaults = DiagnosticSettings()
    nw_t, nw_tuned = choose_threshold(split["tune"], "non-word")
    rw_t, rw_tuned = choose_threshold(split["tune"], "real-word")
    report = split["report"]
    model_default = evaluate(report, lambda f: f is not None and f.gain >= defaults.typo_threshold,
                             lambda f: f.gain >= defaults.real_word_threshold)
    model_tuned = evaluate(report, lambda f: f is not None and f.gain >= nw_t, lambda f: f.gain >= rw_t)
    spell = evaluate(report, lambda f: f is None or bool(typos.dictionary().unknown([f.word])), lambda f: False)
    dict_fix = evaluate(report, lambda f: f is not None, lambda f: False)
    results = {
        "model": str(model.path), "data": "gutenberg valid split (books alternate tune/report)",
        "excerpts": {k: len(v) for k, v in split.items()}, "words": n_words,
        "errors": {k: sum(len(e) for e, _ in v) for k, v in split.items()}, "seconds": round(seconds, 1),
        "defaults": {"typo_threshold": defaults.typo_threshold, "real_word_threshold": defaults.real_word_threshold},
        "tuned_on_tune_split": {"typo_threshold": nw_t, "non_word_f1": nw_tuned and nw_tuned["f1"],
                                "real_word_threshold": rw_t, "real_word_f1": rw_tuned and rw_tuned["f1"]},
        "report_split": {"model_default_thresholds": model_default, "model_tuned_thresholds": model_tuned,
                         "pyspellchecker": spell, "dictionary_plus_close_word_no_model": dict_fix},
        "hint_cost_2000_tokens": cost,
        "curves_report_split": {"non-word": curve(report, "non-word"), "real-word": curve(report, "real-word")},
        "args": vars(args),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    out.with_suffix(".md").write_text(table(results))
    print(table(results))
    if plot:
        plot_curves(results, out.with_suffix(".png"))
    return 0


def _pct(x) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.0f}%"


def table(r: dict) -> str:
    rs = r["report_split"]
    d = r["defaults"]
    rows = [("vq-lsp detector, default thresholds "
             f"({d['typo_threshold']:g} / {d['real_word_threshold']:g} nats)", rs["model_default_thresholds"]),
            (f"vq-lsp detector, thresholds tuned on the tune split ({r['tuned_on_tune_split']['typo_threshold']} / "
             f"{r['tuned_on_tune_split']['real_word_threshold']} nats)", rs["model_tuned_thresholds"]),
            ("same dictionary rules, no model (a close dictionary word exists; British spellings, repeated "
             "spellings, dropped-g dialect are words)", rs["dictionary_plus_close_word_no_model"]),
            ("pyspellchecker (every unknown word)", rs["pyspellchecker"])]
    lines = [f"Report split: {r['excerpts']['report']} excerpts, {r['words']['report']} words, "
             f"{r['errors']['report']} injected errors (model {Path(r['model']).name}).", "",
             "| detector | non-word P | non-word R | non-word F1 | real-word P | real-word R | " +
             " | ".join(f"R {c}" for c in CLASSES) + " |",
             "|---" * (6 + len(CLASSES)) + "|"]
    for name, res in rows:
        nw, rw, by = res["non-word"], res["real-word"], res["recall_by_class"]
        lines.append(f"| {name} | {_pct(nw['precision'])} | {_pct(nw['recall'])} | {_pct(nw['f1'])} | "
                     f"{_pct(rw['precision'])} | {_pct(rw['recall'])} | "
                     + " | ".join(_pct(by[c]["recall"]) for c in CLASSES) + " |")
    counts = ", ".join(f"{c} {v['errors']}" for c, v in rs["pyspellchecker"]["recall_by_class"].items())
    c = r["hint_cost_2000_tokens"]
    lines += ["", f"Errors per class: {counts}.", "",
              f"Per publish on a {c['tokens']}-token Markdown document (medians, 1 thread): Markdown layout "
              f"{c['markdown_layout_ms']} ms, all hint material (surprise, prose words, typo findings, tone) "
              f"{c['hint_material_ms']} ms, against {c['previous_material_ms']} ms for token surprise and "
              f"blank-line paragraph scores alone."]
    return "\n".join(lines) + "\n"


def plot_curves(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for kind, style in (("non-word", "-"), ("real-word", "--")):
        pts = r["curves_report_split"][kind]
        ax.plot([p["recall"] for p in pts], [p["precision"] for p in pts], style, label=f"vq-lsp {kind}")
    for name, marker in (("pyspellchecker", "s"), ("dictionary_plus_close_word_no_model", "^"),
                         ("model_default_thresholds", "o")):
        nw = r["report_split"][name]["non-word"]
        ax.plot([nw["recall"]], [nw["precision"]], marker, label=f"{name.replace('_', ' ')} (non-word)")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("Typo detection on held-out Gutenberg prose (report split)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
