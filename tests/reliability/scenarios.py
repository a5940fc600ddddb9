"""Long-running scenarios against the real `vq-lsp` process, shared by tests/reliability and
benchmarks/reliability_summary.py (so the summary table reports exactly what CI checks).

Each scenario takes a started pytest-lsp client (tests/server/lsp_helpers.py), checks what
the server promises with `expect` (an AssertionError on failure, so a test fails and the summary
counts it), and returns its figures as a dataclass.

The model is a small random VQ model with the bundled model's 8192-token tokenizer: scenarios
measure the server (sync, scheduling, memory, recovery), not the model's quality, and the
small vocabulary keeps its LM head cheap enough for thousands of edits in CI.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types

from tests.server.lsp_helpers import TIMEOUT, change, open_doc, scores, utf16_position, verify, wait_until
from tests.server.test_replay import hunks

LONG_DOC = "src/ch12-00-an-io-project.md"  # 16 revisions, 522-706 GPT-2 tokens: moderate for CI
# max |difference| from a full pass, by the server's precision: outputs are recomputed from exact
# codes, so the error does not accumulate with edits and stays at the dtype's rounding level
DRIFT_TOLERANCE = {"float64": 1e-9, "float32": 1e-4}
LONG_EDITS, CHECK_EVERY = 5000, 250
STORMS = 3
MEMORY_DOCS, MEMORY_TOKENS = 50, 2000
MEMORY_BUDGET_MB = 96.0  # about five of the fifty states of the test model
REST_SLACK_MB = 48.0  # texts, token lists, diagnostics, allocator slack for 50 documents
# A full pass over a 2,000-token document with the test model allocates and frees about 100-260
# MiB of temporaries (LM logits per 256-token window and their copies; the range is glibc heap
# fragmentation, measured over 50 builds in one process), so the peak may exceed the resting
# level by that much while a state is built; the server builds one at a time.
TRANSIENT_MB = 320.0


class ScenarioFailure(AssertionError):
    pass


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise ScenarioFailure(what)


def build_test_model(folder: Path, seed: int = 11) -> Path:
    """A small random VQ model folder (256-token windows) with the bundled model's tokenizer."""
    import inference
    from tests.engine.helpers import tiny_model

    tok = inference.Tokenizer.from_file(inference.DEFAULT_MODEL_DIR / "tokenizer.json")
    model = tiny_model(seed, tokenizer=tok, vocab_size=tok.vocab_size, window_tokens=256, position_pool=25600)
    return inference.save_model_folder(model.net, tok, folder, {"note": "random weights, for reliability tests"})


def revision_history(data_dir: Path, doc: str, file: str = "rust_book_chapters.jsonl.gz") -> list[str]:
    with gzip.open(data_dir / "revisions" / file, "rt") as f:
        for line in f:
            row = json.loads(line)
            if row["doc"] == doc:
                return [r["text"] for r in row["revisions"]]
    raise LookupError(f"{doc} not in {file}")


def chapter_documents(data_dir: Path, tokenizer, count: int, tokens: int) -> list[str]:
    """`count` distinct Rust book chapters (last revisions: real prose) with at least `tokens`
    tokens, each cut at the first line end after its `tokens`-th token."""
    out = []
    with gzip.open(data_dir / "revisions" / "rust_book_chapters.jsonl.gz", "rt") as f:
        for line in f:
            text = json.loads(line)["revisions"][-1]["text"]
            ids, offsets = tokenizer.encode_with_offsets(text)
            if len(ids) >= tokens:
                end = text.find("\n", offsets[tokens - 1][1])
                out.append(text if end < 0 else text[: end + 1])
            if len(out) == count:
                return out
    raise ScenarioFailure(f"only {len(out)} chapters have {tokens}+ tokens")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# ----------------------------------------------------------------- the client's copy of a document
class Mirror:
    """The editor's copy of one document: applies edits and sends each as its own didChange."""

    def __init__(self, client, uri: str, text: str, language: str = "markdown") -> None:
        self.client, self.uri, self.text, self.version = client, uri, text, 1
        open_doc(client, uri, text, version=1, language=language)

    def edit(self, a: int, b: int, new: str) -> int:
        """Replace chars [a, b) by `new` (one didChange, UTF-16 range); returns the new version."""
        (l0, c0), (l1, c1) = utf16_position(self.text, a), utf16_position(self.text, b)
        self.text = self.text[:a] + new + self.text[b:]
        self.version += 1
        change(self.client, self.uri, self.version, (l0, c0, l1, c1, new))
        return self.version

    def send_hunks(self, new_text: str) -> int:
        """A real revision: its line hunks, each as its own didChange, bottom-up."""
        count = 0
        for hunk in hunks(self.text, new_text):
            self.version += 1
            change(self.client, self.uri, self.version, hunk)
            count += 1
        self.text = new_text
        return count


TYPED = "abcdefghijklmnopqrstuvwxyz     ,.;'-()ÉéüñΩ😀\n"
WORDS = re.compile(r"\w+")


def _cursor(rng: random.Random, text: str) -> int:
    """A random char offset that does not split a CRLF."""
    p = rng.randrange(len(text) + 1)
    while 0 < p < len(text) and text[p - 1 : p + 1] == "\r\n":
        p -= 1
    return p


def excursion(rng: random.Random, text: str):
    """Edits (a, b, new), produced one at a time against the current text, that leave the text as
    it was: type then backspace, replace a word then restore it, cut then paste back."""
    kind = rng.random()
    if kind < 0.6:  # type a few characters, then delete them one by one with backspace
        p = _cursor(rng, text)
        typed = "".join(rng.choice(TYPED) for _ in range(rng.randint(2, 12)))
        for i, ch in enumerate(typed):
            yield p + len(typed[:i]), p + len(typed[:i]), ch
        end = p + len(typed)
        for ch in reversed(typed):
            yield end - len(ch), end, ""
            end -= len(ch)
    elif kind < 0.85:  # replace a word by another, later restore it
        words = list(WORDS.finditer(text))
        if not words:
            return
        w = rng.choice(words)
        other = rng.choice(["film", "wonderful", "terrible", "ok", "Rust", "zzyzx", "naïve"])
        yield w.start(), w.end(), other
        yield w.start(), w.start() + len(other), w.group()
    else:  # cut a span (up to a few lines), then paste it back
        a = _cursor(rng, text)
        b = min(len(text), a + rng.randint(1, 200))
        if 0 < b < len(text) and text[b - 1 : b + 1] == "\r\n":
            b += 1
        cut = text[a:b]
        yield a, b, ""
        yield a, a, cut


# ----------------------------------------------------------------- long session
@dataclass
class DriftCheck:
    edits: int
    max_abs_diff: float
    codes_equal: bool


@dataclass
class LongSession:
    edits: int = 0
    revisions: int = 0
    engine_updates: int = 0
    rebuilds: int = 0
    checks: list[DriftCheck] = field(default_factory=list)
    seconds: float = 0.0
    final_tokens: int = 0

    @property
    def max_drift(self) -> float:
        return max(c.max_abs_diff for c in self.checks)


def has_published(client, uri: str, version: int) -> bool:
    """The last diagnostics published for `uri` are for `version` or a newer one."""
    got = client.published.get(uri)
    return bool(got) and got[-1].version is not None and got[-1].version >= version


async def published_version(client, uri: str, version: int, trim: bool = False, timeout: float = TIMEOUT) -> None:
    """Wait until diagnostics for `version` (or a newer one) of `uri` are published; `trim` forgets
    all but the last publish (a 5,000-edit session would otherwise keep every one)."""

    await wait_until(
        client, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda: has_published(client, uri, version), timeout
    )
    if trim:
        del client.published[uri][:-1]


async def all_published(client, uris: list[str], version: int, timeout: float = TIMEOUT) -> None:
    """Wait until every one of `uris` has diagnostics for `version` or newer. Documents opened
    together are built one after another, in an order the server chooses, so `timeout` bounds
    the wait for each next document to publish, not for all of them: fifty builds on a slow
    machine take longer than any one wait should, and a server that stops making progress still
    fails within `timeout`."""

    def published() -> int:
        return sum(has_published(client, uri, version) for uri in uris)

    while (before := published()) < len(uris):
        await wait_until(client, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda: published() > before, timeout)


async def check_drift(client, mirror: Mirror, edits: int, tolerance: float) -> DriftCheck:
    """verify() runs a full pass at the same positions; the server's text must be the client's."""
    res = await verify(client, mirror.uri)
    expect(res["version"] == mirror.version, f"verify answered for version {res['version']}, not {mirror.version}")
    expect(res["textSha256"] == sha256(mirror.text), f"after {edits} edits the server's text differs from the editor's")
    expect(res["tokensMatchText"], f"after {edits} edits the engine's tokens differ from the text's")
    expect(res["codesEqual"], f"after {edits} edits {res['mismatchedCodes']} codes differ from a full pass")
    expect(res["maxAbsDiff"] <= tolerance, f"after {edits} edits the drift {res['maxAbsDiff']:.3g} exceeds {tolerance}")
    expect(not res["rebuilt"], "verify had to rebuild the state")
    return DriftCheck(edits, res["maxAbsDiff"], res["codesEqual"])


async def long_session(
    client,
    revisions: list[str],
    edits: int = 5000,
    check_every: int = 250,
    seed: int = 0,
    tolerance: float = DRIFT_TOLERANCE["float32"],
    uri: str = "file:///tmp/vq/long-session.md",
) -> LongSession:
    """Type `edits` incremental edits into one document: the revision history's line hunks,
    with random typing excursions between revisions (and after the last one, until `edits`).
    Every edit is its own didChange, and the session waits for its diagnostics like a typist
    slower than the engine, so every edit is an engine update. Drift is checked every
    `check_every` edits and at the end."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    out = LongSession()
    m = Mirror(client, uri, revisions[0])
    await published_version(client, uri, 1)
    per_gap = max(1, (edits - sum(len(hunks(a, b)) for a, b in zip(revisions, revisions[1:]))) // len(revisions))
    next_check = check_every

    async def step(version: int) -> None:
        nonlocal next_check
        await published_version(client, uri, version, trim=True)
        if out.edits >= next_check:
            out.checks.append(await check_drift(client, m, out.edits, tolerance))
            next_check += check_every

    for new_text in [*revisions[1:], None]:  # None: after the last revision, type until `edits`
        target = out.edits + per_gap if new_text is not None else edits
        while out.edits < target:
            for a, b, new in excursion(rng, m.text):
                out.edits += 1
                await step(m.edit(a, b, new))
        if new_text is not None and (n := m.send_hunks(new_text)):
            out.edits += n
            out.revisions += 1
            await step(m.version)
    out.checks.append(await check_drift(client, m, out.edits, tolerance))
    res = await scores(client, uri)
    out.engine_updates, out.rebuilds, out.final_tokens = res["updates"], res["rebuilds"], res["tokens"]
    expect(out.rebuilds == 0, f"{out.rebuilds} rebuilds during the session: every update should be incremental")
    out.seconds = time.perf_counter() - t0
    return out


# ----------------------------------------------------------------- edit storms
@dataclass
class StormResult:
    storms: int = 0
    changes: int = 0
    engine_updates: int = 0
    publishes: int = 0
    request_seconds: list[float] = field(default_factory=list)  # hover / scores answered mid-storm
    seconds: float = 0.0


def _storm_edit(rng: random.Random, m: Mirror, cursor: int) -> int:
    """One keystroke at the cursor: mostly typing, some backspaces and new lines. Returns the cursor."""
    r = rng.random()
    if r < 0.15 and cursor > 0:
        m.edit(cursor - 1, cursor, "")
        return cursor - 1
    ch = "\n" if r < 0.2 else rng.choice(TYPED)
    m.edit(cursor, cursor, ch)
    return cursor + len(ch)


async def one_storm(
    client, m: Mirror, rng: random.Random, burst: int, min_changes: int, max_changes: int, gap: float = 0.002
) -> tuple[int, list[float]]:
    """Bursts of `burst` keystrokes every `gap` seconds, much faster than the engine runs. After the
    first burst a hover and a documentScores request go out; the storm goes on until both are
    answered (and at least min_changes were sent), so they must be answered *during* it."""
    cursor = _cursor(rng, m.text)
    sent = 0
    for _ in range(burst):
        cursor = _storm_edit(rng, m, cursor)
        sent += 1
    asked_at, asked_version = time.perf_counter(), m.version
    hover = asyncio.ensure_future(
        client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=m.uri), position=types.Position(0, 0))
        )
    )
    got_scores = asyncio.ensure_future(scores(client, m.uri))
    answered: dict[str, float] = {}
    for name, fut in (("hover", hover), ("scores", got_scores)):
        fut.add_done_callback(lambda f, name=name: answered.setdefault(name, time.perf_counter() - asked_at))
    try:
        while sent < min_changes or len(answered) < 2:
            expect(
                sent < max_changes,
                f"requests sent mid-storm were not answered after {sent} more changes (starved by the storm)",
            )
            for _ in range(burst):
                cursor = _storm_edit(rng, m, cursor)
                sent += 1
            await asyncio.sleep(gap)
    finally:
        for fut in (hover, got_scores):
            fut.cancel()  # no-op once answered; else no "exception never retrieved" noise on failure
    expect(hover.result() is not None and "document:" in hover.result().contents.value, "no hover text mid-storm")
    res = got_scores.result()
    expect(res["version"] >= asked_version, f"scores for version {res['version']}, older than {asked_version}")
    return sent, [answered["hover"], answered["scores"]]


async def edit_storm(
    client,
    text: str,
    storms: int = 3,
    burst: int = 50,
    min_changes: int = 300,
    max_changes: int = 60_000,
    seed: int = 1,
    uri: str = "file:///tmp/vq/storm.md",
) -> StormResult:
    """Several storms into one document; after each: diagnostics only for the newest version,
    coalesced engine work, and a state that verifies against a full pass and the editor's text."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    out = StormResult()
    m = Mirror(client, uri, text)
    await published_version(client, uri, 1)
    for _ in range(storms):
        before = (await scores(client, uri))["updates"]
        first = len(client.published[uri])
        start_version = m.version
        sent, latencies = await one_storm(client, m, rng, burst, min_changes, max_changes)
        await published_version(client, uri, m.version)
        res = await scores(client, uri)  # waits for everything queued: no publish can be in flight after it
        expect(res["version"] == m.version, f"scores answered for version {res['version']}, not {m.version}")
        versions = [p.version for p in client.published[uri][first:]]
        # a version may be published twice: first moved through edits still waiting, then from its own state
        expect(versions == sorted(versions), f"publishes out of order: {versions}")
        expect(versions[-1] == m.version, f"the last publish is for version {versions[-1]}, not {m.version}")
        expect(all(v > start_version for v in versions), "a publish for a version from before the storm")
        updates = res["updates"] - before
        expect(updates < sent / 4, f"{updates} engine updates for {sent} changes: the storm was not coalesced")
        expect(len(versions) <= updates, f"{len(versions)} publishes for {updates} engine updates: stale versions")
        check = await verify(client, uri)
        expect(check["codesEqual"] and check["tokensMatchText"] and not check["rebuilt"], f"after a storm: {check}")
        expect(check["textSha256"] == sha256(m.text), "after a storm the server's text differs from the editor's")
        out.storms += 1
        out.changes += sent
        out.engine_updates += updates
        out.publishes += len(versions)
        out.request_seconds += latencies
    out.seconds = time.perf_counter() - t0
    return out


# ----------------------------------------------------------------- memory
def server_pid(client) -> int:
    return client._server.pid  # pygls' client keeps the asyncio subprocess here


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (VmRSS in /proc/<pid>/status; psutil is not a dependency)."""
    return _status_kib(pid, "VmRSS") * 1024


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} line")


class PeakRss:
    """Peak resident memory of a process per phase: the kernel's high-water mark (VmHWM, reset
    by writing 5 to /proc/<pid>/clear_refs), exact where sampling would miss short peaks; where
    the reset is not allowed, RSS sampled every 5 ms instead."""

    def __init__(self, pid: int) -> None:
        self.pid, self.phase = pid, None
        self.peaks: dict[str, int] = {}
        self._task = None
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            self.exact = True
        except OSError:
            self.exact = False

    def start(self, phase: str) -> int:
        """End the current phase, start `phase`; returns the RSS now."""
        self.stop()
        self.phase = phase
        if self.exact:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        else:
            self._task = asyncio.ensure_future(self._sample())
        return rss_bytes(self.pid)

    async def _sample(self) -> None:
        while True:
            self._note(rss_bytes(self.pid))
            await asyncio.sleep(0.005)

    def _note(self, value: int) -> None:
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), value)

    def stop(self) -> None:
        if self.phase is None:
            return
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._note(_status_kib(self.pid, "VmHWM") * 1024 if self.exact else rss_bytes(self.pid))

    @property
    def peak(self) -> int:
        return max(self.peaks.values())


@dataclass
class MemoryResult:
    documents: int = 0
    tokens: int = 0  # over all documents
    budget_bytes: int = 0
    state_bytes_max: int = 0  # the most the server reported holding at once
    live_states_max: int = 0
    lean_states: int = 0  # of the live states when the most were live: those without layer outputs ("auto" layout)
    bytes_per_document: float = 0.0  # of one live engine state
    bytes_per_token: float = 0.0
    baseline_rss: int = 0
    rest_rss_max: int = 0  # RSS whenever the engine was idle (after each answered request)
    peak_rss: int = 0  # the high-water mark, builds' temporaries included
    peaks: dict[str, int] = field(default_factory=dict)  # peak RSS per phase
    evictions: int = 0
    seconds: float = 0.0


async def many_documents(
    client, docs: list[str], budget_mb: float, tokenizer, revisit: int = 10, warmup: str | None = None
) -> MemoryResult:
    """Open every document at once, ask the scores of the last `revisit` opened, then edit and
    query `revisit` early ones (evicted long ago: rebuilt on demand, others dropped). Measures
    the server's reported state bytes (checked against the budget at every answer), its RSS at
    rest (after each answer) and its peak RSS per phase. The baseline is the RSS after a
    warm-up document was opened and closed (model, torch and tokenizer one-time allocations)."""
    t0 = time.perf_counter()
    pid = server_pid(client)
    budget = int(budget_mb * 2**20)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"vqLsp": {"memoryBudgetMb": budget_mb}})
    )
    warm = "file:///tmp/vq/memory-warmup.md"
    open_doc(client, warm, warmup or docs[0], language="markdown")
    await published_version(client, warm, 1)
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=warm))
    )
    await wait_until(
        client, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda: client.published[warm][-1].version is None
    )  # closing publishes an empty list
    out = MemoryResult(
        documents=len(docs),
        budget_bytes=budget,
        baseline_rss=rss_bytes(pid),
        tokens=sum(len(tokenizer.encode(text)) for text in docs),
    )
    uris = [f"file:///tmp/vq/memory-{i:02d}.md" for i in range(len(docs))]
    peaks = PeakRss(pid)

    def record(res: dict) -> None:
        mem = res["memory"]
        expect(mem["bytes"] <= budget, f"{mem['bytes']} state bytes exceed the budget of {budget}")
        out.state_bytes_max = max(out.state_bytes_max, mem["bytes"])
        if mem["live_states"] > out.live_states_max:
            out.live_states_max, out.lean_states = mem["live_states"], mem["lean_states"]
        out.rest_rss_max = max(out.rest_rss_max, rss_bytes(pid))

    peaks.start("open all")
    for uri, text in zip(uris, docs):
        open_doc(client, uri, text, language="markdown")
    await all_published(client, uris, 1)
    peaks.start("scores of the latest")
    per_doc = []
    for uri in uris[-revisit:]:
        res = await scores(client, uri)
        record(res)
        per_doc.append(res["memory"]["bytes"] / max(1, res["memory"]["live_states"]))
    peaks.start("revisit")
    rng = random.Random(7)
    for uri in rng.sample(uris[: len(uris) // 2], revisit):  # evicted by now: rebuilt on demand, others dropped
        change(client, uri, 2, (0, 0, 0, 0, "Revisited. "))
        await published_version(client, uri, 2)
        res = await scores(client, uri)
        record(res)
        out.evictions += res["evictions"]
    peaks.stop()
    out.peaks = dict(peaks.peaks)
    out.peak_rss = peaks.peak
    out.bytes_per_document = sum(per_doc) / len(per_doc)
    out.bytes_per_token = out.bytes_per_document / (out.tokens / len(docs))
    out.seconds = time.perf_counter() - t0
    return out


def check_memory(out: MemoryResult, rest_slack_mb: float, transient_mb: float) -> None:
    """The budget was exercised; at rest RSS <= baseline + budget + rest_slack (no leak: dropped
    states' memory goes back to the OS); the peak RSS <= baseline + budget + transient (the
    temporaries of the one full pass that runs at a time come on top)."""
    budget, budget_mb = out.budget_bytes, out.budget_bytes / 2**20
    expect(out.live_states_max < out.documents, "every state stayed live: the budget was never exercised")
    mib = 2**20
    rest_limit = out.baseline_rss + budget + rest_slack_mb * mib
    expect(
        out.rest_rss_max <= rest_limit,
        f"RSS at rest {out.rest_rss_max / mib:.0f} MiB exceeds baseline "
        f"{out.baseline_rss / mib:.0f} + budget {budget_mb:.0f} + slack {rest_slack_mb:.0f} MiB",
    )
    by_phase = ", ".join(f"{k} {v / mib:.0f}" for k, v in out.peaks.items())
    expect(
        out.peak_rss <= out.baseline_rss + budget + transient_mb * mib,
        f"peak RSS {out.peak_rss / mib:.0f} MiB exceeds baseline {out.baseline_rss / mib:.0f} + budget "
        f"{budget_mb:.0f} + a full pass's temporaries {transient_mb:.0f} MiB (peaks by phase, MiB: {by_phase})",
    )
