"""Carry a file larger than one run's payload to a remote GPU machine in parts, and check it there.

Why: each run on a remote machine receives the repository's working tree plus a few named files,
64 MiB in all, and a warm machine keeps what earlier runs left. A file bigger than the room the
tree leaves (SmolLM2's 98 MB GGUF) therefore travels as parts in consecutive runs. ``split``
optionally xz-compresses the file, cuts it into parts of at most ``part_bytes`` and writes a
manifest with the sha256 of every part, of the packed stream and of the original file. ``join``
on the other side checks every part first and names each one that is missing, of the wrong size
or corrupted (all of them, not the first), then concatenates, decompresses and checks the whole.
``fits`` says whether the tree plus the files one run carries stay under the payload limit.

    python -m training.gpu_pack split FILE --out DIR [--part-mib 32] [--xz]
    python -m training.gpu_pack check DIR/NAME.manifest.json      # which parts are here, and right
    python -m training.gpu_pack join DIR/NAME.manifest.json --out FILE
    python -m training.gpu_pack fits FILE...        # tree + these files <= 64 MiB?
    python -m training.gpu_pack calls FILE...       # the files, in order, shared out over consecutive runs
    python -m training.gpu_pack room                # the largest part one run carries beside the tree, MiB
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

CHUNK = 1 << 20
PAYLOAD_LIMIT = 64 << 20  # what one run on a remote machine may receive: working tree + carried files
MANIFEST_SUFFIX = ".manifest.json"


class PackError(RuntimeError):
    """A part or the joined file does not match its manifest; the message names every problem."""


@dataclass(frozen=True)
class Part:
    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """What ``join`` checks: the original file, how it was packed, and its parts in order."""

    name: str  # the original file's name
    size: int
    sha256: str
    compression: str  # "xz" or "none"
    packed_size: int
    packed_sha256: str
    parts: tuple[Part, ...]

    def save(self, folder: Path) -> Path:
        path = Path(folder) / f"{self.name}{MANIFEST_SUFFIX}"
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> Manifest:
        try:
            raw = json.loads(Path(path).read_text())
            return cls(**{**raw, "parts": tuple(Part(**p) for p in raw["parts"])})
        except (OSError, ValueError, TypeError, KeyError) as e:
            raise PackError(f"{path}: not a readable manifest ({e})") from None


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def _compress(src: Path, dest: Path) -> None:
    comp = lzma.LZMACompressor(preset=6)
    with open(src, "rb") as f, open(dest, "wb") as out:
        while block := f.read(CHUNK):
            out.write(comp.compress(block))
        out.write(comp.flush())


def split_file(src: Path, folder: Path, part_bytes: int, compress: bool = False) -> Manifest:
    """Write FOLDER/NAME[.xz].partNN (each at most ``part_bytes``) and FOLDER/NAME.manifest.json."""
    if part_bytes < 1:
        raise ValueError("part_bytes must be positive")
    src, folder = Path(src), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    packed = folder / (src.name + (".xz" if compress else ""))
    if compress:
        _compress(src, packed)
    size = packed.stat().st_size if compress else src.stat().st_size
    count = max(1, -(-size // part_bytes))
    parts, whole = [], hashlib.sha256()
    with open(packed if compress else src, "rb") as f:
        for i in range(count):
            name = f"{packed.name}.part{i + 1:02d}"
            h = hashlib.sha256()
            with open(folder / name, "wb") as out:
                left = part_bytes
                while left and (block := f.read(min(CHUNK, left))):
                    out.write(block)
                    h.update(block)
                    whole.update(block)
                    left -= len(block)
            parts.append(Part(name, (folder / name).stat().st_size, h.hexdigest()))
    if compress:
        packed.unlink()
    manifest = Manifest(
        name=src.name,
        size=src.stat().st_size,
        sha256=sha256_of(src),
        compression="xz" if compress else "none",
        packed_size=size,
        packed_sha256=whole.hexdigest(),
        parts=tuple(parts),
    )
    manifest.save(folder)
    return manifest


def check_parts(manifest: Manifest, folder: Path) -> list[str]:
    """One line per part that is missing, of the wrong size or corrupted; empty when all are right."""
    problems = []
    n = len(manifest.parts)
    for i, part in enumerate(manifest.parts, 1):
        path = Path(folder) / part.name
        where = f"part {i} of {n} ({part.name})"
        if not path.is_file():
            problems.append(f"{where}: missing")
        elif path.stat().st_size != part.size:
            problems.append(f"{where}: {path.stat().st_size} bytes, the manifest says {part.size}")
        elif sha256_of(path) != part.sha256:
            problems.append(f"{where}: corrupted (sha256 differs from the manifest's)")
    return problems


def join_parts(manifest_path: Path, dest: Path) -> Path:
    """Check every part, join them (decompressing if packed with xz) into DEST, check the whole."""
    manifest_path = Path(manifest_path)
    manifest = Manifest.load(manifest_path)
    folder = manifest_path.parent
    problems = check_parts(manifest, folder)
    if problems:
        raise PackError(f"{manifest.name}: cannot join:\n  " + "\n  ".join(problems))
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".joining")
    h = hashlib.sha256()
    decomp = lzma.LZMADecompressor() if manifest.compression == "xz" else None
    try:
        with open(tmp, "wb") as out:
            for part in manifest.parts:
                with open(folder / part.name, "rb") as f:
                    while block := f.read(CHUNK):
                        data = decomp.decompress(block) if decomp else block
                        out.write(data)
                        h.update(data)
    except lzma.LZMAError as e:
        tmp.unlink(missing_ok=True)
        raise PackError(f"{manifest.name}: the joined parts do not decompress ({e})") from None
    if h.hexdigest() != manifest.sha256 or tmp.stat().st_size != manifest.size:
        tmp.unlink()
        raise PackError(f"{manifest.name}: the joined file's sha256 or size differs from the manifest's")
    tmp.replace(dest)
    return dest


def tree_bytes(repo: Path) -> int:
    """Bytes of the working tree a run receives: tracked files plus untracked files git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    files = {repo / name.decode() for name in listed.split(b"\0") if name}
    return sum(f.stat().st_size for f in files if f.is_file() and not f.is_symlink())


def run_room(tree: int, margin_mib: float) -> int:
    """Bytes one run carries beside a working tree of `tree` bytes, keeping margin_mib free (the tree grows)."""
    return PAYLOAD_LIMIT - tree - int(margin_mib * (1 << 20))


def share_out(sizes: list[int], room: int) -> list[list[int]]:
    """Indices of ``sizes`` in order, cut into consecutive runs that each carry at most ``room`` bytes."""
    calls: list[list[int]] = [[]]
    used = 0
    for i, size in enumerate(sizes):
        if size > room:
            raise PackError(f"file {i + 1} ({size} bytes) is larger than a run's room ({room} bytes)")
        if used + size > room:
            calls.append([])
            used = 0
        calls[-1].append(i)
        used += size
    return calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.gpu_pack", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("split", help="cut FILE into parts with a manifest")
    p.add_argument("file", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--part-mib", type=float, default=32.0, help="largest part, MiB")
    p.add_argument("--xz", action="store_true", help="xz-compress before cutting")
    p = sub.add_parser("check", help="which parts are here and right (exit 1 if one here is wrong)")
    p.add_argument("manifest", type=Path)
    p = sub.add_parser("join", help="check the parts a manifest lists and join them")
    p.add_argument("manifest", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("fits", help="does the working tree plus these files fit one run's payload?")
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--repo", type=Path, default=Path.cwd())
    p = sub.add_parser("calls", help="share these files out, in order, over consecutive runs")
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--repo", type=Path, default=Path.cwd())
    p.add_argument("--margin-mib", type=float, default=1.0, help="room kept free in every run")
    p = sub.add_parser("room", help="the largest part one run carries beside the tree, in MiB (halves)")
    p.add_argument("--repo", type=Path, default=Path.cwd())
    p.add_argument("--margin-mib", type=float, default=1.0, help="room kept free in every run")
    args = ap.parse_args(argv)
    if args.cmd == "room":
        print(int(run_room(tree_bytes(args.repo.resolve()), args.margin_mib) / (1 << 19)) / 2)
        return 0
    if args.cmd == "calls":
        tree = tree_bytes(args.repo.resolve())
        room = run_room(tree, args.margin_mib)
        sizes = [f.stat().st_size for f in args.files]
        try:
            calls = share_out(sizes, room)
        except PackError as e:
            print(f"gpu_pack calls: {e}", file=sys.stderr)
            return 1
        for n, call in enumerate(calls, 1):
            mib = (tree + sum(sizes[i] for i in call)) / (1 << 20)
            print(f"run {n} ({mib:.2f} MiB with the tree): carry {' '.join(str(args.files[i]) for i in call)}")
        return 0
    if args.cmd == "split":
        m = split_file(args.file, args.out, int(args.part_mib * (1 << 20)), args.xz)
        for part in m.parts:
            print(f"{args.out / part.name}: {part.size / (1 << 20):.2f} MiB")
        print(f"{m.name}: {m.size / (1 << 20):.2f} MiB -> {len(m.parts)} parts, {m.packed_size / (1 << 20):.2f} MiB")
        return 0
    if args.cmd == "check":
        manifest = Manifest.load(args.manifest)
        problems = check_parts(manifest, args.manifest.parent)
        wrong = [p for p in problems if not p.endswith(": missing")]
        here = len(manifest.parts) - (len(problems) - len(wrong))
        print(f"{manifest.name}: {here - len(wrong)} of {len(manifest.parts)} parts here and right")
        for line in problems:
            print(f"  {line}")
        return 1 if wrong else 0
    if args.cmd == "join":
        try:
            print(f"joined -> {join_parts(args.manifest, args.out)}")
        except PackError as e:
            print(f"gpu_pack join: {e}", file=sys.stderr)
            return 1
        return 0
    tree = tree_bytes(args.repo.resolve())
    carried = sum(f.stat().st_size for f in args.files)
    total = tree + carried
    verdict = "fits" if total <= PAYLOAD_LIMIT else "does NOT fit"
    mib = 1 << 20
    print(
        f"tree {tree / mib:.2f} MiB + carried {carried / mib:.2f} MiB = {total / mib:.2f} MiB: "
        f"{verdict} in {PAYLOAD_LIMIT / mib:.0f} MiB"
    )
    return 0 if total <= PAYLOAD_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
