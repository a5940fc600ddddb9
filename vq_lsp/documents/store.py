"""`Documents`: every open document and the model, as the parts that each do one job on them.

A document always keeps its text; when the model is loaded and the document is eligible (a
wanted file type, readable text, not empty, not too long) it also keeps its tokens and an
engine state. Engine states are kept within a memory budget (memory.py) and rebuilt from the
text when the document is edited or a request needs them (never just to re-filter hints:
`HintMaterial` keeps what hints are chosen from). A dropped or closed state is left in the
snapshot cache (snapshots.py) and read back, instead of rebuilt, when the same tokens come
back. A document whose state alone would exceed the budget gets no state and one message. A
state in doubt (the engine refused an edit, its tokens disagree with the text's, verify()
failed) is rebuilt from the text, never from a snapshot; every rebuild is counted and logged.

The parts, each one short job at a time on the server's engine thread (server/engine_thread.py),
so that the server can interleave documents fairly:
- `table` (DocumentTable, table.py): applies a document's events to its text and state;
- `eligibility` (Eligibility, eligibility.py): whether it can have a state, and why not;
- `builder` (StateBuilder, builder.py): gives it the state it lacks, one window at a time;
- `publisher` (HintPublisher, publisher.py): chooses its diagnostics;
- `budget` (Budget, memory.py): keeps the states within the memory budget.
Requests about a built state are in requests.py. The server hands its callbacks in here.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import inference

from ..hints.caches import HintCaches
from ..hints.conventions import Conventions
from ..settings import Settings, load_options
from .builder import StateBuilder
from .eligibility import Eligibility
from .memory import Budget, InUse, never_in_use
from .publisher import HintPublisher
from .shared import Shared
from .snapshots import SnapshotStore
from .state import DocumentState, Message
from .table import DocumentTable

# The live server's device when the settings name none. On a GPU an edit's update is bound by the
# host launching a few hundred small kernels: on an H100 a keystroke in a 10,000-word document took
# p50 63.0 ms against 51.6 ms with the server on the same machine's CPU (`python -m
# benchmarks.gpu_session --sections server`, results/gpu_session_h100.md). `device: cuda` still asks for it.
LIVE_DEVICE = "cpu"


def _ignore(message: Message) -> None:
    """Messages of builds outside the server (tests, scripts) go to the log alone."""


def _nothing() -> None:
    """Nothing to do when a snapshot write lets its state go (outside the server)."""


def model_settings(settings: Settings) -> dict[str, object]:
    """inference.load_model's arguments from the settings that decide which model the server loads and
    how its engine runs: a change to any of them reloads the model, a change to the others does not."""
    return {"path": settings.model_path, "device": settings.device or LIVE_DEVICE, **load_options(settings)}


class Documents:
    """The composition of the parts above over one `Shared` (settings, model, open documents),
    and the model's loading, which concerns them all.

    `in_use(uri)`: a request or an edit waits for the document, so the budget never drops its state;
    `notify(message)`: a build has something to tell the user; `released()`: a snapshot write let
    its state go (on the writer thread)."""

    def __init__(
        self,
        settings: Settings,
        *,
        in_use: InUse = never_in_use,
        notify: Callable[[Message], None] = _ignore,
        released: Callable[[], None] = _nothing,
    ) -> None:
        self.shared = Shared(settings, SnapshotStore(released=released))
        self.eligibility = Eligibility(self.shared)
        self.budget = Budget(self.shared, in_use)
        self.builder = StateBuilder(self.shared, self.eligibility, self.budget, notify)
        self.table = DocumentTable(self.shared, self.eligibility, self.budget, self.builder.take_over)
        self.publisher = HintPublisher(self.shared)
        self.process = self.table.process

    def load_model(self) -> str:
        """Load the model the settings name; drop every state built with the old one."""
        shared, s = self.shared, self.shared.settings
        torch.set_num_threads(s.threads)
        try:
            shared.model = inference.load_model(**model_settings(s))
        except (inference.ModelLoadError, RuntimeError, OSError, ValueError) as e:
            shared.model, shared.model_error = None, f"cannot load the model: {e}"
            raise inference.ModelLoadError(shared.model_error) from None
        shared.model_error = None
        if s.snapshots:
            shared.snapshots.prepare(shared.model)
        for st in shared.states.values():
            st.forget_state()
        cfg = shared.model.config
        return (
            f"loaded {shared.model.path} ({cfg.num_hidden_layers} layers, d={cfg.hidden_size}, "
            f"{cfg.window_tokens}-token windows, {s.context} context) on {shared.model.device} in {s.precision}"
        )

    # what the server and the requests read (and the server replaces) of the shared record
    @property
    def settings(self) -> Settings:
        return self.shared.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.shared.settings = settings

    @property
    def conventions(self) -> Conventions:
        return self.shared.conventions

    @conventions.setter
    def conventions(self, conventions: Conventions) -> None:
        self.shared.conventions = conventions

    @property
    def hint_caches(self) -> HintCaches:
        return self.shared.hint_caches

    @property
    def model(self) -> inference.LoadedModel | None:
        return self.shared.model

    @property
    def states(self) -> dict[str, DocumentState]:
        return self.shared.states

    @property
    def model_error(self) -> str | None:
        return self.shared.model_error

    @property
    def snapshots(self) -> SnapshotStore:
        return self.shared.snapshots

    @snapshots.setter
    def snapshots(self, snapshots: SnapshotStore) -> None:
        self.shared.snapshots = snapshots

    @property
    def text_churn(self) -> int:
        """Bytes of whole-text copies made since the server last took the count (DocumentTable)."""
        return self.table.text_churn

    @text_churn.setter
    def text_churn(self, value: int) -> None:
        self.table.text_churn = value
