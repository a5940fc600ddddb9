"""`vq-train order-only`: the same model with constant position tables, so that it reads only
the order of its tokens (see training/order_only.py); every other weight is untouched."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

import inference
from inference.positions import sample_positions, spread_positions
from tests.training.conftest import run_cli

TABLES = ("decoder.embed_positions.weight", "decoder.embed_positions_fine.weight")


def assert_trained_and_still_order_only(start, trained) -> None:
    """TRAINED (a model folder) kept START's constant position tables and changed other weights."""
    before = load_file(start / "model.safetensors")
    after = load_file(trained / "model.safetensors")
    for name in TABLES:
        assert torch.equal(before[name], after[name])
    assert any(not torch.equal(before[k], after[k]) for k in before if k not in TABLES)
    assert inference.load_model(trained, device="cpu").order_only


def test_order_only_keeps_every_other_weight_and_any_layout_scores_the_same(tmp_path, distilled):
    assert run_cli("order-only", "--model", distilled, "--out", tmp_path / "oo") == 0
    before = load_file(distilled / "model.safetensors")
    after = load_file(tmp_path / "oo" / "model.safetensors")
    assert before.keys() == after.keys()
    for name in before:
        if name in TABLES:
            assert not torch.equal(before[name], after[name])
            assert torch.allclose(after[name], before[name].mean(0, keepdim=True).expand_as(after[name]))
        else:
            assert torch.equal(before[name], after[name]), name
    card = json.loads((tmp_path / "oo" / "card.json").read_text())
    assert card["order_only"]["coarse_rows"] == before[TABLES[0]].shape[0] and "distill" in card

    old = inference.load_model(distilled, device="cpu")
    new = inference.load_model(tmp_path / "oo", device="cpu")
    assert new.order_only and not old.order_only
    ids = torch.randint(4, new.config.vocab_size, (1, 40))
    pool = new.config.position_pool
    layouts = [spread_positions(40, pool), sample_positions(40, pool, torch.Generator().manual_seed(1))]
    with torch.no_grad():
        a, b = (new.net(ids, p[None]) for p in layouts)
        for x, y in zip(a.codes, b.codes):
            assert torch.equal(x, y)
        assert torch.equal(a.cls_logits, b.cls_logits)
        c, d = (old.net(ids, p[None]) for p in layouts)
        assert not torch.equal(c.cls_logits, d.cls_logits)  # the source model reads positions


def test_order_only_needs_an_existing_model(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        run_cli("order-only", "--model", tmp_path / "missing", "--out", tmp_path / "oo")
    assert e.value.code == 2 and "--model" in capsys.readouterr().err


def test_distill_continues_an_order_only_model_and_keeps_it_order_only(tmp_path, data_dir, random_opt, distilled):
    """`distill --init`: the student starts from the model's weights and codebooks (no k-means) and
    an order-only model's position tables stay frozen, so the result still reads only the order."""
    from tests.training.conftest import DISTILL, read_log

    assert run_cli("order-only", "--model", distilled, "--out", tmp_path / "oo") == 0
    out = tmp_path / "more"
    args = ["--data", data_dir, "--teacher", random_opt, *DISTILL, "--out", out, "--steps", 2]
    assert run_cli("distill", *args, "--init", tmp_path / "oo") == 0
    assert_trained_and_still_order_only(tmp_path / "oo", out / "model")
    card = json.loads((out / "model" / "card.json").read_text())
    assert card["distill"]["kmeans_init"] == [{"from": str(tmp_path / "oo")}]
    assert "continued from" in card["distill"]["student"]
    assert len(read_log(out, "distill")) == 2


def test_distill_order_only_trains_a_model_that_reads_only_the_order(tmp_path, data_dir, random_opt):
    """`distill --order-only`: both tables constant before the first step and frozen through training,
    so the codes the locality term trains are the model's own (no order-only stage changes them)."""
    from tests.training.conftest import DISTILL

    out = tmp_path / "oo_distill"
    args = ["--data", data_dir, "--teacher", random_opt, *DISTILL, "--out", out, "--steps", 2]
    assert run_cli("distill", *args, "--order-only") == 0
    weights = load_file(out / "model" / "model.safetensors")
    for name in TABLES:
        table = weights[name]
        assert torch.equal(table, table[:1].expand_as(table))
    assert inference.load_model(out / "model", device="cpu").order_only
    assert json.loads((out / "model" / "card.json").read_text())["distill"]["reads_order_only"] is True
    plain = tmp_path / "plain"
    assert run_cli("distill", "--data", data_dir, "--teacher", random_opt, *DISTILL, "--out", plain, "--steps", 2) == 0
    assert json.loads((plain / "model" / "card.json").read_text())["distill"]["reads_order_only"] is False


def test_whole_model_finetune_keeps_an_order_only_model_order_only(tmp_path, data_dir, distilled, monkeypatch):
    """`finetune --scope all` on an order-only model: the position tables stay frozen (the same text
    keeps its scores wherever it sits) while the rest trains, and `--dead-threshold` reaches the
    quantiser (0: no code re-seeded; the quantiser's own test shows what that keeps) and the card."""
    from tests.training.conftest import FINETUNE
    from training import finetune

    made = []
    real = finetune.TrainQuantizer
    monkeypatch.setattr(finetune, "TrainQuantizer", lambda *a, **k: made.append(k) or real(*a, **k))

    assert run_cli("order-only", "--model", distilled, "--out", tmp_path / "oo") == 0
    out = tmp_path / "ft"
    args = ["--data", data_dir, "--model", tmp_path / "oo", "--out", out, *FINETUNE, "--lr", 1e-2, "--steps", 2]
    assert run_cli("finetune", *args, "--scope", "all", "--locality", 1, "--dead-threshold", 0) == 0
    assert_trained_and_still_order_only(tmp_path / "oo", out / "model")
    assert [k["dead_threshold"] for k in made] == [0]
    card = json.loads((out / "model" / "card.json").read_text())
    assert card["finetune"]["dead_threshold"] == 0 and card["finetune"]["locality_weight"] == 1
