"""The card's paper protocol (training/protocol.py): real revision pairs, the engine against a
paragraph cache that re-runs only the paragraphs an edit touches."""

from __future__ import annotations

import inference
from training import protocol


def test_paragraph_runs_cover_the_text_and_an_edit_touches_its_own_paragraphs():
    model = inference.load_model(dtype="float32")
    enc = model.tokenizer.encode
    first, second, third = enc("One paragraph here."), enc("\n\nA second one."), enc("\n\nAnd a third.")
    ids = first + second + third
    runs = protocol.paragraph_runs(model, ids)
    assert len(runs) == 3 and runs[0][0] == 0 and runs[-1][1] == len(ids)
    assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))  # contiguous, nothing left out
    inside_second = runs[1][0] + 2
    assert protocol.touching(model, ids, inside_second, inside_second + 1) == [runs[1]]
    assert protocol.touching(model, ids, runs[0][1] - 1, runs[1][0] + 1) == runs[:2]  # across a break
    assert protocol.touching(model, ids, inside_second, inside_second) == [runs[1]]  # a deletion


def test_protocol_report_on_revision_pairs(data_dir):
    net, _ = inference.load_model_folder(inference.DEFAULT_MODEL_DIR)
    tok = inference.DEFAULT_MODEL_DIR / "tokenizer.json"
    report = protocol.protocol_report(net, tok, data_dir, pairs=2, seed=0, lengths=(1024, 2048))
    assert report["data"].startswith("2 of 20 consecutive revision pairs of 1024-2048 tokens")
    for scenario in ("one-token edit", "entire revision"):
        cell = report[scenario]
        assert cell["engine_seconds_median"] > 0 and cell["paragraph_cache_over_engine_seconds_median"] > 0
        assert cell["paragraph_cache_over_engine_macs_median"] > 0
    # one replaced token costs the engine less than re-running its whole paragraph, in MACs
    assert report["one-token edit"]["paragraph_cache_over_engine_macs_median"] > 1
