"""The simulator and the selector inspector on a store larger than the retrieval cap: what they
say they return and count is the engine's (limit 0 returns the first MAX_LIMIT records; every
selector candidate is counted, though only the best SELECTED_MAX are listed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from bench.generate import NOW, records
from membrane_engine.retrieval.layered import MAX_LIMIT, SELECTED_MAX, records_returned

ROOT = Path(__file__).resolve().parents[2]

PAGES = ROOT / "console" / "app_pages"
AS_OF = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
TRUST = dict(max_sensitivity="hyper", authenticated=True, actor_id="agent-1")


@pytest.fixture(scope="module")
def large_url(tmp_path_factory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('pages_large') / 'large.db'}"
    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    m.import_records(list(records(MAX_LIMIT + 400, seed=11)))
    m.close()
    yield url


@pytest.fixture
def engine(large_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Membrane]:
    monkeypatch.setenv("MEMBRANE_DB_URL", large_url)
    st.cache_resource.clear()
    st.cache_data.clear()
    m = Membrane.open(large_url, load_sample=False)
    yield m
    m.close()
    st.cache_resource.clear()
    st.cache_data.clear()


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_simulator_with_no_limit_returns_the_first_records_up_to_the_cap(engine: Membrane) -> None:
    at = AppTest.from_file(str(PAGES / "simulator.py"), default_timeout=120)
    at.query_params.update({"as_of": AS_OF, "max_sensitivity": "hyper", "limit": "0"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    sim = engine.simulate(RetrieveRequest(trust=TrustContext(**TRUST), as_of=NOW, limit=0))
    assert sim.total_matching > MAX_LIMIT
    assert metric(at, "Returned") == f"{records_returned(sim.total_matching, 0):,}" == f"{MAX_LIMIT:,}"
    captions = [c.value for c in at.caption]
    assert f"the first {MAX_LIMIT:,} of {sim.total_matching:,}" in " ".join(captions)
    assert f"Showing 1–10 of {MAX_LIMIT:,}." in captions


def test_selector_counts_every_candidate_and_lists_the_best(engine: Membrane) -> None:
    at = AppTest.from_file(str(PAGES / "selector.py"), default_timeout=120)
    at.query_params.update({"as_of": AS_OF, "max_sensitivity": "hyper"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    sim = engine.simulate(RetrieveRequest(trust=TrustContext(**TRUST), as_of=NOW, limit=1,
                                          memory_types=["competence", "plan_graph"]))
    candidates = len(sim.response.selection.scores)
    assert candidates > SELECTED_MAX
    assert metric(at, "Candidates") == f"{candidates:,}"
    assert f"The {SELECTED_MAX:,} best of {candidates:,} candidates." in [c.value for c in at.caption]
    assert len(at.dataframe[0].value) == SELECTED_MAX
