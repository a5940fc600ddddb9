"""Which spans are prose (markup.py): Markdown, reStructuredText, source comments, plain text."""

from __future__ import annotations

import time

import pytest

from vq_lsp.hints import markup

MARKDOWN = """---
title: frontmatterword
---
# A heading with headingword

Some prose with `inlinecodeword` and a [linkword](http://example.com/targetword) and
https://urlword.example/pathword plus <span class="htmlword">inhtml</span> text.

| tableword | cellword |
|-----------|----------|
| rowword   | twoword  |

- listword one
- `pip install commandword`

> quoteword paragraph

```python
fencedword = 1
```

<div>
htmlblockword
</div>

    indentedcodeword

[ref]: http://example.org/refword
"""


def words(text, lay):
    return {text[a:b] for a, b in lay.words(text)}


def test_markdown_hints_only_prose():
    lay = markup.layout(MARKDOWN, markup.MARKDOWN)
    got = words(MARKDOWN, lay)
    assert {"heading", "headingword", "prose", "linkword", "listword", "quoteword", "text", "inhtml"} <= got
    for hidden in (
        "frontmatterword",
        "inlinecodeword",
        "targetword",
        "urlword",
        "pathword",
        "htmlword",
        "tableword",
        "cellword",
        "rowword",
        "twoword",
        "commandword",
        "fencedword",
        "htmlblockword",
        "indentedcodeword",
        "refword",
        "example",
        "http",
        "com",
    ):
        assert hidden not in got, hidden


def test_tone_blocks_are_paragraphs_with_their_word_counts_never_headings():
    lay = markup.layout(MARKDOWN, markup.MARKDOWN)
    blocks = {MARKDOWN[a:b].split()[0]: n for a, b, n in lay.tone}
    assert "#" not in blocks and "|" not in blocks  # no heading, no table
    assert blocks["Some"] == 10  # masked link target, URL and HTML words are not counted
    items = [n for a, b, n in lay.tone if MARKDOWN[a:b].startswith("-")]
    assert items == [2, 0]  # list items: far too short for the default tone length (12 words)


def test_a_lone_carriage_return_ends_a_markdown_line():
    """markdown-it counts \\r as a line end: the spans are those of the same text with \\n (same offsets)."""
    assert markup.layout(MARKDOWN.replace("\n", "\r"), markup.MARKDOWN) == markup.layout(MARKDOWN, markup.MARKDOWN)


def test_rst_rules():
    text = """Title here
==========

A paragraph with ``literalword`` and :ref:`roleword` and `link text <http://x.org/targetword>`_.

.. code-block:: python

   directiveword = 1

.. note:: A note with noteword inside.

Example::

    literalblockword

+-----------+----------+
| gridword  | cellword |
+-----------+----------+

=========  =========
simpleword  otherword
=========  =========

Last paragraph.
"""
    got = words(text, markup.layout(text, markup.RST))
    assert {"Title", "paragraph", "link", "noteword", "Example", "Last"} <= got
    for hidden in (
        "literalword",
        "roleword",
        "targetword",
        "directiveword",
        "literalblockword",
        "gridword",
        "cellword",
        "simpleword",
        "otherword",
        "python",
    ):
        assert hidden not in got, hidden
    tone = [text[a:b] for a, b, _ in markup.layout(text, markup.RST).tone]
    assert not any(t.startswith("Title") for t in tone)


@pytest.mark.parametrize(
    "language, text, prose, code",
    [
        (
            "python",
            'x = "stringword"  # commentword here\ndef f():\n    """Docword string."""\n    return y\n',
            {"commentword", "Docword"},
            {"stringword", "def", "return", "x"},
        ),
        (
            "javascript",
            'let s = "// notcomment";\n// slashword\n/* blockword\n more */ run();\n',
            {"slashword", "blockword", "more"},
            {"notcomment", "let", "run"},
        ),
        ("lua", 'local s = "--x" -- dashword\n', {"dashword"}, {"local", "x"}),
    ],
)
def test_source_files_hint_comments_only(language, text, prose, code):
    kind = markup.markup_of(language)
    assert kind == markup.SOURCE
    got = words(text, markup.layout(text, kind, language))
    assert prose <= got and not (code & got)
    assert markup.markup_of(language, source_hints="off") == markup.NONE
    assert markup.layout(text, markup.NONE).prose == ()


def test_plain_text_masks_urls_and_counts_paragraphs():
    text = "See https://example.com/urlword now.\n\nSecond paragraph here."
    lay = markup.layout(text, markup.PLAIN)
    assert words(text, lay) == {"See", "now", "Second", "paragraph", "here"}
    assert [n for _, _, n in lay.tone] == [2, 3]


def test_markup_from_language_id_and_file_name():
    assert markup.markup_of("markdown") == markup.MARKDOWN
    assert markup.markup_of("restructuredtext") == markup.RST
    assert markup.markup_of("plaintext") == markup.PLAIN
    assert markup.markup_of("", name="docs/README.md") == markup.MARKDOWN
    assert markup.markup_of(None, name="guide.rst") == markup.RST
    assert markup.markup_of(None, name="notes") == markup.PLAIN
    assert markup.markup_of(None, name="tool.py") == markup.SOURCE


def test_broken_markup_does_not_raise():
    for text in ("```\nunclosed fence", "| a |\n|---", "<div>", "`unclosed", "[x](", "---\nfront: matter", ""):
        for kind in (markup.MARKDOWN, markup.RST, markup.PLAIN):
            lay = markup.layout(text, kind)
            assert all(0 <= a < b <= len(text) for a, b in lay.prose)


def test_parsing_a_long_markdown_document_is_cheap():
    text = MARKDOWN * 12  # about 2,000 tokens
    markup.layout(text, markup.MARKDOWN)
    t0 = time.perf_counter()
    for _ in range(5):
        markup.layout(text, markup.MARKDOWN)
    assert (time.perf_counter() - t0) / 5 < 0.1  # measured ~5 ms; generous for a loaded CI machine
