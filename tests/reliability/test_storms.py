"""Edit storms: bursts of keystrokes far faster than the engine. Requests sent mid-storm are
answered mid-storm, work is coalesced, diagnostics go out for the newest version only, and
the state after each storm is exact."""

from __future__ import annotations

import pytest
import pytest_lsp

from tests.server.lsp_helpers import CONFIG, initialize

from .scenarios import LONG_DOC, STORMS, edit_storm, revision_history

pytestmark = pytest.mark.asyncio


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: pytest_lsp.LanguageClient, reliability_model_dir):
    await initialize(lsp_client, "neovim", {"modelPath": str(reliability_model_dir)})
    yield
    await lsp_client.shutdown_session()


async def test_storms_are_coalesced_and_requests_answered_mid_storm(client, data_dir):
    text = revision_history(data_dir, LONG_DOC)[-1]
    res = await edit_storm(client, text, storms=STORMS)
    assert res.storms == STORMS and res.changes >= 300 * STORMS
    assert res.engine_updates < res.changes / 4 and res.publishes <= res.engine_updates
    print(
        f"\n{res.storms} storms, {res.changes} changes -> {res.engine_updates} engine updates, "
        f"{res.publishes} publishes; mid-storm requests answered in max {max(res.request_seconds) * 1000:.0f} ms"
    )
