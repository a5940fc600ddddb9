"""The language server: LSP over stdio, on top of the document store (vq_lsp/documents).

- `transport`: hardened LSP framing on stdin;
- `protocol`: JSON-RPC validation and the LSP lifecycle (pygls' protocol, hardened);
- `language_server`: the serving loop, engine jobs, publishing, builds, model and settings;
- `handlers`: the LSP handlers, thin (`build` makes the server `vq-lsp` runs);
- `engine_thread`: the thread that runs all engine work, interactive jobs first (a second one
  builds windows);
- `builds`: which document's state is built next (the one in use first);
- `scheduler`: per-document coalescing of events;
- `progress`: $/progress for long builds.

Only this package imports pygls.
"""
