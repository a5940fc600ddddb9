import pytest

from inference import VQOPTConfig


def test_config_round_trips_through_json(tmp_path):
    cfg = VQOPTConfig(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        ffn_dim=128,
        vq_heads=4,
        attention="softmax",
        attention_scale=0.25,
        labels=("neg", "pos"),
    )
    cfg.save(tmp_path / "config.json")
    back = VQOPTConfig.load(tmp_path / "config.json")
    assert back == cfg
    assert back.labels == ("neg", "pos")


@pytest.mark.parametrize(
    "change",
    [
        dict(vq_heads=3),
        dict(attention="linear"),
        dict(num_attention_heads=5),
        dict(position_repeat=7),
        dict(window_tokens=10**7),
        dict(labels=("a",)),
    ],
)
def test_invalid_config_is_rejected(change):
    with pytest.raises(ValueError):
        VQOPTConfig(**change)


def test_unknown_field_in_json_is_rejected():
    with pytest.raises(ValueError, match="unknown config fields"):
        VQOPTConfig.from_dict({"hidden_size": 64, "num_attention_heads": 4, "colour": "blue"})
