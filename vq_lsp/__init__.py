"""vq-lsp: a language server and a batch scorer over the incremental VQ-OPT engine.

Modules: settings (what the user configures), textsync (LSP changes -> token splices, pure),
scheduler (per-document coalescing), states (documents, engine states, memory budget), hints
(diagnostics, hover, code lens), transport (hardened LSP framing on stdin), heap (returning
freed state memory to the OS), server (pygls handlers), paragraphs and revisions (shared with
batch), batch (`vq-lsp score`), cli (the `vq-lsp` command).
Only server.py imports pygls; `inference` never imports this package.
"""

__version__ = "0.1.0"
