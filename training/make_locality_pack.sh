#!/usr/bin/env bash
# Make the pack that training/locality_gpu_run.sh runs from on a GPU machine that has the repository
# but neither the data folder nor the GPU-trained models: the dense teacher's config and weights
# ($GPU_MODELS/teacher; its tokenizer is the bundled one), the training ids (`vq-train tokens`, train
# split only, xz-compressed uint16) and run.sh: 28.6 MiB with the default 7M tokens, which with the
# working tree (about 31 MiB) fits one run's 64 MiB payload (10M tokens would not).
#
#   VQ_LSP_DATA=... GPU_MODELS=... bash training/make_locality_pack.sh [PACK]    # default PACK: .gpupack
set -euo pipefail
cd "$(dirname "$0")/.."
: "${VQ_LSP_DATA:?set VQ_LSP_DATA to the data folder}"
: "${GPU_MODELS:?set GPU_MODELS to the GPU-trained models (teacher/ is used)}"
PACK="${1:-.gpupack}"
TOKENS="${TOKENS:-7000000}"
mkdir -p "$PACK/teacher"
install -m 644 "$GPU_MODELS/teacher/config.json" "$GPU_MODELS/teacher/model.safetensors" "$PACK/teacher/"
cmp -s "$GPU_MODELS/teacher/tokenizer.json" inference/default_model/tokenizer.json \
  || { echo "the teacher's tokenizer is not the bundled one: run.sh would read the wrong ids" >&2; exit 1; }
if [ ! -f "$PACK/tokens_train.npy.xz" ]; then
  OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 python -m training.cli tokens --tokenizer inference/default_model \
    --tokens "$TOKENS" --seed 0 --threads 1 --out "$PACK"
fi
cp training/locality_gpu_run.sh "$PACK/run.sh"
du -sb "$PACK" | awk '{printf "%s: %.1f MiB\n", $2, $1 / 1048576}'
