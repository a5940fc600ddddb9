"""Every tensor the training code builds for a model goes to the model's device.

A model on CUDA that meets a CPU index tensor fails ("index is on cpu, different from other
tensors on cuda:0"), which is how ``vq-train finetune --scope post-vq --eval-every N`` crashed at
its first probe. This machine has no GPU, so the model is put on the "meta" device instead: a
weight there refuses a CPU input just as a CUDA weight does, but holds no data, so the run stops
only where a result is copied back to the CPU ("Cannot copy out of meta tensor"). Reaching that
point after a forward pass on meta inputs is the proof that every input went to the model.
"""

from __future__ import annotations

import pytest
import torch

import inference
from inference.positions import spread_positions
from training import post_vq
from training.head_fit import mean_features
from training.reviews import accuracy, forward_padded

EXAMPLES = [([5, 9, 11, 7], 0), ([6, 6, 8], 1), ([12, 40, 7, 9, 10, 11], 1, 2)]


@pytest.fixture()
def meta_net(distilled):
    net, _ = inference.load_model_folder(distilled)
    calls = []
    net.register_forward_pre_hook(lambda _m, args: calls.append({a.device.type for a in args if torch.is_tensor(a)}))
    net.forward_inputs = calls
    return net.to("meta")


def spread(net):
    return lambda n: spread_positions(n, net.config.position_pool)


def test_a_meta_weight_refuses_a_cpu_input_like_a_cuda_one(distilled):
    """The premise: without moving its inputs, the model on meta fails in the forward pass."""
    net, _ = inference.load_model_folder(distilled)
    net = net.to("meta")
    ids = torch.tensor([[1, 5, 9]])
    with pytest.raises(RuntimeError, match="device"):
        net(ids, spread(net)(3)[None])


def test_forward_padded_puts_every_input_on_the_model_device(meta_net):
    out, valid = forward_padded(meta_net, EXAMPLES, spread(meta_net))
    assert out.cls_logits.device.type == "meta" and valid.device.type == "meta"
    assert meta_net.forward_inputs == [{"meta"}]


@pytest.mark.parametrize(
    "run",
    [
        lambda net: accuracy(net, EXAMPLES, spread(net)),  # the fine-tuning probe and evaluate
        lambda net: mean_features(net, EXAMPLES, spread(net)),  # the head fit
        lambda net: post_vq._shard_features(net, EXAMPLES, spread(net), 2, next(net.parameters()).device),
    ],
    ids=["probe_accuracy", "head_fit_features", "post_vq_features"],
)
def test_model_runs_get_inputs_on_the_model_device(meta_net, run):
    with pytest.raises(NotImplementedError, match="meta tensor"):  # only copying the result back fails
        run(meta_net)
    assert meta_net.forward_inputs and all(devices == {"meta"} for devices in meta_net.forward_inputs)


def test_tail_batch_goes_to_the_requested_device(distilled):
    """The post-vq loop batches cached CPU features onto the training device."""
    net, _ = inference.load_model_folder(distilled)
    feats = post_vq._shard_features(net, EXAMPLES, spread(net), 2, torch.device("cpu"))
    batch = feats.batch([0, 1, 2], torch.device("meta"), crop=3, g=torch.Generator().manual_seed(0))
    assert [t.device.type for t in batch] == ["meta"] * 5
    _, cls_logits = post_vq.tail_forward(net.to("meta"), batch[0])
    assert cls_logits.device.type == "meta"
