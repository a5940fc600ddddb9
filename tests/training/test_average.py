"""`vq-train average`: the mean of several tails fine-tuned on one trunk, the trunk untouched, so
the codes (locality, exactness) are the trunk's; models whose trunks differ are refused."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

import inference
from inference.positions import spread_positions
from tests.training.conftest import DISTILL, FINETUNE, run_cli

FT = [*FINETUNE, "--scope", "post-vq", "--w-token", 0, "--steps", 3]


@pytest.fixture(scope="module")
def two_tails(tmp_path_factory, data_dir, distilled):
    out = tmp_path_factory.mktemp("tails")
    for name, lr in (("a", 1e-2), ("b", 3e-2)):
        args = ["--data", data_dir, "--model", distilled, "--out", out / name, *FT, "--lr", lr]
        assert run_cli("finetune", *args) == 0
    return out / "a" / "model", out / "b" / "model"


def test_average_is_the_mean_of_the_tails_and_keeps_the_trunk_and_its_codes(tmp_path, two_tails):
    a, b = two_tails
    assert run_cli("average", "--models", a, b, "--out", tmp_path / "soup") == 0
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    soup = load_file(tmp_path / "soup" / "model.safetensors")
    differing = [k for k in wa if not torch.equal(wa[k], wb[k])]
    assert differing and all(
        k.startswith(("decoder.layers.1.", "decoder.final_layer_norm.", "score_head.")) for k in differing
    )
    for k in wa:
        if k in differing:
            torch.testing.assert_close(soup[k], (wa[k] + wb[k]) / 2)
            assert not torch.equal(soup[k], wa[k])
        else:
            assert torch.equal(soup[k], wa[k]), k

    ids = torch.randint(4, inference.load_model(a, device="cpu").config.vocab_size, (1, 30))
    with torch.no_grad():
        outs = [
            inference.load_model(m, device="cpu").net(ids, spread_positions(30, 2048)[None])
            for m in (a, b, tmp_path / "soup")
        ]
    for codes in zip(*(o.codes for o in outs)):
        assert torch.equal(codes[0], codes[2]) and torch.equal(codes[1], codes[2])
    card = json.loads((tmp_path / "soup" / "card.json").read_text())
    assert card["average"]["models"] == [str(a), str(b)] and len(card["average"]["finetune"]) == 2


def test_average_refuses_models_whose_trunks_differ(tmp_path, data_dir, random_opt, distilled, two_tails):
    other = tmp_path / "other"
    args = ["--data", data_dir, "--teacher", random_opt, *DISTILL, "--out", other, "--steps", 3, "--seed", 5]
    assert run_cli("distill", *args) == 0
    with pytest.raises(SystemExit, match="trunk differs"):
        run_cli("average", "--models", two_tails[0], other / "model", "--out", tmp_path / "soup")
    assert not (tmp_path / "soup").exists()


def test_average_needs_two_existing_models(tmp_path, capsys, distilled):
    for models in ([distilled], [distilled, tmp_path / "missing"]):
        with pytest.raises(SystemExit) as e:
            run_cli("average", "--models", *models, "--out", tmp_path / "soup")
        assert e.value.code == 2 and "--models" in capsys.readouterr().err


def test_a_fine_tune_of_a_soup_keeps_the_soup_and_its_tails_in_its_card(tmp_path, data_dir, two_tails):
    """The card of a model fine-tuned from another lists how the weights it started from were made:
    the soup's average and its first tail's record move, in order, to ``earlier_stages``; the new
    run's record is ``finetune``, and nothing of the source's calibration or evaluation survives."""
    assert run_cli("average", "--models", *two_tails, "--out", tmp_path / "soup") == 0
    args = ["--data", data_dir, "--model", tmp_path / "soup", "--out", tmp_path / "next", *FT, "--lr", 2e-2]
    assert run_cli("finetune", *args) == 0
    again = ["--data", data_dir, "--model", tmp_path / "next" / "model", "--out", tmp_path / "third", *FT]
    assert run_cli("finetune", *again) == 0
    card = json.loads((tmp_path / "third" / "model" / "card.json").read_text())
    first, second = card["earlier_stages"]
    assert first["average"]["models"] == [str(m) for m in two_tails]
    assert first["finetune"]["lr"] == 1e-2  # the first tail's record, as the soup's card carried it
    assert set(second) == {"finetune"} and second["finetune"]["source"] == str(tmp_path / "soup")
    assert card["finetune"]["source"] == str(tmp_path / "next" / "model") and "average" not in card
    assert not {"calibration", "evaluation", "summary"} & set(card)
