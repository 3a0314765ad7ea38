"""Curating through the browser: a reinforce on the Curate page (rationale, preview, Apply, as
the signed-in operator) changes the record's salience and audit trail in the store itself, as a fresh
Membrane on the same URL reads them; the preview alone writes nothing."""

from __future__ import annotations

import uuid

import pytest

from membrane_engine import Membrane

from tests.support.widgets import fill_text

pytestmark = pytest.mark.e2e


def reinforceable(m: Membrane) -> str:
    """A record whose reinforce visibly raises salience: not pinned, a real gain, room below 1."""
    for rid in m.ids():
        r = m.get(rid)
        gain = r.lifecycle.decay.reinforcement_gain
        if not r.lifecycle.pinned and gain >= 0.05 and 0.05 < r.salience < 1 - gain - 0.05:
            return rid
    pytest.fail("the sample store has no record a reinforce would visibly change")


def reinforce_on_page(con, record_id: str, rationale: str) -> None:
    """Drive the Curate page: preselect the record by URL, give a rationale, check the preview,
    Apply. Leaves the page on the outcome."""
    con.open("curate", {"op": "reinforce", "id": record_id})
    assert record_id in con.dom_text(), "the record named by ?id= is not preselected"
    fill_text(con, "Rationale", rationale, area=True)
    apply = con.page.get_by_role("button", name="Apply: reinforce")
    apply.wait_for(state="visible")
    assert apply.is_enabled(), "Apply stays disabled with a record, a name and a rationale"
    con.act(lambda: apply.click())
    con.assert_healthy()


def test_reinforce_through_the_curate_page_is_written_to_the_store(console, sample_store_url):
    operator = "operator:e2e-admin"  # the signed-in operator (harness), not a name typed on the page
    rationale = f"e2e reinforce {uuid.uuid4().hex[:8]}"
    m = Membrane.open(sample_store_url, load_sample=False)
    try:
        rid = reinforceable(m)
        before = m.get(rid)
        gain = before.lifecycle.decay.reinforcement_gain
        log_before = m.audit_log(rid)
    finally:
        m.close()

    con = console.open("curate", {"op": "reinforce", "id": rid})
    assert con.page.get_by_text("Acting as operator:e2e-admin").count() == 1
    fill_text(con, "Rationale", rationale, area=True)
    con.screenshot("curate-reinforce-preview")
    con.assert_healthy()
    assert rationale in con.dom_text() or any(rationale.encode() in f for f in con.frame_bytes()), \
        "the preview does not show the audit entry to be written"
    # the preview wrote nothing
    m = Membrane.open(sample_store_url, load_sample=False)
    try:
        assert len(m.audit_log(rid)) == len(log_before), "the preview wrote an audit entry"
    finally:
        m.close()

    apply = con.page.get_by_role("button", name="Apply: reinforce")
    assert apply.is_enabled()
    con.act(lambda: apply.click())
    con.screenshot("curate-reinforce-done")
    con.assert_healthy()
    assert con.page.locator("[data-testid=stAlert]", has_text="Reinforce done").count() == 1, \
        "no success message after Apply"

    m = Membrane.open(sample_store_url, load_sample=False)
    try:
        after = m.get(rid)
        log = m.audit_log(rid)
        assert len(log) == len(log_before) + 1, "Apply did not append exactly one audit entry"
        entry = log[-1]
        assert entry.action.value == "reinforce"
        assert entry.actor == operator
        assert entry.rationale == rationale
        want = min(before.salience + gain, 1.0)
        assert after.salience == pytest.approx(want, abs=0.02), \
            f"salience {before.salience:.4f} -> {after.salience:.4f}, expected about {want:.4f}"
        assert after.lifecycle.last_reinforced_at is not None
        assert before.lifecycle.last_reinforced_at is None or \
            after.lifecycle.last_reinforced_at > before.lifecycle.last_reinforced_at
        assert m.verify_audit() == []
    finally:
        m.close()
