"""A file carried to a GPU machine in parts comes back whole, or the join names what is wrong."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from training import gpu_pack
from training.gpu_pack import Manifest, PackError, join_parts, split_file


@pytest.fixture
def payload(tmp_path):
    path = tmp_path / "teacher.gguf"
    path.write_bytes(os.urandom(3000) + b"weights " * 2000)  # part random, part compressible
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_split_then_join_gives_the_file_back(tmp_path, payload, compress):
    m = split_file(payload, tmp_path / "parts", part_bytes=4096, compress=compress)
    assert len(m.parts) == -(-m.packed_size // 4096) and all(p.size <= 4096 for p in m.parts)
    assert sum(p.size for p in m.parts) == m.packed_size
    if compress:
        assert m.packed_size < m.size
    out = join_parts(tmp_path / "parts" / "teacher.gguf.manifest.json", tmp_path / "joined" / "t.gguf")
    assert out.read_bytes() == payload.read_bytes()


def test_a_missing_and_a_corrupted_part_are_both_named(tmp_path, payload):
    m = split_file(payload, tmp_path / "p", part_bytes=5000, compress=False)
    assert len(m.parts) >= 3
    (tmp_path / "p" / m.parts[0].name).unlink()
    corrupt = tmp_path / "p" / m.parts[2].name
    data = bytearray(corrupt.read_bytes())
    data[10] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    with pytest.raises(PackError) as err:
        join_parts(tmp_path / "p" / "teacher.gguf.manifest.json", tmp_path / "out.gguf")
    text = str(err.value)
    assert f"part 1 of {len(m.parts)} ({m.parts[0].name}): missing" in text
    assert f"part 3 of {len(m.parts)} ({m.parts[2].name}): corrupted" in text
    assert "part 2 " not in text
    assert not (tmp_path / "out.gguf").exists()


def test_a_truncated_part_is_named_by_its_size(tmp_path, payload):
    m = split_file(payload, tmp_path / "p", part_bytes=5000, compress=True)
    last = tmp_path / "p" / m.parts[-1].name
    last.write_bytes(last.read_bytes()[:-1])
    with pytest.raises(PackError, match=rf"part {len(m.parts)} of {len(m.parts)} .*bytes, the manifest says"):
        join_parts(tmp_path / "p" / "teacher.gguf.manifest.json", tmp_path / "out.gguf")


def test_a_manifest_that_lies_about_the_whole_is_caught(tmp_path, payload):
    split_file(payload, tmp_path / "p", part_bytes=5000)
    path = tmp_path / "p" / "teacher.gguf.manifest.json"
    raw = json.loads(path.read_text())
    raw["sha256"] = "0" * 64
    path.write_text(json.dumps(raw))
    with pytest.raises(PackError, match="joined file's sha256"):
        join_parts(path, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists() and not (tmp_path / "out.gguf.joining").exists()


def test_the_cli_joins_and_exits_1_naming_a_missing_part(tmp_path, payload, capsys):
    assert gpu_pack.main(["split", str(payload), "--out", str(tmp_path / "p"), "--part-mib", "0.001", "--xz"]) == 0
    path = str(tmp_path / "p" / "teacher.gguf.manifest.json")
    manifest = Manifest.load(path)
    assert gpu_pack.main(["join", path, "--out", str(tmp_path / "j")]) == 0
    assert (tmp_path / "j").read_bytes() == payload.read_bytes()
    (tmp_path / "p" / manifest.parts[1].name).unlink()
    assert gpu_pack.main(["join", path, "--out", str(tmp_path / "k")]) == 1
    assert f"part 2 of {len(manifest.parts)} ({manifest.parts[1].name}): missing" in capsys.readouterr().err
    n = len(manifest.parts)
    assert gpu_pack.main(["check", path]) == 0  # a part still on its way is no error
    assert f"{n - 1} of {n} parts here and right" in capsys.readouterr().out
    (tmp_path / "p" / manifest.parts[0].name).write_bytes(b"not the part")
    assert gpu_pack.main(["check", path]) == 1
    assert f"{n - 2} of {n} parts here and right" in capsys.readouterr().out


def test_fits_counts_the_tree_and_the_carried_files(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("runs/\n")
    (repo / "tracked.txt").write_bytes(b"x" * 1000)
    (repo / "runs").mkdir()
    (repo / "runs" / "ignored.bin").write_bytes(b"y" * 5000)
    assert gpu_pack.tree_bytes(repo) == 1000 + len("runs/\n")  # untracked, not ignored: counted
    monkeypatch.setattr(gpu_pack, "PAYLOAD_LIMIT", 1006 + 5000)
    assert gpu_pack.main(["fits", str(repo / "runs" / "ignored.bin"), "--repo", str(repo)]) == 0
    monkeypatch.setattr(gpu_pack, "PAYLOAD_LIMIT", 1006 + 4999)
    assert gpu_pack.main(["fits", str(repo / "runs" / "ignored.bin"), "--repo", str(repo)]) == 1


def test_files_are_shared_out_over_runs_in_order_within_the_room():
    assert gpu_pack.share_out([30, 2, 30, 20, 12], room=33) == [[0, 1], [2], [3, 4]]
    assert gpu_pack.share_out([33, 33], room=33) == [[0], [1]]
    with pytest.raises(PackError, match="file 2 .* larger than a run's room"):
        gpu_pack.share_out([1, 34], room=33)


def test_room_is_the_largest_part_a_run_carries_beside_the_tree(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "tracked.txt").write_bytes(b"x" * 1000)
    mib = 1 << 20
    monkeypatch.setattr(gpu_pack, "PAYLOAD_LIMIT", 1000 + 5 * mib)
    assert gpu_pack.main(["room", "--repo", str(repo), "--margin-mib", "1"]) == 0
    assert capsys.readouterr().out.strip() == "4.0"
    monkeypatch.setattr(gpu_pack, "PAYLOAD_LIMIT", 1000 + 5 * mib - 1)  # a byte short: down to the half MiB
    assert gpu_pack.main(["room", "--repo", str(repo), "--margin-mib", "1"]) == 0
    assert capsys.readouterr().out.strip() == "3.5"
