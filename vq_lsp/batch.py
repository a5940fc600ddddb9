"""`vq-lsp score`: score every revision of a document, each as an edit of the one before.

One IncrementalDocument chain per document: the first revision is a dense pass, every later
one is the Splice list `inference.diff` finds against the previous revision. A row per
revision (document and paragraph scores, tokens, changed tokens, incremental and dense MACs,
seconds) goes out as JSONL or CSV; the summary (total speedup over scoring every revision from
scratch) goes to stderr, and as a last JSONL record. Bad files are reported and skipped.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, TextIO

import numpy as np
import torch
from tqdm import tqdm

import inference

from inference import argtypes

from . import hints as hint_kit
from . import markup

from .revisions import GIT_MERGES, Revision, from_folder, from_git, from_jsonl
from . import typos
from .settings import DiagnosticSettings

VERIFY_TOL = 1e-4  # max |difference| from a dense pass; float32 states built by ONNX Runtime get DENSE_TOL
DENSE_TOL = 1e-3  # ONNX Runtime's and torch's float32 kernels differ by about 1.3e-4 (benchmarks/onnx_dense.py)


@dataclass
class Summary:
    documents: int = 0
    revisions: int = 0
    tokens: int = 0
    incremental_macs: int = 0
    dense_macs: int = 0
    seconds: float = 0.0
    warnings: int = 0
    verify_failures: int = 0
    verified: int = 0

    @property
    def speedup(self) -> float:
        return self.dense_macs / max(1, self.incremental_macs)

    def as_dict(self) -> dict:
        return {"type": "summary", **asdict(self), "speedup": round(self.speedup, 2)}


@dataclass
class Chain:
    doc: inference.IncrementalDocument
    ids: list[int] = field(default_factory=list)


class BatchScorer:
    """Turns (document, revision, text) triples into result rows, one chain per document."""

    def __init__(self, model: inference.LoadedModel, verify: bool = False,
                 hints: DiagnosticSettings | None = None, markup: str | None = None) -> None:
        self.model, self.verify, self.markup = model, verify, markup
        self.hints = hints or DiagnosticSettings()
        self.chains: dict[str, Chain | None] = {}
        self.summary = Summary()

    def score(self, revisions: Iterable[Revision]) -> Iterator[dict]:
        for index, (name, label, text) in enumerate(revisions):
            yield self._score_one(index, name, label, text)

    def _score_one(self, index: int, name: str, label: str, text: str) -> dict:
        ids, offsets = self.model.tokenizer.encode_with_offsets(text)
        if name not in self.chains:
            self.summary.documents += 1
        chain = self.chains.get(name)
        row = {"type": "revision", "doc": name, "revision": label, "index": index, "tokens": len(ids)}
        t0 = time.perf_counter()
        if not ids:  # an empty revision: nothing to score; the next one opens afresh
            self.chains[name] = None
            return {**row, "changed_tokens": 0, "scores": None, "paragraphs": [], "surprises": [], "typos": [],
                    "incremental_macs": 0,
                    "dense_macs": 0, "seconds": 0.0}
        if chain is None:
            doc = inference.IncrementalDocument(self.model, ids)
            changed, macs = len(ids), doc.dense_macs()
            self.chains[name] = chain = Chain(doc, ids)
        else:
            splices = inference.diff(chain.ids, ids)
            changed = sum(max(s.end - s.start, len(s.new_ids)) for s in splices)
            macs = chain.doc.apply(splices).cost.incremental_macs
            chain.ids = ids
        doc = chain.doc
        dense = doc.dense_macs()
        paras, surprises, typo_rows = self._hints(doc, name, label, text, offsets)
        seconds = time.perf_counter() - t0
        row.update(changed_tokens=changed, scores=_rounded(doc.scores), paragraphs=paras, surprises=surprises,
                   typos=typo_rows, incremental_macs=macs, dense_macs=dense, seconds=round(seconds, 6))
        if self.verify:
            check = doc.verify()
            tol = VERIFY_TOL if self.model.consts.dense is None else DENSE_TOL
            ok = check.codes_equal and check.max_abs_diff < tol
            row["verified"] = ok
            self.summary.verified += 1
            self.summary.verify_failures += not ok
        s = self.summary
        s.revisions += 1
        s.tokens += len(ids)
        s.incremental_macs += macs
        s.dense_macs += dense
        s.seconds += seconds
        return row


    def _hints(self, doc, name: str, label: str, text: str, offsets) -> tuple[list, list, list]:
        """Prose blocks with their scores (tone), unlikely words and typos, markup-aware as in the
        server: the markup comes from the revision's file name (else the document's), or --markup."""
        kind = self.markup or markup.markup_of(name=label if "." in label else name)
        lay = markup.layout(text, kind, markup.language_of(label if "." in label else name))
        starts = np.asarray([a for a, _ in offsets], dtype=np.int64)
        _, words, findings = hint_kit.analyse(text, starts, doc, lay)
        paras = []
        for a, b, n_words in lay.tone:
            ta, tb = int(np.searchsorted(starts, a)), int(np.searchsorted(starts, b))
            if ta < tb:
                paras.append({"line": text.count("\n", 0, a), "tokens": tb - ta, "words": n_words,
                              "scores": _rounded(doc.span_scores(ta, tb))})
        cfg = self.hints
        surprises = []
        if cfg.surprise:
            top = sorted((w for w in words if w[2] >= cfg.surprise_threshold), key=lambda w: -w[2])
            surprises = [{**_where(text, a), "text": text[a:b], "surprise": round(s, 2)}
                         for a, b, s in sorted(top[: cfg.max_surprise_hints])]
        typo_rows = []
        if cfg.typo:
            flagged = [f for f in findings if typos.flagged(f, cfg.typo_threshold, cfg.real_word_threshold)]
            flagged = sorted(flagged, key=lambda f: -f.gain)[: cfg.max_typo_hints]
            typo_rows = [{**_where(text, f.start), "text": f.word, "kind": f.kind, "surprise": round(f.surprise, 2),
                          "gain": round(f.gain, 2), "fixes": [w for w, _ in f.fixes]}
                         for f in sorted(flagged, key=lambda f: f.start)]
        return paras, surprises, typo_rows


def _where(text: str, a: int) -> dict:
    return {"line": text.count("\n", 0, a), "column": a - (text.rfind("\n", 0, a) + 1)}


def _rounded(scores: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in scores.items()}


class RowWriter:
    """JSONL (every row as is), CSV (scores flattened, paragraphs as a JSON column) or readable text."""

    def __init__(self, out: TextIO, fmt: str, labels: tuple[str, ...], sentiment_threshold: float = 0.75,
                 tone_min_words: int = 0) -> None:
        self.out, self.fmt, self.labels, self.sentiment_threshold = out, fmt, labels, sentiment_threshold
        self.tone_min_words = tone_min_words
        self.bar: tqdm | None = None  # a progress bar drawn on the same terminal: rows are written around it
        if fmt == "csv":
            self.csv = csv.writer(out)
            self.csv.writerow(["doc", "revision", "index", "tokens", "changed_tokens",
                               *[f"score_{lab}" for lab in labels], "paragraphs", "incremental_macs",
                               "dense_macs", "seconds", "verified"])

    def row(self, r: dict) -> None:
        if self.fmt == "text":
            self._write(self._text(r))
            return
        if self.fmt == "jsonl":
            self._write(json.dumps(r) + "\n")
            return
        scores = r["scores"] or {}
        self.csv.writerow([r["doc"], r["revision"], r["index"], r["tokens"], r["changed_tokens"],
                           *[scores.get(lab, "") for lab in self.labels], json.dumps(r["paragraphs"]),
                           r["incremental_macs"], r["dense_macs"], r["seconds"], r.get("verified", "")])

    def _write(self, chunk: str) -> None:
        """Write a row; with a live progress bar, clear it first and redraw it after, so that a row
        never starts on the bar's line (on a terminal both share one screen)."""
        if self.bar is not None and not self.bar.disable:
            with self.bar.external_write_mode(file=self.out):
                self.out.write(chunk)
                self.out.flush()
        else:
            self.out.write(chunk)

    def _text(self, r: dict) -> str:
        """What a writer reads: the document's tone, then the hints an editor would show (1-based lines)."""
        if r["scores"] is None:
            return f"{r['doc']}/{r['revision']}: empty\n"
        label = max(r["scores"], key=r["scores"].get)
        lines = [f"{r['doc']}/{r['revision']}: {label} {r['scores'][label]:.2f}  ({r['changed_tokens']} of "
                 f"{r['tokens']} tokens changed, {r['dense_macs'] / max(1, r['incremental_macs']):.1f}x fewer MACs "
                 f"than scoring from scratch)"]
        for p in r["paragraphs"]:
            top = max(p["scores"], key=p["scores"].get)
            if p["scores"][top] >= self.sentiment_threshold and p["words"] >= self.tone_min_words:
                lines.append(f"  line {p['line'] + 1}: {top} tone ({p['scores'][top]:.2f})")
        for h in r["typos"]:
            fixes = ", ".join(repr(w) for w in h["fixes"])
            lines.append(f"  line {h['line'] + 1}:{h['column'] + 1}: possible typo {h['text']!r} "
                         f"({h['kind']}, {h['surprise']:.1f} nats; likely: {fixes})")
        for h in r["surprises"]:
            lines.append(f"  line {h['line'] + 1}:{h['column'] + 1}: unexpected {h['text']!r} "
                         f"(surprise {h['surprise']:.1f}): possible typo or awkward wording")
        return "\n".join(lines) + "\n"

    def summary(self, s: Summary) -> None:
        if self.fmt == "jsonl":
            self.out.write(json.dumps(s.as_dict()) + "\n")


def build_parser(prog: str = "vq-lsp score") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description="Score every revision of a document incrementally.")
    ap.add_argument("path", nargs="?", help="a folder of revision files, or a JSONL(.gz) revision file")
    ap.add_argument("--git", metavar="FILE",
                    help="score FILE's git history, oldest commit first: every commit that changed its content is "
                         "a revision, followed across renames; a commit that only renames it is not")
    ap.add_argument("--git-merges", choices=GIT_MERGES, default="first-parent",
                    help="first-parent (default): the main line only, a merge is one revision compared with its "
                         "first parent; all: also the commits of merged branches, in topological order")
    ap.add_argument("--order", choices=["name", "mtime"], default="name", help="order of files in a folder")
    ap.add_argument("--format", choices=["jsonl", "csv", "text"], default="jsonl",
                    help="jsonl and csv: a row per revision; text: the hints, as a writer would read them")
    ap.add_argument("--sentiment-threshold", type=argtypes.probability,
                    default=DiagnosticSettings().sentiment_threshold,
                    help="paragraph tone shown in text output at this probability (0 to 1) or above")
    ap.add_argument("--surprise-threshold", type=argtypes.non_negative_float,
                    help="list words at least this surprising (whole-word -log p, nats, >= 0) as unlikely "
                         "words (default: not listed)")
    ap.add_argument("--tone-min-words", type=argtypes.non_negative_int,
                    default=DiagnosticSettings().tone_min_words,
                    help="text output shows a tone only for prose paragraphs of at least this many words")
    ap.add_argument("--markup", choices=[markup.MARKDOWN, markup.RST, markup.PLAIN, markup.SOURCE, markup.NONE],
                    help="read every revision as this markup (default: from the file name's extension)")
    ap.add_argument("--output", "-o", metavar="FILE", help="write rows here instead of stdout")
    ap.add_argument("--verify", action="store_true", help="check every revision against a full dense pass")
    ap.add_argument("--model", metavar="DIR|NAME", help="model folder, or the name of a model installed with "
                    "vq-train export --install NAME (default: the bundled model)")
    ap.add_argument("--device", type=argtypes.device, help="cpu, cuda, cuda:1 ... (default: CUDA when present)")
    ap.add_argument("--threads", type=argtypes.threads, help="CPU threads for torch, 1 to 1024 (with --ray: per worker)")
    ap.add_argument("--dense", choices=("torch", "onnx", "auto"), default="torch",
                    help="backend of the full passes (first revision, --verify): torch (default), onnx (ONNX Runtime, "
                         "float32 only, needs the [onnx] extra) or auto (ONNX Runtime where it was measured faster)")
    ap.add_argument("--precision", choices=("float64", "float32"), default="float64",
                    help="engine dtype: float64 (default: verification grade) or float32 (half the memory and time)")
    ap.add_argument("--context", choices=inference.CONTEXTS, default="window",
                    help="what a token sees: window (default: the text before it in its window, up to "
                         "window_tokens) or paragraph (only its own paragraph: a paragraph's scores never depend "
                         "on the text before it)")
    ap.add_argument("--state-layout", choices=inference.LAYOUTS, default="full",
                    help="what a document's state keeps: full (default: every layer's output, faster edits) or lean "
                         "(layer outputs recomputed from the codes when an edit needs them: about a fifth less memory)")
    ap.add_argument("--ray", nargs="?", const="local", type=argtypes.ray_address, metavar="ADDRESS",
                    help="score on a Ray cluster, each document's revisions on one worker: a local cluster when no "
                         "ADDRESS is given (write PATH first: `vq-lsp score DIR --ray`), else auto, HOST:PORT or "
                         "ray://HOST:PORT; needs the [cluster] extra")
    ap.add_argument("--ray-workers", type=argtypes.positive_int, metavar="N",
                    help="Ray workers (actors, each loads the model once); default: the cluster's CPUs / --threads")
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Every check that needs no file: a bad flag exits with status 2 and a line naming it."""
    ap = build_parser()
    argtypes.refuse_bare_double_dash(ap, sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    if args.git and args.path:
        ap.error("give either PATH or --git FILE, not both")
    if not args.git and not args.path:
        ap.error("give a folder or JSONL file of revisions (PATH), or --git FILE")
    if args.git_merges != "first-parent" and not args.git:
        ap.error("--git-merges only applies with --git FILE")
    if args.ray_workers and not args.ray:
        ap.error("--ray-workers only applies with --ray")
    if args.ray and args.device and args.device != "cpu":
        ap.error(f"--ray runs its workers on CPU; --device {args.device} is not supported with --ray")
    if args.ray:
        from .ray_batch import INSTALL_HINT, ray_installed

        if not ray_installed():
            ap.error(f"argument --ray: needs the ray package: {INSTALL_HINT}")
    if args.output and args.output in ((args.path or ""), (args.git or "")):
        ap.error(f"--output {args.output} would overwrite the revisions being scored")
    return args


def revisions_for(args: argparse.Namespace, warn, note=None) -> Iterator[Revision]:
    if args.git:
        return from_git(Path(args.git), warn, note, merges=args.git_merges)
    path = Path(args.path)
    if path.is_dir():
        return from_folder(path, args.order, warn)
    if path.is_file():
        return from_jsonl(path, warn)
    raise ValueError(f"{path}: no such file or folder")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    summary_holder: list[Summary] = []

    def warn(message: str) -> None:
        tqdm.write(f"warning: {message}", file=sys.stderr)
        if summary_holder:
            summary_holder[0].warnings += 1

    try:
        if args.threads:
            torch.set_num_threads(args.threads)
        revisions = revisions_for(args, warn, note=lambda m: tqdm.write(m, file=sys.stderr))
        load = dict(dtype=args.precision, dense=args.dense, context=args.context, layout=args.state_layout)
        model = inference.load_model(args.model, device=args.device, **load)
        surprise = {} if args.surprise_threshold is None else {"surprise": True,
                                                                "surprise_threshold": args.surprise_threshold}
        hints = DiagnosticSettings(**surprise)
        if args.ray:
            from .ray_batch import RayScorer

            folder = model.path if args.model else None  # None: each node's own bundled model
            scorer = RayScorer(args.ray, args.ray_workers, folder, args.threads, load,
                               verify=args.verify, hints=hints, markup=args.markup)
        else:
            scorer = BatchScorer(model, verify=args.verify, hints=hints, markup=args.markup)
        summary_holder.append(scorer.summary)
        out = open(args.output, "w", encoding="utf-8", newline="") if args.output else sys.stdout
        try:
            writer = RowWriter(out, args.format, model.config.labels, args.sentiment_threshold, args.tone_min_words)
            bar = tqdm(scorer.score(revisions), unit="rev", disable=not sys.stderr.isatty(), file=sys.stderr)
            writer.bar = bar if out is sys.stdout else None
            with bar:
                for row in bar:
                    writer.row(row)
                    bar.set_postfix(speedup=f"{scorer.summary.speedup:.1f}x")
            writer.bar = None  # closed: the summary goes below it
            writer.summary(scorer.summary)
        finally:
            if out is not sys.stdout:
                out.close()
    except (ValueError, OSError) as e:  # ModelLoadError is a ValueError
        print(f"vq-lsp score: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    s = scorer.summary
    if s.revisions == 0:
        print("vq-lsp score: error: no revision could be scored", file=sys.stderr)
        return 2
    print(f"{s.revisions} revisions of {s.documents} documents, {s.tokens} tokens, {s.seconds:.2f} s; "
          f"incremental {s.incremental_macs / 1e9:.2f} GMACs vs scoring each from scratch "
          f"{s.dense_macs / 1e9:.2f} GMACs: {s.speedup:.1f}x fewer"
          + (f"; verified {s.verified}, failures {s.verify_failures}" if args.verify else "")
          + (f"; {s.warnings} warnings" if s.warnings else ""), file=sys.stderr)
    return 1 if s.verify_failures else 0


if __name__ == "__main__":
    sys.exit(main())
