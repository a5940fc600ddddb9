"""`vq-lsp score`: every revision of a document scored as an edit of the one before.

- `revisions`: where revision histories come from (a folder, a file's git history, JSONL);
- `scorer`: `BatchScorer`, one incremental chain per document, a row per revision, the totals;
- `output`: rows as JSONL, CSV or readable text;
- `ray`: the same rows computed by the workers of a Ray cluster (optional);
- `command`: the command line.

Hints are picked by the server's own rule (vq_lsp/hints/selection.py). Nothing here imports pygls.
"""
