"""vq-lsp: a language server (and, later, a batch scorer) over the incremental VQ-OPT engine.

Modules: settings (what the user configures), textsync (LSP changes -> token splices, pure),
scheduler (per-document coalescing), states (documents, engine states, memory budget), hints
(diagnostics, hover, code lens), server (thin pygls handlers), cli (the `vq-lsp` command).
Only server.py imports pygls; `inference` never imports this package.
"""

__version__ = "0.1.0"
