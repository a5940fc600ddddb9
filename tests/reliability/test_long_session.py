"""An editor left open all day: 5,000 incremental edits into one document through the real
server (a real revision history, with random typing between its revisions), each its own
didChange. Every few hundred edits and at the end the state is checked against a full pass:
codes equal, float drift at rounding level, the server's text the editor's."""

from __future__ import annotations

import pytest
import pytest_lsp

from tests.server.lsp_helpers import CONFIG, initialize

from .scenarios import CHECK_EVERY, DRIFT_TOLERANCE, LONG_DOC, LONG_EDITS, long_session, revision_history

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


@pytest_lsp.fixture(config=CONFIG, params=["float32", "float64"])
async def client(request, lsp_client: pytest_lsp.LanguageClient, reliability_model_dir):
    """The serving precision (the default) and the verification one."""
    await initialize(
        lsp_client, "visual-studio-code", {"modelPath": str(reliability_model_dir), "precision": request.param}
    )
    yield
    await lsp_client.shutdown_session()


async def test_five_thousand_edits_stay_exact(client, data_dir, request):
    precision = request.node.callspec.params["client"]
    revisions = revision_history(data_dir, LONG_DOC)
    res = await long_session(
        client, revisions, edits=LONG_EDITS, check_every=CHECK_EVERY, tolerance=DRIFT_TOLERANCE[precision]
    )
    assert res.edits >= 5000 and res.revisions == len(revisions) - 1
    assert len(res.checks) >= LONG_EDITS // CHECK_EVERY and all(c.codes_equal for c in res.checks)
    assert res.max_drift <= DRIFT_TOLERANCE[precision]
    assert res.engine_updates >= 0.9 * res.edits - 400  # edits are engine updates, not one big batch
    print(
        f"\n{precision}: {res.edits} edits ({res.revisions} revisions + random typing), "
        f"{res.engine_updates} engine updates, "
        f"{len(res.checks)} drift checks, max drift {res.max_drift:.2e}, final {res.final_tokens} tokens, "
        f"{res.seconds:.0f} s"
    )
