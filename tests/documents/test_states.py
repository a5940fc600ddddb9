"""The document store (documents/) without a client: merged changes make one engine update, the memory budget
drops least recently used states, a state in doubt is rebuilt, text problems are reported."""

from __future__ import annotations

import pytest

import inference
from vq_lsp.documents import requests
from vq_lsp.documents.events import Closed, Edited, Opened, SettingsChanged, Settle
from vq_lsp.documents.memory import MIN_STATE_SHARE
from vq_lsp.documents.store import Documents
from vq_lsp.documents.textsync import Change
from vq_lsp.settings import DiagnosticSettings, Settings


def build(docs: Documents, uri: str) -> None:
    """The build steps the server runs for a document with no state yet, in one go."""
    while (step := docs.builder.build_step(uri))[0] < step[1]:
        pass


def test_a_burst_of_changes_is_one_engine_update(docs, gpt2, path):
    uri = "mem://burst"
    out = path.process(uri, [Opened(1, "plaintext", "Good film.")])
    assert out.version == 1 and out.diagnostics is not None
    text, events = "Good film.", []
    for i, ch in enumerate(" It was fun."):
        events.append(Edited(i + 2, [Change(ch, (0, len(text), 0, len(text)))]))
        text += ch
    out = path.process(uri, events)
    st = docs.states[uri]
    assert out.version == 13 and st.updates == 1 and st.doc.token_ids == gpt2.encode(text)
    assert all(len(ev.changes) == 1 for ev in events)  # merging never touched the callers' change lists


@pytest.mark.parametrize("path_settings", [{"state_layout": "lean"}], ids=["lean"])  # states dropped, not thinned
def test_memory_budget_drops_least_recently_used(docs, path):
    text = "\n\n".join(["A long paragraph about a film that went on and on and on."] * 60)
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1e7)
    path.process("mem://a", [Opened(1, "plaintext", text)])
    one = docs.states["mem://a"].bytes()
    assert one > 0
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1.5 * one / 2**20)
    path.process("mem://b", [Opened(1, "plaintext", text)])
    assert docs.states["mem://a"].doc is None and docs.states["mem://a"].evictions == 1
    before = docs.states["mem://b"].doc.scores
    requests.scores(docs, "mem://a")  # rebuilt on demand; now b is the least recently used
    assert docs.states["mem://b"].doc is None and docs.states["mem://a"].doc is not None
    assert requests.scores(docs, "mem://b")["scores"] == pytest.approx(before, abs=1e-12)
    docs.settings = Settings(model_path=docs.settings.model_path)


def test_the_budget_drops_layer_outputs_before_any_state(docs, path):
    """stateLayout auto (the default): a second document that does not fit beside a full first one
    makes the first lean, not dropped; it keeps its scores, stays exact and stays lean when edited.
    A document whose full state would not fit the budget even alone is built lean from the start."""
    text = "\n\n".join(["A long paragraph about a film that went on and on and on."] * 60)
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1e7)
    path.process("mem://a", [Opened(1, "plaintext", text)])
    a = docs.states["mem://a"]
    one, before = a.bytes(), a.doc.scores
    assert requests.scores(docs, "mem://a")["state_layout"] == "full"
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1.9 * one / 2**20)
    told, observe = [], path.server.heap.observe
    path.server.heap.observe = lambda docs, text=0, states=0: (told.append(states), observe(docs, text, states))
    path.process("mem://b", [Opened(1, "plaintext", text + " The end.")])
    b = docs.states["mem://b"]
    assert a.doc is not None and a.evictions == 0 and a.outputs_dropped == 1 and b.doc.keeps_outputs
    assert a.bytes() < 0.9 * one and a.bytes() + b.bytes() <= 1.9 * one
    assert sum(told) == one - a.bytes()  # the heap trimmer is told what was let go
    report = requests.scores(docs, "mem://a")
    assert report["state_layout"] == "lean" and report["scores"] == before and report["evictions"] == 0
    path.process("mem://a", [Edited(2, [Change(" Fine.", (0, 0, 0, 0))])])
    assert not a.doc.keeps_outputs and a.doc.verify().codes_equal
    for uri in ("mem://a", "mem://b"):
        path.process(uri, [Closed()])
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=0.9 * one / 2**20)
    path.process("mem://c", [Opened(1, "plaintext", text)])
    c = docs.states["mem://c"]
    assert c.problem is None and not c.doc.keeps_outputs and c.outputs_dropped == 0 and c.bytes() < 0.9 * one
    docs.settings = Settings(model_path=docs.settings.model_path)


@pytest.mark.parametrize("path_settings", [{"state_layout": "full"}], ids=["full"])
def test_the_full_layout_keeps_its_outputs_under_the_budget(docs, path):
    """stateLayout full is a choice: the budget drops the least recently used state, never outputs."""
    text = "\n\n".join(["A long paragraph about a film that went on and on and on."] * 60)
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1e7)
    path.process("mem://a", [Opened(1, "plaintext", text)])
    a = docs.states["mem://a"]
    one = a.bytes()
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1.9 * one / 2**20)
    path.process("mem://b", [Opened(1, "plaintext", text + " The end.")])
    assert a.doc is None and a.evictions == 1 and a.outputs_dropped == 0
    assert docs.states["mem://b"].doc.keeps_outputs
    docs.settings = Settings(model_path=docs.settings.model_path)


@pytest.mark.parametrize("path_settings", [{"context": "window", "state_layout": "lean"}], ids=["window"])
def test_a_build_makes_room_for_its_pass_as_well_as_its_state(path, docs):
    """Two states fit the budget, but not two states and the second one's build: the first is
    dropped before the second is built (a build's pass temporaries count, not only states). With
    the window context, where a build's pass spans the whole window (a paragraph's pass is small)."""
    text = "\n\n".join(["A long paragraph about a film that went on and on and on."] * 60)
    docs.settings = Settings(model_path=docs.settings.model_path, context="window", memory_budget_mb=1e7)
    path.process("mem://first", [Opened(1, "plaintext", text)])
    st = docs.states["mem://first"]
    state = st.bytes()
    ids = st.tracked.ids  # the pass's temporaries: what a build takes beyond its state
    build = inference.estimate_build_bytes(docs.model, ids) - inference.estimate_state_bytes(docs.model, ids)
    assert build > 0
    budget = 2 * state + build / 2  # both states fit; the second build's temporaries do not
    docs.settings = Settings(model_path=docs.settings.model_path, context="window", memory_budget_mb=budget / 2**20)
    path.process("mem://second", [Opened(1, "plaintext", text + " More.")])
    assert docs.states["mem://first"].doc is None and docs.states["mem://second"].doc is not None
    budget = 2 * state + 2 * build  # room for both and a build: nothing dropped
    docs.settings = Settings(model_path=docs.settings.model_path, context="window", memory_budget_mb=budget / 2**20)
    path.process("mem://third", [Opened(1, "plaintext", text + " Even more.")])
    assert docs.states["mem://second"].doc is not None and docs.states["mem://third"].doc is not None


@pytest.mark.parametrize("path_settings", [{"state_layout": "lean"}], ids=["lean"])  # states dropped, not thinned
def test_the_servers_working_memory_counts_against_the_budget(docs, path):
    """Two states and a build fit the budget, but not beside the server's working memory (resident
    memory above its baseline that is not a state): the first state is dropped before the second
    build. The working memory never takes the room a state that fits the budget alone needs."""
    import inference
    from vq_lsp.documents.memory import WorkingMemory

    text = "\n\n".join(["A long paragraph about a film that went on and on and on."] * 60)
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1e7)
    path.process("mem://first", [Opened(1, "plaintext", text)])
    st = docs.states["mem://first"]
    state = st.bytes()
    ids = st.tracked.ids
    need = inference.estimate_build_bytes(docs.model, ids)
    budget = state + need + state // 2  # both fit, with half a state to spare
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=budget / 2**20)
    docs.budget.working = WorkingMemory(baseline=100 * 2**20)
    states = sum(s.bytes() for s in docs.states.values())
    assert docs.budget.observe_working_memory(100 * 2**20 + states + state) is True  # a state's worth beside the states
    assert docs.budget.working.bytes == state and docs.budget.report()["working_bytes"] == state
    assert docs.budget.state_budget_bytes() == budget - state
    for uri in [u for u in docs.states if u != "mem://first"]:  # earlier tests' documents: closed
        docs.states.pop(uri)
    docs.process("mem://second", [Opened(1, "plaintext", text + " More.")])  # steps: the server would measure
    build(docs, "mem://second")  # its own working memory before the build, replacing the one set here
    assert docs.states["mem://first"].doc is None and docs.states["mem://second"].doc is not None
    assert docs.budget.working.state_budget(budget, need=budget) == budget  # a state that fits alone is still built
    assert WorkingMemory().observe(10**9, 0, 0) is False and WorkingMemory().state_budget(budget) == budget
    for uri in ("mem://first", "mem://second"):
        docs.states.pop(uri)
    docs.budget.working = WorkingMemory()
    docs.settings = Settings(model_path=docs.settings.model_path)


@pytest.mark.parametrize("path_settings", [{"state_layout": "lean"}], ids=["lean"])  # states dropped, not thinned
def test_the_hints_kept_results_count_against_the_budget(docs, path):
    """A state, a second one's build and the hints' kept results (HintCaches.bytes) do not fit the
    budget together, though the states alone would: the first state is dropped before the second
    build, and the budget reports the hints' bytes it counted."""
    text = "\n\n".join(["A long paragraph about a film that went on and on and on."] * 60)
    other = text.replace("film", "show")
    path.process("mem://first", [Opened(1, "markdown", text)])
    first = docs.states["mem://first"]
    hints = docs.hint_caches.bytes()  # the first document's material, layout and lints
    assert hints > 0
    need = inference.estimate_build_bytes(docs.model, docs.model.tokenizer.encode(other))
    budget = first.bytes() + need + hints / 2  # both states fit the budget, not beside the hints
    assert hints < budget * MIN_STATE_SHARE
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=budget / 2**20)
    path.process("mem://second", [Opened(1, "markdown", other)])
    assert first.doc is None and docs.states["mem://second"].doc is not None
    assert docs.budget.report()["hint_bytes"] > 0


def test_a_state_in_doubt_is_rebuilt(docs, gpt2, path):
    uri = "mem://doubt"
    path.process(uri, [Opened(1, "plaintext", "Nice.")])
    st = docs.states[uri]
    st.tracked.ids[0] = 0  # tokens that no longer match the engine's: the next update must notice
    path.process(uri, [Edited(2, [Change(" Yes.", (0, 5, 0, 5))])])
    assert st.rebuilds == 1 and st.doc.token_ids == st.tracked.ids
    res = requests.verify(docs, uri)
    assert res["rebuilt"] and not res["tokensMatchText"]  # the corrupted tokens were caught and rebuilt
    assert requests.verify(docs, uri)["tokensMatchText"] and docs.states[uri].doc.token_ids == gpt2.encode("Nice. Yes.")


def test_a_state_that_fails_to_settle_is_rebuilt_at_once(docs, path, monkeypatch):
    """Settling an idle document raises: the user is told, and the state in doubt is rebuilt from the
    text in the same step (not left missing until the next edit or request), at rest, with its hints
    chosen from it as settled ones."""
    uri, text = "mem://settle-fault", "Good film.\n\nIt was fun."
    path.process(uri, [Opened(1, "plaintext", text)])
    for version, ch in enumerate(" Truly a gem.", start=2):
        path.process(uri, [Edited(version, [Change(ch, (0, 10 + version - 2, 0, 10 + version - 2))])])
    st = docs.states[uri]
    assert not st.doc.at_rest()  # settling has work to do

    def broken(doc):
        raise RuntimeError("settle fault")

    monkeypatch.setattr(inference.IncrementalDocument, "settle", broken)
    out = path.process(uri, [Settle(version)])
    assert [m.level for m in out.messages] == ["warning"]
    assert "could not settle" in out.messages[0].text and "settle fault" in out.messages[0].text
    assert st.rebuilds == 1 and st.doc is not None and st.doc.at_rest() and st.settled
    assert st.doc.token_ids == st.tracked.ids and st.doc.verify().codes_equal
    assert path.process(uri, [Settle(version)]).messages == []  # settled: not tried again


def test_text_problems(docs, path):
    out = path.process("mem://nul", [Opened(1, "plaintext", "ok\x00")])
    assert out.diagnostics == [] and "binary" in out.messages[0].text
    out = path.process("mem://py", [Opened(1, "python", "def f(): pass")])
    assert out.diagnostics == [] and out.messages == []  # not a prose file type: silently no hints
    out = path.process("mem://nope", [Edited(2, [Change("x", (0, 0, 0, 0))])])
    assert "not open" in out.messages[0].text


def test_build_window_by_window_catches_up_with_edits_made_meanwhile(docs, gpt2):
    uri = "mem://steps"
    text = "\n\n".join(f"Paragraph {i} says the film was fine and the music was loud." for i in range(60))
    out = docs.process(uri, [Opened(1, "plaintext", text)])
    assert out.needs_build and docs.states[uri].doc is None  # process alone builds nothing
    done, total = docs.builder.build_step(uri)
    assert 1 == done < total  # one window per step
    edit = [Change("Truly, ", (0, 0, 0, 0))]
    docs.process(uri, [Edited(2, edit)])  # the text moves on mid-build
    while done < total:
        done, total = docs.builder.build_step(uri)
    st = docs.states[uri]
    assert st.doc.token_ids == gpt2.encode("Truly, " + text) and st.doc.verify().codes_equal
    assert docs.publisher.hints(uri).version == 2


def test_settings_rechoose_hints_without_engine_work(docs, path):
    uri = "mem://lazy"
    path.process(uri, [Opened(1, "plaintext", "A fine film.\n\nA dull one.")])
    st = docs.states[uri]
    st.doc = None  # as if evicted: its material stays
    out = docs.process(uri, [SettingsChanged()])
    assert not out.needs_build  # hints for this version can be re-chosen from the material
    again = docs.publisher.hints(uri)
    assert again.version == 1 and again.diagnostics is not None and st.doc is None
    out = docs.process(uri, [Edited(2, [Change("!", (0, 0, 0, 0))])])
    assert out.needs_build  # an edit needs the state back


def test_a_document_over_the_whole_budget_gets_one_message_and_no_state(docs, path):
    text = "\n\n".join(["A long paragraph about a film that went on and on and on."] * 60)
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1.0)
    try:
        out = path.process("mem://big", [Opened(1, "plaintext", text)])
        assert out.diagnostics == [] and docs.states["mem://big"].doc is None
        (msg,) = out.messages
        assert "more than the whole memory budget (memoryBudgetMb = 1)" in msg.text and "MiB" in msg.text
        out = path.process("mem://big", [Edited(2, [Change("x", (0, 0, 0, 0))])])
        assert out.messages == [] and docs.states["mem://big"].doc is None  # said once, never built
        with pytest.raises(LookupError, match="over budget"):
            requests.scores(docs, "mem://big")
    finally:
        docs.settings = Settings(model_path=docs.settings.model_path)


def test_hints_move_through_pending_changes(docs, path):
    uri = "mem://moving"
    text = "The film was a delight.\n\nI hated the ending."
    docs.settings = Settings(
        model_path=docs.settings.model_path,
        diagnostics=DiagnosticSettings(
            sentiment_threshold=0.0,
            surprise=True,
            surprise_threshold=0.0,
            max_surprise_hints=100,
            typo=False,
            tone_min_words=0,
        ),
    )
    try:
        base = path.process(uri, [Opened(1, "plaintext", text)])
        pending = [(2, [Change("Oh. ", (0, 0, 0, 0))]), (3, [Change("\n", (2, 0, 2, 0))])]
        moved = docs.publisher.hints(uri, pending)
        assert moved.version == 3 and len(moved.diagnostics) == len(base.diagnostics)
        new_text = "Oh. The film was a delight.\n\n\nI hated the ending."
        starts = [0, 28, 29, 30]
        for old, new in zip(base.diagnostics, moved.diagnostics):
            assert new.data == {"version": 1} and old.message == new.message

            def chars(d, t, s):
                return t[s[d.range.start.line] + d.range.start.character : s[d.range.end.line] + d.range.end.character]

            assert chars(old, text, [0, 24, 25]) == chars(new, new_text, starts)
    finally:
        docs.settings = Settings(model_path=docs.settings.model_path)


@pytest.mark.parametrize(
    "path_settings, keeps_outputs",
    [({}, True), ({"state_layout": "lean"}, False), ({"state_layout": "full"}, True), ({"state_layout": "auto"}, True)],
    ids=["default", "lean", "full", "auto"],
)
def test_the_state_layout_setting_reaches_the_engine(path, keeps_outputs):
    """stateLayout: lean keeps no layer outputs, full and auto (the default, while the memory budget
    has room) keep them; all verify."""
    path.process("mem://layout", [Opened(1, "plaintext", "A fine film.\n\nI hated the ending.")])
    doc = path.docs.states["mem://layout"].doc
    assert all((w.outputs is not None) == keeps_outputs for w in doc.windows)
    assert doc.verify().codes_equal
