"""The server's snapshot cache (documents/snapshots.py) and its use by the document store
(documents/builder.py, table.py): a closed or evicted document comes back from disk instead of a
rebuild, exactly; a bad snapshot is logged, deleted and rebuilt over; the cache keeps to its cap,
least recently used first; the setting turns it off; another model never restores."""

from __future__ import annotations

import logging
import os
import threading

import inference
from inference import snapshot
from vq_lsp.documents import requests
from vq_lsp.documents.events import Closed, Edited, Opened
from vq_lsp.documents.snapshots import SUFFIX, SnapshotStore
from vq_lsp.documents.textsync import Change
from vq_lsp.settings import Settings

TEXT = "\n\n".join(f"Paragraph {i}: a film that some people liked and others found slow and dull." for i in range(24))


def files(docs) -> list:
    assert docs.snapshots.flush(60)
    return sorted(docs.snapshots.folder.glob(f"*{SUFFIX}"))


def reopen(path, uri, text=TEXT):
    path.process(uri, [Closed()])
    path.process(uri, [Opened(2, "plaintext", text)])
    return path.docs.states[uri]


def test_close_and_reopen_restores_exactly(docs, path):
    uri = "mem://a"
    path.process(uri, [Opened(1, "plaintext", TEXT)])
    first = requests.scores(docs, uri)
    assert first["windows"] >= 2 and first["restores"] == 0
    surprise = docs.states[uri].doc.surprise(0, first["tokens"])
    st = reopen(path, uri)
    assert len(files(docs)) == 1 and st.restores == 1 and "restore_seconds" in st.last_cost
    again = requests.scores(docs, uri)
    assert again["scores"] == first["scores"] and again["paragraphs"] == first["paragraphs"]
    assert st.doc.surprise(0, again["tokens"]) == surprise
    assert again["memory"]["snapshots"]["restored"] == 1 and again["memory"]["snapshots"]["files"] == 1
    check = requests.verify(docs, uri)
    assert check["codesEqual"] and not check["rebuilt"]
    # editing the restored state stays exact
    path.process(uri, [Edited(3, [Change("A much better film. ", (0, 0, 0, 0))])])
    assert requests.verify(docs, uri)["codesEqual"] and st.updates == 1 and st.rebuilds == 0


def test_an_evicted_document_is_restored_and_then_edited(docs, path):
    path.process("mem://a", [Opened(1, "plaintext", TEXT)])
    before = list(docs.states["mem://a"].tracked.ids)
    one = docs.states["mem://a"].bytes()
    docs.settings = Settings(model_path=docs.settings.model_path, memory_budget_mb=1.5 * one / 2**20)
    path.process("mem://b", [Opened(1, "plaintext", TEXT.replace("film", "movie"))])
    a = docs.states["mem://a"]
    assert a.doc is None and a.evictions == 1 and len(files(docs)) == 1
    path.process("mem://a", [Edited(2, [Change("Truly awful. ", (0, 0, 0, 0))])])  # edited while evicted
    assert a.restores == 1 and a.rebuilds == 0 and a.doc.token_ids == a.tracked.ids
    assert requests.verify(docs, "mem://a")["codesEqual"]
    never_evicted = inference.IncrementalDocument(docs.model, before)  # the same edit on a state kept in memory
    never_evicted.apply(inference.diff(before, a.tracked.ids))
    assert a.doc.scores == never_evicted.scores and a.doc.positions == never_evicted.positions


def test_a_corrupt_snapshot_is_logged_deleted_and_rebuilt(docs, caplog, path):
    uri = "mem://c"
    path.process(uri, [Opened(1, "plaintext", TEXT)])
    expected = requests.scores(docs, uri)["scores"]
    path.process(uri, [Closed()])
    (snap,) = files(docs)
    data = bytearray(snap.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snap.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="vq_lsp.documents.snapshots"):
        path.process(uri, [Opened(2, "plaintext", TEXT)])
    assert any("ignored snapshot" in r.message and "checksum" in r.message for r in caplog.records)
    st = docs.states[uri]
    assert st.restores == 0 and st.doc is not None and docs.snapshots.rejected == 1
    assert requests.scores(docs, uri)["scores"] == expected and requests.verify(docs, uri)["codesEqual"]
    assert not snap.exists()  # deleted: the next close writes a good one
    st = reopen(path, uri)
    assert st.restores == 1


def test_a_truncated_snapshot_is_rebuilt(docs, caplog, path):
    uri = "mem://t"
    path.process(uri, [Opened(1, "plaintext", TEXT)])
    path.process(uri, [Closed()])
    (snap,) = files(docs)
    snap.write_bytes(snap.read_bytes()[: snap.stat().st_size // 3])
    with caplog.at_level(logging.WARNING, logger="vq_lsp.documents.snapshots"):
        path.process(uri, [Opened(2, "plaintext", TEXT)])
    assert any("truncated" in r.message for r in caplog.records)
    assert docs.states[uri].restores == 0 and requests.verify(docs, uri)["codesEqual"]


def test_the_setting_turns_snapshots_off(docs, path):
    docs.settings = Settings(model_path=docs.settings.model_path, snapshots=False)
    path.process("mem://off", [Opened(1, "plaintext", TEXT)])
    st = reopen(path, "mem://off")
    assert files(docs) == [] and st.restores == 0 and st.doc is not None
    docs.settings = Settings(model_path=docs.settings.model_path)  # on again: the close writes, the open reads
    st = reopen(path, "mem://off")
    assert st.restores == 1 and len(files(docs)) == 1


def test_another_model_does_not_restore(docs, model_dir, tmp_path, path):
    path.process("mem://m", [Opened(1, "plaintext", TEXT)])
    path.process("mem://m", [Closed()])
    assert len(files(docs)) == 1
    other = tmp_path / "other"
    other.mkdir()
    for f in model_dir.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    config = (other / "config.json").read_text().replace('"layer_norm_eps": 1e-05', '"layer_norm_eps": 2e-05')
    assert config != (other / "config.json").read_text()
    (other / "config.json").write_text(config)
    docs.settings = Settings(model_path=str(other), device="cpu")
    docs.load_model()
    path.process("mem://m", [Opened(2, "plaintext", TEXT)])
    assert docs.states["mem://m"].restores == 0 and docs.snapshots.misses >= 1
    assert requests.verify(docs, "mem://m")["codesEqual"]


def test_a_state_in_doubt_is_neither_saved_nor_restored(docs, path):
    uri = "mem://doubt"
    path.process(uri, [Opened(1, "plaintext", TEXT)])
    path.process(uri, [Closed()])
    path.process(uri, [Opened(2, "plaintext", TEXT)])
    st = docs.states[uri]
    assert st.restores == 1
    st.tracked.ids[0] = 0  # the engine update will find tokens that disagree with its own
    lines = TEXT.split("\n")
    end = (len(lines) - 1, len(lines[-1]))
    path.process(uri, [Edited(3, [Change(" Yes.", (*end, *end))])])
    assert st.rebuilds == 1 and st.restores == 1  # rebuilt from the text, not read back


def test_lru_cap_deletes_least_recently_used(docs, tmp_path):
    store = SnapshotStore(tmp_path / "lru", background=False)
    model = docs.model
    texts = [TEXT.replace("film", w) for w in ("book", "play", "show")]
    built = [inference.IncrementalDocument(model, model.tokenizer.encode(t)) for t in texts]
    assert store.save(built[0], 1e12) and store.save(built[1], 1e12)
    size = max(p.stat().st_size for p in store.folder.iterdir())
    paths = {p.name: p for p in store.folder.iterdir()}
    old, new = sorted(
        paths.values(), key=lambda p: snapshot.document_key(model, built[0].token_ids) in p.name, reverse=True
    )
    os.utime(old, (1_000_000, 1_000_000))  # built[0]'s snapshot: long ago
    os.utime(new, (2_000_000, 2_000_000))
    assert store.load(model, built[0].token_ids) is not None  # a hit: now the most recently used
    assert store.save(built[2], 2.5 * size)  # room for two: built[1]'s, the least recently used, goes
    assert store.load(model, built[1].token_ids) is None
    assert store.load(model, built[0].token_ids) is not None and store.load(model, built[2].token_ids) is not None
    assert store.evicted == 1 and store.stats()["files"] == 2
    assert not store.save(built[0], size / 2)  # a state alone over the cap is not written
    tmp = store.folder / ".dead.123.tmp"  # a write that died long ago is cleaned up
    tmp.write_bytes(b"x")
    os.utime(tmp, (1_000_000, 1_000_000))
    store.trim(1e12)
    assert not tmp.exists() and store.stats()["files"] == 2


def test_writes_run_in_the_background_and_a_load_waits_for_them(docs, monkeypatch, path):
    """The engine thread only queues a write; a load of that snapshot waits until it is on disk."""
    gate = threading.Event()
    real = snapshot.write_document

    def slow_write(*args, **kwargs):
        assert threading.current_thread().name == "vq-snapshots"
        gate.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshot, "write_document", slow_write)
    uri = "mem://bg"
    path.process(uri, [Opened(1, "plaintext", TEXT)])
    path.process(uri, [Closed()])  # returns while the write is held back
    assert docs.snapshots.stats()["pending"] == 1 and not docs.snapshots.flush(0.05)
    threading.Timer(0.2, gate.set).start()
    path.process(uri, [Opened(2, "plaintext", TEXT)])
    assert docs.states[uri].restores == 1 and docs.snapshots.stats()["pending"] == 0


def test_an_unwritable_cache_is_logged_and_serving_goes_on(docs, tmp_path, caplog, path):
    (tmp_path / "file").write_text("not a folder")
    docs.snapshots = SnapshotStore(tmp_path / "file" / "snapshots")
    path.process("mem://w", [Opened(1, "plaintext", TEXT)])
    with caplog.at_level(logging.WARNING, logger="vq_lsp.documents.snapshots"):
        out = path.process("mem://w", [Closed()])
        assert docs.snapshots.flush(60)
    assert out.closed and any("could not write a snapshot" in r.message for r in caplog.records)
    path.process("mem://w", [Opened(2, "plaintext", TEXT)])
    assert docs.states["mem://w"].doc is not None and docs.states["mem://w"].restores == 0


def test_shutdown_waits_for_a_snapshot_being_written(path, monkeypatch):
    """The editor closes a document and quits: the server's shutdown lets the write finish."""
    from lsprotocol import types

    server = path.server
    path.process("mem://q", [Opened(1, "plaintext", TEXT)])
    gate, real = threading.Event(), snapshot.write_document
    monkeypatch.setattr(snapshot, "write_document", lambda *a, **k: (gate.wait(60), real(*a, **k))[1])
    path.process("mem://q", [Closed()])
    assert server.docs.snapshots.stats()["pending"] == 1
    threading.Timer(0.3, gate.set).start()
    server.protocol.fm.features[types.SHUTDOWN](None)
    assert server.docs.snapshots.stats()["pending"] == 0 and len(files(server.docs)) == 1
