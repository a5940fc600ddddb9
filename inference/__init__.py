"""VQ-OPT and its incremental engine. Public API (docs/architecture.md maps the package):

    model = inference.load_model(path=None, device=None)  # context="paragraph": each paragraph alone
    doc = inference.IncrementalDocument(model, model.tokenizer.encode(text))
    res = doc.apply([inference.Splice(start, end, new_ids)])
    res.scores, res.cost, doc.scores, doc.span_scores(a, b), doc.surprise(a, b), doc.verify()
    inference.diff(old_ids, new_ids) -> list[Splice]
    inference.save_snapshot(doc, path); inference.load_snapshot(model, path, ids)  # state on disk

Inside: edits.py (Splice, diff), document.py, windowing.py and recut.py (a document as windows), engine/
(one window's incremental state and its update), model.py and kernels.py (the dense pass),
loading.py, checkpoint.py, snapshot.py and snapshot_schema.py (state on disk), costs.py and
pass_costs.py (what an update costs).

This package never imports the language server or training code.
"""

from .checkpoint import ModelLoadError, load_hf_opt, load_model_folder, save_model_folder
from .config import VQOPTConfig
from .costs import Cost, dense_macs
from .document import (
    DocumentBuilder,
    EditResult,
    IncrementalDocument,
    VerifyResult,
    estimate_build_bytes,
    estimate_state_bytes,
)
from .edits import Splice, apply_splices, diff
from .loading import CONTEXTS, DEFAULT_MODEL_DIR, LAYOUTS, LoadedModel, load_model, pick_device
from .model import VQOPT
from .paths import snapshot_dir
from .snapshot import (
    SnapshotError,
    SnapshotFormatError,
    copy_document,
    load_snapshot,
    model_fingerprint,
    save_snapshot,
    snapshot_key,
)
from .tokenizer import Tokenizer

__all__ = [
    "CONTEXTS",
    "LAYOUTS",
    "Cost",
    "DEFAULT_MODEL_DIR",
    "DocumentBuilder",
    "estimate_build_bytes",
    "estimate_state_bytes",
    "EditResult",
    "IncrementalDocument",
    "LoadedModel",
    "ModelLoadError",
    "Splice",
    "Tokenizer",
    "VQOPT",
    "VQOPTConfig",
    "VerifyResult",
    "apply_splices",
    "dense_macs",
    "diff",
    "load_hf_opt",
    "load_model",
    "load_model_folder",
    "pick_device",
    "save_model_folder",
    # state on disk (snapshot.py)
    "SnapshotError",
    "SnapshotFormatError",
    "copy_document",
    "load_snapshot",
    "model_fingerprint",
    "save_snapshot",
    "snapshot_dir",
    "snapshot_key",
]
