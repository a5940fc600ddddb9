"""`vq-lsp check PATH...`: the hints of files and folders, for CI and pre-commit.

Each file is scored once, with a dense pass, and its hints are chosen exactly as the server
chooses them (hints/conventions.py, then hints/selection.py): the workspace's configuration file,
its and the user's dictionaries, and the file's ignore comments all apply. The workspace root is
the current folder (where CI and pre-commit run): its `vq-lsp.toml` (or pyproject.toml's
`[tool.vq-lsp]`) and `.vq-lsp-words.txt` are read, and exclude globs are relative to it.

A folder is walked for files of a known prose or source suffix whose file type the settings want
(hidden folders skipped); a file named on the command line is checked whatever its suffix, when
its type is wanted. A binary, undecodable or unreadable file is reported on stderr and skipped.

Output: `path:line:col: severity kind message` lines (1-based line and column, in characters), or
`--format json`, `sarif` (SARIF 2.1.0, for code scanning) or `github` (workflow annotations).
Exit status: 1 when a hint at or above `--fail-on` exists, 0 otherwise, 2 for bad usage (a missing
path, a model that cannot be loaded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import inference

from .. import __version__, stdio
from ..engine_flags import add_engine_flags
from ..hints import conventions, excludes, jargon, markup
from ..hints.caches import HintCaches
from ..hints.material import HintMaterial, layout_for
from ..settings import SEVERITIES, Settings
from ..workspace import folder
from .lines import FileText

FORMATS = ("text", "json", "sarif", "github")
FAIL_ON = (*SEVERITIES, "never")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "information": "note", "hint": "note"}
_GITHUB_LEVEL = {"error": "error", "warning": "warning", "information": "notice", "hint": "notice"}
_RULES = {
    "typo": "A likely typo: a word the model reads as a close dictionary word, or a confused word.",
    "sentiment": "The tone of a prose paragraph.",
    "surprise": "A word the model finds very unlikely here.",
    "grammar": "A grammar or word-choice lint.",
}


@dataclass(frozen=True)
class Finding:
    """One hint of one file, 1-based line and column (characters)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    severity: str
    kind: str
    message: str
    fixes: tuple[str, ...] = ()


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="vq-lsp check",
        description=(
            "Print the hints of files and folders (typos, tone, unlikely words) as the language server would "
            "show them, honouring vq-lsp.toml, the dictionaries and ignore comments. Exit status 1 when a hint "
            "at or above --fail-on exists."
        ),
    )
    ap.add_argument("paths", nargs="+", metavar="PATH", help="files or folders to check")
    ap.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default: path:line:col: severity kind message), json, sarif or github",
    )
    ap.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="warning",
        help="exit 1 when a hint of this severity or a more severe one exists (default warning: typos "
        "are warnings, tone information, unlikely words hints); never: always 0",
    )
    add_engine_flags(
        ap, "model", "device", "threads", notes={"model": "(the configuration file's modelPath when not given)"}
    )
    return ap


def _known_suffix(path: Path) -> bool:
    return path.suffix.lower() == ".txt" or markup.language_of(path.name) != "plaintext"


def _relative(path: Path, root: Path) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return path.as_posix()


def files_to_check(paths: list[Path], settings: Settings, root: Path) -> Iterator[Path]:
    """The files named, and the prose and source files under the folders named, minus excludes."""

    def wanted(path: Path) -> bool:
        return settings.wants(markup.language_of(path.name)) and not excludes.excluded(
            os.path.abspath(path), os.path.abspath(root), settings.exclude
        )

    for path in paths:
        if path.is_dir():
            for folder, subfolders, names in os.walk(path):
                subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
                for name in sorted(names):
                    file = Path(folder) / name
                    if _known_suffix(file) and wanted(file):
                        yield file
        elif wanted(path):
            yield path


def read_text(path: Path) -> tuple[str | None, str | None]:
    """A file's text, or why it cannot be checked."""
    try:
        data = path.read_bytes()
    except OSError as e:
        return None, f"cannot read it ({e.strerror or e})"
    if b"\x00" in data[:8192]:
        return None, "a binary file"
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 text ({e.reason} at byte {e.start})"


def check_text(
    model: inference.LoadedModel,
    text: str,
    name: str,
    settings: Settings,
    conv: conventions.Conventions,
    caches: HintCaches,
) -> list[Finding]:
    """The hints of one text as the server would publish them, scored with one dense pass; ValueError
    for a text longer than maxDocumentTokens (the server gives it no hints either)."""
    return hints_of(scored(model, text, name, settings, caches), settings, conv, caches)


@dataclass(frozen=True)
class Scored:
    """One text's hint material, scored, before the hints are chosen: `vq-lsp check` scores every
    file first, so that the words the workspace uses consistently (hints/jargon.py) are known
    before any file's hints are."""

    name: str
    text: FileText
    material: HintMaterial


def scored(model: inference.LoadedModel, text: str, name: str, settings: Settings, caches: HintCaches) -> Scored | None:
    """A text's material (None for an empty text); ValueError as check_text."""
    ids, offsets = model.tokenizer.encode_with_offsets(text)
    if not ids:
        return None
    if len(ids) > settings.max_document_tokens:
        raise ValueError(f"{len(ids)} tokens, more than maxDocumentTokens ({settings.max_document_tokens})")
    doc = inference.IncrementalDocument(model, ids)
    tt = FileText(text, np.asarray([a for a, _ in offsets], dtype=np.int64))
    lay = layout_for(text, markup.language_of(name), settings.diagnostics, caches)
    return Scored(name, tt, HintMaterial.with_layout(text, tt.token_starts, doc, None, lay, caches=caches))


def workspace_words(texts: list[Scored]) -> frozenset[str]:
    """The spellings the files checked together make the writer's words (hints/jargon.py): a word
    used consistently across the workspace is no typo in the one file that uses it once."""
    return jargon.writers_words(jargon.Usage.merged(s.material.usage for s in texts if s.material.usage))


def hints_of(s: Scored | None, settings: Settings, conv: conventions.Conventions, caches: HintCaches) -> list[Finding]:
    """The findings of one scored text under the conventions."""
    if s is None:
        return []
    name, tt, material = s.name, s.text, s.material
    language = markup.language_of(name)
    cfg = settings.diagnostics
    fixes = {(f.start, f.end): tuple(w for w, _ in f.fixes) for f in material.findings}
    out = []
    for h in conventions.choose(tt, material, cfg, conv, language, caches=caches):
        (l0, c0), (l1, c1) = tt.position(h.start), tt.position(h.end)
        out.append(
            Finding(
                name,
                l0 + 1,
                c0 + 1,
                l1 + 1,
                c1 + 1,
                h.severity,
                h.code,
                h.message,
                fixes.get((h.start, h.end), ()) if h.code == "typo" else (),
            )
        )
    return sorted(out, key=lambda f: (f.line, f.column, f.kind))


def _github_escape(text: str, property_value: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def sarif(findings: list[Finding]) -> dict:
    """A SARIF 2.1.0 log of the findings (one run, one rule per hint kind)."""
    kinds = sorted({f.kind for f in findings} | {"typo"})
    results = [
        {
            "ruleId": f.kind,
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.path},
                        "region": {
                            "startLine": f.line,
                            "startColumn": f.column,
                            "endLine": f.end_line,
                            "endColumn": f.end_column,
                        },
                    }
                }
            ],
        }
        for f in findings
    ]
    rules = [{"id": k, "shortDescription": {"text": _RULES.get(k, k)}} for k in kinds]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "vq-lsp", "version": __version__, "rules": rules}}, "results": results}],
    }


def write(findings: list[Finding], fmt: str, out) -> None:
    if fmt == "json":
        json.dump([asdict(f) for f in findings], out, indent=1)
        out.write("\n")
    elif fmt == "sarif":
        json.dump(sarif(findings), out, indent=1)
        out.write("\n")
    elif fmt == "github":
        for f in findings:
            props = ",".join(
                f"{k}={_github_escape(str(v), True)}"
                for k, v in (
                    ("file", f.path),
                    ("line", f.line),
                    ("col", f.column),
                    ("endLine", f.end_line),
                    ("endColumn", f.end_column),
                    ("title", f"vq-lsp {f.kind}"),
                )
            )
            out.write(f"::{_GITHUB_LEVEL[f.severity]} {props}::{_github_escape(f.message)}\n")
    else:
        for f in findings:
            out.write(f"{f.path}:{f.line}:{f.column}: {f.severity} {f.kind} {f.message}\n")


def fails(findings: list[Finding], fail_on: str) -> bool:
    if fail_on == "never":
        return False
    limit = SEVERITIES.index(fail_on)
    return any(SEVERITIES.index(f.severity) <= limit for f in findings)


def main(argv: list[str] | None = None, root: Path | None = None, warn: Callable[[str], None] | None = None) -> int:
    args = build_parser().parse_args(argv)
    reserved = stdio.reserve_stdout()  # the report stays parsable whatever a library prints
    out = reserved.text if reserved else sys.stdout
    warn = warn or (lambda message: print(message, file=sys.stderr))
    root = root or Path.cwd()
    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"vq-lsp check: error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    workspace = folder.read(root)
    for problem in workspace.problems:
        warn(f"vq-lsp check: warning: {problem}")
    settings, conv = workspace.settings, workspace.conventions
    caches = HintCaches()  # this run's: the files' layouts, paragraphs and lints
    caches.grammar.configure(workspace.grammar_rules)
    import torch

    torch.set_num_threads(args.threads)
    try:
        model = inference.load_model(
            args.model or settings.model_path,
            device=args.device,
            dtype=settings.precision,
            context=settings.context,
        )
    except (ValueError, OSError, RuntimeError) as e:  # ModelLoadError is a ValueError
        print(f"vq-lsp check: error: {e}", file=sys.stderr)
        return 2
    texts: list[Scored | None] = []
    for path in files_to_check(paths, settings, root):
        text, problem = read_text(path)
        name = _relative(path, root)
        if problem is None:
            try:
                texts.append(scored(model, text, name, settings, caches))
                continue
            except ValueError as e:
                problem = str(e)
        warn(f"{name}: skipped: {problem}")
    done = [s for s in texts if s is not None]
    conv = conventions.Conventions(conv.dictionary.union(workspace_words(done)), conv.root)
    findings: list[Finding] = []
    for s in done:
        findings += hints_of(s, settings, conv, caches)
    write(findings, args.format, out)
    out.flush()
    return 1 if fails(findings, args.fail_on) else 0


if __name__ == "__main__":
    sys.exit(main())
