"""The paper protocol's "one hunk" scenario applies a real hunk where the writer made it."""

from __future__ import annotations

import random

from benchmarks.paper_table import Bench
from inference import apply_splices, diff


def test_a_hunk_after_the_hunks_before_it_gives_the_revision_up_to_it():
    old = list(range(100, 160))
    new = old[:5] + [7, 8] + old[9:30] + old[33:50] + [9] * 6 + old[50:]  # a replacement, a deletion, an insertion
    hunks = diff(old, new)
    assert len(hunks) == 3
    seen = set()
    for seed in range(40):
        drawn = Bench.hunk_at(old, new, random.Random(seed))
        before, hunk = drawn.before, drawn.splice
        k = len(before)
        seen.add(k)
        assert before == hunks[:k]
        assert drawn.tokens_before == len(apply_splices(old, before))
        assert apply_splices(apply_splices(old, before), [hunk]) == apply_splices(old, hunks[: k + 1])
        assert len(hunk.new_ids) == len(hunks[k].new_ids) and hunk.end - hunk.start == hunks[k].end - hunks[k].start
    assert seen == {0, 1, 2}  # every hunk is drawn
