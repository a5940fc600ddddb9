"""A model folder as bfloat16 safetensors parts under 16 MiB each, and those parts back as a model folder.

Why: a remote GPU machine returns at most 8 files of at most 16 MiB, and a student of SmolLM2
(d=384, 6 layers, a 49,152-token embedding) holds 30.5M parameters: 116 MiB in float32, 58 MiB
in bfloat16. Weight matrices travel as bfloat16; vectors, codebooks and other small tensors stay
float32 (they cost little, and codes are decided against the codebooks). A tensor larger than
what is left of a part is cut by rows. The first part's metadata carries config.json, card.json
and tokenizer.json, so the parts alone make a model folder. ``join`` writes float32 weights
(bfloat16 widens to float32 exactly, so the folder holds the very model that came back) and
names every part that is missing.

    python -m training.bf16_parts split MODEL_FOLDER --out DIR     # DIR/trunk-01-of-04.safetensors ...
    python -m training.bf16_parts join DIR --out MODEL_FOLDER
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

PART_LIMIT = 16 << 20  # what a remote machine returns per file
HEADER_ROOM = 64 << 10  # the safetensors header's tensor entries
SMALL = 1 << 16  # tensors with fewer elements stay float32
SIDE_FILES = ("config.json", "card.json", "tokenizer.json")
NAME = re.compile(r"trunk-(\d+)-of-(\d+)\.safetensors$")


class PartsError(RuntimeError):
    """The returned parts do not make a whole model; the message says which part is missing or wrong."""


@dataclass(frozen=True)
class Piece:
    """Rows ``start:start+len`` of one tensor of the model, as stored in a part under ``key``."""

    key: str
    tensor: str
    start: int
    dtype: str  # the tensor's dtype in the model folder


def _travel_dtype(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16) if t.is_floating_point() and t.dim() >= 2 and t.numel() >= SMALL else t


def split_model(folder: Path, out: Path, limit: int = PART_LIMIT) -> list[Path]:
    """Write OUT/trunk-NN-of-MM.safetensors, each under ``limit`` bytes."""
    folder, out = Path(folder), Path(out)
    weights = load_file(str(folder / "model.safetensors"))
    side = {name: (folder / name).read_text() for name in SIDE_FILES if (folder / name).is_file()}
    side_bytes = len(json.dumps(side))  # as the header escapes them (quotes, newlines, non-ASCII: \uXXXX)
    room = limit - HEADER_ROOM
    if side_bytes >= room:
        raise PartsError(f"config, card and tokenizer take {side_bytes} bytes: more than a part holds")
    parts: list[tuple[dict[str, torch.Tensor], list[Piece]]] = [({}, [])]
    left = room - side_bytes
    for name in sorted(weights):
        t = _travel_dtype(weights[name].contiguous())
        row_bytes = t[0].numel() * t.element_size() if t.dim() else t.element_size()
        start, rows = 0, t.shape[0] if t.dim() else 1
        while start < rows:
            fit = left // row_bytes
            if fit == 0:
                parts.append(({}, []))
                left = room
                continue
            n = min(fit, rows - start)
            key = f"{name}@{start}"
            parts[-1][0][key] = t[start : start + n].clone() if t.dim() else t
            parts[-1][1].append(Piece(key, name, start, str(weights[name].dtype).removeprefix("torch.")))
            left -= n * row_bytes
            start += n
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (tensors, pieces) in enumerate(parts, 1):
        meta = {"part": str(i), "parts": str(len(parts)), "pieces": json.dumps([p.__dict__ for p in pieces])}
        if i == 1:
            meta.update(side)
        path = out / f"trunk-{i:02d}-of-{len(parts):02d}.safetensors"
        save_file(tensors, str(path), metadata=meta)
        if path.stat().st_size >= limit:
            raise PartsError(f"{path.name}: {path.stat().st_size} bytes, not under {limit}")
        paths.append(path)
    return paths


def join_model(parts_dir: Path, out: Path) -> Path:
    """The parts in PARTS_DIR -> a model folder (float32 weights) at OUT."""
    found = {}
    for path in sorted(Path(parts_dir).glob("trunk-*-of-*.safetensors")):
        m = NAME.search(path.name)
        found[(int(m.group(1)), int(m.group(2)))] = path
    if not found:
        raise PartsError(f"{parts_dir}: no trunk-NN-of-MM.safetensors parts")
    counts = {n for _, n in found}
    if len(counts) != 1:
        raise PartsError(f"{parts_dir}: parts of different splits ({sorted(counts)} parts)")
    n = counts.pop()
    missing = [f"trunk-{i:02d}-of-{n:02d}.safetensors" for i in range(1, n + 1) if (i, n) not in found]
    if missing:
        raise PartsError(f"{parts_dir}: missing {', '.join(missing)}")
    rows: dict[str, list[tuple[int, torch.Tensor]]] = {}
    dtypes: dict[str, str] = {}
    side: dict[str, str] = {}
    for i in range(1, n + 1):
        with safe_open(str(found[(i, n)]), "pt") as f:
            meta = f.metadata() or {}
            if meta.get("part") != str(i) or meta.get("parts") != str(n):
                raise PartsError(
                    f"{found[(i, n)].name}: its metadata says part {meta.get('part')} of {meta.get('parts')}"
                )
            if i == 1:
                side = {k: meta[k] for k in SIDE_FILES if k in meta}
            for p in json.loads(meta["pieces"]):
                rows.setdefault(p["tensor"], []).append((p["start"], f.get_tensor(p["key"])))
                dtypes[p["tensor"]] = p["dtype"]
    weights = {}
    for name, chunks in rows.items():
        chunks.sort(key=lambda c: c[0])
        expected = 0
        for start, chunk in chunks:
            if start != expected:
                raise PartsError(f"{name}: rows {expected}-{start} are in no part")
            expected += chunk.shape[0] if chunk.dim() else 1
        whole = torch.cat([c for _, c in chunks]) if chunks[0][1].dim() else chunks[0][1]
        weights[name] = whole.to(getattr(torch, dtypes[name]) if dtypes[name] != "bfloat16" else torch.float32)
    if "config.json" not in side:
        raise PartsError(f"{found[(1, n)].name}: no config.json in its metadata")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "model.safetensors"))
    for name, text in side.items():
        (out / name).write_text(text)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.bf16_parts", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("split", help="a model folder -> bfloat16 parts under 16 MiB")
    p.add_argument("model", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("join", help="bfloat16 parts -> a model folder (float32 weights)")
    p.add_argument("parts", type=Path)
    p.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "split":
            for path in split_model(args.model, args.out):
                print(f"{path}: {path.stat().st_size / (1 << 20):.2f} MiB")
        else:
            print(f"model folder -> {join_model(args.parts, args.out)}")
    except PartsError as e:
        print(f"bf16_parts {args.cmd}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
