"""`vq-train average`: one model whose tail is the mean of several tails fine-tuned on one trunk.

Why: tails fine-tuned on one trunk with different recipes fall short on different sides. On the
bundled trunk, a tail trained with a quarter of neutral paragraphs ranks reviews as well as any
but leans positive on plain prose, so neutral documents pass the tone gate; the same recipe with
40% neutral paragraphs is quiet on plain prose but ranks lowercased reviews a little worse. The
mean of their weights (a "model soup": fine-tunes of one starting point lie in one basin, and
their average keeps what each learnt) reads reviews as well as the first and plain prose as
quietly as the second (benchmarks/README.md, "Locality against accuracy"), at no cost at
inference: it is one model of the same shape.

Only the tail is averaged (`post_vq.tail_modules`: the last FFN, the final norm, the score
head). Every other weight, the codebooks and the tied embedding included, must be the same in
every model, so the average's codes are the trunk's bit for bit: its locality and the engine's
exactness are the trunk's, whatever the tails learnt.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .post_vq import tail_modules, weights_digest


@torch.no_grad()
def average_tails(nets: list) -> int:
    """Set the first net's tail to the mean of every net's tail (in place); returns how many
    numbers were averaged. Raises SystemExit when the nets' trunks differ."""
    first = nets[0]
    digest = weights_digest(first)
    for i, net in enumerate(nets[1:], 1):
        if net.config.to_dict() != first.config.to_dict() or weights_digest(net) != digest:
            raise SystemExit(
                f"vq-train average: model {i + 1}'s trunk differs from the first's (weights before the last "
                "quantiser, codebooks or config): average only tails fine-tuned on one trunk "
                "(finetune --scope post-vq from one model)"
            )
    numbers = 0
    tails = [tail_modules(net) for net in nets]
    for modules in zip(*tails):
        params = [dict(m.named_parameters()) for m in modules]
        for name, target in params[0].items():
            target.copy_(torch.stack([p[name] for p in params]).mean(0))
            numbers += target.numel()
    return numbers


def run_average(args) -> Path:
    """`vq-train average --models A B ... --out C`: C is A with the mean of every model's tail."""
    from inference import Tokenizer, load_model_folder, save_model_folder

    folders = [Path(m) for m in args.models]
    loaded = [load_model_folder(f) for f in folders]
    nets, cards = [net for net, _ in loaded], [card for _, card in loaded]
    numbers = average_tails(nets)
    card = {
        **cards[0],
        "average": {
            "models": [str(f) for f in folders],
            "how": "mean of the tails' weights (last FFN, final norm, score head); every other weight identical",
            "tail_numbers": numbers,
            "finetune": [c.get("finetune") for c in cards],
        },
    }
    out = Path(args.out)
    save_model_folder(nets[0], Tokenizer.from_file(folders[0] / "tokenizer.json"), out, card)
    return out
