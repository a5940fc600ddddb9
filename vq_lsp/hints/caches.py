"""Everything the hints keep between publishes, in one object owned by whoever serves.

A keystroke's hints are cheap because earlier results are kept: each version's layout and
paragraph spans, each paragraph's material and Harper lints, the typo detector (it caches how
candidate words tokenize) and the continuation scores. Kept in module globals or hung on the
model, that memory had no owner: tests cleared it by hand, a closed document's entries stayed,
and `hints`, which knows nothing of documents, still held per-document state. Here one
`HintCaches` holds all of it; the server's document store, `vq-lsp check` and `vq-lsp score`
each make one and pass it in, and the store tells it when a document closes (`forget`).
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import types
import weakref
from dataclasses import dataclass, field

import numpy as np
import torch

import inference

from . import markup, typos
from .grammar import GrammarChecker
from .paragraph_cache import KeptParagraphs, LastMaterial, ParagraphCache, ParagraphMaterial
from .paragraph_spans import ParagraphSpans
from .recent import Recent
from .reuse import MaterialCaches

LAYOUTS_KEEP = 8  # a publish asks for one version's layout for its material, grammar lints and ignore comments
SPANS_KEEP = 4  # a publish asks twice (material and grammar lints)
WRITERS_WORDS_KEEP = 8  # a keystroke seldom changes which spellings are the writer's words
CONTINUATION_KEEP = 8192  # scores kept per model: a word typed letter by letter asks again for most of its candidates
SIZE_SAMPLE = 64  # entries of a table read to estimate its size (HintCaches.bytes)


@dataclass
class ModelCaches:
    """What is kept for one model: its results depend on the model's weights and tokenizer."""

    detector: typos.Detector
    continuation: Recent[float]  # log p of a word's further pieces, by tokens (material.continuation)
    paragraphs: ParagraphCache  # each paragraph's material by its text, tokens and prose


@dataclass
class HintCaches:
    """The hints' kept results: per text (layouts, paragraph spans, the writer's words), per model (`of_model`), per
    open document (`last_material`, dropped by `forget`) and Harper's linters with their lints."""

    layouts: Recent[markup.Layout] = field(default_factory=lambda: Recent(keep=LAYOUTS_KEEP))
    spans: Recent[ParagraphSpans] = field(default_factory=lambda: Recent(keep=SPANS_KEEP))
    writers_words: Recent[frozenset[str]] = field(default_factory=lambda: Recent(keep=WRITERS_WORDS_KEEP))
    last_material: LastMaterial = field(default_factory=LastMaterial)
    grammar: GrammarChecker = field(init=False)
    _model: weakref.ref | None = field(default=None, init=False, repr=False)
    _per_model: ModelCaches | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _sizes: KnownSizes = field(default_factory=lambda: KnownSizes(), init=False, repr=False)
    _size_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.grammar = GrammarChecker(self.spans)

    def of_model(self, model: inference.LoadedModel) -> ModelCaches:
        """The caches of `model`; a model other than the last one asked for starts fresh ones (a
        server serves one model at a time; a reload replaces it)."""
        with self._lock:
            if self._per_model is None or self._model is None or self._model() is not model:
                self._model = weakref.ref(model)
                self._per_model = ModelCaches(
                    typos.Detector(model.tokenizer), Recent(keep=CONTINUATION_KEEP), ParagraphCache()
                )
            return self._per_model

    def material(self, model: inference.LoadedModel) -> MaterialCaches:
        """What reuse.document_material keeps, for `model`."""
        return MaterialCaches(self.of_model(model).paragraphs, self.spans, self.writers_words, self.last_material)

    def bytes(self) -> int:
        """About how much memory the kept results hold, for the memory budget beside the engine
        states (`SizeWalk` says what is counted and how). It runs on the engine thread before each
        new build, so it must stay short however much is kept: a paragraph's material, a layout
        and paragraph spans never change once made, so their sizes are taken once and remembered
        (`_sizes`) instead of walking their objects at every count (with fifty open documents,
        17 ms against 254 ms: benchmarks/hint_cache_size.py)."""
        with self._size_lock:
            return self.bytes_with(self._sizes)

    def bytes_with(self, sizes: KnownSizes) -> int:
        """The count of `bytes` with the UNCHANGING sizes known in `sizes` (an empty KnownSizes:
        every object walked, what benchmarks/hint_cache_size.py compares against)."""
        walk = SizeWalk(sizes=sizes)
        walk.seen.update({id(self), id(self._sizes), id(self._size_lock)})
        return int(sum(walk.size(v) for v in vars(self).values()))

    def forget(self, doc: inference.IncrementalDocument | None) -> None:
        """Drop what is kept for one document's engine state (the document closed)."""
        if doc is not None:
            self.last_material.drop(doc)


# results that never change once made: their size is taken once (SizeWalk.sizes)
UNCHANGING = (ParagraphMaterial, KeptParagraphs, markup.Layout, ParagraphSpans)
# what the kept results refer to but do not own, counted nowhere
NOT_OWNED = (
    inference.LoadedModel,
    inference.IncrementalDocument,
    inference.Tokenizer,
    threading.Thread,
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    functools.partial,
    functools._lru_cache_wrapper,
)


@dataclass(frozen=True)
class KnownSize:
    """An UNCHANGING object's own bytes, and the UNCHANGING objects it refers to (`within`), which
    are counted where a walk first meets them: a paragraph's material is kept both by its
    document's last paragraphs and by the paragraph cache, and counts once."""

    own: float
    within: tuple


class KnownSizes:
    """The sizes of UNCHANGING objects, by identity (they are not hashable: they hold arrays), each
    forgotten when its object is freed."""

    def __init__(self) -> None:
        self.by_id: dict[int, tuple[weakref.ref, KnownSize]] = {}

    def get(self, obj) -> KnownSize | None:
        known = self.by_id.get(id(obj))
        return known[1] if known is not None and known[0]() is obj else None

    def put(self, obj, size: KnownSize) -> None:
        key = id(obj)

        def forget(ref: weakref.ref) -> None:
            if (known := self.by_id.get(key)) is not None and known[0] is ref:
                del self.by_id[key]

        self.by_id[key] = (weakref.ref(obj, forget), size)

    def __len__(self) -> int:
        return len(self.by_id)


@dataclass
class SizeWalk:
    """Bytes reachable from objects (strings, tuples, arrays, records), each counted once, but not
    what they refer to without owning (NOT_OWNED: the model, the tokenizer, a document's engine
    state), nor what sits outside Python's view (Harper's linters and lints' native memory, the
    typo detector's function caches). A table of more than `sample` entries is estimated from
    that many entries spread over it (the entries of one table are alike: paragraph material,
    layouts, scores). An UNCHANGING object is walked whole the first time it is met, on its own,
    and its size is looked up in `sizes` after that (`within` collects the UNCHANGING objects met
    inside such a walk)."""

    sizes: KnownSizes
    sample: float = SIZE_SAMPLE
    within: list | None = None
    seen: set[int] = field(default_factory=set)
    storages: set[int] = field(default_factory=set)

    def size(self, obj) -> float:
        if id(obj) in self.seen or isinstance(obj, NOT_OWNED):
            return 0
        self.seen.add(id(obj))
        if isinstance(obj, UNCHANGING):
            return self.unchanging(obj)
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            if storage.data_ptr() in self.storages:
                return 0
            self.storages.add(storage.data_ptr())
            return storage.nbytes()
        if isinstance(obj, np.ndarray):  # its data with it when it owns its data
            return sys.getsizeof(obj) + (0 if obj.base is None else self.size(obj.base))
        if not isinstance(obj, (dict, list, tuple, set, frozenset)):
            return self.fields(obj)
        return self.table(obj)

    def unchanging(self, obj) -> float:
        if self.within is not None:  # inside another one's walk: counted where the outer walk meets it
            self.within.append(obj)
            return 0
        known = self.sizes.get(obj)
        if known is None:
            walk = SizeWalk(self.sizes, sample=math.inf, within=[])
            known = KnownSize(walk.fields(obj), tuple(walk.within))
            self.sizes.put(obj, known)
        return known.own + sum(self.size(x) for x in known.within)

    def fields(self, obj) -> float:
        """A record: itself, its __dict__ and its slots."""
        slots = [n for c in type(obj).__mro__ for n in _names(c.__dict__.get("__slots__", ()))]
        own = sys.getsizeof(obj) + self.size(getattr(obj, "__dict__", None))
        return own + sum(self.size(getattr(obj, n, None)) for n in slots)

    def table(self, obj: dict | list | tuple | set | frozenset) -> float:
        own = sys.getsizeof(obj)
        try:  # one C call, but a weak entry dropped meanwhile can still change a table
            entries = list(obj.items()) if isinstance(obj, dict) else [(x,) for x in obj]
        except RuntimeError:  # changed while read: its entries go uncounted this time
            return own
        picked = entries[:: max(1, math.ceil(len(entries) / self.sample))]
        found = sum(self.size(x) for entry in picked for x in entry)
        return own + (found * len(entries) / len(picked) if picked else 0)


def _names(slots) -> tuple:
    return (slots,) if isinstance(slots, str) else tuple(slots)
