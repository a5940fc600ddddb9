#!/usr/bin/env bash
# Distil a student of SmolLM2-135M on one CUDA GPU within one short slot, from a pack that reached
# the machine in parts (training/make_smollm2_pack.sh), and leave the trunk as bfloat16 parts
# under 16 MiB that a remote machine can return:
#
#   bash training/smollm2_gpu_run.sh PACK RUN RESULT [more vq-train distill flags]
#   TRAIN_SECONDS=450 bash training/smollm2_gpu_run.sh runs/smollm2_pack runs/smollm2_gpu "$OUT"
#
# 1. joins PACK's GGUF parts (every part's sha256 and the whole file's checked; a missing or
#    corrupted part is named) and unpacks PACK's gguf wheel into RUN/pylib (no pip, no network);
# 2. `vq-train teacher --pretrained` dequantizes the GGUF once into RUN/teacher (float32);
# 3. distils the student from PACK/tokens_train.npy.xz (`vq-train tokens`, train split only) for
#    TRAIN_SECONDS of wall clock in all: a probe of PROBE steps (inside the warm-up, before VQ)
#    measures steps/s, and the same run resumes scheduled for the steps the rest of the budget
#    allows (training/slot_steps.py), stopped by --max-seconds if it still runs long;
# 4. writes RUN/distill/model (float32), RESULT/trunk-NN-of-MM.safetensors (bfloat16, config,
#    card and tokenizer inside; `python -m training.bf16_parts join` makes a model folder of them),
#    RESULT/log.jsonl and RESULT/summary.json.
#
# The student: d=384, 6 layers, 6 heads, FFN 1,536, 2 VQ heads, window 2,048 (the gpu-smollm2
# recipe's shape), trained to read only the order of its tokens from the first step (--order-only:
# any layout an edit history leaves gives the same codes, and the codes the locality term trains
# are the model's), with the locality term at 4 on 2 edited copies a step (the weight that brought
# the bundled trunk's flips down in the locality study), and soft targets at temperature 1 (at
# distill's default, 2, a fresh student stayed above its tokens' unigram entropy: training/README.md,
# "A second slot, longer"). Re-running with the same RUN resumes.
# Needs Python with torch, transformers, accelerate, safetensors, tokenizers, numpy and tqdm.
# A dry run on a CPU: SHAPE="--d 32 --layers 2 --heads 2 --ffn 64" SEQ=64 BATCH=1 PROBE=4 SKIP=1
#   LOG_EVERY=1 TRAIN_SECONDS=60 bash training/smollm2_gpu_run.sh PACK RUN RESULT --device cpu --window 64
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PACK="$(cd "${1:?usage: smollm2_gpu_run.sh PACK RUN RESULT [more distill flags]}" && pwd)"
RUN="${2:?usage: smollm2_gpu_run.sh PACK RUN RESULT}"
RESULT="${3:?usage: smollm2_gpu_run.sh PACK RUN RESULT}"
shift 3
TRAIN_SECONDS="${TRAIN_SECONDS:-450}"
PROBE="${PROBE:-60}"
SKIP="${SKIP:-20}"
LOG_EVERY="${LOG_EVERY:-10}"
SHAPE="${SHAPE:---d 384 --layers 6 --heads 6 --ffn 1536}"
SEQ="${SEQ:-2048}"
BATCH="${BATCH:-4}"
LOCALITY="${LOCALITY:-4}"
TEMPERATURE="${TEMPERATURE:-1}"  # distill's default, 2, left a fresh student at its unigram entropy
LR="${LR:-1e-3}"
WARMUP="${WARMUP:-100}"
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
[ "$PROBE" -lt "$WARMUP" ] || { echo "PROBE ($PROBE) must end inside the warm-up ($WARMUP steps)" >&2; exit 2; }
for f in "$GGUF.manifest.json" tokens_train.npy.xz; do
  [ -f "$PACK/$f" ] || { echo "smollm2_gpu_run.sh: missing $PACK/$f (training/make_smollm2_pack.sh)" >&2; exit 2; }
done
WHEELS=("$PACK"/gguf-*.whl)
WHEEL="${WHEELS[0]}"
[ -f "$WHEEL" ] || { echo "smollm2_gpu_run.sh: no gguf wheel in $PACK" >&2; exit 2; }
mkdir -p "$RUN" "$RESULT"
RUN="$(cd "$RUN" && pwd)"
cd "$REPO"
export PYTHONPATH="$REPO:$RUN/pylib${PYTHONPATH:+:$PYTHONPATH}"
DEVICE=(--device cuda)  # unless the extra flags name one
for flag in "$@"; do case "$flag" in --device | --device=*) DEVICE=() ;; esac; done
t0=$(date +%s)

[ -f "$RUN/$GGUF" ] || "$PYTHON" -m training.gpu_pack join "$PACK/$GGUF.manifest.json" --out "$RUN/$GGUF"
[ -d "$RUN/pylib/gguf" ] || "$PYTHON" -m zipfile -e "$WHEEL" "$RUN/pylib"
"$PYTHON" -m training.cli teacher --pretrained "$RUN/$GGUF" --out "$RUN/teacher" --quiet
echo "[$(($(date +%s) - t0)) s] teacher ready"

distill() {  # distill FLAGS...: the one run, each call resuming it
  "$PYTHON" -m training.cli distill --teacher "$RUN/teacher/model" --tokens-file "$PACK/tokens_train.npy.xz" \
    --out "$RUN/distill" $SHAPE --vq-heads 2 --window 2048 --scale 0.0009765625 --top-k 64 --seq "$SEQ" \
    --batch "$BATCH" --lr "$LR" --warmup "$WARMUP" --locality "$LOCALITY" --edit-batch 2 --order-only \
    --temperature "$TEMPERATURE" \
    --ckpt-every 200 --log-every "$LOG_EVERY" "${DEVICE[@]}" --resume --quiet "$@"
}

if [ ! -f "$RUN/plan.txt" ]; then
  p0=$(date +%s)
  distill --steps 1000000 --vq-start 1000000 --stop-after "$PROBE" "$@"
  probe_s=$(($(date +%s) - p0))
  loop_s=$((TRAIN_SECONDS - 2 * probe_s))  # the second start costs at most what the whole probe did
  [ "$loop_s" -gt 0 ] || { echo "TRAIN_SECONDS=$TRAIN_SECONDS leaves no time after a ${probe_s} s probe" >&2; exit 2; }
  plan=$("$PYTHON" -m training.slot_steps "$RUN/distill/log.jsonl" --seconds "$loop_s" --probe "$PROBE" --skip "$SKIP")
  echo "$plan $loop_s" >"$RUN/plan.txt"
fi
read -r STEPS VQ_START LOOP_S <"$RUN/plan.txt"
echo "[$(($(date +%s) - t0)) s] distilling: $STEPS steps, VQ from step $VQ_START, at most $LOOP_S s"
distill --steps "$STEPS" --vq-start "$VQ_START" --max-seconds "$LOOP_S" "$@"

"$PYTHON" -m training.bf16_parts split "$RUN/distill/model" --out "$RESULT"
cp "$RUN/distill/log.jsonl" "$RESULT/log.jsonl"
"$PYTHON" -m training.gpu_run_report "$RUN/distill" --json "$RESULT/summary.json"
echo "[$(($(date +%s) - t0)) s] done: $(ls "$RESULT" | tr '\n' ' ')"
