"""`vq-lsp score` output: a row per revision as JSONL (as is), CSV (scores flattened) or readable
text (the document's tone and the hints an editor would show), and the summary as a last JSONL record."""

from __future__ import annotations

import csv
import json
from typing import TextIO

from tqdm import tqdm

from ..hints.selection import shown_tone
from ..settings import DiagnosticSettings
from .scorer import Summary


class RowWriter:
    """JSONL (every row as is), CSV (scores flattened, paragraphs as a JSON column) or readable text."""

    def __init__(self, out: TextIO, fmt: str, labels: tuple[str, ...], sentiment_threshold: float = 0.75,
                 tone_min_words: int = 0) -> None:
        self.out, self.fmt, self.labels, self.sentiment_threshold = out, fmt, labels, sentiment_threshold
        self.tone_min_words = tone_min_words
        self.tone = DiagnosticSettings(sentiment_threshold=sentiment_threshold, tone_min_words=tone_min_words)
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
            shown = shown_tone(p["scores"], p["words"], self.tone)  # the server's rule for a shown tone
            if shown is not None:
                lines.append(f"  line {p['line'] + 1}: {shown[0]} tone ({shown[1]:.2f})")
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
