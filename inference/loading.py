"""`load_model`: a model folder (or the bundled default) ready for the engine.

The engine computes in float64 by default: exactness is its contract (codes equal to a dense
pass), and float64 keeps the rounding of delta updates far below any gap between two codes.
float32 halves memory and time at the price of a (guarded) chance of a near-tie mismatch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import torch

from .checkpoint import ModelLoadError, load_model_folder
from .config import VQOPTConfig
from .engine import LAYOUTS, SIZINGS, LayerConstants
from .engine.constants import device_sizing
from .model import VQOPT
from .paths import resolve_model
from .tokenizer import Tokenizer

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "default_model"
# The tie guard per dtype, (tie_rel, growth): a row is recomputed in full when two of its codes
# are within tie_rel * (u^2 + max |c|^2), u bounding |s| and growing by 1 + growth per move, so
# that the guard widens as a row's rounding accumulates (float32's drift after thousands of
# edits, measured by benchmarks/tie_guard.py, stays below its guard; float64's is far below).
TIE_GUARD = {torch.float64: (1e-9, 0.0), torch.float32: (1e-5, 5e-4)}
# what the server and `vq-lsp score` offer: float32 to serve (half the state and time), float64 to verify
PRECISIONS = {"float32": torch.float32, "float64": torch.float64}
# what a token's context is. window: everything before it in its window (up to window_tokens, cut
# at paragraph breaks only when a document outgrows a window; the paper's setting). paragraph:
# only its own paragraph (each paragraph is its own window), so a paragraph's scores never depend on
# the text before it, and an edit's work stays inside its paragraph.
CONTEXTS = ("window", "paragraph")
# how an update sizes its row sets (inference/engine/policy.py): auto, the device's choice
# (LayerConstants.to: exact sizing on every device today), or one by name
SIZING_CHOICES = ("auto", *SIZINGS)
# what `verify` may report for a sound state (max |difference| from a dense pass): torch's dense pass,
# and ONNX Runtime's, whose float32 kernels differ from torch's by about 1.3e-4 (benchmarks/onnx_dense.py)
VERIFY_TOL = 1e-4
ONNX_VERIFY_TOL = 1e-3
T = TypeVar("T")


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """CUDA when present, CPU otherwise (or what the caller asked for)."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass
class LoadedModel:
    """A network in eval mode on its device, with the tokenizer and what the engine precomputes."""

    net: VQOPT
    tokenizer: Tokenizer | None
    card: dict = field(default_factory=dict)
    path: Path | None = None
    context: str = "window"  # see CONTEXTS
    layout: str = "full"  # see LAYOUTS: what a document's state keeps per row (the server serves "auto")
    sizing: str = "auto"  # see SIZING_CHOICES
    # values derived from this model on first use and kept with it (see `cached`)
    derived: dict[str, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.context not in CONTEXTS:
            raise ValueError(f"context must be one of {list(CONTEXTS)}, got {self.context!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {self.layout!r}")
        self.net.eval().requires_grad_(False)
        p = next(self.net.parameters())
        self.device, self.dtype = p.device, p.dtype
        self.consts = LayerConstants(self.net).to(self.device)
        self.use_sizing(self.sizing)
        self.consts.keep_outputs = self.layout != "lean"  # "auto" builds full windows, drops outputs later
        self.order_only = self.net.reads_order_only()  # positions decide causality only: any layout is at rest
        self.tie_rel, self.tie_growth = TIE_GUARD.get(self.dtype, (1e-3, 0.0))
        tok = self.tokenizer
        self.paragraph_ids = tok.paragraph_break_ids if tok is not None else frozenset()
        self.line_ids = tok.line_break_ids if tok is not None else frozenset()
        self.newline_end_ids = tok.newline_end_ids if tok is not None else frozenset()

    def use_sizing(self, sizing: str) -> None:
        """Size every later update, in any document of this model, by `sizing` (see SIZING_CHOICES; auto:
        the device's choice): updates read it from the model's constants. The codes are the same at every sizing."""
        if sizing not in SIZING_CHOICES:
            raise ValueError(f"sizing must be one of {list(SIZING_CHOICES)}, got {sizing!r}")
        self.sizing = sizing
        self.consts.sizing = device_sizing(self.device) if sizing == "auto" else SIZINGS[sizing]

    @property
    def config(self) -> VQOPTConfig:
        return self.net.config

    @property
    def dense_on_onnx(self) -> bool:
        """Whether full passes (builds, verify) may run on ONNX Runtime (use_dense "onnx" or "auto")
        rather than torch; its float32 kernels differ from torch's in the last bits."""
        return self.consts.dense is not None

    @property
    def verify_tolerance(self) -> float:
        """The largest |difference| from a dense pass that `verify` may report for a sound state:
        VERIFY_TOL, or ONNX_VERIFY_TOL when the dense pass runs on ONNX Runtime."""
        return ONNX_VERIFY_TOL if self.dense_on_onnx else VERIFY_TOL

    def cached(self, name: str, make: Callable[[], T]) -> T:
        """A value derived from this model, made on first use and kept with it (a detector, a hash):
        one per model and name, for callers that would otherwise hang attributes on the model."""
        if name not in self.derived:  # two threads asking at once may both make it: the first one made is kept
            self.derived.setdefault(name, make())
        return self.derived[name]

    def use_dense(self, backend: str, threads: int | None = None) -> None:
        """Which backend runs the full passes (builds, verify): torch, onnx or auto (ONNX Runtime
        where benchmarks/onnx_dense.py measured it faster with equal codes); incremental updates
        always run on torch."""
        from .onnx_dense import select_dense  # onnxruntime is an optional extra

        self.consts.dense = select_dense(self.net, backend, threads)
        self.dense_backend = backend

    @classmethod
    def from_net(
        cls,
        net: VQOPT,
        tokenizer: Tokenizer | None = None,
        *,
        device=None,
        dtype=torch.float64,
        card: dict | None = None,
        context: str = "window",
        layout: str = "full",
        sizing: str = "auto",
    ) -> LoadedModel:
        net = net.to(device=pick_device(device), dtype=dtype)
        return cls(net, tokenizer, card or {}, context=context, layout=layout, sizing=sizing)


def load_model(
    path: str | os.PathLike | None = None,
    device=None,
    dtype: torch.dtype | str = torch.float64,
    dense: str = "torch",
    context: str = "window",
    layout: str = "full",
    sizing: str = "auto",
) -> LoadedModel:
    """Load a model folder, or a model installed under that name (paths.py); None means the default
    model bundled in the package. dtype: a torch dtype or a name from PRECISIONS; dense: the
    backend of full passes (see LoadedModel.use_dense); context: see CONTEXTS; layout: see LAYOUTS;
    sizing: see SIZING_CHOICES."""
    if context not in CONTEXTS:
        raise ValueError(f"context must be one of {list(CONTEXTS)}, got {context!r}")
    if isinstance(dtype, str):
        if dtype not in PRECISIONS:
            raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {dtype!r}")
        dtype = PRECISIONS[dtype]
    folder = resolve_model(path) if path is not None else DEFAULT_MODEL_DIR
    if path is None and not (folder / "config.json").exists():
        raise ModelLoadError(f"no bundled default model in {folder}; pass the path of a model folder")
    net, card = load_model_folder(folder)
    tok_path = folder / "tokenizer.json"
    if not tok_path.exists():
        raise ModelLoadError(f"{tok_path}: file missing")
    try:
        tokenizer = Tokenizer.from_file(tok_path)
    except Exception as e:  # the tokenizers library raises its own exception type
        raise ModelLoadError(f"{tok_path}: cannot be read ({e})") from None
    if tokenizer.vocab_size > net.config.vocab_size:
        raise ModelLoadError(
            f"{folder}: tokenizer has {tokenizer.vocab_size} tokens, model only {net.config.vocab_size}"
        )
    model = LoadedModel.from_net(
        net, tokenizer, device=device, dtype=dtype, card=card, context=context, layout=layout, sizing=sizing
    )
    model.path = folder
    if dense != "torch":
        model.use_dense(dense, torch.get_num_threads())
    return model
