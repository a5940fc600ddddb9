"""Write the final model folder: config.json, model.safetensors, tokenizer.json, card.json.

The card merges what every stage recorded (data, tokens seen, wall time) with the evaluation
report, so the bundled model carries its own measured accuracy and locality figures. The
folder is checked by loading it back through ``inference.load_model`` and must stay under the
size limit (the bundled model ships inside the package).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch


def summary(card: dict) -> dict:
    """The headline figures, gathered from the stages' sections of the card (missing ones skipped)."""
    ev = card.get("evaluation", {})
    out: dict = {}
    imdb = ev.get("imdb_test", {})
    if imdb:
        out["imdb_test_accuracy_vq"] = imdb["vq"]["accuracy"]
        out["imdb_test_f1_vq"] = imdb["vq"]["f1"]
        out["imdb_test_subset"] = imdb.get("subset")
        if "dense_teacher" in imdb:
            out["imdb_test_accuracy_dense_teacher"] = imdb["dense_teacher"]["accuracy"]
            out["imdb_test_f1_dense_teacher"] = imdb["dense_teacher"]["f1"]
            out["vq_over_dense_accuracy"] = imdb["vq_over_dense_accuracy"]
    lm = ev.get("held_out_lm", {})
    if lm:
        out["vq_loss_gap"] = lm["vq_loss_gap"]
        out["held_out_lm_loss_vq_on"] = lm["lm_loss_vq_on"]
        if "lm_loss_vq_on_by_token_index" in lm:
            out["held_out_lm_loss_by_token_index"] = lm["lm_loss_vq_on_by_token_index"]
        out["codes_used_per_layer"] = [u["codes_used"] for u in lm["code_usage_per_layer"]]
        out["code_perplexity_per_layer"] = [u["perplexity"] for u in lm["code_usage_per_layer"]]
    robust = ev.get("robustness", {})
    if robust:
        out["robustness_accuracy"] = {
            k: v["accuracy"] for k, v in robust.items() if isinstance(v, dict) and "accuracy" in v
        }
        out["robustness_positive_rate"] = {
            k: v["positive_rate"] for k, v in robust.items() if isinstance(v, dict) and "positive_rate" in v
        }
        out["robustness_reviews"] = robust.get("reviews")
    context = ev.get("paragraph_context", {})
    if context:
        out["paragraph_flip_rate_vs_alone"] = {
            k: v["flip_rate_vs_alone"] for k, v in context.items() if isinstance(v, dict) and "flip_rate_vs_alone" in v
        }
        out["paragraph_accuracy"] = {k: v["accuracy"] for k, v in context.items() if isinstance(v, dict)}
    hints = ev.get("tone_hints", {})
    if hints:
        out["tone_hints"] = {
            k: {f: v[f] for f in ("accuracy", "positive_rate", "shown_share", "shown_precision")}
            for k, v in hints.items()
            if isinstance(v, dict)
        }
        out["tone_hint_rule"] = hints.get("rule")
    calibration = card.get("calibration")
    if calibration:
        out["calibration"] = {k: calibration[k] for k in ("temperature", "ece_before", "ece_after")}
    if "single_token_edits" in ev:
        out["flip_rate_per_layer"] = ev["single_token_edits"]["flip_rate_per_layer"]
    if "engine" in ev:
        out["single_token_mac_speedup_median"] = ev["engine"]["single_token_mac_speedup_median"]
    teacher = ev.get("teacher_uses_context", {})
    out["finetune_scope"] = card.get("finetune", {}).get("scope", "all")
    out["tokens_seen"] = {
        "teacher": teacher.get("tokens_seen"),
        "distill": card.get("distill", {}).get("tokens_seen"),
        "finetune_reviews": card.get("finetune", {}).get("reviews_seen"),
        "head_fit_reviews": (card.get("finetune", {}).get("head_fit") or {}).get("reviews"),
    }
    out["wall_seconds"] = {
        "teacher": teacher.get("wall_seconds"),
        "distill": card.get("distill", {}).get("wall_seconds"),
        "finetune": card.get("finetune", {}).get("wall_seconds"),
    }
    return out


def export(args) -> Path:
    from inference import Tokenizer, load_model, load_model_folder, save_model_folder

    net, card = load_model_folder(args.model)
    if args.eval:
        card["evaluation"] = json.loads(Path(args.eval).read_text())
    card["summary"] = summary(card)
    if args.commands:
        card["commands"] = [line for line in Path(args.commands).read_text().splitlines() if line.strip()]
    card.setdefault("vq_heads", net.config.vq_heads)
    card.setdefault("vq_codes", net.config.vq_codes)
    if args.fp16:
        net = net.half()
        card["weights_dtype"] = "float16"
    else:
        card["weights_dtype"] = "float32"
    out = Path(args.out)
    save_model_folder(net, Tokenizer.from_file(Path(args.model) / "tokenizer.json"), out, card)
    if args.fp16:  # save_model_folder stores float32; re-store the tensors as float16
        from safetensors.torch import load_file, save_file

        weights = load_file(str(out / "model.safetensors"))
        save_file({k: v.to(torch.float16) for k, v in weights.items()}, str(out / "model.safetensors"))
    size_mb = sum(f.stat().st_size for f in out.iterdir()) / 2**20
    if size_mb > args.max_mb:
        raise SystemExit(f"{out} is {size_mb:.1f} MB, over the {args.max_mb} MB limit (try --fp16)")
    load_model(out, device="cpu")  # fails loudly if the folder does not load
    print(f"{out}: {size_mb:.1f} MB")
    if getattr(args, "install", None):
        target = install(out, args.install)
        load_model(args.install, device="cpu")  # found by name
        print(f"installed as {args.install!r} in {target}")
    return out


def install(folder: Path, name: str) -> Path:
    """Copy a model folder into the user model folder (inference/paths.py) as `name`.

    A model already installed under that name is replaced, and never half-way: the copy is made
    beside it and renamed into place."""
    from inference import paths

    target = paths.installed_model(name)
    if target.resolve() == Path(folder).resolve():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp, old = target.parent / f".{name}.installing", target.parent / f".{name}.replaced"
    for leftover in (tmp, old):
        shutil.rmtree(leftover, ignore_errors=True)
    shutil.copytree(folder, tmp)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target
