"""The writer's conventions without a server: ignore comments in each markup, exclude globs, the
dictionary's matching, the configuration file's precedence and messages, the word-list edits."""

from __future__ import annotations

from pathlib import Path

from vq_lsp.hints import excludes, ignores, markup
from vq_lsp.hints.dictionary import Dictionary, parse_word_list
from vq_lsp.settings import Settings
from vq_lsp.workspace import config_file, dictionaries


def silenced_words(text: str, kind: str, markup_kind: str, language_id: str = "") -> list[str]:
    found = ignores.find(text, markup_kind, language_id)
    return [
        w
        for w in ("teh", "recieve", "mornning", "forcast", "beleive")
        if w in text and found.silences(kind, text.index(w), text.index(w) + len(w))
    ]


def test_markdown_regions_next_line_and_kinds():
    text = (
        "teh first\n<!-- vq-lsp-disable typo -->\nrecieve inside\n<!-- vq-lsp-enable -->\nmornning after\n"
        "<!-- vq-lsp-disable-next-line -->\n\nforcast next\nbeleive later\n"
    )
    assert silenced_words(text, "typo", markup.MARKDOWN) == ["recieve", "forcast"]
    assert silenced_words(text, "sentiment", markup.MARKDOWN) == ["forcast"]  # the region was for typos only


def test_a_disable_without_enable_runs_to_the_end_and_kinds_have_aliases():
    text = "teh\n<!-- vq-lsp-disable tone -->\nrecieve\n"
    found = ignores.find(text, markup.MARKDOWN)
    assert found.silences("sentiment", text.index("recieve"), len(text))
    assert not found.silences("typo", text.index("recieve"), len(text))
    assert not found.silences("sentiment", 0, 3)


def test_directives_count_only_in_the_markups_comments():
    assert silenced_words("vq-lsp-disable\nteh\n", "typo", markup.MARKDOWN) == []  # prose, not a comment
    assert silenced_words("vq-lsp-disable\nteh\n", "typo", markup.PLAIN) == ["teh"]  # a line of its own
    rst = ".. vq-lsp-disable-next-line typo\n\nteh here\nrecieve there\n"
    assert silenced_words(rst, "typo", markup.RST) == ["teh"]
    source = "x = 1  # teh vq-lsp: ignore\n# recieve\ny = 2  # vq-lsp-disable\n# mornning\n"
    assert silenced_words(source, "typo", markup.SOURCE, "python") == ["teh", "mornning"]
    assert silenced_words('s = "vq-lsp: ignore"  # teh\n', "typo", markup.SOURCE, "python") == []  # in a string


def test_a_documents_own_words_and_the_fix_that_writes_them():
    text = "<!-- vq-lsp-words: dtype stdio -->\n# Title\n"
    assert ignores.find(text, markup.MARKDOWN).words == {"dtype", "stdio"}
    assert ignores.document_words_insert(text, "markdown", "png") == (len("<!-- vq-lsp-words:"), " png")
    front = "---\ntitle: x\n---\nBody\n"
    assert ignores.document_words_insert(front, "markdown", "teh") == (
        len("---\ntitle: x\n---\n"),
        "<!-- vq-lsp-words: teh -->\n",
    )
    assert ignores.document_words_insert("Body\n", "restructuredtext", "teh") == (0, ".. vq-lsp-words: teh\n\n")
    assert ignores.document_words_insert("#!/bin/sh\n# x\n", "shellscript", "teh") == (10, "# vq-lsp-words: teh\n")
    assert ignores.document_words_insert("int x;\n", "c", "teh") == (0, "// vq-lsp-words: teh\n")


def test_exclude_globs():
    assert excludes.matches("docs/generated/api.md", ["docs/generated"])
    assert excludes.matches("docs/generated/deep/api.md", ["docs/generated/**"])
    assert excludes.matches("a/b/CHANGELOG.md", ["CHANGELOG.md"])
    assert excludes.matches("notes/x.min.md", ["*.min.md"])
    assert not excludes.matches("docs/guide.md", ["docs/generated/**", "*.min.md"])
    assert not excludes.matches("other/docs/generated/x.md", ["docs/generated/**"])  # relative to the root
    assert excludes.excluded("file:///w/docs/generated/a.md", "/w", ["docs/generated/**"])
    assert not excludes.excluded("file:///elsewhere/docs/generated/a.md", "/w", ["docs/generated/**"])
    assert not excludes.excluded("untitled:Untitled-1", "/w", ["**"])


def test_dictionary_matching_and_word_lists():
    words = Dictionary.of(["dtype", "GitHub"])
    assert "dtype" in words and "Dtype" in words and "GitHub" in words
    assert "github" not in words and "stdio" not in words
    assert words.near("dtpye") == ["dtype"] and words.near("Dtyp") == ["Dtype"] and words.near("Githb") == ["GitHub"]
    assert words.near("dtype") == [] and words.near("types") == []
    assert parse_word_list("# team words\ndtype\n\n  stdio  # the C header\n") == ["dtype", "stdio"]


def test_append_edit_ends_the_list_with_the_word(tmp_path):
    path = tmp_path / "words.txt"
    new = dictionaries.append_edit(path, "dtype")
    assert (new.exists, new.line, new.character, new.text) == (False, 0, 0, "dtype\n")
    path.write_text("stdio")
    add = dictionaries.append_edit(path, "dtype")
    assert (add.exists, add.line, add.character, add.text) == (True, 0, 5, "\ndtype\n")
    path.write_text("stdio\n")
    assert dictionaries.append_edit(path, "dtype").text == "dtype\n"


def test_configuration_file_precedence_and_values(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.vq-lsp]\nwords = ["from-pyproject"]\n')
    config = config_file.load(tmp_path)
    assert config.words == ("from-pyproject",) and config.path == tmp_path / "pyproject.toml"
    (tmp_path / "vq-lsp.toml").write_text(
        'words = ["dtype"]\nexclude = ["build/**"]\nfile-types = ["markdown"]\n'
        '[diagnostics]\ntypo-threshold = 3.0\nsentiment = false\ntypo-severity = "warning"\n'
    )
    config = config_file.load(tmp_path)  # vq-lsp.toml wins: pyproject.toml's table is not read
    assert config.words == ("dtype",) and config.path == tmp_path / "vq-lsp.toml" and not config.problems
    settings = config.apply(Settings())
    assert settings.exclude == ("build/**",) and settings.file_types == ("markdown",)
    d = settings.diagnostics
    assert (d.typo_threshold, d.sentiment, d.typo_severity) == (3.0, False, "warning")
    words, problems = dictionaries.load(tmp_path, config.words)
    assert "dtype" in words and not problems


def test_a_pyproject_without_the_table_is_no_configuration(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert config_file.load(tmp_path) == config_file.WorkspaceConfig()
    assert config_file.load(None) == config_file.WorkspaceConfig()


def test_bad_values_name_the_file_and_key_and_the_rest_applies(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.vq-lsp]\nwords = "dtype"\n[tool.vq-lsp.diagnostics]\ntypo-threshold = "high"\ntone-min-words = 3\n'
    )
    config = config_file.load(tmp_path)
    where = str(tmp_path / "pyproject.toml")
    assert len(config.problems) == 2 and all(p.startswith(where + ": tool.vq-lsp.") for p in config.problems)
    assert "words must be a list of strings" in config.problems[0]
    assert "diagnostics.typoThreshold = 'high' is invalid" in config.problems[1]
    settings = config.apply(Settings())
    assert settings.diagnostics.tone_min_words == 3
    assert settings.diagnostics.typo_threshold == Settings().diagnostics.typo_threshold


def test_a_file_that_is_not_toml_is_one_message(tmp_path: Path):
    (tmp_path / "vq-lsp.toml").write_text("words = [\n")
    config = config_file.load(tmp_path)
    (problem,) = config.problems
    assert problem.startswith(str(tmp_path / "vq-lsp.toml") + ": not valid TOML")
    assert config.apply(Settings()) == Settings()
