"""How a layer's codebook shapes its code flips, before any training: fewer codes, and sums scaled by depth.

    python -m benchmarks.codebook_geometry [--model FOLDER] [--layer 0] [--codes 8 12 16 64]
        [--depth-powers 0 0.5 1] [--sequences 96] [--seq 1024] [--seed 0] [--threads 1]
        [--out benchmarks/results]

Why: a layer's attention sums are unnormalised (``s_n = c * sum_i gelu(q_n.k_i) v_i``), so a row's
sum grows with its depth in the window while one edit's change to it does not, and shallow rows
flip most (the bundled model's layer 0 above all; see benchmarks/README.md). Two cures can be
judged on the model's own sums of one layer without training anything:

- fewer codes: a k-means codebook of K codes per VQ head (what ``vq-train finetune --refit-codes``
  starts from), wider cells that fewer edits cross;
- a depth-normalised sum: ``s * depth^-p`` quantised instead of ``s`` (p = 1 is the mean of the
  terms instead of their sum), which would need an architecture the engine does not have.

The sums are the model's, layer LAYER's, with the earlier layers' trained codes. Every codebook
is fitted on the first half of --sequences held-out sequences (the LM text ``vq-train evaluate``
reads; nothing from eval/) and its flips counted on the other half: one random token replaced in
each sequence (``training.locality.make_edits``), the share of later rows whose nearest code
changed, overall and per band of depth (``training.evaluate.DEPTH_BANDS``). Beside each, its
relative distortion sum |s - c|^2 / sum |s|^2: what the layer gives up. The model's trained
codebook is the first row. Nothing here is trained, so this is where a refit starts, not where
fine-tuning takes it.
"""

from __future__ import annotations

import argparse
import platform
import sys

import torch

from benchmarks import common

CHUNK = 16  # sequences per forward pass


def layer_sums(net, ids: torch.Tensor, layer: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention sums of `layer` before and after one replaced token per sequence, (B, T, d) each,
    and the later-rows mask (B, T)."""
    from inference.positions import spread_positions
    from training.locality import make_edits

    b, t = ids.shape
    edited, where = make_edits(ids, torch.ones_like(ids, dtype=torch.bool), net.config.vocab_size, seed_gen(seed))
    pos = spread_positions(t, net.config.position_pool).expand(b, t)
    before, after = [], []
    with torch.no_grad():
        for start in range(0, b, CHUNK):
            part = slice(start, start + CHUNK)
            before.append(net(ids[part], pos[part], vq=True).pre_vq[layer])
            after.append(net(edited[part], pos[part], vq=True).pre_vq[layer])
    later = torch.arange(t)[None] > where[:, None]
    return torch.cat(before), torch.cat(after), later


def seed_gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def nearest(s: torch.Tensor, book: torch.Tensor) -> torch.Tensor:
    """Codes (B, T, h) of sums (B, T, d) in codebook (h, K, w)."""
    from training.vq import chunks, distances

    return distances(chunks(s, book.shape[0]), book).argmin(-1).reshape(*s.shape[:-1], book.shape[0])


def measure(book: torch.Tensor, before: torch.Tensor, after: torch.Tensor, later: torch.Tensor) -> dict:
    """Flip rate overall and per depth band, and relative distortion, of one codebook on test sums."""
    from training.evaluate import DEPTH_BANDS

    codes = nearest(before, book)
    flipped = (codes != nearest(after, book)).any(-1) & later  # (B, T)
    band = torch.bucketize(torch.arange(before.shape[1]), torch.tensor(DEPTH_BANDS)).expand_as(later)
    by_depth = [
        float(flipped[later & (band == i)].sum()) / max(1, int((later & (band == i)).sum()))
        for i in range(len(DEPTH_BANDS) + 1)
    ]
    h = book.shape[0]
    quantised = book[torch.arange(h), codes].flatten(-2)  # (B, T, d)
    return {
        "flip_rate": float(flipped.sum()) / max(1, int(later.sum())),
        "flip_rate_by_depth": by_depth,
        "relative_distortion": float((before - quantised).pow(2).sum() / before.pow(2).sum()),
        "codes_used": [int(codes[..., j].unique().numel()) for j in range(h)],
    }


def run(args) -> dict:
    from inference import load_model_folder
    from training.evaluate import DEPTH_BANDS, VALID_TOKENS, edit_sequences
    from training.teacher import load_or_collect_tokens
    from training.tokenizer import load_tokenizer
    from training.vq import chunks, kmeans

    torch.set_num_threads(args.threads)
    folder = common.model_folder(args.model or "bundled")
    net, _ = load_model_folder(folder)
    if not 0 <= args.layer < net.config.num_hidden_layers:
        raise SystemExit(f"--layer {args.layer}: the model has layers 0-{net.config.num_hidden_layers - 1}")
    valid = load_or_collect_tokens(
        load_tokenizer(folder / "tokenizer.json"), common.data_dir(args.data), "valid", VALID_TOKENS, None, args.seed
    )
    ids = edit_sequences(valid, args.sequences, args.seq, args.seed)
    before, after, later = layer_sums(net, ids, args.layer, args.seed)
    fit, test = slice(0, args.sequences // 2), slice(args.sequences // 2, None)
    trained = net.layers[args.layer].vq.codebook.detach()
    rows = [{"codebook": "trained", **measure(trained, before[test], after[test], later[test])}]
    depth = torch.arange(1, args.seq + 1, dtype=before.dtype)[None, :, None]  # (1, T, 1): the row's keys
    h = net.config.vq_heads
    for power in args.depth_powers:
        scale = depth.pow(-power)
        x = chunks(before[fit] * scale, h)  # (N, h, w)
        for codes in args.codes:
            book = kmeans(x, codes, args.iters, seed_gen(args.seed))
            flips = measure(book, (before * scale)[test], (after * scale)[test], later[test])
            rows.append({"codebook": "k-means", "codes": codes, "depth_power": power, **flips})
    return {
        "model": common.recorded_path(folder),
        "layer": args.layer,
        "rows": rows,
        "depth_bands": list(DEPTH_BANDS),
        "fit_sequences": args.sequences // 2,
        "test_sequences": args.sequences - args.sequences // 2,
        "tokens": args.seq,
        "command": common.command_line("codebook_geometry", args.argv),
        "hardware": f"one {platform.machine()} CPU",
    }


def report(results: dict) -> str:
    edges = [0, *results["depth_bands"]]
    bands = [f"{a + 1}-{b}" for a, b in zip(edges, edges[1:])] + [f"{edges[-1] + 1}+"]
    header = ["codebook", "codes per VQ head", "sum quantised", "codes flipped", *(f"depth {b}" for b in bands)]
    header += ["relative distortion"]
    rows = []
    for r in results["rows"]:
        if r["codebook"] == "trained":
            what, codes = "trained (the model's)", f"{max(r['codes_used'])} used"
        else:
            what, codes = "k-means", str(r["codes"])
        power = r.get("depth_power", 0)
        rows.append(
            [what, codes, "s" if power == 0 else f"s / depth^{power:g}", f"{100 * r['flip_rate']:.2f}%"]
            + [f"{100 * x:.2f}%" for x in r["flip_rate_by_depth"]]
            + [f"{r['relative_distortion']:.3f}"]
        )
    return (
        f"# Layer {results['layer']}'s codebook and its code flips, before any training\n\n"
        f"`{results['command']}`\n\n"
        f"Model: `{results['model']}`. Codebooks fitted on {results['fit_sequences']} held-out sequences of "
        f"{results['tokens']} tokens; flips counted on {results['test_sequences']} others, one random token "
        f"replaced in each (share of later rows whose code changed, overall and by depth into the window); "
        f"{results['hardware']}.\n\n" + common.markdown_table(header, rows) + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layer", type=int, default=0)
    p.add_argument("--codes", type=int, nargs="+", default=[8, 12, 16, 64], help="k-means codes per VQ head")
    p.add_argument("--depth-powers", type=float, nargs="+", default=[0.0, 0.5, 1.0], help="p in s / depth^p")
    p.add_argument("--sequences", type=int, default=96, help="held-out sequences: half fit, half test")
    p.add_argument("--seq", type=int, default=1024, help="tokens per sequence, BOS included")
    p.add_argument("--iters", type=int, default=25, help="k-means iterations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    return common.run_benchmark("codebook_geometry", p, argv, run, report)


if __name__ == "__main__":
    sys.exit(main())
