"""Fifty open documents of about 2,000 tokens under a memory budget: the engine states the
server reports stay within the budget; its resident memory at rest within a baseline plus the
budget plus a fixed slack, also while evicted states are rebuilt on demand (before documents/heap.py
it reached 880 MiB where 470 were allowed); and its peak within the baseline plus the budget
plus the temporaries of one full pass."""

from __future__ import annotations

import pytest
import pytest_lsp

import inference
from tests.server.lsp_helpers import CONFIG, initialize

from .scenarios import (
    MEMORY_BUDGET_MB,
    MEMORY_DOCS,
    MEMORY_TOKENS,
    REST_SLACK_MB,
    TRANSIENT_MB,
    chapter_documents,
    check_memory,
    many_documents,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: pytest_lsp.LanguageClient, reliability_model_dir):
    # grammar off: the budget bounds document states; Harper's linter is a fixed cost built in the background
    await initialize(lsp_client, "neovim", {"modelPath": str(reliability_model_dir), "diagnostics": {"grammar": False}})
    yield
    await lsp_client.shutdown_session()


async def test_fifty_documents_stay_within_the_budget(client, data_dir, reliability_model_dir):
    tok = inference.Tokenizer.from_file(reliability_model_dir / "tokenizer.json")
    docs = chapter_documents(data_dir, tok, MEMORY_DOCS + 1, MEMORY_TOKENS)
    res = await many_documents(client, docs[1:], MEMORY_BUDGET_MB, tok, warmup=docs[0])
    check_memory(res, REST_SLACK_MB, TRANSIENT_MB)
    assert res.documents == MEMORY_DOCS and res.tokens >= MEMORY_DOCS * MEMORY_TOKENS
    assert res.state_bytes_max <= res.budget_bytes and res.evictions >= 1
    print(
        f"\n50 documents, {res.tokens} tokens: {res.bytes_per_document / 2**20:.1f} MiB per live state, "
        f"{res.bytes_per_token:.0f} B per token, at most {res.live_states_max} live states; RSS baseline "
        f"{res.baseline_rss / 2**20:.0f} MiB, at rest <= {res.rest_rss_max / 2**20:.0f} MiB, peak "
        f"{res.peak_rss / 2**20:.0f} MiB (budget {MEMORY_BUDGET_MB:.0f} MiB); {res.seconds:.0f} s"
    )
