"""Fine-tuning with ``--scope post-vq``: only the modules after the last quantiser train, so every
VQ code (and with it locality and exactness) is exactly what the distilled model had."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

import inference
from inference.positions import spread_positions
from tests.training.conftest import FINETUNE, read_log, run_cli
from training import post_vq

TAIL_PREFIXES = (
    "decoder.layers.1.final_layer_norm.",
    "decoder.layers.1.fc1.",
    "decoder.layers.1.fc2.",
    "decoder.final_layer_norm.",
    "score_head.",
)
FT = [*FINETUNE, "--lr", 1e-2, "--scope", "post-vq", "--w-token", 0]


def test_tail_forward_on_cached_features_matches_the_full_pass(distilled):
    """What the post-vq loop trains on (cached residual + tail) is what the model computes."""
    net, _ = inference.load_model_folder(distilled)
    torch.manual_seed(0)
    examples = [(torch.randint(4, net.config.vocab_size, (n,)).tolist(), n % 2) for n in (5, 17, 30)]
    feats = post_vq._shard_features(net, examples, lambda n: spread_positions(n, net.config.position_pool), 2, "cpu")
    x, ids, valid, scored, labels = feats.batch([0, 1, 2], torch.device("cpu"))
    assert labels.tolist() == [1, 1, 0] and valid.sum(1).tolist() == [6, 18, 31]  # BOS + tokens
    with torch.no_grad():
        _, cls_tail = post_vq.tail_forward(net, x)
        for i, n in enumerate([6, 18, 31]):  # each review alone through the full model
            ref = net(ids[i : i + 1, :n], spread_positions(n, net.config.position_pool)[None]).cls_logits[0]
            torch.testing.assert_close(cls_tail[i, :n], ref, atol=2e-3, rtol=2e-3)  # features are float16


def test_post_vq_finetune_changes_only_the_tail_and_keeps_codes(tmp_path, data_dir, distilled):
    run_cli("finetune", "--data", data_dir, "--model", distilled, "--out", tmp_path / "a", *FT, "--steps", 30)
    logs = read_log(tmp_path / "a", "finetune")
    assert all(r["scope"] == "post-vq" for r in logs)
    assert sum(r["cls"] for r in logs[-6:]) < sum(r["cls"] for r in logs[:6]) - 0.05  # the classifier learns
    before = load_file(distilled / "model.safetensors")
    after = load_file(tmp_path / "a" / "model" / "model.safetensors")
    assert before.keys() == after.keys()
    for name in before:
        if name.startswith(TAIL_PREFIXES):
            continue
        assert torch.equal(before[name], after[name]), f"{name} changed outside the tail"
    assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith(TAIL_PREFIXES))
    card = json.loads((tmp_path / "a" / "model" / "card.json").read_text())
    assert card["finetune"]["scope"] == "post-vq" and card["finetune"]["post_vq_features"]["reviews"] == 160
    assert "distill" in card

    # Same codes as the distilled model on any text, and the engine stays exact.
    old = inference.load_model(distilled, device="cpu")
    new = inference.load_model(tmp_path / "a" / "model", device="cpu")
    ids = new.tokenizer.encode("Dull first act. Then the film finds its heart, and the ending is superb.")
    pos = spread_positions(len(ids) + 1, new.config.position_pool)[None]
    full_ids = torch.tensor([[new.config.bos_token_id, *ids]])
    with torch.no_grad():
        codes_old, codes_new = old.net(full_ids, pos).codes, new.net(full_ids, pos).codes
    assert all(torch.equal(a, b) for a, b in zip(codes_old, codes_new))
    doc = inference.IncrementalDocument(new, ids)
    doc.apply([inference.Splice(3, 4, [ids[7]])])
    doc.apply([inference.Splice(1, 1, ids[:3])])
    check = doc.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-6


def test_post_vq_resume_matches_uninterrupted_and_reuses_features(tmp_path, data_dir, distilled):
    common = ["finetune", "--data", data_dir, "--model", distilled, *FT, "--steps", 8]
    run_cli(*common, "--out", tmp_path / "a")
    run_cli(*common, "--out", tmp_path / "b", "--stop-after", 3)
    assert not (tmp_path / "b" / "model").exists()
    shards = sorted((tmp_path / "b" / "features").glob("shard_*.pt"))
    assert shards
    stamp = [s.stat().st_mtime_ns for s in shards]
    run_cli(*common, "--out", tmp_path / "b", "--resume")
    assert [s.stat().st_mtime_ns for s in shards] == stamp  # cached features were loaded, not recomputed
    wa = load_file(tmp_path / "a" / "model" / "model.safetensors")
    wb = load_file(tmp_path / "b" / "model" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_post_vq_finetunes_a_dense_teacher_the_same_way(tmp_path, data_dir, random_opt):
    run_cli("finetune", "--dense", "--data", data_dir, "--model", random_opt, "--out", tmp_path, *FT, "--steps", 4)
    card = json.loads((tmp_path / "model" / "card.json").read_text())
    assert card["finetune"]["dense"] and card["finetune"]["scope"] == "post-vq"
    net, _ = inference.load_model_folder(tmp_path / "model")
    assert net.config.attention == "softmax" and not net.config.vq


def test_cached_features_are_not_reused_for_another_model(tmp_path, distilled):
    """A features folder left by one model is recomputed, not silently reused, for another."""
    net, _ = inference.load_model_folder(distilled)
    examples = [([5, 9, 11, 7], 0), ([6, 6, 8], 1)]
    first, _ = post_vq.cache_features(net, examples, tmp_path, seed=0)
    again, _ = post_vq.cache_features(net, examples, tmp_path, seed=0)
    assert torch.equal(first.x, again.x)  # same model: loaded from the shard
    with torch.no_grad():
        net.decoder.embed_tokens.weight.add_(0.5)  # another model
    other, _ = post_vq.cache_features(net, examples, tmp_path, seed=0)
    assert not torch.equal(first.x, other.x)


def test_post_vq_augmented_finetune_records_its_mix_and_trains(tmp_path, data_dir, distilled):
    mix = "original=1,lowercase=1,lower_respaced=1,sentence=1,truncated=1,after_context=2"
    run_cli(
        "finetune", "--data", data_dir, "--model", distilled, "--out", tmp_path, *FT, "--steps", 20, "--augment", mix
    )
    card = json.loads((tmp_path / "model" / "card.json").read_text())
    counts = card["finetune"]["augment"]["reviews_per_variant"]
    assert card["finetune"]["augment"]["mix"] == mix and sum(counts.values()) == 160
    assert counts["after_context"] > 20 and counts["sentence"] > 5
    feats = post_vq.join(
        [
            post_vq.Features(**{k: v for k, v in torch.load(p).items() if k not in ("key", "seconds")})
            for p in sorted((tmp_path / "features").glob("shard_*.pt"))
        ]
    )
    assert int((feats.context > 0).sum()) == counts["after_context"]  # their context rows are cached unscored
    logs = read_log(tmp_path, "finetune")
    assert sum(r["cls"] for r in logs[-5:]) < sum(r["cls"] for r in logs[:5])


def test_copy_tail_puts_anothers_tail_on_a_trunk_and_leaves_the_trunk_alone(distilled):
    """`finetune --tail-from`: the tail is the source's; every other weight (so every code) is the trunk's."""
    net, _ = inference.load_model_folder(distilled)
    source, _ = inference.load_model_folder(distilled)
    with torch.no_grad():
        for p in source.parameters():
            p.add_(1.0)  # a source that differs everywhere
    before = {k: v.clone() for k, v in net.state_dict().items()}
    post_vq.copy_tail(source, net)
    theirs = source.state_dict()
    for name, value in net.state_dict().items():
        in_tail = name.startswith(TAIL_PREFIXES)
        assert torch.equal(value, theirs[name] if in_tail else before[name]), name
