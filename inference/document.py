"""IncrementalDocument: the engine's public face, a document as a chain of window states.

A document longer than one window is split at paragraph boundaries (a token holding a blank
line, else a line break, else a hard cut) into independent windows (windowing.py). With the
model's context "paragraph" every paragraph is its own window (split further only if it outgrows
one), and an edit that makes or removes a paragraph break rebuilds just the paragraphs around it.
A Splice list is checked in full before anything changes (bad input raises ValueError and leaves
the state intact), routed to the windows it touches, and applied there as one revision; a window
that would outgrow its capacity is re-split and rebuilt with a dense pass, an emptied one is
dropped (recut.py).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from . import recut
from .costs import Cost
from .edits import Splice
from .engine import WindowState, dense, passes
from .engine.heads import predecessor_logprobs
from .engine.policy import LSE_CHUNK_ROWS
from .windowing import cut_document, estimate_build_bytes, estimate_state_bytes, new_window

__all__ = [
    "DocumentBuilder",
    "EditResult",
    "IncrementalDocument",
    "VerifyResult",
    "estimate_build_bytes",
    "estimate_state_bytes",
    "span_probs",
]

if TYPE_CHECKING:
    from .loading import LoadedModel


@dataclass
class EditResult:
    scores: dict[str, float]  # label -> probability for the whole document after the edit
    cost: Cost


@dataclass
class VerifyResult:
    codes_equal: bool
    max_abs_diff: float
    mismatched_codes: int  # (row, layer) pairs whose codes differ from the dense pass
    windows: int


def span_probs(logp_sum: torch.Tensor, n_tokens: int | torch.Tensor) -> torch.Tensor:
    """A span's class probabilities from the sum of its tokens' class log-probabilities.

    The span score is the mean of the token scores, a token's score being its log-probability
    vector (for two labels: its log-odds), renormalised. Log-odds add evidence up, so a span of
    mildly positive tokens reads clearly positive, where a mean of probabilities would sit near
    0.5; and a sum updates incrementally. Training optimises this same aggregate. Several spans
    at once: sums (k, labels) and token counts (k, 1).
    """
    count = n_tokens.clamp(min=1) if isinstance(n_tokens, torch.Tensor) else max(1, n_tokens)
    return torch.softmax(logp_sum / count, -1)


def span_totals(
    windows: list[WindowState], bounds: list[tuple[int, int]], spans: Sequence[tuple[int, int]], labels: int
) -> torch.Tensor:
    """Each span's sum of class log-probabilities (len(spans), labels), float64, over the windows
    (with their token bounds) it covers: each span's windows found by bisection, each piece's sum
    two rows of its window's running sums."""
    ends = [b for _, b in bounds]
    totals = np.zeros((len(spans), labels))
    for i, (start, end) in enumerate(spans):
        k = bisect.bisect_right(ends, start)
        while k < len(bounds) and bounds[k][0] < end:
            a, b = bounds[k]
            lo, hi = max(start, a), min(end, b)
            if lo < hi:
                prefix = windows[k].cls_prefix()
                totals[i] += prefix[hi - a] - prefix[lo - a]
            k += 1
    return torch.from_numpy(totals)


class IncrementalDocument:
    """A token sequence whose model outputs stay exact under edits, at the cost of what changed."""

    def __init__(self, model: LoadedModel, ids: Sequence[int]) -> None:
        if model.config.attention != "gelu":
            raise ValueError("the incremental engine needs a model with attention='gelu' (softmax couples every row)")
        builder = DocumentBuilder(model, ids)
        while not builder.done:
            builder.step()
        self.model = model
        self.windows: list[WindowState] = builder.windows

    # ----------------------------------------------------------------- helpers
    @staticmethod
    def _check_ids(model: LoadedModel, ids: Sequence[int]) -> None:
        vocab = model.config.vocab_size
        bad = [t for t in ids if not (0 <= t < vocab)]
        if bad:
            raise ValueError(f"token ids out of vocabulary [0, {vocab}): {bad[:5]}")

    @property
    def capacity(self) -> int:
        """Tokens one window holds (BOS takes a row)."""
        return recut.capacity(self.model)

    def _split(self, ids: Sequence[int]) -> list[tuple[int, int]]:
        return cut_document(self.model, ids)

    def _bounds(self) -> list[tuple[int, int]]:
        return recut.window_bounds(self.windows)

    # ----------------------------------------------------------------- reading
    @property
    def n_tokens(self) -> int:
        return sum(w.n_tokens for w in self.windows)

    @property
    def token_ids(self) -> list[int]:
        out: list[int] = []
        for w in self.windows:  # each window's ids are kept until its next update (WindowState.token_id_array)
            out.extend(w.token_ids())
        return out

    def token_id_array(self) -> np.ndarray:
        """Every token's id, as one array (from each window's kept ids)."""
        parts = [w.token_id_array() for w in self.windows]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def surprise_array(self) -> np.ndarray:
        """-log p(token | prefix) of every token, float64, from each window's kept reads: a
        publish reads 10,000s of them after an update that changed one window."""
        parts = [w.surprise_array() for w in self.windows]
        return np.concatenate(parts) if parts else np.zeros(0)

    @property
    def positions(self) -> list[int]:
        """Pool position of every token (each window has its own pool)."""
        return [p for w in self.windows for p in w.positions()]

    @property
    def window_bounds(self) -> list[tuple[int, int]]:
        return self._bounds()

    @property
    def window_count(self) -> int:
        """How many windows (independent contexts, each a BOS row and its own state) the document holds."""
        return len(self.windows)

    @property
    def scores(self) -> dict[str, float]:
        """Class probabilities of the whole document, from each window's kept total (see span_scores)."""
        total = torch.stack([w.cls_total for w in self.windows]).sum(0)
        return dict(zip(self.model.config.labels, span_probs(total, self.n_tokens).tolist()))

    @property
    def keeps_outputs(self) -> bool:
        """Whether every window keeps its layer outputs (full layout); once dropped, never again."""
        return all(w.outputs is not None for w in self.windows)

    def drop_outputs(self) -> int:
        """Drop every window's layer outputs, the bytes freed (the memory budget's first resort):
        still exact, lean from then on, windows later edits build included (`_done`)."""
        return sum(w.drop_outputs() for w in self.windows)

    def dense_macs(self) -> int:
        """What a dense pass over the whole document (every window) costs: scoring from scratch."""
        return sum(w.dense_macs() for w in self.windows)

    def state_bytes(self) -> int:
        """Memory the incremental state holds (for memory budgets)."""
        return sum(w.state_bytes() for w in self.windows)

    def _check_span(self, start: int, end: int) -> None:
        if not (0 <= start < end <= self.n_tokens):
            raise ValueError(f"span [{start}, {end}) is not a non-empty range of the {self.n_tokens} tokens")

    def _pieces(self, start: int, end: int):
        for w, (a, b) in zip(self.windows, self._bounds()):
            lo, hi = max(start, a), min(end, b)
            if lo < hi:
                yield w, lo - a, hi - a

    def span_scores(self, start: int, end: int) -> dict[str, float]:
        """Class probabilities of tokens [start, end) (a paragraph, a sentence, all): see `span_probs`."""
        return self.spans_scores([(start, end)])[0]

    def spans_scores(self, spans: Sequence[tuple[int, int]]) -> list[dict[str, float]]:
        """`span_scores` of each (start, end), each piece's sum two rows of its window's running sums
        (`WindowState.cls_prefix`): a publish reads every tone block, a keystroke changes one window."""
        bounds = self._bounds()
        n = bounds[-1][1] if bounds else 0
        for start, end in spans:
            if not (0 <= start < end <= n):
                raise ValueError(f"span [{start}, {end}) is not a non-empty range of the {n} tokens")
        if not spans:
            return []
        totals = span_totals(self.windows, bounds, spans, len(self.model.config.labels))
        counts = torch.tensor([[end - start] for start, end in spans], dtype=torch.float64)
        return [dict(zip(self.model.config.labels, row)) for row in span_probs(totals, counts).tolist()]

    def surprise(self, start: int, end: int) -> list[float]:
        """-log p(token | prefix) for tokens [start, end); the first token of a window sees only BOS."""
        self._check_span(start, end)
        return [float(x) for w, a, b in self._pieces(start, end) for x in w.surprise(a, b).tolist()]

    def next_token_logprobs(self, indices: Sequence[int], candidates: Sequence[Sequence[int]] | None = None):
        """log p(v | prefix) at each token index: what the model expected there.

        Read-only, from each predecessor's final hidden state (recomputed from its codes with the
        lean state layout, kept with the full one) and the LM head over it, as the update computes
        the surprise `surprise` reads: alternatives to a written token (a typo's likely fixes)
        cost a few rows' layer finishes and logits, not a forward pass. Without `candidates`: the whole vocabulary,
        a (len(indices), vocab) tensor. With `candidates` (token ids per index): only those, a
        list of 1-D tensors, which is all a caller weighing a few alternatives needs.
        """
        bounds = self._bounds()
        ends = [b for _, b in bounds]
        rows = []
        for i in indices:
            if not (0 <= i < self.n_tokens):
                raise ValueError(f"token index {i} is outside the {self.n_tokens} tokens")
            k = bisect.bisect_right(ends, i)
            w, local = self.windows[k], i - bounds[k][0]
            prev = w.token_slots(local - 1, local)[0] if local else w.order[0]  # the window's BOS row
            rows.append((w, prev))
        if candidates is not None and len(candidates) != len(rows):
            raise ValueError(f"{len(candidates)} candidate lists for {len(rows)} indices")
        vocab = self.model.config.vocab_size
        if candidates is not None:
            for ids in candidates:
                self._check_ids(self.model, ids)
        with torch.no_grad():
            if not rows:
                return torch.zeros(0, vocab) if candidates is None else []
            if candidates is None:
                return predecessor_logprobs(self.model.consts, rows, candidates)
            # in chunks of rows: a long document's first hints ask for 1,000s of rows at once, and
            # their (rows x vocab) logits held about 100 MiB at a time
            out = []
            for a in range(0, len(rows), LSE_CHUNK_ROWS):
                out += predecessor_logprobs(
                    self.model.consts, rows[a : a + LSE_CHUNK_ROWS], candidates[a : a + LSE_CHUNK_ROWS]
                )
            return out

    def verify(self) -> VerifyResult:
        checks = [dense.verify(w) for w in self.windows]
        return VerifyResult(
            codes_equal=all(c.codes_equal for c in checks),
            max_abs_diff=max(c.max_abs_diff for c in checks),
            mismatched_codes=sum(c.mismatched_codes for c in checks),
            windows=len(checks),
        )

    # ----------------------------------------------------------------- at rest
    def at_rest(self) -> bool:
        """Whether the state is the one an open of the same tokens builds: the same windows, each
        with an open's positions (for a model that reads only the order, any positions). Then its
        scores equal a fresh open's, whatever edits led here."""
        ids = self.token_ids
        return self._bounds() == self._split(ids) and (
            self.model.order_only or all(passes.at_rest(w) for w in self.windows)
        )

    def settle(self) -> EditResult:
        """Bring the state to rest (see `at_rest`): windows whose extent differs from an open's cut
        are rebuilt by a dense pass, the others re-spread where their positions differ (an
        update that recomputes the rows from the first moved one on). Edits keep their cheap,
        history-dependent positions (a token inserted between two others takes a free position
        between them); settling when the document is idle, and before scores that must not depend
        on the history (`vq-lsp score`), makes the same text give the same scores. A model that
        reads only the order gives every layout the same codes, so its windows are never re-spread."""
        t0 = time.perf_counter()
        cost = Cost(dirty_per_layer=[0] * self.model.config.num_hidden_layers)
        lean = not self.keeps_outputs
        ids = self.token_ids
        want, have = self._split(ids), self._bounds()
        if want != have:
            kept = dict(zip(have, self.windows))
            self.windows = [kept.get((a, b)) or recut.fresh(self.model, ids[a:b], cost) for a, b in want]
        for w in self.windows:
            if not (self.model.order_only or passes.at_rest(w)):
                cost.add(passes.settle(w))
        return self._done(cost, t0, lean)

    # ----------------------------------------------------------------- editing
    def _validate(self, splices: Sequence[Splice]) -> list[Splice]:
        n = self.n_tokens
        out = sorted((s for s in splices if s.start != s.end or s.new_ids), key=lambda s: s.start)
        growth = 0
        for i, s in enumerate(out):
            if not (0 <= s.start <= s.end <= n):
                raise ValueError(f"splice [{s.start}, {s.end}) is out of range for a document of {n} tokens")
            if i and (out[i - 1].end > s.start or out[i - 1].start == s.start):
                raise ValueError(f"splices [{out[i - 1].start}, {out[i - 1].end}) and [{s.start}, {s.end}) overlap")
            self._check_ids(self.model, s.new_ids)
            growth += len(s.new_ids) - (s.end - s.start)
        if n + growth <= 0:
            raise ValueError("the edit would delete every token; a document needs at least one")
        return out

    def apply(self, splices: Sequence[Splice], at_rest: bool = False) -> EditResult:
        """Apply one revision (splices against the current document) and return scores and cost.

        at_rest: leave the state at rest (see `settle`), the edited windows updated straight to an
        open's layout in the same update: the scores are then a fresh open's of the new text."""
        t0 = time.perf_counter()
        splices = self._validate(splices)
        per_window = recut.route(splices, self._bounds(), self.n_tokens)
        cost = Cost(dirty_per_layer=[0] * self.model.config.num_hidden_layers)
        apply = recut.apply_paragraphs if self.model.context == "paragraph" else recut.apply_windows
        lean = not self.keeps_outputs
        self.windows = apply(self.model, self.windows, per_window, cost, at_rest)
        return self._rest(cost, t0, at_rest, lean)

    def _rest(self, cost: Cost, t0: float, at_rest: bool, lean: bool) -> EditResult:
        """The end of `apply`: with at_rest, what the update left unlike an open (the windows' cut) settled."""
        if at_rest:
            cost.add(self.settle().cost)
        return self._done(cost, t0, lean)

    def _done(self, cost: Cost, t0: float, lean: bool) -> EditResult:
        """The end of an update; a lean document's new windows (built with the model's layout) made lean."""
        if lean:
            self.drop_outputs()
        if self.windows and self.windows[0].key_pos.is_cuda:
            torch.cuda.synchronize()
        cost.seconds = time.perf_counter() - t0
        return EditResult(scores=self.scores, cost=cost)


class DocumentBuilder:
    """Builds an IncrementalDocument one window (one dense pass) at a time.

    A caller that serves several documents on one thread (the language server) runs one `step`
    at a time and can answer other work in between, so a long document never holds the others
    hostage for more than one window's pass. `document()` hands over the finished state.
    """

    def __init__(self, model: LoadedModel, ids: Sequence[int], lean: bool = False) -> None:
        """lean: drop each window's layer outputs once it is built (the memory budget's choice for
        a document whose full state would not fit); otherwise the model's layout."""
        if model.config.attention != "gelu":
            raise ValueError("the incremental engine needs a model with attention='gelu' (softmax couples every row)")
        ids = list(ids)
        if not ids:
            raise ValueError("cannot open an empty document: it needs at least one token")
        IncrementalDocument._check_ids(model, ids)
        self.model, self.ids, self.lean = model, ids, lean
        self.bounds = cut_document(model, ids)
        self.windows: list[WindowState] = []

    @property
    def done(self) -> bool:
        return len(self.windows) == len(self.bounds)

    @property
    def progress(self) -> tuple[int, int]:
        """(windows built, windows in all)."""
        return len(self.windows), len(self.bounds)

    def step(self) -> None:
        """Build the next window."""
        a, b = self.bounds[len(self.windows)]
        window = new_window(self.model, self.ids[a:b])
        if self.lean:
            window.drop_outputs()
        self.windows.append(window)

    def document(self) -> IncrementalDocument:
        if not self.done:
            raise RuntimeError(f"the document is built {len(self.windows)} of {len(self.bounds)} windows")
        doc = IncrementalDocument.__new__(IncrementalDocument)
        doc.model, doc.windows = self.model, self.windows
        return doc
