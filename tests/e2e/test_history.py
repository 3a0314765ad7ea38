"""A record's past in the browser: the decay page draws its true curve, the audit page links
each record to the explorer and names a retract, and a curator restores a version from the
record's History tab (preview, confirmation, Restore), after which the audit page shows it.
Screenshots of each go to tests/e2e/screenshots (history-*.png)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from membrane_engine import Membrane

from .conftest import _serve
from tests.support.widgets import click_tab, fill_text, open_dropdown

pytestmark = pytest.mark.e2e

UTC = timezone.utc
DAY = 86400
RID = "7d1f0c2e-5b8a-4c3d-9e61-0a2b3c4d5e6f"
T0 = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=6)


def doc(rid: str, subject: str) -> dict:
    t = T0.isoformat().replace("+00:00", "Z")
    return {"id": rid, "type": "semantic", "sensitivity": "low", "confidence": 0.9, "salience": 1.0, "scope": "",
            "tags": ["ops"], "created_at": t, "updated_at": t,
            "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": DAY, "min_salience": 0.0,
                                    "max_age_seconds": 0, "reinforcement_gain": 0.1},
                          "pinned": False, "deletion_policy": "auto_prune"},
            "provenance": {"sources": []}, "relations": [],
            "payload": {"kind": "semantic", "subject": subject, "predicate": "runs on", "object": "postgres 16",
                        "validity": {"mode": "global"}}}


@pytest.fixture(scope="module")
def history_store(tmp_path_factory) -> str:
    """RID created six days ago, reinforced two days after, retracted a day after that."""
    url = f"sqlite:///{tmp_path_factory.mktemp('e2e-history') / 'membrane.db'}"
    when = [T0]
    m = Membrane.open(url, load_sample=False, clock=lambda: when[0])
    try:
        m.import_records([doc(RID, "billing service")])
        when[0] = T0 + timedelta(days=2)
        m.reinforce(RID, "operator:bob", "useful", gain=0.1)
        when[0] = T0 + timedelta(days=3)
        m.retract(RID, "operator:bob", "wrong host")
    finally:
        m.close()
    return url


@pytest.fixture(scope="module")
def history_server(history_store, tmp_path_factory):
    yield from _serve("history", history_store, tmp_path_factory.mktemp("e2e-history-server"))


def frames_have(con, text: str) -> bool:
    return text in con.dom_text() or any(text.encode() in f for f in con.frame_bytes())


def test_decay_and_audit_show_the_true_past_and_link_records(new_console, history_server):
    con = new_console(history_server)
    con.open("decay", {"id": RID})
    con.assert_healthy()
    assert con.page.locator(".js-plotly-plot").count() >= 1, "no chart for the preselected record"
    assert frames_have(con, "billing service runs on postgres 16"), "the record is not named by its label"
    assert frames_have(con, "retract") and frames_have(con, "reinforce")
    con.screenshot("history-decay")

    con.open("audit")
    con.assert_healthy()
    assert frames_have(con, f"/records?id={RID}"), "the audit table does not link the record to the explorer"
    assert frames_have(con, "salience: 0.175; status: active"), "no before values in the audit table"
    con.screenshot("history-audit")
    # The link opens the record in the explorer.
    con.open("records", {"id": RID})
    con.assert_healthy()
    assert RID in con.dom_text()


def test_a_curator_restores_a_version_and_the_audit_page_shows_it(new_console, history_server, history_store):
    con = new_console(history_server, role="curator")
    con.open("records", {"id": RID})
    con.assert_healthy()
    click_tab(con, "History")
    con.assert_healthy()
    box = con.widget("stSelectbox", "Version")
    open_dropdown(con, box)
    option = con.page.locator("[role=listbox] [role=option]", has_text=re.compile(r"#1 .*reinforce"))
    con.act(lambda: option.first.click())
    fill_text(con, "Why restore it?", "the retract was a mistake")
    con.assert_healthy()
    confirm = con.page.get_by_text(re.compile("I confirm: restore the version of"))
    con.act(lambda: confirm.click())
    button = con.page.get_by_role("button", name="Restore this version")
    assert button.is_enabled()
    con.screenshot("history-record-restore-preview")
    con.act(lambda: button.click())
    con.assert_healthy()
    click_tab(con, "History")
    assert con.page.locator("[data-testid=stAlert]", has_text="Restored the version of").count() == 1
    con.screenshot("history-record-restored")

    m = Membrane.open(history_store, load_sample=False)
    try:
        record = m.get(RID)
        last = m.audit_rows(RID)[-1]
        assert record.revision_status == "active"
        assert last.entry.actor == "operator:e2e-curator"
        assert last.entry.rationale.endswith("the retract was a mistake")
        assert last.details["status"] == {"before": "retracted", "after": "active"}
        assert m.verify_audit() == []
    finally:
        m.close()

    con.open("audit", {"id": RID})
    con.assert_healthy()
    assert frames_have(con, "restore version"), "the audit page does not name the restore"
    assert frames_have(con, "status: retracted"), "no before value of the restore"
    con.screenshot("history-audit-after-restore")


def test_a_viewer_has_no_restore_button(new_console, history_server):
    con = new_console(history_server, role="viewer")
    con.open("records", {"id": RID})
    click_tab(con, "History")
    con.assert_healthy()
    assert con.page.get_by_role("button", name="Restore this version").count() == 0
    assert "Curators and admins can restore a version" in con.dom_text()
