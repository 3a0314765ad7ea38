"""Review and bulk work in the browser: the record explorer opens a selected row in a dialog and
applies one operation to several selected rows (one preview, one confirmation, per-record
results); the Review page resolves a contested record. What the console wrote is read back from
the store with a Membrane of the test's own. Runs on a store of its own (it changes records)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane, TrustContext
from membrane_engine.oversight.record_query import Filters, search

from .conftest import SAMPLE, _serve, build_store
from tests.support.widgets import fill_text

pytestmark = pytest.mark.e2e

ROW = 35  # st.dataframe's row height in pixels (header row included)
ALL = TrustContext(max_sensitivity="hyper")


@pytest.fixture(scope="module")
def review_store_url(tmp_path_factory) -> str:
    return build_store(tmp_path_factory.mktemp("e2e-review") / "membrane.db", json_file=SAMPLE)


@pytest.fixture(scope="module")
def review_server(review_store_url, tmp_path_factory) -> Iterator:
    yield from _serve("review", review_store_url, tmp_path_factory.mktemp("e2e-review-server"))


def select_row(con, row: int) -> None:
    """Tick the selection box of the ``row``-th row (0 = first) of the page's first table (a
    canvas: clicked where the row marker is drawn)."""
    grid = con.page.locator("[data-testid=stDataFrame]").first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    con.act(lambda: con.page.mouse.click(box["x"] + 18, box["y"] + ROW * (row + 1) + ROW / 2), settle=0.8)


def first_page_ids(url: str, count: int) -> list[str]:
    m = Membrane.open(url, load_sample=False)
    try:
        return [r.id for r in search(m, Filters(), limit=count, sort="salience", clearance=ALL)[1]]
    finally:
        m.close()


def test_explorer_dialog_and_bulk_reinforce(new_console, review_server, review_store_url):
    con = new_console(review_server)
    con.open("records")
    con.assert_healthy()
    con.screenshot("explorer-table")
    ids = first_page_ids(review_store_url, 3)

    # One row: its record opens in a dialog, where the eye is.
    select_row(con, 0)
    dialog = con.page.locator("[role=dialog]")
    dialog.wait_for(state="visible")
    assert ids[0] in dialog.inner_text(), "the dialog does not show the selected record"
    assert "Payload" in dialog.inner_text()
    con.screenshot("explorer-dialog")
    con.assert_healthy()
    con.act(lambda: con.page.keyboard.press("Escape"), settle=0.8)
    assert con.page.locator("[role=dialog]").count() == 0

    # Two more rows: three selected, "Apply to 3 records".
    select_row(con, 1)
    select_row(con, 2)
    con.page.get_by_text("Apply to 3 records").first.wait_for(state="visible")
    m = Membrane.open(review_store_url, load_sample=False)
    try:
        before = {rid: len(m.audit_log(rid)) for rid in ids}
    finally:
        m.close()
    fill_text(con, "Rationale", "e2e bulk reinforce")
    con.page.get_by_text("every other record is applied").first.wait_for(state="visible")
    con.screenshot("explorer-bulk-preview")
    con.assert_healthy()
    m = Membrane.open(review_store_url, load_sample=False)
    try:
        assert {rid: len(m.audit_log(rid)) for rid in ids} == before, "the preview wrote something"
    finally:
        m.close()
    apply = con.page.get_by_role("button", name="Apply to 3 records")
    assert not apply.is_enabled(), "Apply is enabled before the confirmation"
    con.act(lambda: con.page.get_by_text("I confirm: reinforce 3 records").click())
    assert apply.is_enabled()
    con.act(lambda: apply.click(), settle=0.8)
    con.page.locator("[data-testid=stAlert]", has_text="Reinforce applied to 3 records").wait_for(state="visible")
    con.screenshot("explorer-bulk-done")
    con.assert_healthy()
    m = Membrane.open(review_store_url, load_sample=False)
    try:
        for rid in ids:
            log = m.audit_log(rid)
            assert len(log) == before[rid] + 1, f"{rid}: not exactly one new audit entry"
            assert (log[-1].action.value, log[-1].actor, log[-1].rationale) == (
                "reinforce", "operator:e2e-admin", "e2e bulk reinforce")
        assert m.verify_audit() == []
    finally:
        m.close()


def test_review_page_resolves_a_contested_record(new_console, review_server, review_store_url):
    m = Membrane.open(review_store_url, load_sample=False)
    try:
        queue = m.review_queue(ALL)
    finally:
        m.close()
    assert queue.contested, "the sample store has no contested record"
    target = queue.contested[0]
    con = new_console(review_server)
    con.open("review")
    con.assert_healthy()
    text = con.dom_text()
    assert f"Contested ({queue.contested_total})" in text
    assert target.label in text and all(c.label in text for c in target.contesters)
    con.screenshot("review-page")
    fill_text(con, "Rationale", "e2e: the record holds")
    apply = con.page.get_by_role("button", name="Apply: reinstate")
    apply.wait_for(state="visible")
    con.screenshot("review-reinstate-preview")
    con.act(lambda: apply.click(), settle=0.8)
    con.page.locator("[data-testid=stAlert]", has_text="Reinstate done").wait_for(state="visible")
    con.assert_healthy()
    con.screenshot("review-reinstated")
    m = Membrane.open(review_store_url, load_sample=False)
    try:
        record = m.get(target.record.id)
        assert record.revision_status == "active"
        last = record.audit_log[-1]
        assert (last.actor, last.rationale) == ("operator:e2e-admin", "reinstated: e2e: the record holds")
        assert target.record.id not in {i.record.id for i in m.review_queue(ALL).contested}
    finally:
        m.close()
