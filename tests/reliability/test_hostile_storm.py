"""The hostile storm with the server's defaults (float32, the default memory budget, a fresh
snapshot cache): 300 unwelcome messages around a dozen opens of long documents that fit the
budget and are built, then a hover on a small Markdown document. The hover is answered within
2 s (its scores when it is in sync, a message saying its hints are paused when the storm's first
message put it out of sync), the log holds no traceback, and the server is idle within 20 s.
The long documents are shorter than by hand (hostile_storm.py runs 20,000 words) so that the
check stays fast on the small model."""

from __future__ import annotations

import pytest

from .hostile_storm import hostile_storm, long_texts
from .rawclient import RawClient

WORDS = 3_000


@pytest.mark.parametrize("in_sync", [False, True], ids=["paused", "in-sync"])
def test_a_hover_after_the_storm_is_answered_at_once_and_the_server_goes_idle(
    reliability_model_dir, data_dir, tmp_path, in_sync
):
    c = RawClient(env={"VQ_LSP_CACHE_DIR": str(tmp_path / "cache")})
    try:
        c.initialize({"modelPath": str(reliability_model_dir)})
        res = hostile_storm(c, long_texts(WORDS, data_dir), small_in_sync=in_sync)
        assert res.opens == 12 and not res.problems(), res.problems()
        print(
            f"\nhover after the storm {res.hover_seconds * 1000:.0f} ms; idle {res.idle_after_s:.1f} s after it "
            f"({res.cpu_after_storm:.2f} CPU-s); {res.log_lines} log lines"
        )
        assert c.shutdown_and_exit() == 0
    finally:
        c.kill()
