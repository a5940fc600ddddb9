"""Why a document gets no hints: a `Problem` value, and its wording for the user.

A problem is compared as a value (a reason from a fixed set, plus what is wrong with the text
for an unreadable one), never as a free-form string: the store says so once per change of
problem, and some reasons keep the document's tokens while others drop them.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass

import inference

from ..settings import Settings

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


class Reason(enum.Enum):
    OUT_OF_SYNC = "out of sync"  # a change was lost: paused until the editor sends the full text
    NO_MODEL = "no model"
    FILE_TYPE = "file type"  # a languageId the settings do not hint
    UNREADABLE = "unreadable"  # binary content or undecodable text (the detail says which)
    EMPTY = "empty"
    TOO_LONG = "too long"  # more tokens than maxDocumentTokens
    OVER_BUDGET = "over budget"  # its engine state alone would exceed the memory budget


QUIET = frozenset({Reason.EMPTY, Reason.FILE_TYPE, Reason.NO_MODEL, Reason.OUT_OF_SYNC})  # no message for these
# the text was tokenized fine and its tokens are kept (a too-long text keeps only its text: see Documents)
KEEPS_TOKENS = frozenset({Reason.EMPTY, Reason.OVER_BUDGET})


@dataclass(frozen=True)
class Problem:
    reason: Reason
    detail: str | None = None  # what is wrong with an unreadable text

    def __str__(self) -> str:
        return self.detail or self.reason.value


def text_problem(text: str) -> Problem | None:
    """Why a text cannot be scored as prose (None when it can)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return Problem(Reason.UNREADABLE, f"undecodable text: an unpaired surrogate at character {e.start}")
    if "\x00" in text:
        return Problem(Reason.UNREADABLE, "binary content (NUL bytes)")
    if len(text) >= 16 and len(_CONTROL.findall(text)) > 0.1 * len(text):
        return Problem(Reason.UNREADABLE, "binary content (mostly control characters)")
    return None


def describe(
    problem: Problem,
    ids: list[int] | None,
    model: inference.LoadedModel | None,
    settings: Settings,
    counted: tuple[int, bool] | None = None,
) -> str:
    """The problem as the user reads it, with the numbers that explain it and what to change
    (`ids`: the document's tokens, None when it is not tokenized; `counted`: for a text too
    long to keep its tokens, (tokens counted, whether that is all of them))."""
    n = len(ids) if ids else 0
    if problem.reason is Reason.TOO_LONG:
        if counted is not None:
            return (
                f"{'' if counted[1] else 'over '}{counted[0]} tokens, more than maxDocumentTokens = "
                f"{settings.max_document_tokens}"
            )
        return f"{n if ids is not None else '?'} tokens, more than maxDocumentTokens = {settings.max_document_tokens}"
    if problem.reason is Reason.OVER_BUDGET:
        need = least_state_bytes(model, ids if ids is not None else n) / 2**20
        return (
            f"{n} tokens, whose engine state would take about {need:,.0f} MiB, more than the whole memory "
            f"budget (memoryBudgetMb = {settings.memory_budget_mb:g}); raise memoryBudgetMb above "
            f"{math.ceil(need)} to get hints for it"
        )
    return str(problem)


def least_state_bytes(model: inference.LoadedModel, tokens: int | list[int]) -> int:
    """The smallest a document's state can be under the model's layout (with "auto" the budget may
    make it lean): what must fit the whole memory budget for the document to get hints."""
    return inference.estimate_state_bytes(model, tokens, lean=model.layout == "auto")
