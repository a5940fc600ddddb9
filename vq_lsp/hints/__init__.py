"""What is hinted, and how: from a document's engine state to the hints a writer sees.

- `markup`: which parts of a text are prose (only prose is hinted; the model reads everything),
  from each markup's blocks (`markup_blocks`) and Markdown's chunks (`markdown_chunks`);
- `paragraphs`: paragraphs and the token spans that cover them;
- `typos`: the typo detector (a dictionary says which words are suspect, the model which fix fits);
- `material`: what hints are chosen from (tone blocks' scores, word surprises, typo findings);
- `reuse`: that material paragraph by paragraph, reused where an edit changed nothing
  (`paragraph_spans`, `paragraph_cache`, `fresh_material`);
- `grammar`: Harper's lints (`grammar_rules`: which are shown; `grammar_lints`: the records);
- `caches`: `HintCaches`, everything kept between publishes, owned and passed in by the caller;
- `selection`: the one rule that picks hints from that material, shared by the server and
  `vq-lsp score`;
- `lsp`: the picked hints as LSP diagnostics, hover text, quick fixes and the code lens.

Nothing here knows documents, the server or the scorer; only `lsp` imports lsprotocol.
"""
