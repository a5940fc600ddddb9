"""A storm of hostile messages with a dozen opens of documents too big for the memory budget:
each is refused once, a hover on a small document is answered right after, and the server is
idle soon after."""

from __future__ import annotations

import inference

from .big_opens import big_document, big_open_storm
from .rawclient import RawClient

BUDGET_MB = 32  # a small budget: the 20,000-token document's state alone is over it in either precision


def test_big_opens_do_not_hold_a_small_document_hostage(reliability_model_dir, data_dir):
    tok = inference.Tokenizer.from_file(reliability_model_dir / "tokenizer.json")
    big, n = big_document(data_dir, tok, 20_000)
    model = inference.load_model(reliability_model_dir, device="cpu", dtype="float32")  # the server's default
    assert inference.estimate_state_bytes(model, n) > BUDGET_MB * 2**20  # the premise: each open is refused
    small = "A short, happy note about a lovely film.\n"
    c = RawClient()
    try:
        c.initialize({"modelPath": str(reliability_model_dir), "memoryBudgetMb": BUDGET_MB})
        res = big_open_storm(c, small, big, n)
        assert res.refused_messages == 12 and len(res.hover_seconds) == 5
        print(
            f"\nhover after the storm: p50 {res.hover_p50 * 1000:.0f} ms, max {max(res.hover_seconds) * 1000:.0f} ms; "
            f"server CPU {res.idle_cpu_seconds:.2f} s in {res.idle_window_s:.0f} s after it"
        )
        assert c.shutdown_and_exit() == 0
    finally:
        c.kill()
