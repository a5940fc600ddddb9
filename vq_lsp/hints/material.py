"""What hints are chosen from: per-token surprise, prose word surprises, typo findings and the
tone blocks' scores of one version of a text, computed from its engine state.

Shared by the server (hints/lsp.py, through `HintMaterial`) and `vq-lsp score` (`analyse`).
A text is given as a `TokenizedText` (the server's `TrackedText` is one), so this package
needs nothing from the document store.

A publish costs what the edit costs: the model's findings of a paragraph are kept
(reuse.py, in the `HintCaches` the caller passes) and reused while the paragraph's text and its tokens' surprise
stay as they were, so only the paragraphs an edit touched (or whose scores it changed) are
examined again. What the whole document says about its words (`typos.Evidence`: repeated
spellings, code words) is cheap and recomputed on every publish.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

import inference

from ..settings import DiagnosticSettings
from . import jargon, markup, reuse, tone, typos
from .paragraphs import paragraphs
from .recent import Recent

if TYPE_CHECKING:
    from .caches import HintCaches


class TokenizedText(Protocol):
    """A text with the char offset where each of its tokens starts (documents/textsync.py's TrackedText)."""

    text: str
    token_starts: np.ndarray

    def position(self, offset: int) -> tuple[int, int]: ...


def detector(doc: inference.IncrementalDocument, caches: HintCaches) -> typos.Detector:
    """The typo detector of the document's model: one per loaded model (it caches how candidate
    words tokenize), kept in `caches`."""
    return caches.of_model(doc.model).detector


CONTINUATION_CONTEXT = 48  # tokens of the text before a word that the forward pass for its further pieces reads
# sequences per forward pass: a pass's attention temporaries grow with the batch, and 64 sequences
# of 50 tokens peaked at 237 MiB above resting memory (16: 62 MiB, and 20% faster on one core)
CONTINUATION_BATCH = 16


def continuation(doc: inference.IncrementalDocument, caches: HintCaches):
    """For typos.Detector.examine: log p(pieces[1:] | the text before token i, pieces[0]) for each
    (i, pieces), from a dense forward pass of the model over at most CONTINUATION_CONTEXT tokens
    of i's window before it (BOS first; the model reads positions by their order only). A score
    is a function of those tokens alone, so scores are kept by them: while a word is typed, its
    context stays and its candidates repeat, and the forward passes (8 ms per candidate on one
    core) were the slowest part of a keystroke's hints. Kept per model in `caches`."""
    model = doc.model
    kept: Recent[float] = caches.of_model(model).continuation

    def score(jobs: list[tuple[int, list[int]]]) -> list[float]:
        ids = doc.token_id_array()
        window_starts = [a for a, _ in doc.window_bounds]
        seqs = []
        for i, pieces in jobs:
            w0 = window_starts[bisect.bisect_right(window_starts, i) - 1]
            context = ids[max(w0, i - CONTINUATION_CONTEXT) : i].tolist()
            seqs.append(([model.config.bos_token_id] + context + list(pieces), 1 + len(context), len(pieces)))
        keys = [(tuple(s), count) for s, _, count in seqs]
        out = [kept.peek(key) for key in keys]
        missing = [n for n, got in enumerate(out) if got is None]
        for n, got in zip(missing, _continuation_scores(model, [seqs[n] for n in missing])):
            out[n] = got
            kept.put(keys[n], got)
        return out

    return score


def _continuation_scores(model, seqs: list[tuple[list[int], int, int]]) -> list[float]:
    """log p of each sequence's pieces after its first, (tokens, index of the first piece, piece
    count), in batches of padded rows through the dense model."""
    net, cfg = model.net, model.config
    out: list[float] = []
    for at in range(0, len(seqs), CONTINUATION_BATCH):
        batch = seqs[at : at + CONTINUATION_BATCH]
        width = max(len(s) for s, _, _ in batch)
        tok = torch.full((len(batch), width), cfg.pad_token_id, dtype=torch.long)
        pos = torch.zeros((len(batch), width), dtype=torch.long)
        valid = torch.zeros((len(batch), width), dtype=torch.bool)
        for b, (s, _, _) in enumerate(batch):
            tok[b, : len(s)] = torch.tensor(s)
            pos[b, : len(s)] = torch.arange(len(s)) * cfg.position_pool // len(s)
            valid[b, : len(s)] = True
        rows, targets = [], []
        for b, (s, first, count) in enumerate(batch):
            rows += [(b, first + k - 1) for k in range(1, count)]
            targets += [s[first + k] for k in range(1, count)]
        with torch.no_grad():
            hidden = net(tok.to(model.device), pos.to(model.device), valid.to(model.device)).hidden
            picked = hidden[[r for r, _ in rows], [c for _, c in rows]]
            logp = torch.log_softmax(net.lm_logits(picked).double(), -1)
            got = logp[torch.arange(len(targets)), torch.tensor(targets)].cpu().tolist()
        k = 0
        for _, _, count in batch:
            out.append(float(sum(got[k : k + count - 1])))
            k += count - 1
    return out


def word_surprises(spans, surprise: np.ndarray) -> list[tuple[int, int, float]]:
    """(start, end, whole-word surprise) of words given as (start, end, first token, end token)."""
    cumulative = np.concatenate([[0.0], np.cumsum(surprise)])
    return [(a, b, float(cumulative[j] - cumulative[i])) for a, b, i, j in spans]


def token_surprise(doc: inference.IncrementalDocument) -> np.ndarray:
    """-log p(token | prefix) of every token (`doc.surprise` of all of them), as one array."""
    return doc.surprise_array()


def text_material(
    text: str,
    starts: np.ndarray,
    doc: inference.IncrementalDocument,
    lay: markup.Layout,
    tolerance: float = 0.0,
    *,
    caches: HintCaches,
) -> reuse.DocumentMaterial:
    """The text's material paragraph by paragraph (reuse.py), with the findings the document's
    evidence excuses left out."""
    surprise = token_surprise(doc)
    got = reuse.document_material(
        text,
        np.asarray(starts),
        surprise,
        lay,
        doc,
        detector(doc, caches),
        continuation(doc, caches),
        tolerance,
        kept=caches.material(doc.model),
    )
    # the findings nothing excuses, as they are (no copy of each with its excuse: a publish reads
    # hundreds, and in a technical document most weak confusables are excused)
    findings = [f for f in got.findings if not got.evidence.excuse(f, text)]
    findings = [replace(f, excused="") if f.excused else f for f in findings]
    return replace(got, findings=findings)


def analyse(
    text: str, starts: np.ndarray, doc: inference.IncrementalDocument, lay: markup.Layout, *, caches: HintCaches
) -> tuple[np.ndarray, list, list[typos.WordFinding]]:
    """Token surprise, prose word surprises and typo findings of a text (shared with `vq-lsp score`)."""
    surprise = token_surprise(doc)
    got = text_material(text, starts, doc, lay, caches=caches)
    return surprise, got.words, got.findings


def tone_blocks(starts: np.ndarray, doc: inference.IncrementalDocument, lay: markup.Layout) -> list[tone.ToneBlock]:
    """Every prose block that may have a tone; a block's tokens are those that start in it
    (`starts`: each token's first char)."""
    out = []
    for a, b, n_words in lay.tone:
        ta, tb = int(np.searchsorted(starts, a, "left")), int(np.searchsorted(starts, b, "left"))
        if ta < tb:
            out.append(tone.ToneBlock(a, b, ta, tb, doc.span_scores(ta, tb), n_words))
    return out


def layout_for(text: str, language_id: str, cfg: DiagnosticSettings, caches: HintCaches) -> markup.Layout:
    """The prose of a document by its languageId (and the sourceComments setting). The last few
    are kept by text (`caches.layouts`): a publish asks for the same version's layout for its
    material, its grammar lints and its ignore comments, and parses it once."""
    kind = markup.markup_of(language_id, source_hints="comments" if cfg.source_comments else "off")
    return caches.layouts.get((text, kind, language_id), lambda: markup.layout(text, kind, language_id))


def paragraph_scores(tt: TokenizedText, doc: inference.IncrementalDocument):
    """(char start, char end, token start, token end, scores) per paragraph with tokens."""
    offsets = [(a, a) for a in tt.token_starts.tolist()]  # only the starts are used
    out = []
    for p in paragraphs(tt.text, offsets):
        end = p.start + len(tt.text[p.start : p.end].rstrip())  # no trailing "\r" in the range
        out.append((p.start, end, p.token_start, p.token_end, doc.span_scores(p.token_start, p.token_end)))
    return out


@dataclass(frozen=True)
class HintMaterial:
    """What diagnostics are chosen from, for one version of the text: the tone blocks' scores,
    every prose word's surprise and the typo findings. Small next to the state, so it outlives a
    dropped engine state: a settings change that only changes which hints are shown
    (thresholds, kinds, tone length) republishes from it with no engine work, and an evicted
    document is not rebuilt just to re-filter its hints."""

    version: int | None
    paragraphs: list[tone.ToneBlock]  # the prose blocks that may show a tone (tone_blocks)
    words: list  # (char start, char end, whole-word surprise) of prose words
    findings: list  # typos.WordFinding, every suspect word nothing excuses (the thresholds choose among them)
    # its spellings missing from the dictionary (`vq-lsp check` learns the workspace's words from them)
    usage: jargon.Usage | None = None

    @classmethod
    def of(
        cls,
        tt: TokenizedText,
        doc: inference.IncrementalDocument,
        version: int | None,
        language_id: str = "plaintext",
        cfg: DiagnosticSettings | None = None,
        tolerance: float = reuse.REUSE_TOLERANCE_NATS,
        *,
        caches: HintCaches,
    ) -> HintMaterial:
        lay = layout_for(tt.text, language_id, cfg or DiagnosticSettings(), caches)
        return cls.with_layout(tt.text, tt.token_starts, doc, version, lay, tolerance, caches=caches)

    @classmethod
    def with_layout(
        cls,
        text: str,
        starts: np.ndarray,
        doc: inference.IncrementalDocument,
        version: int | None,
        lay: markup.Layout,
        tolerance: float = 0.0,
        *,
        caches: HintCaches,
    ) -> HintMaterial:
        """The material of a text whose prose is `lay` (`vq-lsp score` finds it from a file name).
        `tolerance`: see reuse.document_material (the server's edits may reuse paragraphs whose
        scores moved a little; a batch run's results depend on the text alone)."""
        got = text_material(text, starts, doc, lay, tolerance, caches=caches)
        return cls(version, got.tones, got.words, got.findings, got.usage)


def word_at(text: str, lay: markup.Layout, offset: int) -> tuple[int, int] | None:
    """The prose word touching `offset`, if any."""
    for m in markup.WORD.finditer(text, max(0, offset - 64), min(len(text), offset + 64)):
        if m.start() <= offset <= m.end() and lay.allows(m.start(), m.end()):
            return m.start(), m.end()
    return None


def explain_words(
    tt: TokenizedText,
    doc: inference.IncrementalDocument,
    spans,
    language_id: str = "plaintext",
    cfg: DiagnosticSettings | None = None,
    *,
    caches: HintCaches,
) -> list[typos.WordFinding]:
    """The detector's view of words (char spans), flagged or not, as the hints see them: a
    suspect word's finding is the one its hint was chosen from (same fixes, same excuse), any
    other word gets its surprise and closest dictionary words (hover, quick fixes)."""
    lay = layout_for(tt.text, language_id, cfg or DiagnosticSettings(), caches)
    surprise = token_surprise(doc)
    starts = np.asarray(tt.token_starts)
    found = detector(doc, caches).examine(
        tt.text, starts, surprise, spans, doc.next_token_logprobs, force=True, continuation=continuation(doc, caches)
    )
    evidence = reuse.document_material(
        tt.text, starts, surprise, lay, doc, detector(doc, caches), kept=caches.material(doc.model)
    ).evidence
    return typos.excused(found, evidence, tt.text)


def quick_fixes(
    tt: TokenizedText,
    doc: inference.IncrementalDocument,
    a: int,
    b: int,
    language_id: str = "plaintext",
    cfg: DiagnosticSettings | None = None,
    *,
    caches: HintCaches,
) -> list[typos.WordFinding]:
    """The detector's view of every prose word overlapping chars [a, b] (each with its fixes),
    words a hint is shown for first (best evidence first), then the others in text order."""
    cfg = cfg or DiagnosticSettings()
    lay = layout_for(tt.text, language_id, cfg, caches)
    spans = [(p, q) for p, q in lay.words(tt.text) if p <= b and a <= q]
    found = [f for f in explain_words(tt, doc, spans[:20], language_id, cfg, caches=caches) if f.fixes]
    shown = sorted(
        (f for f in found if typos.flagged(f, cfg.typo_threshold, cfg.real_word_threshold)), key=lambda f: -f.gain
    )
    return shown + [f for f in found if f not in shown]
