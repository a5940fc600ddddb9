"""Score every revision of a document, each as an edit of the one before.

One IncrementalDocument chain per document: the first revision is a dense pass, every later
one is the Splice list `inference.diff` finds against the previous revision, applied at rest
(`apply(..., at_rest=True)`): the edited rows go straight to the positions an open of the new
text gives them, so every row's scores are those `vq-lsp check` and a freshly opened editor
give the same text, whatever revisions led to it (the rows after a middle edit are recomputed,
which the row's MACs count). A row per
revision holds document and paragraph scores, the hints an editor would show (picked by the
server's rule, hints/selection.py), tokens, changed tokens, incremental and dense MACs and
seconds; `Summary` adds the rows up (the same totals for the Ray scorer, ray.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace

import numpy as np

import inference

from ..hints import conventions, grammar, markup
from ..hints.caches import HintCaches
from ..hints.material import HintMaterial
from ..hints.selection import select
from ..settings import DiagnosticSettings
from .lines import FileText, line_and_column
from .revisions import Revision
from .rows import GrammarRow, ParagraphRow, RevisionRow, ToneRow, TypoRow, WordRow


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
        return inference.costs.speedup(self.dense_macs, self.incremental_macs)

    def add(self, row: RevisionRow, new_document: bool) -> None:
        """Count one revision's row (`new_document`: the first row of its document). An empty
        revision counts its document only."""
        self.documents += new_document
        if row.scores is None:
            return
        self.revisions += 1
        self.tokens += row.tokens
        self.incremental_macs += row.incremental_macs
        self.dense_macs += row.dense_macs
        self.seconds += row.seconds
        if row.verified is not None:
            self.verified += 1
            self.verify_failures += not row.verified

    def as_dict(self) -> dict:
        return {"type": "summary", **asdict(self), "speedup": round(self.speedup, 2)}


@dataclass
class Chain:
    doc: inference.IncrementalDocument
    ids: list[int] = field(default_factory=list)


class BatchScorer:
    """Turns (document, revision, text) triples into result rows, one chain per document."""

    def __init__(
        self,
        model: inference.LoadedModel,
        verify: bool = False,
        hints: DiagnosticSettings | None = None,
        markup: str | None = None,
        writer: conventions.Conventions | None = None,
        grammar_rules: grammar.Rules | None = None,
    ) -> None:
        """`hints`: the diagnostics settings; `writer`: the words and root of the workspace (its word
        lists), under which hints are chosen as the server and `vq-lsp check` choose them (ignore
        comments in the text too); `grammar_rules`: the workspace's `grammar.rules`."""
        self.model, self.verify, self.markup = model, verify, markup
        self.hints = hints or DiagnosticSettings()
        self.writer = writer or conventions.Conventions()
        self.chains: dict[str, Chain | None] = {}
        self.hint_caches = HintCaches()  # the hints' kept results (paragraphs, typo detector) over the run
        self.hint_caches.grammar.configure(grammar_rules or grammar.Rules.of(None))
        self.summary = Summary()

    def score(self, revisions: Iterable[Revision]) -> Iterator[RevisionRow]:
        for index, (name, label, text) in enumerate(revisions):
            yield self.score_revision(index, name, label, text)

    def score_revision(self, index: int, name: str, label: str, text: str) -> RevisionRow:
        """The row of one revision (the `index`-th of the run), as an edit of its document's previous one."""
        new_document = name not in self.chains
        row = self._row(index, name, label, text)
        self.summary.add(row, new_document)
        return row

    def _row(self, index: int, name: str, label: str, text: str) -> RevisionRow:
        ids, offsets = self.model.tokenizer.encode_with_offsets(text)
        chain = self.chains.get(name)
        row = RevisionRow(doc=name, revision=label, index=index, tokens=len(ids))
        t0 = time.perf_counter()
        if not ids:  # an empty revision: nothing to score; the next one opens afresh
            self.chains[name] = None
            return row
        if chain is None:
            doc = inference.IncrementalDocument(self.model, ids)
            changed, macs = len(ids), doc.dense_macs()
            self.chains[name] = chain = Chain(doc, ids)
        else:
            splices = inference.diff(chain.ids, ids)
            changed = sum(max(s.end - s.start, len(s.new_ids)) for s in splices)
            macs = chain.doc.apply(splices, at_rest=True).cost.incremental_macs
            chain.ids = ids
        doc = chain.doc
        dense = doc.dense_macs()
        hints = self._hints(doc, name, label, text, offsets)
        seconds = time.perf_counter() - t0
        row = replace(
            row,
            changed_tokens=changed,
            scores=_rounded(doc.scores),
            **hints,
            incremental_macs=macs,
            dense_macs=dense,
            seconds=round(seconds, 6),
        )
        if self.verify:
            check = doc.verify()
            row = replace(row, verified=check.codes_equal and check.max_abs_diff < self.model.verify_tolerance)
        return row

    def _hints(self, doc, name: str, label: str, text: str, offsets) -> dict[str, list]:
        """The row's paragraphs (every prose block with its scores) and the hints an editor would show:
        markup-aware as in the server (the markup from the revision's file name, else the document's,
        or --markup), chosen under the writer's conventions as `vq-lsp check` chooses them."""
        named = label if "." in label else name
        lay = markup.layout(text, self.markup or markup.markup_of(name=named), markup.language_of(named))
        starts = np.asarray([a for a, _ in offsets], dtype=np.int64)
        material = HintMaterial.with_layout(text, starts, doc, None, lay, caches=self.hint_caches)
        shown = conventions.choose(
            FileText(text, starts),
            material,
            self.hints,
            self.writer,
            markup.language_of(named),
            caches=self.hint_caches,
        )
        findings = {(f.start, f.end): f for f in material.findings}
        surprise = {}  # the surprise of each unlikely word shown (selected again only when one is)
        if any(h.code == "surprise" for h in shown):
            surprise = {(s.start, s.end): s.surprise for s in select(material, self.hints).surprises}
        rows: dict[str, list] = {"tones": [], "typos": [], "grammar": [], "surprises": []}
        for h in sorted(shown, key=lambda h: (h.start, h.end)):
            (line, column), word = line_and_column(text, h.start), text[h.start : h.end]
            if h.code == "sentiment":
                rows["tones"].append(ToneRow(line, h.label or "", h.message))
            elif h.code == "typo":
                f = findings[(h.start, h.end)]
                fixes = [w for w, _ in f.fixes]
                rows["typos"].append(
                    TypoRow(line, column, word, f.kind, round(f.surprise, 2), round(f.gain, 2), fixes, h.message)
                )
            elif h.code == "grammar":
                rows["grammar"].append(GrammarRow(line, column, word, h.message))
            elif h.code == "surprise":
                rows["surprises"].append(WordRow(line, column, word, round(surprise[(h.start, h.end)], 2), h.message))
        paragraphs = [
            ParagraphRow(line_and_column(text, p.start)[0], p.token_end - p.token_start, p.words, _rounded(p.scores))
            for p in material.paragraphs
        ]
        return {"paragraphs": paragraphs, **rows}


def _rounded(scores: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in scores.items()}
