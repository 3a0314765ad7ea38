"""Consolidation proposals through the browser (SPEC 12 in the Review queue): the Review page's
Consolidation section finds proposals (a dry run through the operator's view: nothing written),
shows each beside its sources, and Apply writes one, as the signed-in curator, where a fresh
Membrane on the same URL reads it; the history lists the run. At 1400 and 1024 px the section
draws without an exception. A viewer sees it disabled.

On a server of its own: applying adds records, which the shared servers' tests count."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from membrane_engine import Membrane

from tests.e2e.conftest import SAMPLE, _serve, build_store
from tests.support.browser import ConsoleServer
from tests.support.widgets import open_dropdown

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def consolidation_url(tmp_path_factory) -> str:
    return build_store(tmp_path_factory.mktemp("e2e-consolidation") / "membrane.db", json_file=SAMPLE)


@pytest.fixture(scope="module")
def consolidation_server(consolidation_url, tmp_path_factory) -> Iterator[ConsoleServer]:
    yield from _serve("consolidation", consolidation_url, tmp_path_factory.mktemp("e2e-consolidation-server"))


def engine(url: str) -> Membrane:
    return Membrane.open(url, load_sample=False)


def counts(url: str) -> tuple[int, int]:
    m = engine(url)
    try:
        return m.count(), m.audit_query(limit=0)[0]
    finally:
        m.close()


def open_section(con) -> None:
    con.open("review")
    con.assert_healthy()
    con.act(lambda: con.page.get_by_role("radio", name="Consolidation").click())
    con.page.get_by_role("heading", name="Consolidation").first.wait_for(state="visible")


def choose(con, label: str, option: str) -> None:
    box = con.widget("stSelectbox", label)
    open_dropdown(con, box)
    choice = con.page.locator("[role=listbox] [role=option]", has_text=re.compile("^" + re.escape(option) + "$"))
    con.act(lambda: choice.first.click())


def test_find_and_apply_a_proposal_in_a_real_browser(new_console, consolidation_server, consolidation_url):
    before = counts(consolidation_url)
    m = engine(consolidation_url)
    try:
        preview = m.consolidate(dry_run=True)
    finally:
        m.close()
    skills = [p for p in preview.proposals if p.consolidator == "competence"]
    assert skills, "the sample store proposes no skill"
    target = skills[0]

    con = new_console(consolidation_server, role="curator")
    open_section(con)
    con.act(lambda: con.page.get_by_role("button", name="Find proposals").click(), settle=0.8)
    con.assert_healthy()
    con.page.get_by_text(f"Proposals ({len(preview.proposals)})").first.wait_for(state="visible")
    assert counts(consolidation_url) == before, "the dry run wrote"
    choose(con, "Consolidator", "competence")
    con.assert_healthy()
    text = con.text()
    assert target.record.payload.skill_name in text, "the skill to be created is not shown"
    assert all(s in text for s in target.sources[:6]), "the skill's sources are not beside it"
    con.screenshot("review-consolidation-1400")

    # The first card's Apply is the first skill's (cards follow the report's order).
    apply = con.page.get_by_role("button", name="Apply", exact=True).first
    con.act(lambda: apply.click(), settle=0.8)
    con.page.locator("[data-testid=stAlert]", has_text="Applied: 1 created").wait_for(state="visible")
    con.assert_healthy()
    # the history (a table drawn on a canvas: read from what the server sent)
    assert {h.needle for h in con.find(["chosen proposals: competence 1 created"])}, "the run is not in the history"
    con.screenshot("review-consolidation-applied-1400")

    m = engine(consolidation_url)
    try:
        assert m.count() == before[0] + 1
        [run] = m.as_operator("e2e-curator").consolidation_history()
        assert run.selected and run.actors == ("operator:e2e-curator",)
        [new] = [i.record_id for i in run.items]
        record = m.get(new)
        assert record.payload.skill_name == target.record.payload.skill_name
        assert record.audit_log[0].actor == "operator:e2e-curator"
        assert {s.ref for s in record.provenance.sources} == set(target.sources)
        assert m.verify_audit() == []
    finally:
        m.close()


def test_the_consolidation_section_at_1024_px(new_console, consolidation_server):
    con = new_console(consolidation_server, role="admin", viewport=(1024, 900))
    open_section(con)
    con.act(lambda: con.page.get_by_role("button", name="Find proposals").click(), settle=0.8)
    con.assert_healthy()
    con.page.get_by_text("Proposals (").first.wait_for(state="visible")
    # each card's buttons stay inside its row, and the row inside the page, at this width
    main = con.page.locator("[data-testid=stMainBlockContainer]").bounding_box()
    applies = con.page.get_by_role("button", name="Apply", exact=True)
    assert applies.count() >= 1
    for k in range(applies.count()):
        button = applies.nth(k)
        row = button.locator("xpath=ancestor::*[@data-testid='stHorizontalBlock'][1]").bounding_box()
        at = button.bounding_box()
        assert row["x"] <= at["x"] and at["x"] + at["width"] <= row["x"] + row["width"] + 1, (row, at)
        assert row["x"] + row["width"] <= main["x"] + main["width"] + 1, (main, row)
    con.screenshot("review-consolidation-1024")


def test_a_viewer_sees_the_section_disabled(new_console, consolidation_server, consolidation_url):
    before = counts(consolidation_url)
    con = new_console(consolidation_server, role="viewer")
    open_section(con)
    find = con.page.get_by_role("button", name="Find proposals")
    assert not find.is_enabled()
    assert "needs the curator role" in con.text()
    assert counts(consolidation_url) == before
