"""The pieces behind the reliability fixes, without a server: framing (transport.py), requests
mid-storm (Coalescer.caught_up), and returning dropped states' memory (heap.py)."""

from __future__ import annotations

import asyncio
import io
import os
import threading

import pytest

from vq_lsp.documents.heap import BUILD_WEIGHT, HeapTrimmer
from vq_lsp.server.scheduler import Coalescer
from vq_lsp.server.transport import FdReader, frames


def read_all(data: bytes, max_body: int = 1000) -> list:
    return list(frames(io.BytesIO(data), max_body))


def test_frames_resync_after_bad_input():
    good = b'{"a": 1}'
    msg = b"Content-Length: 8\r\n\r\n" + good
    assert read_all(msg + msg) == [(good, None), (good, None)]
    assert read_all(b"junk" + msg) == [(good, None)]  # glued to a header: found again
    assert read_all(b"content-length:8\n\n" + good) == [(good, None)]  # case, spacing, bare newlines
    bad = read_all(b"Content-Length: abc\r\n\r\n" + msg)
    assert bad[0][0] is None and "must be a number" in bad[0][1] and bad[1] == (good, None)
    assert read_all(b"Content-Type: x\r\n\r\n" + msg) == [(good, None)]  # no length: nothing read
    assert read_all(b"Content-Length: 100\r\n\r\n" + good) == []  # the client died mid-message


def test_oversized_bodies_are_skipped_and_long_lines_bounded():
    body = b"x" * 5000
    out = read_all(b"Content-Length: 5000\r\n\r\n" + body + b"Content-Length: 2\r\n\r\n{}")
    assert out[0][0] is None and "larger than the limit" in out[0][1] and out[1] == (b"{}", None)
    assert read_all(b"A" * 100_000 + b"\r\nContent-Length: 2\r\n\r\n{}") == [(b"{}", None)]


def test_fd_reader_over_a_pipe():
    r, w = os.pipe()
    threading.Thread(target=lambda: (os.write(w, b"Content-Length: 2\r\n\r\n{}" * 3), os.close(w))).start()
    assert list(frames(FdReader(r))) == [(b"{}", None)] * 3
    os.close(r)


@pytest.mark.asyncio
async def test_a_request_is_not_starved_by_an_edit_storm():
    """caught_up waits for what was queued before it, not for edits that keep arriving."""
    batches = []

    async def run(key, events, superseded):
        batches.append(list(events))
        await asyncio.sleep(0.01)  # the engine is slower than the typist

    co = Coalescer(run)
    stop = False

    async def storm():
        i = 0
        while not stop:
            co.submit("doc", i)
            i += 1
            await asyncio.sleep(0.001)

    typist = asyncio.ensure_future(storm())
    await asyncio.sleep(0.05)
    queued = co.submitted["doc"]
    await asyncio.wait_for(co.caught_up("doc"), 1.0)  # while the storm goes on
    assert co.busy("doc") and co.processed["doc"] >= queued
    stop = True
    await typist
    await co.idle()
    assert [e for b in batches for e in b] == list(range(co.submitted["doc"]))  # in order, none lost


class FakeDoc:
    def __init__(self, size):
        self.size = size

    def state_bytes(self):
        return self.size


def test_heap_trimmer_trims_after_state_churn_only():
    t = HeapTrimmer(after_bytes=100)
    calls = []
    t._trim = calls.append
    a, b = FakeDoc(10), FakeDoc(30)
    t.observe([a])  # built: counts BUILD_WEIGHT times its size
    assert t.churn == BUILD_WEIGHT * 10 and not calls
    for _ in range(5):
        t.observe([a, None])  # incremental updates: no churn, no trim
    assert t.churn == BUILD_WEIGHT * 10 and not calls
    t.observe([b])  # a dropped, b built
    assert calls == [0] and t.churn == 0 and t.trims == 1


def test_heap_trimmer_counts_copies_of_texts_kept_without_tokens():
    """Keystrokes in a text over the token limit copy the whole text: after enough of them the
    freed copies are returned, and a keystroke in a small text never causes a trim."""
    t = HeapTrimmer(after_bytes=10, after_text_bytes=100)
    calls = []
    t._trim = calls.append
    t.observe([None], text_bytes=40)
    t.observe([None], text_bytes=40)
    assert not calls and t.text_churn == 80 and t.churn == 0
    t.observe([None], text_bytes=40)
    assert calls == [0] and t.text_churn == 0


def test_edits_to_a_text_over_the_token_limit_count_their_copies(tmp_path):
    """Documents counts the bytes of whole-text copies it makes for a document kept as text alone."""
    from vq_lsp.documents.events import Edited, Opened
    from vq_lsp.documents.store import Documents
    from vq_lsp.documents.textsync import Change
    from vq_lsp.settings import Settings

    docs = Documents(Settings(max_document_tokens=50))
    docs.load_model()
    text = "word " * 400 + "\n"
    docs.process("file:///long.md", [Opened(1, "markdown", text)])
    assert docs.states["file:///long.md"].tracked is None  # over the limit: the text alone
    docs.text_churn = 0
    docs.process("file:///long.md", [Edited(2, [Change("x", (0, 0, 0, 0)), Change("y", (0, 0, 0, 0))])])
    assert docs.states["file:///long.md"].text.startswith("yxword")
    assert docs.text_churn >= 2 * len(text)  # two changes, two copies of the whole text


def test_heap_trimmer_in_the_background_trims_on_a_thread_of_its_own():
    """The server's trimmer never trims on the thread that observes (the engine thread)."""
    import threading

    t = HeapTrimmer(after_bytes=10, background=True, after_text_bytes=10)
    if t._wanted is None:
        pytest.skip("no malloc_trim on this platform")
    threads, done = [], threading.Event()
    t._trim = lambda pad: (threads.append(threading.current_thread().name), done.set())
    t.observe([None], text_bytes=20)
    assert done.wait(5.0) and threads == ["vq-heap-trim"] and t.text_churn == 0
