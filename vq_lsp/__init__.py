"""vq-lsp: a language server and a batch scorer over the incremental VQ-OPT engine (`inference`).

Layers, each a sub-package that imports only the ones below it (tests/test_architecture.py):
- `settings` (what the user configures) and `cli` (the `vq-lsp` command) at the top level;
- `hints`: which parts of a text are prose, the typo detector, and the one rule that picks the
  hints a writer sees, shaped for LSP;
- `documents`: the open documents, their text sync, engine states, memory budget and snapshots;
- `server`: the pygls language server over stdio (the only package that imports pygls);
- `scoring`: `vq-lsp score`, every revision of a document scored as an edit of the one before.

`server` builds on `documents` and `hints`, `scoring` on `hints`; `inference` never imports this package.
"""

__version__ = "0.1.0"
