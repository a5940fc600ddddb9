#!/usr/bin/env bash
# Continue distilling the bundled model's trunk with a stronger locality term, on one CUDA GPU, for a
# fixed wall-clock budget. Runs from a pack made by training/make_locality_pack.sh (which copies this
# script into it as run.sh), in a checkout of the repository:
#
#   bash PACK/run.sh OUT [more vq-train distill flags]       # e.g. bash .gpupack/run.sh runs/local_gpu
#   MAX_SECONDS=20 bash PACK/run.sh OUT --device cpu --batch 1 --seq 256 --threads 1   # a dry run on a CPU
#
# The student starts from inference/default_model (order-only: its position tables stay frozen; the
# trunk up to the last quantiser is the GPU-trained one, identical to `vq-train order-only` of
# $GPU_MODELS/finetuned) and learns from the dense GPU-trained teacher (PACK/teacher) on the packed
# training ids (PACK/tokens_train.npy.xz: `vq-train tokens`, the train split only). Needs Python with
# torch, safetensors, tokenizers, numpy and tqdm; no data folder, no network, none of the server's
# dependencies. Writes OUT/checkpoint.pt (every CKPT_EVERY steps and where it stops), OUT/log.jsonl
# and OUT/model (the distilled trunk, model-folder format, its card.json with the command's settings
# and the measured throughput); prints steps/s and tokens/s. Re-running with the same OUT resumes.
# The budget ends the run after the step that spends it; the LR schedule follows STEPS, so STEPS
# should be about what the budget allows (the GPU recipe's distillation ran 1,500 steps in 175 s on one H100
# at this batch and length). After it, on a CPU: the tone recipe's tail (vq-train finetune
# --scope post-vq --tail-from runs/order/base ...), calibrate, evaluate, as benchmarks/README.md
# "Locality against accuracy" does on a CPU.
set -euo pipefail
PACK="$(cd "$(dirname "$0")" && pwd)"
REPO="${REPO:-$(cd "$PACK/.." && pwd)}"
OUT="${1:?usage: run.sh OUT [more vq-train distill flags]}"
shift
MAX_SECONDS="${MAX_SECONDS:-240}"
STEPS="${STEPS:-2000}"
LOCALITY="${LOCALITY:-8}"
DEAD_THRESHOLD="${DEAD_THRESHOLD:-0}"  # continuing a trained model: its unused codes are not re-seeded
LR="${LR:-1e-4}"
CKPT_EVERY="${CKPT_EVERY:-250}"
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
for f in teacher/config.json teacher/model.safetensors tokens_train.npy.xz; do
  [ -f "$PACK/$f" ] || { echo "run.sh: missing $PACK/$f (make the pack with training/make_locality_pack.sh)" >&2; exit 2; }
done
[ -f "$REPO/inference/default_model/model.safetensors" ] || { echo "run.sh: no checkout at $REPO (set REPO)" >&2; exit 2; }
cd "$REPO"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
DEVICE=(--device cuda)  # unless the extra flags name one (the type check refuses cuda where there is none)
for flag in "$@"; do case "$flag" in --device | --device=*) DEVICE=() ;; esac; done
set -x
"$PYTHON" -m training.cli distill --teacher "$PACK/teacher" --tokenizer inference/default_model/tokenizer.json \
  --tokens-file "$PACK/tokens_train.npy.xz" --init inference/default_model --out "$OUT" \
  --locality "$LOCALITY" --dead-threshold "$DEAD_THRESHOLD" --edit-batch 2 --batch 8 --seq 2048 --vq-heads 2 --scale 0.0009765625 --window 2048 \
  --lr "$LR" --warmup 50 --steps "$STEPS" --max-seconds "$MAX_SECONDS" --ckpt-every "$CKPT_EVERY" --log-every 25 \
  "${DEVICE[@]}" --resume --quiet "$@"
{ set +x; } 2>/dev/null
"$PYTHON" -m training.gpu_run_report "$OUT"
