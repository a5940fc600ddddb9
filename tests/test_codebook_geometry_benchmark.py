"""benchmarks/codebook_geometry.py: a layer's flips under refitted and depth-scaled codebooks."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from benchmarks import codebook_geometry

DATA = Path(__file__).parent / "data"


def test_the_trained_row_reads_the_models_own_codes_and_more_codes_distort_less(tmp_path):
    out = tmp_path / "out"
    argv = ["--sequences", "8", "--seq", "64", "--codes", "4", "32", "--depth-powers", "0", "1", "--iters", "5"]
    assert codebook_geometry.main([*argv, "--data", str(DATA), "--out", str(out)]) == 0
    results = json.loads((out / "codebook_geometry.json").read_text())
    rows = results["rows"]
    assert [r["codebook"] for r in rows] == ["trained"] + ["k-means"] * 4
    assert [(r["codes"], r["depth_power"]) for r in rows[1:]] == [(4, 0.0), (32, 0.0), (4, 1.0), (32, 1.0)]
    assert all(0 <= r["flip_rate"] <= 1 and len(r["flip_rate_by_depth"]) == 4 for r in rows)
    assert all(max(r["codes_used"]) <= r["codes"] for r in rows[1:])
    assert rows[2]["relative_distortion"] < rows[1]["relative_distortion"]  # 32 codes fit the sums closer than 4
    text = (out / "codebook_geometry.md").read_text()
    assert "| trained (the model's) |" in text and "| s / depth^1 |" in text and "| depth 513+ |" in text


def test_nearest_codes_of_the_layers_sums_are_the_models_codes():
    """The trained row is a measurement of the model itself: its codes are the dense pass's."""
    from inference import load_model_folder
    from inference.positions import spread_positions

    net, _ = load_model_folder(codebook_geometry.common.model_folder("bundled"))
    ids = torch.randint(4, net.config.vocab_size, (2, 40), generator=torch.Generator().manual_seed(0))
    before, after, later = codebook_geometry.layer_sums(net, ids, 0, seed=3)
    with torch.no_grad():
        codes = net(ids, spread_positions(40, net.config.position_pool).expand(2, 40), vq=True).codes[0]
    assert torch.equal(codebook_geometry.nearest(before, net.layers[0].vq.codebook.detach()), codes)
    assert later.sum() > 0 and not torch.equal(before, after)
