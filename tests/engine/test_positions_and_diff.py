"""Pure properties of position assignment and of the token diff."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import inference
from inference.positions import NEW, assign_positions, sample_positions, spread_positions


def test_spread_and_sample_put_bos_first_and_increase():
    for pos in (spread_positions(50, 5000), sample_positions(50, 5000)):
        assert pos[0] == 0 and bool((pos[1:] > pos[:-1]).all()) and int(pos[-1]) < 5000


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 60),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 12)), max_size=6),
    st.sampled_from([64, 200, 1000, 100000]),
)
def test_assignment_fills_gaps_in_order_and_reports_relabels(n, inserts, pool):
    rows = list(spread_positions(n, pool).numpy())
    for where, count in inserts:
        at = 1 + where % len(rows)
        if len(rows) + count > pool:
            break
        rows[at:at] = [NEW] * count
    before = np.array(rows)
    got = assign_positions(before, pool)
    pos = got.positions
    assert pos[0] == 0 and (np.diff(pos) > 0).all() and pos[-1] < pool
    moved = set(got.relabelled.tolist())
    for i, old in enumerate(before):
        if old != NEW:
            assert (pos[i] != old) == (i in moved)


def test_relabelling_is_local_when_the_pool_is_sparse():
    rows = list(spread_positions(1000, 100000).numpy())  # gaps of 100
    rows[500:500] = [NEW] * 150  # more than the gap holds
    got = assign_positions(np.array(rows), 100000)
    assert 0 < len(got.relabelled) < 500 and got.full_respreads == 0


tokens = st.lists(st.integers(0, 6), max_size=60)


@settings(max_examples=300, deadline=None)
@given(tokens, tokens)
def test_diff_then_apply_gives_the_new_sequence(old, new):
    splices = inference.diff(old, new)
    assert inference.apply_splices(old, splices) == new
    starts = [s.start for s in splices]
    assert starts == sorted(starts)
    assert all(a.end < b.start or (a.end <= b.start and a.start < b.start) for a, b in zip(splices, splices[1:]))


def test_diff_of_a_single_token_change_is_one_small_splice():
    old = list(range(100))
    new = old[:40] + [7, 7] + old[41:]
    assert inference.diff(old, new) == [inference.Splice(40, 41, [7, 7])]
    assert inference.diff(old, old) == []
