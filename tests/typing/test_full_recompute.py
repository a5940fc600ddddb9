"""The fullRecompute setting (documents/updates.py): every update rebuilds the document's state from scratch
over the new tokens, so that benchmarks compare the engine with a dense pass on the same server.
Its result must be exactly a fresh document over the same tokens, and it counts as an update."""

from __future__ import annotations

import pytest

import inference
from tests.documents.server_path import ServerPath
from vq_lsp.documents import requests
from vq_lsp.documents.events import Edited, Opened
from vq_lsp.documents.textsync import Change
from vq_lsp.settings import Settings, parse


@pytest.fixture(scope="module")
def servers(tiny_model_dir):
    out = {}
    for full in (False, True):  # the window context: one window, so an edit's dense cost is the document's
        out[full] = ServerPath.with_model(tiny_model_dir, context="window", full_recompute=full)
    yield out
    for path in out.values():
        path.close()


@pytest.fixture(scope="module")
def both(servers):
    return {full: path.docs for full, path in servers.items()}


def type_into(path: ServerPath, uri: str, text: str, typed: str) -> str:
    """Open, then type one character at a time, each keystroke down the server's own path."""
    path.process(uri, [Opened(1, "plaintext", text)])
    for i, ch in enumerate(typed):
        line = text.count("\n")
        col = len(text) - (text.rfind("\n") + 1)
        path.process(uri, [Edited(i + 2, [Change(ch, (line, col, line, col))])])
        text += ch
    return text


def test_setting_parses_from_camel_case():
    s, warnings = parse({"vqLsp": {"fullRecompute": True}})
    assert s.full_recompute and not warnings and not Settings().full_recompute
    assert parse({"fullRecompute": "yes"})[1]  # not a boolean: a warning, and the default


def test_full_mode_rebuilds_every_update_exactly(both, servers, gpt2_tokenizer):
    text = type_into(servers[True], "mem://full", "A calm\n\nstart.", " Then it rained")
    st = both[True].states["mem://full"]
    assert st.updates == len(" Then it rained") and st.rebuilds == 0
    cost = st.last_cost
    assert cost["incremental_macs"] == cost["dense_macs"] == st.doc.dense_macs() > 0
    assert st.doc.token_ids == gpt2_tokenizer.encode(text)
    fresh = inference.IncrementalDocument(both[True].model, gpt2_tokenizer.encode(text))
    assert st.doc.positions == fresh.positions  # a dense pass from scratch: evenly spread positions
    assert st.doc.scores == pytest.approx(fresh.scores, abs=1e-12)
    assert requests.verify(both[True], "mem://full")["codesEqual"]


def test_incremental_mode_is_cheaper_on_the_same_edits(both, servers):
    type_into(servers[False], "mem://inc", "A calm\n\nstart.", " Then it rained")
    type_into(servers[True], "mem://full2", "A calm\n\nstart.", " Then it rained")
    inc, full = both[False].states["mem://inc"], both[True].states["mem://full2"]
    assert inc.doc.token_ids == full.doc.token_ids and inc.updates == full.updates
    assert inc.last_cost["incremental_macs"] < inc.last_cost["dense_macs"] == full.last_cost["incremental_macs"]
    before = full.doc
    both[True].process("mem://full2", [Edited(99, [Change("!", (2, 0, 2, 0))])])
    assert full.doc is not before  # a new state, not the old one patched
