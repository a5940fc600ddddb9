"""Our OPT loader + dense pass in softmax mode without VQ must reproduce transformers' OPT."""

import pytest
import torch
from safetensors.torch import save_file
from transformers import OPTConfig, OPTForCausalLM

import inference
from inference.positions import spread_positions


@pytest.fixture(scope="module")
def hf_opt(tmp_path_factory):
    torch.manual_seed(0)
    cfg = OPTConfig(
        vocab_size=211,
        hidden_size=48,
        num_hidden_layers=2,
        ffn_dim=96,
        num_attention_heads=4,
        max_position_embeddings=64,
        word_embed_proj_dim=48,
        dropout=0.0,
        attention_dropout=0.0,
    )
    model = OPTForCausalLM(cfg).eval()
    folder = tmp_path_factory.mktemp("opt")
    model.save_pretrained(folder)
    return model, folder


def _hf_logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("repeat", [100, 1])
def test_softmax_no_vq_matches_transformers(hf_opt, repeat):
    model, folder = hf_opt
    net = inference.load_hf_opt(folder, attention="softmax", vq=False, position_repeat=repeat)
    assert net.config.position_pool == 6400
    ids = torch.randint(3, 211, (2, 40))
    ids[:, 0] = 2  # OPT's BOS
    # pool position i * (P / max_positions) is OPT position i, whatever the table's factorisation
    positions = (torch.arange(40) * 100).expand(2, 40)
    with torch.no_grad():
        ours = net.lm_logits(net(ids, positions).hidden)
    ref = _hf_logits(model, ids)
    assert torch.allclose(ours, ref, atol=1e-5), (ours - ref).abs().max()


def test_checkpoint_without_model_prefix_loads_the_same(hf_opt, tmp_path):
    model, folder = hf_opt
    state = {k.removeprefix("model."): v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    a = inference.load_hf_opt(folder, attention="softmax", vq=False)
    b = inference.load_hf_opt(tmp_path, attention="softmax", vq=False)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        if "codebook" not in ka and "score_head" not in ka:
            assert ka == kb and torch.equal(va, vb)


def test_padding_mask_gives_same_rows_as_unpadded(hf_opt):
    _, folder = hf_opt
    net = inference.load_hf_opt(folder, attention="gelu", vq=True)
    short = torch.randint(3, 211, (1, 10))
    padded = torch.cat([short, torch.ones(1, 6, dtype=torch.long)], 1)
    pos = spread_positions(16, net.config.position_pool).unsqueeze(0)
    valid = torch.arange(16).unsqueeze(0) < 10
    with torch.no_grad():
        a = net(short, pos[:, :10]).hidden
        b = net(padded, pos, valid).hidden[:, :10]
    assert torch.allclose(a, b, atol=1e-6)


def test_loader_rejects_shape_mismatch(hf_opt, tmp_path):
    model, folder = hf_opt
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    state["model.decoder.layers.0.fc1.weight"] = torch.zeros(3, 3)
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    with pytest.raises(inference.ModelLoadError, match="fc1.weight"):
        inference.load_hf_opt(tmp_path)
