"""Harper beside the model: which should speak where both see a misspelling, and what Harper costs.

On the typo benchmark's texts (benchmarks/typo_detection.py: injected errors in held-out Gutenberg
prose, the same injection, seed and split), each excerpt's predictions are compared with the
injected errors, exactly by span, for

- the model's typo detector at its default thresholds (what the server shows),
- Harper's spelling lints (`Spelling`, and its `Typo` rules such as teh -> the),
- Harper's other lints (grammar, word choice) on real-word errors (their/there ...),
- the union of the model's and Harper's spelling (one hint per span: either may flag a word).

A better precision at a similar recall decides who speaks on spelling; the union shows what adding
Harper's spelling would cost in false alarms. Then the cost per publish on a ~2,000-token Markdown
document (this project's README, cut at a paragraph), measured in the same run: the model's hint
material, Harper on every paragraph (its cache empty), and Harper after a one-paragraph edit.

    python -m benchmarks.harper_typos [--books 12] [--excerpts 3]

Writes benchmarks/results/harper_typos.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

import inference
from benchmarks.common import REPO, data_dir
from benchmarks.typo_detection import NON_WORD, REAL_WORD, excerpts, findings_of, inject, prf
from vq_lsp.hints import markup, typos
from vq_lsp.hints.caches import HintCaches
from vq_lsp.hints.material import HintMaterial
from vq_lsp.settings import DiagnosticSettings

SPELLING_KINDS = ("Spelling", "Typo")


CACHES = HintCaches()  # the run's: one Harper linter, the publishes' kept paragraphs


def harper_lints(text: str) -> list[tuple[int, int, str]]:
    """(start, end, lint kind) of every Harper lint of a plain text (nothing skipped)."""
    linter = CACHES.grammar.linter()
    return [(lint.span.start, lint.span.end, str(lint.lint_kind)) for lint in linter.lint(text)]


def scored(errors, flagged: set[tuple[int, int]], kinds: tuple[str, ...]) -> tuple[int, int, int]:
    """(true positives, false positives, misses) of predicted spans against one class group's errors;
    a prediction at another group's error counts as neither right nor wrong."""
    truth = {(e.start, e.end) for e in errors if e.kind in kinds}
    other = {(e.start, e.end) for e in errors if e.kind not in kinds}
    tp = len(flagged & truth)
    return tp, len(flagged - truth - other), len(truth) - tp


def publish_cost(model, repeat: int = 5) -> dict:
    """Seconds per publish on the README's first ~2,000 tokens: the model's hint material, then Harper."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    ids, offsets = model.tokenizer.encode_with_offsets(text)
    cut = offsets[min(2000, len(offsets) - 1)][0]
    text = text[: text.rfind("\n\n", 0, cut) + 1]
    ids, offsets = model.tokenizer.encode_with_offsets(text)
    doc = inference.IncrementalDocument(model, ids)
    starts = np.asarray([a for a, _ in offsets], dtype=np.int64)
    lay = markup.layout(text, markup.MARKDOWN)
    times = {"model_hint_material": [], "harper_every_paragraph": [], "harper_one_paragraph_edited": []}
    for i in range(repeat):
        t0 = time.perf_counter()
        HintMaterial.with_layout(text, starts, doc, None, lay, caches=CACHES)
        times["model_hint_material"].append(time.perf_counter() - t0)
        checker = CACHES.grammar
        checker.clear_cache()  # every paragraph linted; the linter itself is built (and warmed) once
        t0 = time.perf_counter()
        checker.lints(text, lay)
        times["harper_every_paragraph"].append(time.perf_counter() - t0)
        edited = text.replace("the ", f"the{' ' * (i + 2)}", 1)  # one paragraph changes
        t0 = time.perf_counter()
        checker.lints(edited, markup.layout(edited, markup.MARKDOWN))
        times["harper_one_paragraph_edited"].append(time.perf_counter() - t0)
    return {"tokens": len(ids), "repeat": repeat, **{k: round(float(np.median(v)), 4) for k, v in times.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="model folder (default: the bundled model)")
    ap.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    ap.add_argument("--books", type=int, default=12, help="valid-split books used (odd ones are the report split)")
    ap.add_argument("--excerpts", type=int, default=3)
    ap.add_argument("--chars", type=int, default=6000)
    ap.add_argument("--rate", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=17, help="as benchmarks/typo_detection.py: the same errors")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "harper_typos"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = inference.load_model(args.model, device="cpu")
    rng = random.Random(args.seed)
    defaults = DiagnosticSettings()
    rows = {
        name: {"non-word": [0, 0, 0], "real-word": [0, 0, 0]}
        for name in (
            "model",
            "harper_spelling",
            "model_or_harper_spelling",
            "harper_other_lints",
            "model_or_harper_other",
        )
    }
    n_errors = 0
    for b, title, text in excerpts(
        data_dir(args.data) / "gutenberg" / "gutenberg_subset.jsonl.gz", args.books, args.excerpts, args.chars
    ):
        bad_text, errors = inject(text, rng, args.rate)
        if b % 2 == 0:
            continue  # the tune split: nothing is tuned here, every figure is on the report split
        n_errors += len(errors)
        found = findings_of(model, bad_text)
        model_nw = {
            (f.start, f.end)
            for f in found
            if typos.flagged(f, defaults.typo_threshold, defaults.real_word_threshold) and f.kind == "non-word"
        }
        model_rw = {
            (f.start, f.end)
            for f in found
            if typos.flagged(f, defaults.typo_threshold, defaults.real_word_threshold) and f.kind == "real-word"
        }
        lints = harper_lints(bad_text)
        spelling = {(a, b) for a, b, k in lints if k in SPELLING_KINDS}
        other = {(a, b) for a, b, k in lints if k not in SPELLING_KINDS}
        predicted = {
            "model": (model_nw, model_rw),
            "harper_spelling": (spelling, set()),
            "model_or_harper_spelling": (model_nw | spelling, model_rw),
            "harper_other_lints": (set(), other),
            "model_or_harper_other": (model_nw, model_rw | other),
        }
        for name, (nw, rw) in predicted.items():
            for group, flagged, kinds in (("non-word", nw, NON_WORD), ("real-word", rw, REAL_WORD)):
                for i, v in enumerate(scored(errors, flagged, kinds)):
                    rows[name][group][i] += v
        print(f"{title[:40]:40} {len(errors):3} errors", file=sys.stderr)
    results = {
        "model": args.model or "the bundled model (inference/default_model)",
        "data": "gutenberg valid split, report half (as benchmarks/typo_detection.py)",
        "errors": n_errors,
        "harper": "harper-py " + _harper_version(),
        "rows": {name: {g: prf(*v) for g, v in groups.items()} for name, groups in rows.items()},
        "publish_cost_seconds": publish_cost(model),
        "hardware": "one CPU core (torch threads = --threads)",
        "args": {
            **vars(args),
            "out": str(Path(args.out).resolve().relative_to(REPO))
            if Path(args.out).resolve().is_relative_to(REPO)
            else args.out,
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    out.with_suffix(".md").write_text(table(results))
    print(table(results))
    return 0


def _harper_version() -> str:
    from importlib.metadata import version

    return version("harper-py")


def table(r: dict) -> str:
    flags = " ".join(f"--{k} {v}" for k, v in r["args"].items() if k in ("books", "excerpts"))
    lines = [
        f"`python -m benchmarks.harper_typos {flags}` ({r['harper']}, {r['errors']} injected errors, "
        f"report split; {r['hardware']})",
        "",
        "| predictions | non-word P | non-word R | real-word P | real-word R |",
        "|---|---|---|---|---|",
    ]
    for name, g in r["rows"].items():
        nw, rw = g["non-word"], g["real-word"]
        lines.append(f"| {name} | {nw['precision']} | {nw['recall']} | {rw['precision']} | {rw['recall']} |")
    c = r["publish_cost_seconds"]
    lines += [
        "",
        f"Per publish on a {c['tokens']}-token Markdown document (median of {c['repeat']}): model hint "
        f"material {c['model_hint_material']} s, Harper on every paragraph {c['harper_every_paragraph']} s, "
        f"Harper after a one-paragraph edit {c['harper_one_paragraph_edited']} s.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
