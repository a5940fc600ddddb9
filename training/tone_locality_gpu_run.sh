#!/usr/bin/env bash
# Fine-tune the whole bundled model for tone with the locality term on, on one CUDA GPU, for a fixed
# wall-clock budget: the recipe a GPU should try next for a model both accurate and local (the
# distillation alone made codes local but lost the tone; training/README.md, "Which knob"). Runs from
# a pack made by training/make_tone_locality_pack.sh (which copies this script into it as run.sh), in
# a checkout of the repository:
#
#   bash PACK/run.sh OUT [more vq-train finetune flags]      # e.g. bash .tonepack/run.sh "$OUT"
#   MAX_SECONDS=20 bash PACK/run.sh OUT --device cpu --batch 2 --seq 128 --limit 200 --neutral 40 --threads 1
#                                                            # a dry run on a CPU
#
# The settings are those of "W" in benchmarks/README.md ("Locality against accuracy": the whole model
# fine-tuned with the writing-style variants, the neutral paragraphs and the locality term), from the
# bundled model, on every training review but the 1,000 held out, with the margin the GPU locality
# study chose, at the locality and language-model weights that runs on one CPU core chose
# (benchmarks/README.md, "W-CPU": locality 4 kept more tone than 8, LM weight 1 kept the language
# model that 0.2 lost). The wheels are unpacked (not installed) into a folder on PYTHONPATH. The run
# itself stays on the machine (RUN, with its checkpoint: re-running with the same RUN resumes); OUT
# gets what comes back: the model as bfloat16 parts under 16 MiB (`python -m training.bf16_parts join
# OUT/parts --out MODEL` makes the folder again), log.jsonl, report.json (steps, throughput, held-out
# accuracy) and run.log. The LR schedule follows STEPS; the budget ends the run after the step that
# spends it. After it, on a CPU: `vq-train calibrate --centre-neutral 1000`, `evaluate` and
# `benchmarks.code_flips` with the bundled model's flags, as the same section does.
set -euo pipefail
PACK="$(cd "$(dirname "$0")" && pwd)"
REPO="${REPO:-$(cd "$PACK/.." && pwd)}"
OUT="${1:?usage: run.sh OUT [more vq-train finetune flags]}"
shift
MAX_SECONDS="${MAX_SECONDS:-300}"
STEPS="${STEPS:-3000}"
LOCALITY="${LOCALITY:-4}"
MARGIN="${MARGIN:-0.1}"
W_LM="${W_LM:-1}"
RUN="${RUN:-$REPO/runs/tone_locality_gpu}"
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
SITE="${SITE:-$(mktemp -d)}"
for f in data/imdb/imdb_train.jsonl.gz data/revisions/wiki_versions.jsonl.gz data/gutenberg/gutenberg_subset.jsonl.gz; do
  [ -f "$PACK/$f" ] || { echo "run.sh: missing $PACK/$f (make the pack with training/make_tone_locality_pack.sh)" >&2; exit 2; }
done
[ -f "$REPO/inference/default_model/model.safetensors" ] || { echo "run.sh: no checkout at $REPO (set REPO)" >&2; exit 2; }
mkdir -p "$OUT"
# (where they import already, as on a development machine's dry run, the wheels are not needed)
if ! "$PYTHON" -c "import markdown_it, mdit_py_plugins, msgpack" 2>/dev/null && compgen -G "$PACK/wheels/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --target "$SITE" "$PACK"/wheels/*.whl
fi
cd "$REPO"
export PYTHONPATH="$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}"
DEVICE=(--device cuda)  # unless the extra flags name one
for flag in "$@"; do case "$flag" in --device | --device=*) DEVICE=() ;; esac; done
{
  nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null || echo "no nvidia-smi"
  "$PYTHON" -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
  set -x
  "$PYTHON" -m training.cli finetune --data "$PACK/data" --model inference/default_model --out "$RUN" --scope all \
    --seq 512 --holdout 1000 --limit 24000 \
    --augment original=2,lowercase=1.5,respaced=1,lower_respaced=1.5,sentence=1.5,truncated=1,after_context=1.5 \
    --neutral 3000 --neutral-share 0.25 --batch 16 --lr 3e-5 --w-token 0 --head-lr-mult 10 --warmup 50 \
    --locality "$LOCALITY" --margin "$MARGIN" --w-lm "$W_LM" --edit-batch 2 --dead-threshold 0 \
    --steps "$STEPS" --max-seconds "$MAX_SECONDS" --ckpt-every 500 --log-every 25 "${DEVICE[@]}" --resume --quiet "$@"
  { set +x; } 2>/dev/null
  "$PYTHON" -m training.gpu_run_report "$RUN" --stage finetune --json "$OUT/report.json"
  "$PYTHON" -m training.bf16_parts split "$RUN/model" --out "$OUT/parts"
  cp "$RUN/log.jsonl" "$OUT/"
} 2>&1 | tee "$OUT/run.log"
