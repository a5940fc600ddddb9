"""What every part of the document store reads: the settings, the model, the conventions, the
open documents, the snapshot cache and the hints' caches.

The parts (table.py, eligibility.py, builder.py, publisher.py, memory.py) each do one job on
the same documents. The server replaces the settings and the conventions while it runs, and a
model load replaces the model, so the parts read them here, never from a copy of their own.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import inference

from ..hints.caches import HintCaches
from ..hints.conventions import Conventions
from ..settings import Settings
from .snapshots import SnapshotStore
from .state import DocumentState


@dataclass
class Shared:
    """The one record every part holds (never a copy of a field of it)."""

    settings: Settings
    snapshots: SnapshotStore
    model: inference.LoadedModel | None = None
    model_error: str | None = "the model is not loaded yet"
    states: OrderedDict[str, DocumentState] = field(default_factory=OrderedDict)  # least recently used first
    conventions: Conventions = field(default_factory=Conventions)  # dictionaries, root
    hint_caches: HintCaches = field(default_factory=HintCaches)  # what publishes keep; a close drops its document's

    def budget_bytes(self) -> float:
        """The memory budget of the engine states and the server's working memory, in bytes."""
        return self.settings.memory_budget_mb * 2**20
