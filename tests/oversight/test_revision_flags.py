"""Retracted and superseded records as an agent gets them: explain says so, a simulation counts
them, on both databases."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.oversight import clearance as gate

from tests.support.records import T0, revised_store

EVERYTHING = TrustContext(max_sensitivity="hyper", authenticated=True, actor_id="agent", scopes=[])
PUBLIC = TrustContext(max_sensitivity="public", authenticated=True, actor_id="agent", scopes=[])


@pytest.fixture
def mem(store_url: str) -> Iterator[Membrane]:
    yield from revised_store(store_url)


def test_explain_says_retracted_and_superseded(mem: Membrane) -> None:
    gone = mem.explain("gone", EVERYTHING, as_of=T0)
    assert gone.rules[-1] == "retracted" and gone.reasons[-1].startswith("retracted:")
    assert "still returned unless min_salience is above 0" in gone.reasons[-1]
    old = mem.explain("old", EVERYTHING, as_of=T0)
    assert old.rules[-1] == "superseded" and old.reasons[-1].startswith("superseded by new:")
    # A retracted competence record says so only in its audit log.
    assert mem.explain("skill", EVERYTHING).rules[-1] == "retracted"
    for active in ("keep", "new", "skill-2"):
        assert not {"retracted", "superseded"} & set(mem.explain(active, EVERYTHING).rules), active


def test_explain_tells_no_revision_to_a_context_without_the_content(mem: Membrane) -> None:
    redacted = mem.explain("gone", PUBLIC)  # low is one above public: metadata only
    assert redacted.verdict.value == "redacted" and "retracted" not in redacted.rules
    # Nor past an operator's clearance that sees it redacted while the context sees it in full.
    shown = gate.explain(mem, "gone", EVERYTHING, PUBLIC)
    assert shown.verdict.value == "redacted"
    assert "retracted" not in shown.rules and not any("retracted:" in r for r in shown.reasons)


def test_simulation_counts_the_retracted_and_superseded_records_returned(mem: Membrane) -> None:
    sim = mem.simulate(RetrieveRequest(trust=EVERYTHING, as_of=T0, limit=0))
    assert {r.id for r in sim.response.records} >= {"gone", "old", "skill"}
    assert sim.revised == {"retracted": 2, "superseded": 1}
    # min_salience above 0 drops them (salience 0): none reaches the agent.
    assert mem.simulate(RetrieveRequest(trust=EVERYTHING, as_of=T0, min_salience=0.01)).revised == {
        "retracted": 0, "superseded": 0}
    # Seen redacted (payload and log withheld), a record is counted as neither.
    assert mem.simulate(RetrieveRequest(trust=PUBLIC, as_of=T0)).revised == {"retracted": 0, "superseded": 0}
