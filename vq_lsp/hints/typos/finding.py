"""A word the detector looked at closely (`WordFinding`), worded here (`WordFinding.explain`) so
that a hint's message, its quick fixes and its hover name the same words, and whether it is
shown under the thresholds (`flagged`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WordFinding:
    """One word the detector looked at closely, in character offsets of the text."""

    start: int
    end: int
    word: str
    surprise: float  # -log p(word | context), summed over its pieces (nats)
    kind: str  # "non-word" (not in the dictionary), "real-word" (a confusable dictionary word), "word" (neither)
    gain: float  # log p(best fix) - log p(word): how much likelier the best fix is (nats); -inf: no fix
    # (replacement, its log p here), likeliest first; a confusable read on (`Detector._read_on`) adds what
    # the replacement changes in the log p of the words after, so that gain = best score + surprise
    fixes: tuple[tuple[str, float], ...]
    excused: str = ""  # why it is never shown whatever its gain ("" when nothing excuses it)

    def likely(self) -> str:
        return ", ".join(repr(w) for w, _ in self.fixes) or "no close dictionary word"

    def explain(self) -> str:
        """The hint's message: a non-word is unlikely here; a real-word error is a confusable of its partner."""
        if self.kind == "real-word" and self.fixes:
            return (
                f"{self.word!r} may be a confusable of {self.fixes[0][0]!r} here ({self.gain:.1f} nats likelier: "
                f"{self.surprise:.1f} nats for {self.word!r}); likely: {self.likely()}"
            )
        return f"{self.word!r} is unlikely here: {self.surprise:.1f} nats; likely: {self.likely()}"

    def describe(self) -> str:
        """The same scores for a word no hint is shown for (hover), without alarming wording."""
        closest = f"; closest words: {self.likely()}" if self.fixes else ""
        why = f" ({self.excused})" if self.excused else ""
        return f"{self.word!r}: {self.surprise:.1f} nats here, no hint{why}{closest}"


def flagged(f: WordFinding, non_word_threshold: float, real_word_threshold: float) -> bool:
    """Whether a finding is shown as a typo under these thresholds (nats of gain): a non-word or
    real-word finding that nothing excuses (a "word" finding only describes a word, for hover)."""
    if f.excused or f.kind == "word":
        return False
    return f.gain >= (non_word_threshold if f.kind == "non-word" else real_word_threshold)
