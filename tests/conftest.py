"""Shared fixtures: the data the tests read and small models the tests build themselves.

Tests read small real excerpts of the data folder committed under tests/data (its README lists them and
their licences), so the suite runs on a fresh clone. The few tests that need the full folder take the
``full_data_dir`` fixture: they run when ``VQ_LSP_DATA`` names it (CI sets it) and are otherwise skipped,
counted in the summary at the end of the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import inference

# Tests run many tiny tensor ops: one thread avoids OpenMP spin-waiting when the cores are busy.
torch.set_num_threads(1)

FIXTURES = Path(__file__).resolve().parent / "data"
NO_FULL_DATA = "needs the full data folder: set VQ_LSP_DATA"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The committed excerpts, in the data folder's layout and formats."""
    return FIXTURES


@pytest.fixture(scope="session")
def full_data_dir() -> Path:
    """The full data folder from ``VQ_LSP_DATA``; the test is skipped when it is not set."""
    folder = os.environ.get("VQ_LSP_DATA")
    if not folder:
        pytest.skip(NO_FULL_DATA)
    if not Path(folder).is_dir():
        pytest.fail(f"VQ_LSP_DATA={folder} is not a folder")
    return Path(folder)


# The slow tier: the tests left out of `pytest -m "not slow"`, the fast tier of the README (CI runs both).
# Each entry is a test file or a test (any parametrization) that took 8 s or more on one busy CPU core,
# or whose module-wide server start did; what stays in the fast tier still drives the real server
# end to end, checks exactness along edit sequences, and runs every command line.
SLOW = (
    "tests/reliability/test_big_opens.py",
    "tests/reliability/test_faults.py",
    "tests/reliability/test_fuzz.py",
    "tests/reliability/test_hostile_storm.py",
    "tests/reliability/test_long_session.py",
    "tests/reliability/test_memory.py",
    "tests/reliability/test_storms.py",
    "tests/editors/test_nvim.py",
    "tests/editors/test_nvim_dictionary.py",
    "tests/batch/test_ray_batch.py",
    "tests/server/test_requests_first.py",
    "tests/server/test_fairness.py",
    "tests/documents/test_budget_use.py",
    "tests/server/test_bad_model.py",
    "tests/server/test_replay.py",
    "tests/server/test_paragraph_context.py",
    "tests/engine/test_replay.py",
    "tests/engine/test_exactness.py::test_random_edit_sequences_stay_exact",
    "tests/engine/test_exactness.py::test_windows_split_and_rebuild_stay_exact",
    "tests/engine/test_exactness.py::test_small_pool_forces_full_respread_and_stays_exact",
    "tests/engine/test_exactness.py::test_fixed_long_sequence_with_storms_relabels_and_stays_exact",
    "tests/engine/test_model_folders.py::test_wrong_shaped_or_missing_tensor_is_named",
    "tests/hints/test_reuse.py::test_random_edits_publish_what_a_fresh_computation_publishes",
    "tests/batch/test_score.py::test_runs_as_a_program",
    "tests/batch/test_score_hints.py",
    "tests/server/test_snapshots_e2e.py",
    "tests/training/test_pretrained_teacher.py",
    "tests/training/test_smollm2_slot.py",
    "tests/training/test_tone_locality_pack.py::test_the_pack_fine_tunes_from_its_own_data_and_sends_the_model_back",
    "tests/training/test_reproduce_script.py",
    "tests/training/test_context_scoring.py",
    "tests/training/test_module_structure.py",
    "tests/training/test_step_loop.py::test_full_run_saves_logs_and_follows_the_schedule",
    "tests/typing/test_replay_ci.py",
    "tests/typing/test_full_recompute.py",
    "tests/test_dependencies.py",
    "tests/test_dependencies_used.py",
    "tests/test_gpu_session_benchmark.py::test_the_gpu_pack_runs_the_benchmark_from_its_own_data",
    "tests/batch/test_git_text.py",
    "tests/engine/test_paragraph_context.py::test_random_edits_with_paragraph_breaks_keep_paragraph_windows_and_exact_codes",
    "tests/server/test_settings.py::test_model_from_the_command_line",
)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if any(item.nodeid == s or item.nodeid.startswith((s + "::", s + "[")) for s in SLOW):
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter) -> None:
    """Say how many tests did not run for want of the full data folder, so a green run says what it left out."""
    skipped = terminalreporter.stats.get("skipped", [])
    missing = sum(1 for r in skipped if isinstance(r.longrepr, tuple) and NO_FULL_DATA in str(r.longrepr[2]))
    if missing:
        terminalreporter.write_line(
            f"{missing} test(s) not run for want of the full data folder: set VQ_LSP_DATA (CI does)", yellow=True
        )


@pytest.fixture(scope="session")
def gpt2_tokenizer(data_dir):
    folder = data_dir / "gpt2_tokenizer"
    return inference.Tokenizer.from_gpt2_files(folder / "vocab.json", folder / "merges.txt")


@pytest.fixture(scope="session")
def gpt2(gpt2_tokenizer) -> inference.Tokenizer:
    """The GPT-2 tokenizer under the short name the server and documents tests use."""
    return gpt2_tokenizer


@pytest.fixture(scope="session")
def model_dir(tiny_model_dir) -> Path:
    """The shared tiny random VQ model folder (GPT-2 tokenizer, 256-token windows) the server loads."""
    return tiny_model_dir


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, gpt2_tokenizer) -> Path:
    """A small random VQ model folder with the GPT-2 tokenizer (no trained model needed)."""
    from tests.engine.helpers import tiny_model

    model = tiny_model(11, tokenizer=gpt2_tokenizer, vocab_size=50257, window_tokens=256, position_pool=25600)
    return inference.save_model_folder(
        model.net, gpt2_tokenizer, tmp_path_factory.mktemp("model") / "tiny", {"note": "random weights, for tests"}
    )


REPLAY_DOC = "src/ch12-02-reading-a-file.md"  # a Rust book chapter with 29 consecutive revisions


@pytest.fixture(scope="session")
def rust_book_revisions(data_dir) -> list[str]:
    """Texts of REPLAY_DOC's consecutive revisions, oldest first (real edit history)."""
    import gzip
    import json

    with gzip.open(data_dir / "revisions" / "rust_book_chapters.jsonl.gz", "rt") as f:
        for line in f:
            row = json.loads(line)
            if row["doc"] == REPLAY_DOC:
                return [r["text"] for r in row["revisions"]]
    pytest.fail(f"{REPLAY_DOC} not found in the revisions data")
