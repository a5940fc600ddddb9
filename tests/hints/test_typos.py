"""The typo detector (hints/typos/) and its hints, on the bundled model: whole-word surprise, close
dictionary words scored by the LM head, confusion sets, and what `choose` publishes."""

from __future__ import annotations

import numpy as np
import pytest

import inference
from vq_lsp.documents.textsync import TrackedText
from vq_lsp.hints import lsp as hints
from vq_lsp.hints import material as hint_material
from vq_lsp.hints import typos
from vq_lsp.hints.caches import HintCaches
from vq_lsp.hints.material import HintMaterial
from vq_lsp.settings import DiagnosticSettings


@pytest.fixture(scope="module")
def model():
    return inference.load_model(None, device="cpu")


def material(model, text, language="plaintext", cfg=None):
    tt = TrackedText(model.tokenizer, text)
    doc = inference.IncrementalDocument(model, tt.ids)
    return tt, doc, HintMaterial.of(tt, doc, 1, language, cfg or DiagnosticSettings(), caches=HintCaches())


def test_next_token_logprobs_agree_with_surprise_and_refuse_bad_indices(model):
    ids = model.tokenizer.encode("The cat sat on the mat.\n\nIt was warm.")
    doc = inference.IncrementalDocument(model, ids)
    lp = doc.next_token_logprobs(list(range(len(ids))))
    assert lp.shape == (len(ids), model.config.vocab_size)
    own = -lp[np.arange(len(ids)), ids].numpy()
    assert np.allclose(own, doc.surprise(0, len(ids)), atol=1e-4)
    assert np.allclose(lp.exp().sum(-1).numpy(), 1.0, atol=1e-4)
    for bad in (-1, len(ids)):
        with pytest.raises(ValueError, match="outside"):
            doc.next_token_logprobs([bad])


def test_candidate_logprobs_of_many_rows_are_those_of_the_whole_vocabulary(model):
    """Asked for candidates at more rows than one chunk of logits holds (a long document's first
    hints), each row's candidates are read from the same distribution as the whole vocabulary's."""
    from inference.engine.policy import LSE_CHUNK_ROWS

    ids = model.tokenizer.encode(" ".join(["The cat sat on the mat and it was warm."] * 60))
    doc = inference.IncrementalDocument(model, ids)
    rows = list(range(0, len(ids)))[: LSE_CHUNK_ROWS + 50]
    assert len(rows) > LSE_CHUNK_ROWS
    candidates = [[ids[i], (ids[i] + 7) % model.config.vocab_size] for i in rows]
    picked = doc.next_token_logprobs(rows, candidates)
    whole = doc.next_token_logprobs(rows)
    assert len(picked) == len(rows)
    for i, (got, cand) in enumerate(zip(picked, candidates)):
        assert np.allclose(got.numpy(), whole[i, cand].numpy(), atol=1e-5)


def test_dictionary_helpers():
    assert typos.is_word("the") and typos.is_word("The") and not typos.is_word("teh")
    assert typos.is_word("NASA") and typos.is_word("McDonald")  # acronyms and CamelCase are not judged
    assert "the" in typos.close_words("teh") and "The" in typos.close_words("Teh")
    assert typos.close_words("qqqqqqqq") == []
    assert set(typos.CONFUSABLE["their"]) == {"there", "they're"}


def test_token_span_refuses_spans_that_cut_a_token(model):
    text = "a teh b"
    ids, offsets = model.tokenizer.encode_with_offsets(text)
    starts = np.asarray([a for a, _ in offsets])
    i, j = typos.token_span(text, starts, len(ids), 2, 5)
    assert model.tokenizer.decode(ids[i:j]).strip() == "teh"
    assert typos.token_span(text, starts, len(ids), 3, 5) is None  # "eh": the piece " te" straddles its start
    assert typos.token_span(text, starts, len(ids), 2, 3) is None  # "t": the piece " te" runs past its end


def test_non_word_typo_is_flagged_with_its_fix_and_names_are_not(model):
    text = (
        "I went to teh store because the milk was gone, and then I walked back home again. "
        "Mr. Darcy smiled at Elizabeth and said nothing more about it."
    )
    tt, doc, mat = material(model, text)
    chosen = hints.choose(tt, mat, DiagnosticSettings())
    typo_hints = [h for h in chosen if h.code == "typo"]
    assert [text[h.start : h.end] for h in typo_hints] == ["teh"]
    f = next(f for f in mat.findings if f.word == "teh")
    assert f.kind == "non-word" and f.fixes[0][0] == "the" and f.gain > 0
    i, j = tt.token_span(f.start - 1, f.end)  # " teh": the leading space is in its first piece
    assert j - i > 1 and model.tokenizer.decode(tt.ids[i:j]) == " teh"
    whole = float(np.sum(doc.surprise(i, j)))
    assert f.surprise == pytest.approx(whole)  # the whole word's pieces, not one piece
    assert f.explain().startswith(f"'teh' is unlikely here: {f.surprise:.1f} nats; likely: 'the'")
    assert not [h for h in chosen if h.code == "surprise"]  # unlikely-word hints are off by default


def test_confusable_word_is_weighed_against_its_partner(model):
    text = "After the meeting I drove home form the office and had dinner with my family."
    _, _, mat = material(model, text)
    f = next(f for f in mat.findings if f.word == "form")
    assert f.kind == "real-word" and f.fixes[0][0] == "from" and f.gain > 0
    right = "After the meeting I drove home from the office and had dinner with my family."
    _, _, ok = material(model, right)
    g = next(f for f in ok.findings if f.word == "from")
    assert g.fixes[0][0] == "form" and g.gain < 0  # the right word is likelier than its partner


def test_thresholds_and_limits_choose_among_findings(model):
    text = "I went to teh store and bougth some milk, then I walked hom again.\n"
    tt, _, mat = material(model, text)
    assert len([f for f in mat.findings if f.kind == "non-word"]) >= 3
    strict = DiagnosticSettings(typo_threshold=100.0)
    assert not [h for h in hints.choose(tt, mat, strict) if h.code == "typo"]
    one = DiagnosticSettings(typo_threshold=-100.0, max_typo_hints=1)
    assert len([h for h in hints.choose(tt, mat, one) if h.code == "typo"]) == 1
    assert not [h for h in hints.choose(tt, mat, DiagnosticSettings(typo=False)) if h.code == "typo"]


def test_tone_needs_a_long_prose_paragraph(model):
    text = (
        "# Install\n\nRun it.\n\n"
        + "The film was a wonderful delight from start to finish and I loved every minute of it.\n"
    )
    cfg = DiagnosticSettings(sentiment_threshold=0.0)
    tt, _, mat = material(model, text, "markdown", cfg)
    tones = [text[h.start : h.end] for h in hints.choose(tt, mat, cfg) if h.code == "sentiment"]
    assert tones == [text.splitlines()[4]]  # not the heading, not the two-word paragraph
    everything = DiagnosticSettings(sentiment_threshold=0.0, tone_min_words=0)
    assert len([h for h in hints.choose(tt, mat, everything) if h.code == "sentiment"]) == 2  # headings never


def test_no_hints_in_markdown_tables_code_or_urls(model):
    text = (
        "Some prose here.\n\n| teh | recieve |\n|---|---|\n| becuase | wrod |\n\n"
        "Run `teh --recieve` or open https://example.com/teh/recieve.\n\n```\nteh recieve becuase\n```\n"
    )
    cfg = DiagnosticSettings(surprise=True, surprise_threshold=0.0, typo_threshold=-100.0, real_word_threshold=-100.0)
    tt, _, mat = material(model, text, "markdown", cfg)
    hinted = {text[h.start : h.end] for h in hints.choose(tt, mat, cfg) if h.code in ("typo", "surprise")}
    assert hinted and hinted <= {"Some", "prose", "here", "Run", "or", "open"}


def test_british_spellings_are_words_not_typos():
    for word in ("colour", "Honoured", "realising", "offence", "centre", "travelled", "catalogue"):
        assert typos.is_word(word), word
    for typo in ("colur", "realsing", "ofence"):
        assert not typos.is_word(typo), typo


def test_a_spelling_used_twice_or_dialect_is_deliberate(model):
    assert typos.deliberate("Lys", 2) and not typos.deliberate("teh", 1)
    assert typos.deliberate("mornin", 1) and typos.deliberate("goin'", 1) and not typos.deliberate("becuase", 1)
    text = "Lys smiled at Lys again, and we were goin home when teh rain began.\n"
    _, _, mat = material(model, text)
    assert {f.word for f in mat.findings if f.kind == "non-word"} == {"teh"}


def typo_hints(model, text, language="plaintext"):
    tt, _, mat = material(model, text, language)
    return [text[h.start : h.end] for h in hints.choose(tt, mat, DiagnosticSettings()) if h.code == "typo"]


def test_stretched_words_rhyming_pairs_and_accent_apostrophes_are_not_typos(model):
    for text in (
        "I hadn't laughed like this in a loooong while, and the ending was sooo good.\n",
        "Nooooo, the film was loooong and the actors were sooooo bad.\n",
        "The plot is a loosey goosey combo of superior films, piled higgledy-piggledy on top of each other.\n",
        "If you´ve got nothing better to do, watch it. It isn´t bad, and the film`s ending is fine.\n",
        "I could've told you that'll happen, and there'd be trouble.\n",
        "It was shot with some camera-work and pop art stylings that are pure late sixties.\n",
    ):
        assert typo_hints(model, text) == [], text


def test_doubled_letters_and_a_typo_beside_a_short_word_are_still_typos(model):
    assert typo_hints(model, "We bought a red ballloon for the party, and it was goood fun.\n") == ["ballloon", "goood"]
    assert typo_hints(model, "Let's just say tthis is only an indicator of how bad it gets.\n") == ["tthis"]
    assert typo_hints(model, "If you´ve got nothing beter to do, watch it.\n") == ["beter"]


def test_stretched_rhyming_and_contracted_spellings():
    assert typos.stretched("loooong") and typos.stretched("sooo") and typos.stretched("nooooo")
    assert not typos.stretched("ballloon") and not typos.stretched("goood")  # one letter too many: a typo
    assert not typos.stretched("aaargh") and not typos.stretched("teh")  # no word when the run is shortened
    text = "a loosey goosey plot, hocus pocus, tthis is, the thign then"
    pairs = {
        w for w in ("loosey", "goosey", "hocus", "pocus", "tthis", "thign") if typos.rhyming_pair(text, *at(text, w))
    }
    assert pairs == {"loosey", "goosey", "hocus", "pocus"}
    text = "you´ve, isn`t, teh´s, film´s"
    assert [w for w in ("you", "ve", "isn", "teh", "film") if typos.apostrophe_word(text, *at(text, w))] == [
        "you",
        "ve",
        "isn",
        "film",
    ]
    assert typos.ing_plural("stylings") and typos.ing_plural("chantings") and not typos.ing_plural("stylinsg")
    for word in ("could've", "that'll", "there'd", "what're", "Film's"):
        assert typos.is_word(word), word
    for word in ("shuold've", "teh's", "could'xe"):
        assert not typos.is_word(word), word


def at(text, word):
    a = text.index(word)
    return a, a + len(word)


def test_the_detector_is_kept_per_model(tiny_model_dir):
    """One detector per loaded model, made once and reused; another model gets its own."""
    loaded = inference.load_model(tiny_model_dir, device="cpu")
    doc = inference.IncrementalDocument(loaded, loaded.tokenizer.encode("A short test."))
    caches = HintCaches()
    found = hint_material.detector(doc, caches)
    assert hint_material.detector(doc, caches) is found and found.tokenizer is loaded.tokenizer
    other = inference.load_model(tiny_model_dir, device="cpu")
    assert hint_material.detector(inference.IncrementalDocument(other, [1, 2]), caches) is not found


def findings_by_word(mat) -> dict:
    return {f.word: f for f in mat.findings}


def test_a_common_misspelling_used_twice_is_still_a_typo_and_a_name_is_not(model):
    assert not typos.deliberate("recieve", 2) and not typos.deliberate("teh", 3)
    assert typos.deliberate("Lys", 2) and typos.deliberate("Lys", 3)
    text = "I recieve letters from Lys every week, and Lys writes that they recieve mine.\n"
    tt, _, mat = material(model, text)
    shown = [text[h.start : h.end] for h in hints.choose(tt, mat, DiagnosticSettings()) if h.code == "typo"]
    assert shown == ["recieve", "recieve"]


def test_two_edit_typos_get_fixes_when_nothing_is_one_edit_away(model):
    assert "beginners" in typos.fix_candidates("begginers") and "beginning" in typos.fix_candidates("beggining")
    assert "misspelled" in typos.fix_candidates("mispeled")
    assert typos.fix_candidates("teh")[:1] == ["the"]  # one edit away: no two-edit search
    assert typos.fix_candidates("zq") == []  # too short to guess two edits from
    text = "Most begginers find the beggining of the book hard.\n"
    _, _, mat = material(model, text)
    found = findings_by_word(mat)
    assert found["begginers"].fixes[0][0] == "beginners" and found["beggining"].fixes[0][0] == "beginning"


def test_edit_distance_counts_a_swap_as_one_edit():
    assert typos.edit_distance("teh", "the") == 1
    assert typos.edit_distance("mispeled", "misspelled") == 2
    assert typos.edit_distance("abc", "abcdef") == 3


def test_a_confusable_is_read_with_the_words_after_it(model):
    cfg = DiagnosticSettings()
    for wrong, word, partner in (
        ("So they took there departure, leaving me still staring.\n", "there", "their"),
        ("Such a thing may exist, but they're are few men that can say they have seen it.\n", "they're", "there"),
    ):
        tt, doc, mat = material(model, wrong)
        f = findings_by_word(mat)[word]
        assert f.fixes[0][0] == partner and typos.flagged(f, cfg.typo_threshold, cfg.real_word_threshold), wrong
        (left_only,) = typos.Detector(model.tokenizer).examine(
            wrong, tt.token_starts, doc.surprise_array(), [(f.start, f.end)], doc.next_token_logprobs
        )
        assert f.gain > left_only.gain + 2  # the words after make the partner far likelier than those before alone
        right = wrong.replace(f" {word} ", f" {partner} ")
        tt, _, mat = material(model, right)
        assert not [h for h in hints.choose(tt, mat, cfg) if h.code == "typo"], right


def test_the_words_after_a_confusable_leave_out_the_word_being_typed(model):
    """While the next words are typed at the end of a paragraph, a confusable is read on over
    the finished words only: the text read stays the same for every letter of the word being
    typed, so its forward passes are kept (by their tokens) instead of repeated per keystroke."""
    sentence = "So they took there departure, leaving me"
    start = sentence.index(" departure")
    seen = []
    for n in range(start, len(sentence) + 1):
        text = "First paragraph.\n\n" + sentence[:n] + "\n\nNext paragraph.\n"
        ids, offsets = model.tokenizer.encode_with_offsets(text)
        starts = np.asarray([a for a, _ in offsets])
        j = int(np.searchsorted(starts, text.index(" there") + len(" there")))
        seen.append(typos.words_after(text, starts, len(ids), j))
    assert sorted(set(seen), key=len) == ["", " departure,", " departure, leaving"]
    finished = "So they took there departure, leaving me at the door.\n"
    ids, offsets = model.tokenizer.encode_with_offsets(finished)
    starts = np.asarray([a for a, _ in offsets])
    j = int(np.searchsorted(starts, finished.index(" there") + len(" there")))
    assert typos.words_after(finished, starts, len(ids), j) == " departure, leaving me"  # 4 tokens


def test_capitalised_confusables_are_not_checked(model):
    text = "- Know your shell.\n- Know the basic commands.\n\nTheir eyes met. Now we know.\n"
    _, _, mat = material(model, text, "markdown")
    assert not [f for f in mat.findings if f.kind == "real-word" and f.word[:1].isupper()]


def test_a_real_word_hint_names_its_partner_in_message_hover_and_fixes(model):
    text = "Some people are more talented then the original author of the book.\n"
    cfg = DiagnosticSettings(real_word_threshold=0.0)
    tt, doc, mat = material(model, text, cfg=cfg)
    (typo,) = [h for h in hints.choose(tt, mat, cfg) if h.code == "typo"]
    assert text[typo.start : typo.end] == "then"
    assert "'then' may be a confusable of 'than'" in typo.message and typo.message.endswith("likely: 'than'")
    fixes = hint_material.quick_fixes(tt, doc, typo.start, typo.end, "plaintext", cfg, caches=HintCaches())
    assert [w for w, _ in fixes[0].fixes] == ["than"]
    hover = hints.hover_text(tt, doc, typo.start + 1, "plaintext", cfg, caches=HintCaches())
    assert f"possible typo: {fixes[0].explain()}" in hover


def test_hover_says_unlikely_only_where_a_hint_is_shown(model):
    text = "Some people went to teh market on Saturday morning.\n"
    tt, doc, _ = material(model, text)
    calm = hints.hover_text(tt, doc, 1, caches=HintCaches())
    assert "'Some':" in calm and "no hint" in calm and "unlikely" not in calm
    assert "possible typo: 'teh' is unlikely here" in hints.hover_text(
        tt, doc, text.index("teh") + 1, caches=HintCaches()
    )


def test_code_like_words_in_a_technical_document_are_not_typos(model):
    text = (
        "# Shells\n\nPress **alt-b** to go back a word.\n\n"
        "Use zsh or fish on Unix, read stdin with the shell, and keep settings in a file with the "
        ".yaml extension.\n\n```\nzsh -c 'cat /dev/stdin'\n```\n\nI went to teh store. The documentation "
        "lists the signatues of every function.\n"
    )
    tt, _, mat = material(model, text, "markdown")
    shown = {text[h.start : h.end] for h in hints.choose(tt, mat, DiagnosticSettings()) if h.code == "typo"}
    # a long word one edit from a word worth suggesting is a typo even where jargon is expected
    assert {"teh", "signatues"} <= shown and not shown & {"zsh", "stdin", "yaml", "Unix", "alt"}
    plain = "Use zsh or fish, and read stdin with the shell.\n"  # no code: not a technical document
    _, _, prose = material(model, plain)
    assert {"zsh", "stdin"} <= {f.word for f in prose.findings}


def test_quick_fix_ranges_keep_only_diagnostics_at_the_cursor():
    from lsprotocol import types

    def diag(line, a, b):
        return types.Diagnostic(
            range=types.Range(types.Position(line, a), types.Position(line, b)),
            message="m",
            source=hints.SOURCE,
            code="typo",
        )

    on_line = [diag(0, 0, 5), diag(0, 10, 18), diag(0, 30, 35)]
    cursor = types.Range(types.Position(0, 12), types.Position(0, 12))
    assert hints.fixable(on_line, cursor) == [on_line[1]]
    assert hints.fixable(on_line, types.Range(types.Position(0, 18), types.Position(0, 18))) == [on_line[1]]
    assert hints.fixable(on_line, types.Range(types.Position(0, 0), types.Position(0, 40))) == on_line
    assert hints.fixable(on_line) == on_line


def test_fixes_are_ranked_by_the_whole_word(model):
    for text, word, best in (
        ("It was a very usefull tool for the job.\n", "usefull", "useful"),
        ("I am wrting a letter to my mother.\n", "wrting", "writing"),
        ("I went to the shop and bougth some milk.\n", "bougth", "bought"),
    ):
        _, _, mat = material(model, text)
        assert findings_by_word(mat)[word].fixes[0][0] == best, text


def test_correct_confusables_are_not_flagged_at_the_default_threshold(model):
    text = "The code in its current form is fine. They were of one mind, quiet, orderly and kind. Their eyes met.\n"
    tt, _, mat = material(model, text)
    assert not [h for h in hints.choose(tt, mat, DiagnosticSettings()) if h.code == "typo"]


def test_the_compact_delete_index_finds_what_a_dict_of_deletions_finds():
    """Two-edit candidates from the hashed, sorted index equal those of the plain dict of every
    fix-worthy word's one-letter deletions (the form it replaced), for real misspellings and for
    nonsense."""
    freq = typos.dictionary().word_frequency
    plain: dict[str, set[str]] = {}
    for w, count in freq.items():
        if count >= typos.MIN_FIX_FREQUENCY and w.isalpha():
            for key in {w} | {w[:i] + w[i + 1 :] for i in range(len(w))}:
                plain.setdefault(key, set()).add(w)

    def reference(lower: str) -> set[str]:
        found: set[str] = set()
        for e in typos.dictionary().edit_distance_1(lower):
            found |= plain.get(e, set())
            for i in range(len(e)):
                found |= plain.get(e[:i] + e[i + 1 :], set())
        return {w for w in found if typos.edit_distance(lower, w) <= 2}

    rng = np.random.default_rng(4)
    words = ["begginers", "beggining", "mispeled", "recieve", "wrting", "qzxv", "thier", "acommodate", "a", ""]
    common = [w for w, c in freq.items() if c >= 10_000 and w.isalpha() and len(w) > 3]
    for w in rng.choice(common, 40, replace=False):
        i, j = sorted(rng.integers(0, len(w), 2))
        words.append(w[:i] + w[i + 1 : j] + "xe"[j % 2] + w[j:])  # a deletion and an insertion
    for w in words:
        assert typos.two_edits(w) == reference(w), w


def test_a_name_used_twice_in_a_text_without_capitals_is_no_typo(model):
    text = "the offensive at sayd karam in paktia province was fought by teh army, and paktia fell in a week.\n"
    lower = {f.word for f in material(model, text)[2].findings if f.kind == "non-word"}
    assert "paktia" not in lower and "teh" in lower  # a known slip stays a typo however often it is used
    cased = text.replace("the offensive", "The offensive")
    assert "paktia" in {f.word for f in material(model, cased)[2].findings if f.kind == "non-word"}
    uncased = typos.Evidence({"paktia": 2, "recieve": 2}, frozenset(), False, uncased=True)
    assert uncased.excuse(typos.WordFinding(0, 6, "paktia", 20.0, "non-word", 19.0, (("partial", -1.0),)), text)
    assert not uncased.excuse(typos.WordFinding(0, 7, "recieve", 20.0, "non-word", 9.0, (("receive", -1.0),)), text)


def test_abbreviations_are_no_typos_but_a_word_that_ends_a_sentence_may_be():
    def why(text: str, word: str, cased: bool = True) -> str:
        a = text.index(word)
        f = typos.WordFinding(a, a + len(word), word, 12.0, "non-word", 5.0, (("set", -2.0),))
        return typos.Evidence({}, frozenset(), False, uncased=not cased).excuse(f, text)

    assert why("The rate was 2.66% (2007 est.) last year.", "est") == "an abbreviation"
    assert why("births to approx. 5,000 women", "approx") == "an abbreviation"
    assert why("cannabis sativa subsp. indica grows wild", "subsp") == "an abbreviation"
    assert not why("cannabis sativa subsp. indica grows wild", "subsp", cased=False)  # a sentence may follow
    assert not why("They went to teh. Then home.", "teh")  # no abbreviation: a sentence follows
    assert not why("the whole sentence ends in a typo est.", "est")


def test_units_and_labels_beside_numbers_and_identifiers_in_technical_text_are_no_typos():
    def why(text: str, word: str, technical: bool = False) -> str:
        a = text.index(word)
        f = typos.WordFinding(a, a + len(word), word, 12.0, "non-word", 5.0, (("cats", -2.0),))
        return typos.Evidence({}, frozenset(), technical).excuse(f, text)

    assert why("The held-out loss was 5.66 nats per token.", "nats") == "a unit or label beside a number"
    assert why("exported with opset 17 and run", "opset") == "a unit or label beside a number"
    assert not why("exported with the opset of the day", "opset")  # no number beside it
    assert not why("It took 5 yeras to build.", "yeras")  # a known slip beside a number is still one
    assert why("each row in the same dtype, then", "dtype", technical=True).startswith("code-like")
    assert not why("each row in the same dtype, then", "dtype")  # only in a technical document
    assert not why("we dtermine the value", "dtermine", technical=True)  # a slip that starts so
    assert not why("start from the ccode in the listing", "ccode", technical=True)  # a doubled letter
    assert typos.english_onset("nats") and not typos.english_onset("dtype") and not typos.english_onset("stdio")


def test_a_form_of_a_dictionary_word_the_list_lacks_is_no_typo():
    assert typos.inflected("lints") and typos.inflected("linted") and typos.inflected("linting")  # of "lint"
    assert not typos.inflected("viewss")  # a doubled letter
    assert not typos.inflected("thes")  # a known slip of "these"
    text = "Each thread that lints has its own linter, and the cache is never held while Harper lints.\n"
    a = text.index("lints")
    f = typos.WordFinding(a, a + 5, "lints", 15.0, "non-word", 6.0, (("lines", -2.0),))
    assert typos.Evidence({}, frozenset(), False).excuse(f, text) == "a form of a dictionary word"


def test_entries_of_a_list_of_names_and_lower_cased_acronyms_are_no_typos():
    text = "islands by province:\n\nbanten\n panaitan\n sangiang\n\nearly yeras\n\nthe hotel had a tv and wi-fi.\n"

    def why(word: str, uncased: bool = True) -> str:
        a = text.index(word)
        f = typos.WordFinding(a, a + len(word), word, 12.0, "non-word", 5.0, (("pantain", -2.0),))
        return typos.Evidence({}, frozenset(), False, uncased=uncased).excuse(f, text)

    assert why("panaitan") == "an entry of a list" and why("banten") == "an entry of a list"
    assert not why("yeras")  # a heading: one short line between paragraphs
    assert why("tv") == "a lower-cased acronym" and not why("tv", uncased=False)
    slip = "banten\n teh islands\n"  # a known slip stays a typo in a list
    f = typos.WordFinding(8, 11, "teh", 12.0, "non-word", 5.0, (("the", -2.0),))
    assert typos.list_entry(slip, 8, 11) and not typos.Evidence({}, frozenset(), False).excuse(f, slip)


def test_a_slip_of_a_rare_long_word_has_it_as_a_fix_but_its_plural_is_no_slip():
    # pyspellchecker counts technical words low: "compiler" 59, "microseconds" 50
    assert "compiler" in typos.fix_candidates("compielr") and "microseconds" in typos.fix_candidates("miccroseconds")
    assert typos.misspelling("compielr") and typos.long_slips("seguidillas") == ()
    assert typos.long_slips("lints") == ()  # short words keep MIN_FIX_FREQUENCY


def why_technical(text: str, word: str, uses: dict | None = None) -> str:
    a = text.rindex(word)  # its last use
    f = typos.WordFinding(a, a + len(word), word, 20.0, "non-word", 6.0, (("fix", -2.0),))
    return typos.Evidence(uses or {}, frozenset(), True).excuse(f, text)


def test_an_unmistakable_slip_is_no_jargon_but_a_neighbouring_key_may_be():
    # a key struck twice, two letters swapped, a slip of a rare long word: typos even where jargon is expected
    for text, word in (
        ("recomputing its affected rowss, where", "rowss"),
        ("Now elt’s try to share a value", "elt’s"),
        ("This file own’t have a section", "own’t"),
        ("The compielr error shows that", "compielr"),
    ):
        assert why_technical(text, word) == "", word
    # jargon one neighbouring key or one dropped letter from a rarer word stays excused
    assert why_technical("and diffed against the old tokens", "diffed").startswith("jargon")
    assert not typos.unmistakable_slip("nats")  # "ants" swapped: a short word has too many anagrams


def test_a_dictionary_word_with_a_prefix_or_suffix_is_no_typo():
    for word in ("deallocated", "unfretted", "parsable", "loathness", "serenaders"):
        assert typos.derived(word), word
    assert not typos.derived("happyness")  # one edit from a common word: it misspelt
    assert not typos.derived("charless")  # a doubled letter of "charles", not "char" + "less"
    text = "it will deallocate the space on the heap"
    assert why_technical(text, "deallocate") == "a dictionary word with a prefix or suffix"
    assert not typos.rhyming_pair("gorilla ggorilla diehli", 8, 16)  # a key struck twice is no rhyme


def test_a_term_introduced_in_emphasis_is_the_writers():
    text = "A _struct_, or _structure_, is a custom type.\n\nA struct is like an object.\n"
    assert why_technical(text, "struct", {"struct": 2}) == "the writer's term: introduced in emphasis"
    assert why_technical(text, "struct", {"struct": 1}) == ""  # introduced, never used again
    plain = "A struct is a custom type.\n\nA struct is like an object.\n"
    assert why_technical(plain, "struct", {"struct": 2}) == ""  # "strict" one key away: a slip, unless set off
    assert not typos.introduced_term("a **teh** and teh", "teh")  # one edit from a very common word
    assert not typos.introduced_term("snake_struct_case and struct", "struct")


def test_a_typo_of_a_rare_long_word_in_technical_text_is_flagged(model):
    text = (
        "# Paths\n\nRun `cargo build` to compile the crate.\n\n"
        "The compielr error shows that the shortcut is no longer valid within the module.\n"
    )
    assert "compielr" in typo_hints(model, text, "markdown")
