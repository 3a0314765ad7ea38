"""The explorer's page of a sorted result (only the rows that can be on the page are sorted)
equals the same slice of the full sort: keys ascending, NaN last, ties by id."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from membrane_engine.oversight.record_query import page_positions


@settings(max_examples=200, deadline=None, derandomize=True)
@given(n=st.integers(1, 400), distinct=st.integers(1, 50), nans=st.integers(0, 30),
       offset=st.integers(0, 420), limit=st.integers(1, 100), seed=st.integers(0, 2**16))
def test_page_equals_the_slice_of_the_full_sort(n, distinct, nans, offset, limit, seed):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, distinct, n).astype(float) / 7  # many ties
    keys[rng.choice(n, min(nans, n), replace=False)] = np.nan
    ids = np.array([f"r{rng.integers(0, 10**9):09d}-{i}" for i in range(n)], dtype=object)
    full = np.lexsort((ids.astype(str), keys))[offset:offset + limit]
    assert page_positions(keys, ids, offset, limit).tolist() == full.tolist()
