"""Where an offset lies in a text, as an editor counts: one rule for `vq-lsp check` and `vq-lsp score`.

`\\n`, `\\r\\n` and a lone `\\r` each end a line, as in the Language Server Protocol (the server's
text sync, documents/textsync.py, counts lines so), so a file saved with old Mac line ends gets the
line numbers an editor shows. Columns are characters (the server's are UTF-16 code units).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def line_and_column(text: str, offset: int) -> tuple[int, int]:
    """(line, column), both 0-based, of the character at `offset`."""
    line = text.count("\n", 0, offset) + text.count("\r", 0, offset) - text.count("\r\n", 0, offset)
    return line, offset - (max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1)


@dataclass(frozen=True)
class FileText:
    """A file's text and its tokens' first characters (hints/material.py's TokenizedText), with
    positions counted by `line_and_column`."""

    text: str
    token_starts: np.ndarray

    def position(self, offset: int) -> tuple[int, int]:
        """(line, character), 0-based, as an editor counts them."""
        return line_and_column(self.text, offset)
