"""Documents (states.py) without LSP: merged changes make one engine update, the memory budget
drops least recently used states, a state in doubt is rebuilt, text problems are reported."""

from __future__ import annotations

import pytest

from vq_lsp.settings import Settings
from vq_lsp.states import Documents
from vq_lsp.textsync import Change


@pytest.fixture(scope="module")
def docs(model_dir):
    d = Documents(Settings(model_path=str(model_dir), device="cpu"))
    d.load_model()
    return d


def test_a_burst_of_changes_is_one_engine_update(docs, gpt2):
    uri = "mem://burst"
    out = docs.process_now(uri, [("open", 1, "plaintext", "Good film.")])
    assert out.version == 1 and out.diagnostics is not None
    text, events = "Good film.", []
    for i, ch in enumerate(" It was fun."):
        events.append(("change", i + 2, [Change(ch, (0, len(text), 0, len(text)))]))
        text += ch
    out = docs.process_now(uri, events)
    st = docs.states[uri]
    assert out.version == 13 and st.updates == 1 and st.doc.token_ids == gpt2.encode(text)
    assert all(len(ev[2]) == 1 for ev in events)  # merging never touched the callers' change lists


def test_memory_budget_drops_least_recently_used(docs):
    text = "\n\n".join(["A long paragraph about a film that went on and on and on."] * 30)
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1e7)
    docs.process_now("mem://a", [("open", 1, "plaintext", text)])
    one = docs.states["mem://a"].bytes()
    assert one > 0
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1.5 * one / 2**20)
    docs.process_now("mem://b", [("open", 1, "plaintext", text)])
    assert docs.states["mem://a"].doc is None and docs.states["mem://a"].evictions == 1
    before = docs.states["mem://b"].doc.scores
    docs.scores("mem://a")  # rebuilt on demand; now b is the least recently used
    assert docs.states["mem://b"].doc is None and docs.states["mem://a"].doc is not None
    assert docs.scores("mem://b")["scores"] == pytest.approx(before, abs=1e-12)
    docs.settings = Settings(model_path=docs.settings.model_path)


def test_a_state_in_doubt_is_rebuilt(docs, gpt2):
    uri = "mem://doubt"
    docs.process_now(uri, [("open", 1, "plaintext", "Nice.")])
    st = docs.states[uri]
    st.tracked.ids[0] = 0  # tokens that no longer match the engine's: the next update must notice
    docs.process_now(uri, [("change", 2, [Change(" Yes.", (0, 5, 0, 5))])])
    assert st.rebuilds == 1 and st.doc.token_ids == st.tracked.ids
    res = docs.verify(uri)
    assert res["rebuilt"] and not res["tokensMatchText"]  # the corrupted tokens were caught and rebuilt
    assert docs.verify(uri)["tokensMatchText"] and docs.states[uri].doc.token_ids == gpt2.encode("Nice. Yes.")


def test_text_problems(docs):
    out = docs.process_now("mem://nul", [("open", 1, "plaintext", "ok\x00")])
    assert out.diagnostics == [] and "binary" in out.messages[0].text
    out = docs.process_now("mem://py", [("open", 1, "python", "def f(): pass")])
    assert out.diagnostics == [] and out.messages == []  # not a prose file type: silently no hints
    out = docs.process_now("mem://nope", [("change", 2, [Change("x", (0, 0, 0, 0))])])
    assert "not open" in out.messages[0].text
