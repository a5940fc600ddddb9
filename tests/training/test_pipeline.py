"""End to end on tiny models: every stage runs, losses fall, resume equals an uninterrupted run,
distillation starts from a random-init OPT saved with save_pretrained, and the exported folder
loads with ``inference.load_model`` and passes the engine's exactness check."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

import inference
from inference import kernels
from tests.training.conftest import DISTILL, FINETUNE, TINY_OPT, read_log, run_cli

TEACHER = [
    *TINY_OPT,
    "--max-pos",
    64,
    "--batch",
    4,
    "--seq",
    32,
    "--tokens",
    20_000,
    "--valid-tokens",
    3000,
    "--lr",
    3e-3,
    "--warmup",
    2,
    "--log-every",
    1,
    "--quiet",
]


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_teacher_loss_falls_and_resume_matches(tmp_path, data_dir, tiny_tokenizer):
    common = ["teacher", "--data", data_dir, "--tokenizer", tiny_tokenizer, *TEACHER]
    run_cli(*common, "--out", tmp_path / "a", "--steps", 30)
    losses = [r["loss"] for r in read_log(tmp_path / "a", "teacher")]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.3, losses
    report = json.loads((tmp_path / "a" / "model" / "teacher_report.json").read_text())
    assert report["tokens_seen"] == 30 * 4 * 32 and "valid_loss_without_attention" in report

    run_cli(*common, "--out", tmp_path / "b", "--steps", 8)
    run_cli(*common, "--out", tmp_path / "c", "--steps", 8, "--stop-after", 3)  # interrupted
    assert not (tmp_path / "c" / "model").exists()
    run_cli(*common, "--out", tmp_path / "c", "--steps", 8, "--resume")
    assert same_weights(
        load_file(tmp_path / "b" / "model" / "model.safetensors"),
        load_file(tmp_path / "c" / "model" / "model.safetensors"),
    )


def test_distill_from_random_opt_and_resume_matches(tmp_path, data_dir, random_opt):
    common = ["distill", "--data", data_dir, "--teacher", random_opt, *DISTILL]
    run_cli(*common, "--out", tmp_path / "a", "--steps", 6)
    run_cli(*common, "--out", tmp_path / "b", "--steps", 6, "--stop-after", 4)
    run_cli(*common, "--out", tmp_path / "b", "--steps", 6, "--resume")
    wa = load_file(tmp_path / "a" / "model" / "model.safetensors")
    assert same_weights(wa, load_file(tmp_path / "b" / "model" / "model.safetensors"))

    card = json.loads((tmp_path / "a" / "model" / "card.json").read_text())
    assert all(min(layer["codes_used"]) >= 32 for layer in card["distill"]["kmeans_init"])  # k-means spreads codes
    logs = read_log(tmp_path / "a", "distill")
    assert all("locality" in r and "flip" in r for r in logs)
    model = inference.load_model(tmp_path / "a" / "model", device="cpu")
    assert model.config.attention == "gelu" and model.config.vq and model.config.vq_heads == 2


def test_distill_loss_decreases(tmp_path, data_dir, peaked_opt):
    run_cli(
        "distill",
        "--data",
        data_dir,
        "--teacher",
        peaked_opt,
        *DISTILL,
        "--out",
        tmp_path,
        "--steps",
        25,
        "--locality",
        0,
        "--w-ce",
        0,
    )
    logs = read_log(tmp_path, "distill")
    assert "locality" not in logs[0]  # the ablation: no edited copies at all
    first, last = [r["loss"] for r in logs[:4]], [r["loss"] for r in logs[-4:]]
    assert sum(last) < sum(first) * 0.8, (first, last)


def test_finetune_evaluate_export_end_to_end(tmp_path, data_dir, random_opt, distilled):
    ft = ["--data", data_dir, *FINETUNE, "--lr", 3e-3, "--steps", 20]
    run_cli("finetune", "--model", distilled, "--out", tmp_path / "ft", *ft)
    run_cli("finetune", "--dense", "--model", random_opt, "--out", tmp_path / "ftd", *ft)
    logs = read_log(tmp_path / "ft", "finetune")
    assert sum(r["cls"] for r in logs[-5:]) < sum(r["cls"] for r in logs[:5])  # the classifier learns
    card = json.loads((tmp_path / "ft" / "model" / "card.json").read_text())
    assert {"distill", "finetune"} <= card.keys()

    run_cli(
        "evaluate",
        "--data",
        data_dir,
        "--model",
        tmp_path / "ft" / "model",
        "--dense-model",
        tmp_path / "ftd" / "model",
        "--out",
        tmp_path / "ev",
        "--test-limit",
        30,
        "--max-tokens",
        40,
        "--lm-batches",
        1,
        "--lm-seq",
        48,
        "--edit-docs",
        2,
        "--edit-seq",
        60,
        "--holdout",
        40,
        "--robust-reviews",
        12,
        "--context-reviews",
        6,
        "--neutral-paragraphs",
        0,
        "--protocol-pairs",
        0,  # the protocol's revisions are longer than this tiny model's window; tests/training/test_protocol.py
    )
    report = json.loads((tmp_path / "ev" / "eval.json").read_text())
    hints = report["tone_hints"]
    assert {"imdb_test", "held_out_original", "held_out_lower_respaced", "held_out_first_sentence"} <= hints.keys()
    assert hints["imdb_test"]["n"] == 30 and hints["imdb_test"]["accuracy"] == report["imdb_test"]["vq"]["accuracy"]
    assert hints["held_out_lowercase"]["accuracy"] == report["robustness"]["lowercase"]["accuracy"]
    assert all(0 <= hints[k]["shown_share"] <= 1 for k in hints if k.startswith("held_out_"))
    robust = report["robustness"]
    assert {"original", "lowercase", "respaced", "lower_respaced", "first_sentence"} <= robust.keys()
    assert all(
        robust[k]["n"] == 12 and 0 <= robust[k]["positive_rate"] <= 1 for k in robust["accuracy_gap_to_original"]
    )
    assert (
        robust["accuracy_gap_to_original"]["lowercase"]
        == robust["lowercase"]["accuracy"] - robust["original"]["accuracy"]
    )
    context = report["paragraph_context"]
    assert [k for k in context if k != "paragraphs"] == [
        "alone",
        "after_table",
        "after_code",
        "after_opposite_paragraph",
    ]
    assert all(
        context[k]["n"] == 6 and 0 <= context[k]["flip_rate_vs_alone"] <= 1 for k in ("after_table", "after_code")
    )
    assert report["imdb_test"]["vq"]["n"] == 30 and 0 <= report["imdb_test"]["dense_teacher"]["accuracy"] <= 1
    assert all(report["engine"]["verify_codes_equal"])
    assert len(report["single_token_edits"]["flip_rate_per_layer"]) == 2
    assert report["held_out_lm"]["code_usage_per_layer"][0]["codes_used"][0] > 1
    assert set(report["held_out_lm"]["lm_loss_vq_on_by_token_index"]) == {"0-16", "16-256"}  # 47 predicted tokens

    # Calibration folds a temperature into the head: the document scores become softmax(logits / T), exactly.
    run_cli(
        "calibrate",
        "--data",
        data_dir,
        "--model",
        tmp_path / "ft" / "model",
        "--out",
        tmp_path / "cal",
        "--holdout",
        40,
        "--calibration-start",
        20,
        "--calibration-reviews",
        20,
        "--max-tokens",
        40,
    )
    cal_card = json.loads((tmp_path / "cal" / "card.json").read_text())["calibration"]
    temperature = cal_card["temperature"]
    assert cal_card["rows"] == 20 * 6 and cal_card["nll_after"] <= cal_card["nll_before"] + 1e-6
    from inference.positions import spread_positions
    from training.reviews import document_scores
    from training.tone_hints import scaled

    raw, _ = inference.load_model_folder(tmp_path / "ft" / "model")
    folded, _ = inference.load_model_folder(tmp_path / "cal")
    examples = [([5, 9, 17, 33, 60, 7], 1), ([70, 3, 44], 0)]

    def spread(n: int):
        return spread_positions(n, raw.config.position_pool)

    torch.testing.assert_close(
        document_scores(folded, examples, spread),
        scaled(document_scores(raw, examples, spread), temperature),
        atol=1e-5,
        rtol=1e-5,
    )

    out = tmp_path / "export"
    run_cli("export", "--model", tmp_path / "ft" / "model", "--eval", tmp_path / "ev" / "eval.json", "--out", out)
    assert sorted(p.name for p in out.iterdir()) == ["card.json", "config.json", "model.safetensors", "tokenizer.json"]
    model = inference.load_model(out, device="cpu")
    assert model.card["evaluation"]["imdb_test"]["vq"]["n"] == 30
    summary = model.card["summary"]
    assert summary["robustness_accuracy"]["lowercase"] == robust["lowercase"]["accuracy"]
    assert summary["robustness_positive_rate"]["first_sentence"] == robust["first_sentence"]["positive_rate"]
    assert set(summary["paragraph_flip_rate_vs_alone"]) == {"after_table", "after_code", "after_opposite_paragraph"}
    ids = model.tokenizer.encode("A slow start, but the ending was wonderful and moving.")
    doc = inference.IncrementalDocument(model, ids)
    doc.apply([inference.Splice(2, 3, [ids[5]])])
    doc.apply([inference.Splice(4, 4, ids[:2])])
    check = doc.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-6
    assert set(doc.scores) == {"negative", "positive"}


def test_teacher_folder_with_vocab_and_merges_only(tmp_path, data_dir, random_opt, tiny_tokenizer):
    """A Hugging Face OPT checkpoint ships vocab.json + merges.txt, not tokenizer.json: distil from it as is."""
    import shutil

    from tokenizers import Tokenizer

    folder = tmp_path / "opt"
    shutil.copytree(random_opt, folder)
    (folder / "tokenizer.json").unlink()
    bpe = json.loads(tiny_tokenizer.read_text())["model"]
    (folder / "vocab.json").write_text(json.dumps(bpe["vocab"]))
    merges = [m if isinstance(m, str) else " ".join(m) for m in bpe["merges"]]
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    run_cli("distill", "--data", data_dir, "--teacher", folder, *DISTILL, "--out", tmp_path / "d", "--steps", 2)
    exported = Tokenizer.from_file(str(tmp_path / "d" / "model" / "tokenizer.json"))
    reference = Tokenizer.from_file(str(tiny_tokenizer))
    text = "An OPT checkpoint's tokenizer, byte-level: naïve café, 3.14!"
    assert exported.encode(text).ids == reference.encode(text).ids
    assert (
        inference.load_model(tmp_path / "d" / "model", device="cpu").tokenizer.encode(text)
        == exported.encode(text, add_special_tokens=False).ids
    )


def test_head_fit_lowers_the_document_loss_before_fine_tuning(tmp_path, data_dir, distilled):
    """--head-fit solves the head on frozen features first; a resumed run keeps that report."""
    ft = [
        "finetune",
        "--data",
        data_dir,
        "--model",
        distilled,
        "--batch",
        4,
        "--seq",
        48,
        "--limit",
        120,
        "--holdout",
        40,
        "--lr",
        1e-3,
        "--warmup",
        1,
        "--quiet",
        "--steps",
        4,
        "--head-fit",
        100,
        "--w-token",
        0,
        "--eval-every",
        2,
        "--eval-reviews",
        20,
    ]
    run_cli(*ft, "--out", tmp_path / "a")
    fit = read_log(tmp_path / "a", "head_fit")[0]
    assert fit["reviews"] == 100 and fit["doc_nll_after"] < fit["doc_nll_before"] - 0.01, fit
    assert 0 <= fit["probe"]["accuracy"] <= 1
    run_cli(*ft, "--out", tmp_path / "b", "--stop-after", 2)
    run_cli(*ft, "--out", tmp_path / "b", "--resume")
    assert same_weights(
        load_file(tmp_path / "a" / "model" / "model.safetensors"),
        load_file(tmp_path / "b" / "model" / "model.safetensors"),
    )
    card = json.loads((tmp_path / "b" / "model" / "card.json").read_text())
    assert card["finetune"]["head_fit"]["doc_nll_after"] == fit["doc_nll_after"]  # carried through the resume


def test_distill_holds_chosen_layers_harder_and_refuses_a_weight_per_wrong_layer(
    tmp_path, data_dir, random_opt, capsys
):
    common = ["distill", "--data", data_dir, "--teacher", random_opt, *DISTILL, "--steps", 2]
    run_cli(*common, "--out", tmp_path / "a", "--locality-layers", 3, 1)
    card = json.loads((tmp_path / "a" / "model" / "card.json").read_text())
    assert card["distill"]["locality_layers"] == [3.0, 1.0]
    assert all("locality" in r for r in read_log(tmp_path / "a", "distill"))
    assert run_cli(*common, "--out", tmp_path / "b", "--locality-layers", 1, 1, 1) == 2  # a clear error
    assert not (tmp_path / "b" / "model").exists()
    assert "needs 2 non-negative weights, one per layer" in capsys.readouterr().err


def test_finetune_refits_a_layer_to_fewer_codes_keeps_them_through_a_resume_and_refuses_a_misfit(
    tmp_path, data_dir, distilled, capsys
):
    """--refit-codes 0=3: layer 0 starts from a k-means of 3 codes per head on the training mix; the
    other codes stay parked through training (and a resume), and the card says so."""
    ft = ["finetune", "--data", data_dir, "--model", distilled, *FINETUNE, "--steps", 4, "--dead-threshold", 0.5]
    run_cli(*ft, "--out", tmp_path / "a", "--refit-codes", "0=3")
    run_cli(*ft, "--out", tmp_path / "b", "--refit-codes", "0=3", "--stop-after", 2)
    run_cli(*ft, "--out", tmp_path / "b", "--refit-codes", "0=3", "--resume")
    for run in ("a", "b"):
        net, card = inference.load_model_folder(tmp_path / run / "model")
        parked = kernels.parked_codes(net.layers[0].vq.codebook)
        assert parked[:, 3:].all() and not parked[:, :3].any()
        assert not kernels.parked_codes(net.layers[1].vq.codebook).any()
        assert [(r["layer"], r["live_codes"]) for r in card["finetune"]["refit_codes"]] == [(0, 3)]
    assert same_weights(
        load_file(tmp_path / "a" / "model" / "model.safetensors"),
        load_file(tmp_path / "b" / "model" / "model.safetensors"),
    )
    assert run_cli(*ft, "--out", tmp_path / "c", "--refit-codes", "5=3") == 2
    assert "--refit-codes 5=3: the model has layers 0-1" in capsys.readouterr().err
    assert run_cli(*ft, "--out", tmp_path / "e", "--refit-codes", "0=3", "--scope", "post-vq") == 2
    assert "--refit-codes needs a VQ model and --scope all" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        run_cli(*ft, "--out", tmp_path / "d", "--refit-codes", "0")
    assert e.value.code == 2 and "expected LAYER=CODES" in capsys.readouterr().err
