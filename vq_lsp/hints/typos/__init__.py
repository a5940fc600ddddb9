"""Typo detection: a dictionary says which words are suspect, the language model says which
close spelling the context wants.

A word's surprise is the sum over its subword pieces (-log p of the whole word, exact). Its
candidate fixes are dictionary words one edit away (swap, drop, insert, replace: what
pyspellchecker generates), and for a dictionary word, the other members of its confusion set
(their/there, lose/loose, form/from ...). Each candidate is scored with the LM head at the
word's position (the stored final hidden state of the previous token, no forward pass), and
a candidate of several pieces by the probability of the whole word: its first piece so, its
further pieces by a short forward pass over the text just before it (`continuation`), when it
could beat the best one-piece candidate (so `useful` beats `usefully`, `bought` beats `bough`).
The evidence is the gain, log p(best fix) - log p(word), in nats:

- a word missing from the dictionary is a "non-word" typo when the gain reaches the non-word
  threshold (the model rejects typos whose fix it does not believe in); without a dictionary
  word one edit away (two when none is one away) it is never one, nor when cheap evidence about
  the document excuses it (`Evidence.excuse`: a capitalised word inside a sentence (a name), a
  name or coinage used twice, dropped-g dialect, the plural of a word in -ing ("stylings"), a
  stretched word ("sooo", "loooong"), a rhyming pair ("loosey goosey", "higgledy-piggledy"), a
  piece of a contraction written with an accent or backtick for its apostrophe ("you´ve"), a
  spelling used twice or a short word with no vowel in a text with no capital letters (a
  lower-cased export, where names and acronyms show no capital), a form of a dictionary word the
  word list lacks ("lints"), a dictionary word with a prefix or suffix ("deallocate", "parsable"),
  a term the document introduces in emphasis and uses again ("A _struct_ is"), a short word
  before an abbreviation's period ("2006 est.)") or beside a number (a unit, "5.66 nats", or a
  label, "opset 17"), an entry of a list of short lines,
  code-like words in a technical document, and there jargon with no common word one edit away
  unless it is an unmistakable slip: a key struck twice, two letters swapped, a slip of a rare
  long word, whose fixes pyspellchecker counts too low to suggest otherwise ("compielr");
- a lower-case dictionary word is a "real-word" error when a confusable word gains at least the
  real-word threshold: a dictionary cannot see these at all. A word the words before already
  doubt is read on: the word and its partners are scored on the few words after it as well
  (`Detector._read_on`), since "quiet, orderly" and "quite, orderly" read alike up to the word.
  A capitalised one is never checked: it starts a sentence or a list item, where the left
  context the model reads says little about which of the pair follows, or it is a name or a
  title.

Every finding is worded in finding.py (`WordFinding.explain`), so that a hint's message, its
quick fixes and its hover name the same words.

The package, one job a module: words.py (the dictionary, `is_word`, close words, the confusion
sets), slips.py (slips of the hand), candidates.py (a suspect word's candidate fixes), tokens.py
(words as tokens), detector.py (`Detector`), finding.py (`WordFinding`, `flagged`), excuses.py
(the rules that excuse a word as the writer's) and evidence.py (`Evidence`, which asks them).
What the other modules, the tests and the benchmarks use is importable from the package itself.
"""

from __future__ import annotations

from .candidates import fix_candidates
from .detector import Detector
from .evidence import TECHNICAL_REAL_WORD_GAIN, Evidence, excused, technical_gain, technical_pair
from .excuses import (
    apostrophe_word,
    deliberate,
    derived,
    english_onset,
    inflected,
    ing_plural,
    introduced_term,
    list_entry,
    rhyming_pair,
    stretched,
)
from .finding import WordFinding, flagged
from .slips import long_slips, misspelling, unmistakable_slip
from .tokens import WORDS_AFTER_TOKENS, token_span, word_tokens, words_after
from .words import CONFUSABLE, MIN_FIX_FREQUENCY, close_words, dictionary, edit_distance, is_word, reads_on, two_edits

__all__ = (
    "CONFUSABLE",
    "Detector",
    "Evidence",
    "MIN_FIX_FREQUENCY",
    "TECHNICAL_REAL_WORD_GAIN",
    "WORDS_AFTER_TOKENS",
    "WordFinding",
    "apostrophe_word",
    "close_words",
    "deliberate",
    "derived",
    "dictionary",
    "edit_distance",
    "english_onset",
    "excused",
    "fix_candidates",
    "flagged",
    "inflected",
    "ing_plural",
    "introduced_term",
    "is_word",
    "list_entry",
    "long_slips",
    "misspelling",
    "reads_on",
    "rhyming_pair",
    "stretched",
    "technical_gain",
    "technical_pair",
    "token_span",
    "two_edits",
    "unmistakable_slip",
    "word_tokens",
    "words_after",
)
