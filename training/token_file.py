"""Training tokens in one file, for a machine that has the model and the code but not the data folder.

``vq-train tokens`` writes the ids that ``vq-train distill`` would tokenise from ``$VQ_LSP_DATA``
(train split, same seed, same count) as a NumPy ``.npy`` array of uint16 (every vocabulary here
has at most 65,536 tokens), xz-compressed: about 1.04 bytes a token for the bundled 8,192-token
BPE on the training text, a quarter of int32. ``vq-train distill --tokens-file`` reads it (or a
plain ``.npy``) instead of the data folder, so a GPU run carries a few MiB of ids, not the corpus.
"""

from __future__ import annotations

import io
import lzma
from pathlib import Path

import numpy as np
import torch

FILE_NAME = "tokens_train.npy.xz"


def write_token_file(tokens: torch.Tensor, folder: Path) -> Path:
    """Save token ids (N,) as FOLDER/tokens_train.npy.xz (uint16); refuses ids that do not fit."""
    ids = tokens.to(torch.int64)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) > np.iinfo(np.uint16).max):
        raise SystemExit("token ids outside 0-65535 cannot be written as uint16")
    buf = io.BytesIO()
    np.save(buf, ids.numpy().astype(np.uint16))
    path = Path(folder) / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(lzma.compress(buf.getvalue(), preset=6))
    tmp.replace(path)
    return path


def read_token_file(path: Path) -> torch.Tensor:
    """The ids of a token file (.npy.xz or .npy) as an int32 tensor (N,), the dtype the data pipeline samples."""
    path = Path(path)
    raw = path.read_bytes()
    if path.suffix == ".xz":
        try:
            raw = lzma.decompress(raw)
        except lzma.LZMAError as e:
            raise SystemExit(f"{path}: not an xz file ({e})") from None
    try:
        ids = np.load(io.BytesIO(raw), allow_pickle=False)
    except ValueError as e:
        raise SystemExit(f"{path}: not a .npy array ({e})") from None
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise SystemExit(f"{path}: not a 1-D array of token ids")
    return torch.from_numpy(ids.astype(np.int32))
