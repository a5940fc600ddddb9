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

import threading
import weakref
from dataclasses import dataclass, field

import inference

from . import markup, typos
from .grammar import GrammarChecker
from .paragraph_cache import LastMaterial, ParagraphCache
from .paragraph_spans import ParagraphSpans
from .recent import Recent
from .reuse import MaterialCaches

LAYOUTS_KEEP = 8  # a publish asks for one version's layout for its material, grammar lints and ignore comments
SPANS_KEEP = 4  # a publish asks twice (material and grammar lints)
WRITERS_WORDS_KEEP = 8  # a keystroke seldom changes which spellings are the writer's words
CONTINUATION_KEEP = 8192  # scores kept per model: a word typed letter by letter asks again for most of its candidates


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
        states: the objects they reach (strings, tuples, arrays, records), each counted once, but
        not the model, the tokenizer or a document's engine state they refer to, nor what sits
        outside Python's view (Harper's linters and lints' native memory, the typo detector's
        function caches). A table of more than `sample` entries is estimated from `sample` of them
        spread over it, so that the count stays short (it runs on the engine thread) however many
        paragraphs are kept (the entries of one table are alike: paragraph material, layouts, scores)."""
        import functools
        import math
        import sys
        import types

        import numpy as np
        import torch

        opaque = (
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
        sample = 64
        seen, storages = {id(self)}, set()

        def size(obj) -> float:
            if id(obj) in seen or isinstance(obj, opaque):
                return 0
            seen.add(id(obj))
            if isinstance(obj, torch.Tensor):
                storage = obj.untyped_storage()
                if storage.data_ptr() in storages:
                    return 0
                storages.add(storage.data_ptr())
                return storage.nbytes()
            own = sys.getsizeof(obj)  # an array's data with it when it owns its data
            if isinstance(obj, np.ndarray):
                return own + (0 if obj.base is None else size(obj.base))
            if not isinstance(obj, (dict, list, tuple, set, frozenset)):
                slots = [n for c in type(obj).__mro__ for n in _names(c.__dict__.get("__slots__", ()))]
                return own + size(getattr(obj, "__dict__", None)) + sum(size(getattr(obj, n, None)) for n in slots)
            try:  # one C call, but a weak entry dropped meanwhile can still change a table
                entries = list(obj.items()) if isinstance(obj, dict) else [(x,) for x in obj]
            except RuntimeError:  # changed while read: its entries go uncounted this time
                return own
            picked = entries[:: math.ceil(len(entries) / sample)] if entries else []
            found = sum(size(x) for entry in picked for x in entry)
            return own + (found * len(entries) / len(picked) if picked else 0)

        def _names(slots) -> tuple:
            return (slots,) if isinstance(slots, str) else tuple(slots)

        return int(sum(size(v) for v in vars(self).values()))

    def forget(self, doc: inference.IncrementalDocument | None) -> None:
        """Drop what is kept for one document's engine state (the document closed)."""
        if doc is not None:
            self.last_material.drop(doc)
