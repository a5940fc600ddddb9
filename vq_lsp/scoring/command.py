"""The `vq-lsp score` command: flags, where the revisions come from, and the run.

Rows go out as JSONL, CSV or text (output.py); the summary (total speedup over scoring every
revision from scratch) goes to stderr, and as a last JSONL record. Bad files are reported and
skipped. With --ray the rows are computed on a Ray cluster (ray.py), else in this process
(scorer.py). A progress bar is drawn on stderr when stderr is a terminal, whatever the format.
Every flag's help states its default. Hints are chosen as `vq-lsp check` chooses them: under the
workspace's configuration file and word lists (read from the current folder) and the ignore
comments in each text.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import torch
from tqdm import tqdm

import inference
from inference import argtypes

from .. import stdio
from ..engine_flags import add_engine_flags
from ..hints import markup
from ..settings import DiagnosticSettings, Settings, load_options
from ..workspace import folder
from .output import RowWriter
from .ray import INSTALL_HINT, RayScorer, ray_address, ray_installed
from .revisions import GIT_MERGES, Revision, RevisionSource, folder_source, from_jsonl, git_source
from .rows import mac_ratio
from .scorer import BatchScorer, Summary


def build_parser(prog: str = "vq-lsp score") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description="Score every revision of a document incrementally.")
    add_source_flags(ap)
    add_output_flags(ap)
    add_run_flags(ap)
    add_ray_flags(ap)
    return ap


def add_source_flags(ap: argparse.ArgumentParser) -> None:
    """Where the revisions come from: PATH (a folder or a file of rows) or a file's git history."""
    ap.add_argument("path", nargs="?", help="a folder of revision files, or a JSONL(.gz) revision file")
    ap.add_argument(
        "--git",
        metavar="FILE",
        help="score FILE's git history, oldest commit first: every commit that changed its content is "
        "a revision, followed across renames; a commit that only renames it is not (default: "
        "none, PATH is scored)",
    )
    ap.add_argument(
        "--git-merges",
        choices=GIT_MERGES,
        default="first-parent",
        help="first-parent (default): the main line only, a merge is one revision compared with its "
        "first parent; all: also the commits of merged branches, in topological order",
    )
    ap.add_argument(
        "--order", choices=["name", "mtime"], default="name", help="order of files in a folder (default: %(default)s)"
    )


def add_output_flags(ap: argparse.ArgumentParser) -> None:
    """What the rows say and where they go."""
    ap.add_argument(
        "--format",
        choices=["jsonl", "csv", "text"],
        default="jsonl",
        help="jsonl and csv: a row per revision; text: the hints, as a writer would read them; with "
        "--git, each commit's date, short hash and subject, the change of the document score and "
        "the hints new (+) or gone (-, at their line in the previous revision) since the previous "
        "commit (default: %(default)s)",
    )
    ap.add_argument(
        "--all-hints",
        action="store_true",
        help="text output of --git lists every hint of every revision, not only the new and gone ones (default: off)",
    )
    ap.add_argument(
        "--sentiment-threshold",
        type=argtypes.probability,
        help="paragraph tone shown at this probability (0 to 1) or above (default: the workspace file's "
        f"diagnostics.sentimentThreshold, else {DiagnosticSettings().sentiment_threshold})",
    )
    ap.add_argument(
        "--surprise-threshold",
        type=argtypes.non_negative_float,
        help="list words at least this surprising (whole-word -log p, nats, >= 0) as unlikely "
        "words (default: not listed)",
    )
    ap.add_argument(
        "--tone-min-words",
        type=argtypes.non_negative_int,
        help="a tone only for prose paragraphs of at least this many words (default: the workspace file's "
        f"diagnostics.toneMinWords, else {DiagnosticSettings().tone_min_words})",
    )
    ap.add_argument(
        "--markup",
        choices=[markup.MARKDOWN, markup.RST, markup.PLAIN, markup.SOURCE, markup.NONE],
        help="read every revision as this markup (default: from the file name's extension)",
    )
    ap.add_argument("--output", "-o", metavar="FILE", help="write rows here (default: stdout)")


def add_run_flags(ap: argparse.ArgumentParser) -> None:
    """How the revisions are scored: the engine's flags, the full passes' backend, checks."""
    ap.add_argument(
        "--verify", action="store_true", help="check every revision against a full dense pass (default: off)"
    )
    add_engine_flags(ap, notes={"threads": "(with --ray: per worker)"})
    ap.add_argument(
        "--dense",
        choices=("torch", "onnx", "auto"),
        default="torch",
        help="backend of the full passes (first revision, --verify): torch (default), onnx (ONNX Runtime, "
        "float32 only, needs the [onnx] extra) or auto (ONNX Runtime where it was measured faster)",
    )


def add_ray_flags(ap: argparse.ArgumentParser) -> None:
    """Scoring on a Ray cluster instead of in this process."""
    ap.add_argument(
        "--ray",
        nargs="?",
        const="local",
        type=ray_address,
        metavar="ADDRESS",
        help="score on a Ray cluster, each document's revisions on one worker: a local cluster when no "
        "ADDRESS is given (write PATH first: `vq-lsp score DIR --ray`), else auto, HOST:PORT or "
        "ray://HOST:PORT; needs the [cluster] extra (default: off, scored in this process)",
    )
    ap.add_argument(
        "--ray-workers",
        type=argtypes.positive_int,
        metavar="N",
        help="Ray workers (actors, each loads the model once); default: the cluster's CPUs / --threads",
    )


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
    if args.all_hints and not (args.git and args.format == "text"):
        ap.error("--all-hints only applies with --git FILE --format text (other sources list every hint)")
    if args.ray_workers and not args.ray:
        ap.error("--ray-workers only applies with --ray")
    if args.ray and args.device and args.device != "cpu":
        ap.error(f"--ray runs its workers on CPU; --device {args.device} is not supported with --ray")
    if args.ray and not ray_installed():
        ap.error(f"argument --ray: needs the ray package: {INSTALL_HINT}")
    if args.output and args.output in ((args.path or ""), (args.git or "")):
        ap.error(f"--output {args.output} would overwrite the revisions being scored")
    return args


REVISION_ROW_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz")  # what from_jsonl reads


def revisions_for(args: argparse.Namespace, warn, note=None) -> RevisionSource:
    if args.git:
        return git_source(Path(args.git), warn, note, merges=args.git_merges)
    path = Path(args.path)
    if path.is_dir():
        return folder_source(path, args.order, warn)
    if path.is_file():
        if not path.name.lower().endswith(REVISION_ROW_SUFFIXES):
            raise ValueError(
                f"{path}: not a file of revision rows ({', '.join(REVISION_ROW_SUFFIXES)}); to check one document, "
                f"run `vq-lsp check {path}`; to score the versions of a document, give the folder that holds them"
            )
        return RevisionSource(from_jsonl(path, warn))
    raise ValueError(f"{path}: no such file or folder")


def progress_screen() -> dict[str, int]:
    """The progress bar's screen size: tqdm follows the terminal's, but a terminal that reports none (a
    pseudo-terminal nobody sized, as under `script` or a task runner) would hide the bar: 80 x 24 then."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):  # not a real file: tqdm finds its own size
        return {}
    return {} if size.columns > 0 and size.lines > 0 else {"ncols": 80, "nrows": 24}


def remembering(revisions: Iterator[Revision], texts: deque[str]) -> Iterator[Revision]:
    """The revisions, each text also queued for the writer: rows come back in input order (both
    scorers), so a row's text is the oldest one queued (a few, with Ray's revisions in flight)."""
    for revision in revisions:
        texts.append(revision[2])
        yield revision


class Warnings:
    """Warnings go to stderr above the progress bar, and count in the run's summary once there is one."""

    def __init__(self) -> None:
        self.summary: Summary | None = None

    def __call__(self, message: str) -> None:
        tqdm.write(f"warning: {message}", file=sys.stderr)
        if self.summary is not None:
            self.summary.warnings += 1


def hint_settings(args: argparse.Namespace, workspace: Settings) -> DiagnosticSettings:
    """The hints rows carry: the workspace file's diagnostics settings under the flags; unlikely words
    only when --surprise-threshold is given."""
    cfg = workspace.diagnostics
    if args.sentiment_threshold is not None:
        cfg = dataclasses.replace(cfg, sentiment_threshold=args.sentiment_threshold)
    if args.tone_min_words is not None:
        cfg = dataclasses.replace(cfg, tone_min_words=args.tone_min_words)
    if args.surprise_threshold is None:
        return dataclasses.replace(cfg, surprise=False)
    return dataclasses.replace(cfg, surprise=True, surprise_threshold=args.surprise_threshold)


def make_scorer(args: argparse.Namespace, model: inference.LoadedModel, load: dict, warn) -> BatchScorer | RayScorer:
    """The scorer the flags ask for: on a Ray cluster (--ray) or in this process, with `model`."""
    workspace = folder.read(Path.cwd())  # as `vq-lsp check` reads it
    for problem in workspace.problems:
        warn(problem)
    options = {
        "verify": args.verify,
        "hints": hint_settings(args, workspace.settings),
        "markup": args.markup,
        "writer": workspace.conventions,
        "grammar_rules": workspace.grammar_rules,
    }
    if not args.ray:
        return BatchScorer(model, **options)
    model_folder = model.path if args.model else None  # None: each node's own bundled model
    return RayScorer(args.ray, args.ray_workers, model_folder, args.threads, load, **options)


def write_rows(
    writer: RowWriter,
    scorer: BatchScorer | RayScorer,
    revisions: Iterator[Revision],
    expected: int | None,
    texts: deque[str] | None,
    to_stdout: bool,
) -> None:
    """Score the revisions and write a row each, then the summary; `texts`: each revision's text, in
    order, for a writer that lists what changed. The progress bar draws on stderr when it is a
    terminal; a writer to stdout (the same terminal, likely) moves it aside for each row."""
    bar = tqdm(
        scorer.score(revisions),
        total=expected,
        unit="rev",
        disable=not sys.stderr.isatty(),
        file=sys.stderr,
        **progress_screen(),
    )
    writer.bar = bar if to_stdout else None
    with bar:
        for row in bar:
            writer.row(row, texts.popleft() if texts is not None else None)
            bar.set_postfix(speedup=f"{scorer.summary.speedup:.1f}x")
    writer.bar = None  # closed: the summary goes below it
    writer.summary(scorer.summary)


def score(args: argparse.Namespace, stdout, warn: Warnings) -> Summary:
    """Read the revisions, load the model, score and write every row; the run's summary."""
    if args.threads:
        torch.set_num_threads(args.threads)
    source = revisions_for(args, warn, note=lambda m: tqdm.write(m, file=sys.stderr))
    changes_only = bool(args.git) and args.format == "text" and not args.all_hints
    texts: deque[str] | None = deque() if changes_only else None
    revisions = remembering(source.revisions, texts) if texts is not None else source.revisions
    load = {**load_options(args), "dense": args.dense}
    model = inference.load_model(args.model, device=args.device, **load)
    scorer = make_scorer(args, model, load, warn)
    warn.summary = scorer.summary
    out = open(args.output, "w", encoding="utf-8", newline="") if args.output else stdout
    try:
        writer = RowWriter(out, args.format, model.config.labels, commits=source.commits, changes_only=changes_only)
        write_rows(writer, scorer, revisions, source.expected, texts, to_stdout=out is stdout)
    finally:
        if out is not stdout:
            out.close()
    return scorer.summary


UNRELATED_REVISIONS = (
    " (each revision replaced most of the one before: a folder is scored as the versions of one document; "
    "`vq-lsp check FOLDER` gives the hints of separate files)"
)


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def report(s: Summary, verified: bool) -> int:
    """The summary line on stderr; the exit status: 2 when nothing was scored, 1 on a failed check."""
    if s.revisions == 0:
        print("vq-lsp score: error: no revision could be scored", file=sys.stderr)
        return 2
    print(
        f"{_counted(s.revisions, 'revision')} of {_counted(s.documents, 'document')}, {s.tokens} tokens, "
        f"{s.seconds:.2f} s; incremental {s.incremental_macs / 1e9:.2f} GMACs vs scoring each from scratch "
        f"{s.dense_macs / 1e9:.2f} GMACs: {mac_ratio(s.incremental_macs, s.dense_macs)}"
        + (UNRELATED_REVISIONS if s.incremental_macs > s.dense_macs else "")
        + (f"; verified {s.verified}, failures {s.verify_failures}" if verified else "")
        + (f"; {s.warnings} warnings" if s.warnings else ""),
        file=sys.stderr,
    )
    return 1 if s.verify_failures else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reserved = stdio.reserve_stdout()  # the rows stay parsable whatever a library prints
    stdout = reserved.text if reserved else sys.stdout
    try:
        summary = score(args, stdout, Warnings())
    except (ValueError, OSError) as e:  # ModelLoadError is a ValueError
        print(f"vq-lsp score: error: {e}", file=sys.stderr)
        return 2
    stdout.flush()
    return report(summary, args.verify)


if __name__ == "__main__":
    sys.exit(main())
