"""Faults: a damaged model folder, the engine or the hints raising mid-update, a failing
request, the client dying mid-message or vanishing, shutdown and exit with work pending.
Each gets a clear message, leaves no corrupted state, and ends in recovery or a clean exit."""

from __future__ import annotations

import pytest

import inference

from . import faults
from .scenarios import chapter_documents


@pytest.fixture(scope="module")
def long_docs(data_dir, reliability_model_dir) -> list[str]:
    tok = inference.Tokenizer.from_file(reliability_model_dir / "tokenizer.json")
    return chapter_documents(data_dir, tok, 4, 2000)


def test_damaged_model_folders_then_recovery(reliability_model_dir, tmp_path):
    assert faults.bad_model_folders(reliability_model_dir, tmp_path) == 3


def test_engine_fault_in_the_middle_of_an_update(reliability_model_dir):
    assert faults.engine_fault_mid_update(reliability_model_dir) == 1


def test_build_diagnostics_and_request_faults(reliability_model_dir):
    assert faults.handler_faults(reliability_model_dir) == 3


def test_a_failed_settle_is_reported_and_rebuilt(reliability_model_dir):
    assert faults.settle_fault(reliability_model_dir) == 1


def test_a_repeating_fault_does_not_loop(reliability_model_dir):
    assert faults.repeating_fault(reliability_model_dir) == 1


def test_client_dies_mid_message_or_vanishes(reliability_model_dir, long_docs):
    assert faults.client_dies(reliability_model_dir, long_docs) == 3


def test_shutdown_and_exit_with_work_pending(reliability_model_dir, long_docs):
    assert faults.shutdown_and_exit_with_work_pending(reliability_model_dir, long_docs) == 2
