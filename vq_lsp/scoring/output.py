"""`vq-lsp score` output: a row per revision as JSONL (as is), CSV (scores flattened) or readable
text (the document's tone and the hints an editor would show), and the summary as a last JSONL record.

Text output of a git history names each revision by its commit (date, short hash, subject), gives
the change of the document score, and lists only the hints that are new or gone since the previous
revision (hint_changes.py), so that a long history reads as what each commit changed; every hint
of every revision (the listing of folders and revision files) is one flag away.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TextIO

from tqdm import tqdm

from .hint_changes import ListedHint, changes
from .revisions import CommitHeader
from .rows import RevisionRow, mac_ratio
from .scorer import Summary


@dataclass
class _Previous:
    """A document's previous revision, as the changes listing compares with it."""

    text: str = ""
    hints: list[ListedHint] = field(default_factory=list)
    scores: dict[str, float] | None = None


class RowWriter:
    """JSONL (every row as is), CSV (scores flattened, paragraphs as a JSON column) or readable text."""

    def __init__(
        self,
        out: TextIO,
        fmt: str,
        labels: tuple[str, ...],
        commits: Mapping[str, CommitHeader] | None = None,
        changes_only: bool = False,
    ) -> None:
        """`commits`: the commit behind each revision label (a git history), named in text headers;
        `changes_only`: text lists the hints new or gone since the previous revision (needs `row`'s text)."""
        self.out, self.fmt, self.labels = out, fmt, labels
        self.commits = commits or {}
        self.changes_only = changes_only
        self.previous: dict[str, _Previous] = {}
        self.bar: tqdm | None = None  # a progress bar drawn on the same terminal: rows are written around it
        if fmt == "csv":
            self.csv = csv.writer(out)
            self.csv.writerow(
                [
                    "doc",
                    "revision",
                    "index",
                    "tokens",
                    "changed_tokens",
                    *[f"score_{lab}" for lab in labels],
                    "paragraphs",
                    "incremental_macs",
                    "dense_macs",
                    "seconds",
                    "verified",
                ]
            )

    def row(self, r: RevisionRow, text: str | None = None) -> None:
        """Write one revision's row; `text` is the revision's text (the changes listing maps lines with it)."""
        if self.fmt == "text":
            self._write(self._text(r, text or ""))
            return
        if self.fmt == "jsonl":
            self._write(json.dumps(r.as_json()) + "\n")
            return
        scores = r.scores or {}
        self.csv.writerow(
            [
                r.doc,
                r.revision,
                r.index,
                r.tokens,
                r.changed_tokens,
                *[scores.get(lab, "") for lab in self.labels],
                json.dumps(r.as_json()["paragraphs"]),
                r.incremental_macs,
                r.dense_macs,
                r.seconds,
                "" if r.verified is None else r.verified,
            ]
        )

    def _write(self, chunk: str) -> None:
        """Write a row; with a live progress bar, clear it first and redraw it after, so that a row
        never starts on the bar's line (on a terminal both share one screen)."""
        if self.bar is not None and not self.bar.disable:
            with self.bar.external_write_mode(file=self.out):
                self.out.write(chunk)
                self.out.flush()
        else:
            self.out.write(chunk)

    def _text(self, r: RevisionRow, text: str) -> str:
        """What a writer reads: the revision, the document's tone, then the hints an editor would show
        (1-based lines): all of them, or only those new (+) or gone (-) since the previous revision."""
        commit = self.commits.get(r.revision)
        if commit is None:
            return self._plain_text(r)
        head = f"{commit.date} {commit.short_hash} {commit.subject}".rstrip()
        before = self.previous.get(r.doc, _Previous())
        if r.scores is None:
            self.previous[r.doc] = _Previous()
            return f"{head}\n  empty\n"
        hints = self._hints(r)
        self.previous[r.doc] = _Previous(text, hints, r.scores)
        label = max(r.scores, key=r.scores.get)
        score = f"{label} {r.scores[label]:.2f}"
        if before.scores is not None and label in before.scores:
            score += f" ({r.scores[label] - before.scores[label]:+.2f})"
        status = (
            f"  {score}; {r.changed_tokens} of {r.tokens} tokens changed, "
            f"{mac_ratio(r.incremental_macs, r.dense_macs)} MACs than scoring from scratch; "
            f"{len(hints)} hint{'' if len(hints) == 1 else 's'}"
        )
        if not self.changes_only:
            return "\n".join([head, status, *(f"  {h.text}" for h in hints)]) + "\n"
        diff = changes(before.hints, hints, before.text, text)
        status += f": {len(diff.new)} new, {len(diff.gone)} gone"
        return (
            "\n".join([head, status, *(f"  + {h.text}" for h in diff.new), *(f"  - {h.text}" for h in diff.gone)])
            + "\n"
        )

    def _plain_text(self, r: RevisionRow) -> str:
        """A revision of a folder or a revision file: `doc/revision:`, the tone, every hint."""
        if r.scores is None:
            return f"{r.doc}/{r.revision}: empty\n"
        label = max(r.scores, key=r.scores.get)
        lines = [
            f"{r.doc}/{r.revision}: {label} {r.scores[label]:.2f}  ({r.changed_tokens} of "
            f"{r.tokens} tokens changed, {mac_ratio(r.incremental_macs, r.dense_macs)} MACs "
            f"than scoring from scratch)"
        ]
        lines += [f"  {h.text}" for h in self._hints(r)]
        return "\n".join(lines) + "\n"

    def _hints(self, r: RevisionRow) -> list[ListedHint]:
        """The row's hints in the order they are listed: tones, typos, grammar, unexpected words; each
        in the server's words (the row carries them)."""
        hints = [ListedHint(("tone", t.label), t.line, False, f"line {t.line + 1}: {t.message}") for t in r.tones]
        for kind, found in (("typo", r.typos), ("grammar", r.grammar), ("unexpected", r.surprises)):
            for h in found:
                what = (f"typo {h.kind}" if kind == "typo" else kind, h.text)
                hints.append(ListedHint(what, h.line, True, f"line {h.line + 1}:{h.column + 1}: {h.message}"))
        return hints

    def summary(self, s: Summary) -> None:
        if self.fmt == "jsonl":
            self.out.write(json.dumps(s.as_dict()) + "\n")
