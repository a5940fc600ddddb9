"""The open documents: their text, tokens, engine states and hint material, within a memory budget.

- `events`: what the server queues for a document (opened, edited, closed, ...), as dataclasses;
- `textsync`: LSP content changes -> our copy of the text -> token splices (pure);
- `state`: one document's state, changed through its transitions, and what processing returns (`Outcome`);
- `problems`: why a document gets no hints, as values;
- `store`: `Documents`, the parts below over one `Shared` record (`shared`), callbacks from the server;
- `table`: applying a document's events to its text and state; `updates`: engine updates of a built state;
- `eligibility`: whether a document can have a state, and tokenizing it;
- `builder`: giving a document the state it lacks (kept, copied, restored or built window by window);
- `publisher`: choosing a document's diagnostics;
- `requests`: scores, verify, hover and quick fixes answered from a built state;
- `memory`: the LRU budget of engine states (`Budget`); `heap`: giving freed memory back to the OS;
- `snapshots`: states of closed and evicted documents on disk;
- `remap`: moving hints through edits that are still waiting.

Nothing here imports pygls: the server (vq_lsp/server) speaks LSP and hands plain events in.
"""
