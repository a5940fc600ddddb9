"""What happens to a document, as the server queues it: one dataclass per kind of event.

The server turns LSP notifications into these (server/handlers.py) and the scheduler hands
them, in order and batched, to `DocumentTable.process` (table.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .textsync import Change


@dataclass(frozen=True)
class Opened:
    """didOpen: the editor's text of a new document."""

    version: int | None
    language_id: str
    text: str


@dataclass(frozen=True)
class Edited:
    """didChange: content changes, applied in order, that lead to `version`."""

    version: int | None
    changes: list[Change] = field(default_factory=list)


@dataclass(frozen=True)
class Closed:
    """didClose: forget the document (its state goes to the snapshot cache)."""


@dataclass(frozen=True)
class ChangeLost:
    """A didChange the server could not read: the text is in doubt until the editor sends it in full."""

    version: int | None
    reason: str


@dataclass(frozen=True)
class Refresh:
    """Build whatever the document lacks (a new model, a retry after an internal error)."""


@dataclass(frozen=True)
class Settle:
    """The document has been idle since `version`: bring its state to rest (the positions a fresh
    open gives, IncrementalDocument.settle) and choose its hints from exact scores, so that at rest
    they are those `vq-lsp check` gives the same text, whatever edits led to it."""

    version: int | None


@dataclass(frozen=True)
class SettingsChanged:
    """The settings changed: re-choose hints, from the hint material where it is current."""


Event = Opened | Edited | Closed | ChangeLost | Refresh | Settle | SettingsChanged


def merge_edits(events: Iterable[Event]) -> list[Event]:
    """Consecutive edits as one (the newest version, every change in order), other events as they are.

    Each run of edits gets one fresh list, extended in place: a burst of k edits costs k, not k^2."""
    out: list[Event] = []
    for ev in events:
        last = out[-1] if out else None
        if isinstance(ev, Edited) and isinstance(last, Edited):
            last.changes.extend(ev.changes)
            out[-1] = Edited(ev.version, last.changes)
        elif isinstance(ev, Edited):
            out.append(Edited(ev.version, list(ev.changes)))
        else:
            out.append(ev)
    return out
