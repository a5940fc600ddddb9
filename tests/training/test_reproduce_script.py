"""The reproduce script's GPU recipe: every stage runs in order, resumable, on CUDA, with options
that ``vq-train``'s own parser accepts (a stand-in ``vq-train`` parses and records each call)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "training" / "reproduce_default_model.sh"

FAKE = """#!{python}
import sys
sys.path.insert(0, {root!r})
from training.cli import build_parser
# exits 2 on an unknown or malformed option ("cuda" is parsed as "cpu": the parser checks the device exists)
build_parser().parse_args(["cpu" if a == "cuda" else a for a in sys.argv[1:]])
with open({log!r}, "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
"""


def run_script(tmp_path: Path, **env) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    fake = bin_dir / "vq-train"
    fake.write_text(FAKE.format(python=sys.executable, root=str(ROOT), log=str(log)))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    full_env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "VQ_LSP_DATA": str(tmp_path),
        "RUN": str(tmp_path / "run"),
        "EXPORT_TO": str(tmp_path / "export"),
        **env,
    }
    res = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=300)
    calls = [line.split() for line in log.read_text().splitlines()] if log.is_file() else []
    return res, calls


def test_gpu_recipe_runs_every_stage_resumable_on_cuda(tmp_path):
    res, calls = run_script(tmp_path, RECIPE="gpu")
    assert res.returncode == 0, res.stdout + res.stderr
    assert [c[0] for c in calls] == ["teacher", "distill", "order-only", "finetune", "finetune", "evaluate", "export"]
    training = [c for c in calls if c[0] in ("teacher", "distill", "finetune")]
    assert all("--resume" in c and c[c.index("--device") + 1] == "cuda" for c in training)
    finetunes = [c for c in calls if c[0] == "finetune"]
    assert all("after_context" in c[c.index("--augment") + 1] and "post-vq" in c for c in finetunes)
    assert "--dense" in finetunes[1] and "--eval-every" in finetunes[0]
    assert c_value(calls[2], "--out") == c_value(calls[3], "--model")
    evaluate = calls[5]
    assert "--robust-reviews" in evaluate and evaluate[evaluate.index("--test-limit") + 1] == "5000"
    assert (tmp_path / "run" / "tokenizer" / "tokenizer.json").read_bytes() == (
        ROOT / "inference" / "default_model" / "tokenizer.json"
    ).read_bytes()


def test_smollm2_recipe_extracts_the_teacher_then_runs_every_stage_resumable(tmp_path):
    res, calls = run_script(tmp_path, RECIPE="gpu-smollm2")
    assert res.returncode == 0, res.stdout + res.stderr
    assert [c[0] for c in calls] == ["teacher", "distill", "order-only", "finetune", "evaluate", "export"]
    teacher, distill, order_only, finetune, evaluate, export = calls
    assert c_value(order_only, "--out") == c_value(finetune, "--model")
    assert teacher[teacher.index("--pretrained") + 1] == "smollm2"
    assert distill[distill.index("--teacher") + 1] == str(tmp_path / "run" / "teacher" / "model")
    assert all("--resume" in c and "--device" not in c for c in (teacher, distill, finetune))  # device: at run time
    assert float(distill[distill.index("--locality") + 1]) > 0 and "--vq-start" in distill and "--d" in distill
    assert "after_context" in finetune[finetune.index("--augment") + 1] and "post-vq" in finetune
    assert "--robust-reviews" in evaluate and "--dense-model" not in evaluate
    assert export[export.index("--out") + 1] == str(tmp_path / "export")
    assert not (tmp_path / "run" / "tokenizer").exists()  # the student uses the teacher's tokenizer
    res, calls = run_script(tmp_path, RECIPE="gpu-smollm2", DEVICE="cuda")  # appends to the same call log
    again = [c for c in calls[6:] if c[0] in ("teacher", "distill", "finetune")]
    assert res.returncode == 0 and len(again) == 3 and all(c[c.index("--device") + 1] == "cuda" for c in again)


def test_unknown_recipe_is_refused(tmp_path):
    res, calls = run_script(tmp_path, RECIPE="tpu")
    assert res.returncode == 2 and "RECIPE must be cpu or gpu" in res.stderr and calls == []


def test_tone_recipe_fine_tunes_both_twins_then_calibrates_evaluates_and_exports(tmp_path):
    res, calls = run_script(tmp_path, RECIPE="tone", GPU_MODELS=str(tmp_path / "gpu"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert [c[0] for c in calls] == ["order-only", "finetune", "finetune", "calibrate", "evaluate", "export"]
    assert c_value(calls[0], "--out") == c_value(calls[1], "--model")
    calls = calls[1:]
    finetunes = calls[:2]
    assert all("--resume" in c and "post-vq" in c and int(c[c.index("--neutral") + 1]) > 0 for c in finetunes)
    assert all("after_context" in c[c.index("--augment") + 1] for c in finetunes)
    assert "--dense" in finetunes[1] and c_value(finetunes[1], "--model").endswith("gpu/teacher")
    # the order-only model's tail reads reviews twice as long (argparse keeps the last --seq)
    assert [f[len(f) - 1 - f[::-1].index("--seq") + 1] for f in finetunes] == ["1024", "512"]
    calibrated = c_value(calls[2], "--out")
    assert c_value(calls[3], "--model") == calibrated == c_value(calls[4], "--model")
    assert "--dense-model" in calls[3] and "--neutral-paragraphs" in calls[3]


def test_tone_recipe_needs_the_gpu_models(tmp_path):
    res, calls = run_script(tmp_path, RECIPE="tone")
    assert res.returncode != 0 and "GPU_MODELS" in res.stderr and calls == []


def test_local_recipe_distils_averages_two_tails_refits_layer_0_then_one_quiet_tail_evaluates_exports(tmp_path):
    res, calls = run_script(tmp_path, RECIPE="local", GPU_MODELS=str(tmp_path / "gpu"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert [c[0] for c in calls] == [
        "order-only",
        "distill",
        *("finetune", "finetune", "average", "calibrate"),
        "finetune",
        *("finetune", "calibrate"),
        "evaluate",
        "export",
    ]
    order_only, distill, tail_a, tail_b, average, calibrate, refit, tail, recalibrate, evaluate, export = calls
    assert c_value(distill, "--init") == c_value(order_only, "--out")
    assert c_value(distill, "--locality") == "8" and c_value(distill, "--dead-threshold") == "0"
    assert c_value(distill, "--teacher").endswith("gpu/teacher") and "--resume" in distill
    trunk = c_value(distill, "--out") + "/model"
    assert c_value(tail_a, "--model") == trunk == c_value(tail_b, "--model")
    assert [c_value(t, "--neutral-share") for t in (tail_a, tail_b, tail)] == ["0.25", "0.4", "0.55"]
    assert all("post-vq" in t and "--resume" in t and c_value(t, "--seq") == "1024" for t in (tail_a, tail_b, tail))
    assert average[average.index("--models") + 1 : average.index("--models") + 3] == [
        c_value(tail_a, "--out") + "/model",
        c_value(tail_b, "--out") + "/model",
    ]
    assert c_value(calibrate, "--model") == c_value(average, "--out")
    assert c_value(refit, "--model") == c_value(calibrate, "--out")  # the first soup, calibrated
    assert c_value(refit, "--scope") == "all" and c_value(refit, "--refit-codes") == "0=8"
    assert c_value(refit, "--locality") == "4" and "--resume" in refit
    assert c_value(tail, "--model") == c_value(refit, "--out") + "/model"
    assert c_value(recalibrate, "--model") == c_value(tail, "--out") + "/model"
    assert c_value(calibrate, "--centre-neutral") == "1000" == c_value(recalibrate, "--centre-neutral")
    assert c_value(evaluate, "--model") == c_value(recalibrate, "--out") == c_value(export, "--model")
    assert c_value(export, "--eval") == c_value(evaluate, "--out") + "/eval.json"


def test_local_recipe_needs_the_gpu_models(tmp_path):
    res, calls = run_script(tmp_path, RECIPE="local")
    assert res.returncode != 0 and "GPU_MODELS" in res.stderr and calls == []


def c_value(call: list[str], flag: str) -> str:
    return call[call.index(flag) + 1]


def test_smollm2_tail_joins_the_returned_parts_then_tunes_calibrates_evaluates_exports(tmp_path):
    import json

    import torch
    from safetensors.torch import load_file, save_file

    from training.bf16_parts import split_model

    trunk = tmp_path / "returned_trunk"
    trunk.mkdir()
    save_file({"decoder.embed_tokens.weight": torch.randn(512, 256)}, str(trunk / "model.safetensors"))
    (trunk / "config.json").write_text(json.dumps({"hidden_size": 256}))
    split_model(trunk, tmp_path / "parts")
    res, calls = run_script(tmp_path, RECIPE="smollm2-tail", PARTS=str(tmp_path / "parts"))
    assert res.returncode == 0, res.stdout + res.stderr
    joined = load_file(str(tmp_path / "run" / "trunk" / "model.safetensors"))["decoder.embed_tokens.weight"]
    assert joined.dtype == torch.float32 and joined.shape == (512, 256)
    assert [c[0] for c in calls] == ["teacher", "finetune", "calibrate", "evaluate", "export"]
    assert c_value(calls[1], "--model") == str(tmp_path / "run" / "trunk") and "post-vq" in calls[1]
    assert c_value(calls[2], "--model") == c_value(calls[1], "--out") + "/model"
    assert c_value(calls[3], "--model") == c_value(calls[2], "--out") == c_value(calls[4], "--model")
    assert c_value(calls[4], "--out") == str(tmp_path / "export")  # the test's EXPORT_TO; by default $RUN/model


def test_smollm2_tail_needs_the_returned_parts(tmp_path):
    res, calls = run_script(tmp_path, RECIPE="smollm2-tail")
    assert res.returncode != 0 and "PARTS" in res.stderr and calls == []
