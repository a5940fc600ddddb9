"""benchmarks/kv_layout.py: one row's attention over every key, in the state's layout and the fused one."""

from __future__ import annotations

import json

import torch

import inference
from benchmarks import kv_layout


def test_both_layouts_hold_the_same_numbers_and_give_the_same_sums():
    forms = kv_layout.layouts(2, 4, 50, 8, torch.float64, torch.Generator().manual_seed(0))
    for fused, blocks in zip(forms[kv_layout.FUSED], forms[kv_layout.HEAD_MAJOR]):
        for a, b in zip(fused, blocks):
            assert torch.equal(a, b)  # the same query, keys and values, laid out differently
        assert torch.equal(kv_layout.one_row_sums(*fused), kv_layout.one_row_sums(*blocks))


def test_the_state_keeps_each_heads_keys_and_values_as_one_block():
    """What the benchmark calls the state's layout is what WindowState keeps."""
    doc = inference.IncrementalDocument(inference.load_model(), list(range(10, 60)))
    for view in doc.windows[0].layer_views:
        assert view.keys_by_head.transpose(1, 2).is_contiguous()
        assert view.values_by_head.is_contiguous() and view.queries_by_head.is_contiguous()


def test_the_benchmark_writes_its_report(tmp_path):
    argv = ["--tokens", "64", "--calls", "4", "--repeats", "1", "--out", str(tmp_path)]
    assert kv_layout.main(argv) == 0
    result = json.loads((tmp_path / "kv_layout.json").read_text())
    assert set(result["median_us"]) == {kv_layout.FUSED, kv_layout.HEAD_MAJOR}
    assert result["largest_difference"] == 0.0 and result["calls"] == 4
    assert "| head-major (L, 3, H, S, hd) |" in (tmp_path / "kv_layout.md").read_text()
