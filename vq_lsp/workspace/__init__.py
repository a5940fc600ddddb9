"""The workspace's files that shape the hints, read from disk for the server and `vq-lsp check`:

- `config_file`: `vq-lsp.toml` (or `[tool.vq-lsp]` in pyproject.toml), the settings a team shares;
- `dictionaries`: the workspace's and the user's word lists, and the edits that add a word to them.

What these files mean for the hints (a dictionary word is never flagged, an excluded file gets
none) is decided in vq_lsp/hints/conventions.py; this package only finds and reads them.
"""
