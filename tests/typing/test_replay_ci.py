"""Live typing in CI: part of one real typing session (dev file) replayed, accelerated, into the
real `vq-lsp` over stdio by the benchmark's own client (benchmarks/typing_replay.py). Diagnostics
must arrive for the final version and the final state must verify against a full pass.
A shorter replay with the fullRecompute setting checks that the setting reaches the server."""

from __future__ import annotations

import gzip
import json

import pytest

import inference
from benchmarks.typing_replay import Server, prepare, replay, server_command

pytestmark = pytest.mark.asyncio

SESSION = 0  # the first session of the dev file


@pytest.fixture(scope="module")
def session(data_dir) -> dict:
    with gzip.open(data_dir / "typing" / "coauthor_sessions.jsonl.gz", "rt") as f:
        for i, line in enumerate(f):
            if i == SESSION:
                return json.loads(line)


async def type_session(rep, model: str | None, options: dict, speed: float):
    tokenizer = inference.load_model(model, device="cpu").tokenizer
    server = Server()
    uri = "file:///replay/ci.txt"
    try:
        await server.start(server_command(model, 1), {"threads": 1, **options}, timeout=60)
        result = await replay(server, rep, uri, speed, "ci", len(tokenizer.encode(rep.final_text)), timeout=60)
    finally:
        if server.proc is not None:
            await server.stop()
    return server, uri, result


async def test_replay_part_of_a_real_session(session):
    rep = prepare(session, max_events=300, start="random", pause_cap=0.5, seed=0)
    assert len(rep.keystrokes) >= 250 and rep.first_event > 0  # opened mid-session: a longer document
    server, uri, r = await type_session(rep, None, {}, speed=8.0)  # the bundled model
    final = len(rep.keystrokes) + 1
    versions = [v for _, v in server.published[uri] if v is not None]
    assert versions[-1] == final and versions == sorted(versions)  # the final version's hints, never out of order
    assert r.verified, r.verify  # codes equal a full pass, tokens match the expected text, nothing rebuilt
    assert r.verify["version"] == final and r.verify["maxAbsDiff"] < 1e-4  # float32, the server's default
    assert r.rebuilds == 0 and 0 < r.updates <= r.keystrokes
    assert len(r.latency_ms) == r.keystrokes and min(r.latency_ms) > 0 and r.cpu_seconds > 0
    assert r.last_cost["incremental_macs"] < r.last_cost["dense_macs"]
    # hints published mid-burst (moved through the edits still waiting) cover the right characters
    assert r.checked_ranges > 0 and r.wrong_ranges == 0
    assert len(r.staleness_ms) == r.keystrokes
    assert not [m for t, m in server.messages if t <= 2], server.messages  # no errors or warnings shown


async def test_full_recompute_setting_reaches_the_server(session, tiny_model_dir):
    rep = prepare(session, max_events=60, start="first", pause_cap=0.2, seed=0)
    server, uri, r = await type_session(rep, str(tiny_model_dir), {"fullRecompute": True}, speed=4.0)
    assert r.verified and r.updates > 0 and server.shown[uri] == len(rep.keystrokes) + 1
    assert r.last_cost["incremental_macs"] == r.last_cost["dense_macs"]  # every update a dense pass
