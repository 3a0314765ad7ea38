"""Capturing through the browser (SPEC 12): the Capture page previews what a capture would
write (mentions matched and created, edges) without writing, and Capture writes it, as the
signed-in operator, where a fresh Membrane on the same URL reads it. At 1400 and 1024 px the
page draws without an exception, and its two columns do not overlap.

On a server of its own: a capture adds records, which the shared sample server's tests count."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from membrane_engine import Membrane

from tests.e2e.conftest import SAMPLE, _serve, build_store
from tests.support.browser import ConsoleServer
from tests.support.widgets import fill_text, open_dropdown

pytestmark = pytest.mark.e2e

DEV_PATEL = "5dc05140-cde6-5fba-bd02-4fe9e2d738fe"  # the sample's Dev Patel (low, project-alpha)
FORM = {"source": "kestrel", "source_kind": "event", "scope": "project-alpha",
        "text": "Paired with Dev on the limiter leak", "file": "pkg/auth/middleware.go",
        "entities": "DEV PATEL\nidle bucket eviction"}


@pytest.fixture(scope="module")
def capture_url(tmp_path_factory) -> str:
    return build_store(tmp_path_factory.mktemp("e2e-capture") / "membrane.db", json_file=SAMPLE)


@pytest.fixture(scope="module")
def capture_server(capture_url, tmp_path_factory) -> Iterator[ConsoleServer]:
    yield from _serve("capture", capture_url, tmp_path_factory.mktemp("e2e-capture-server"))


def count(url: str) -> int:
    m = Membrane.open(url, load_sample=False)
    try:
        return m.count()
    finally:
        m.close()


def choose(con, label: str, option: str) -> None:
    box = con.widget("stSelectbox", label)
    open_dropdown(con, box)
    choice = con.page.locator("[role=listbox] [role=option]", has_text=re.compile("^" + re.escape(option) + "$"))
    con.act(lambda: choice.first.click())


def columns_apart(con) -> None:
    """The form's two columns side by side, neither reaching into the other."""
    boxes = con.page.locator("[data-testid=stColumn]").evaluate_all(
        "els => els.filter(e => e.querySelector('h3')).map(e => { const r = e.getBoundingClientRect();"
        " return [r.left, r.right, r.top]; })")
    assert len(boxes) == 2, boxes
    (left_l, left_r, left_t), (right_l, right_r, right_t) = sorted(boxes)
    assert left_r <= right_l + 1 and abs(left_t - right_t) < 2, boxes


def test_preview_then_capture_in_a_real_browser(new_console, capture_server, capture_url):
    before = count(capture_url)
    con = new_console(capture_server, role="curator")
    con.open("capture", FORM)
    con.assert_healthy()
    choose(con, "Sensitivity", "low")
    fill_text(con, "Summary", "Pairing with Dev: idle buckets are never evicted")
    con.assert_healthy()
    text = con.text()
    assert "Would write an episodic record (low, scope project-alpha), 1 new entity, 6 edges" in text, text
    hits = {h.needle for h in con.find(["Dev Patel", "auth middleware", "idle bucket eviction", "mentions_entity"])}
    assert {"Dev Patel", "auth middleware", "idle bucket eviction", "mentions_entity"} <= hits, hits
    assert count(capture_url) == before, "the preview wrote"
    columns_apart(con)
    con.screenshot("capture-preview-1400")

    button = con.page.get_by_role("button", name="Capture")
    assert button.is_enabled()
    con.act(lambda: button.click())
    con.assert_healthy()
    assert con.page.locator("[data-testid=stAlert]", has_text="Captured.").count() == 1
    assert "Wrote an episodic record (low, scope project-alpha), 1 new entity, 6 edges" in con.text()
    con.screenshot("capture-written-1400")

    # The Graph page, opened from the capture, draws the edges it wrote.
    link = con.page.get_by_role("link", name="See them on the Graph page")
    con.mark()
    con.act(lambda: link.click(), settle=1.0)
    con.assert_healthy()
    assert "/graph" in con.page.url and "task=" in con.page.url, con.page.url
    con.page.locator("[data-testid=stPlotlyChart]").first.wait_for(state="visible")
    assert {h.needle for h in con.find(["mentions_entity", "mentioned_in"])} == {"mentions_entity", "mentioned_in"}

    m = Membrane.open(capture_url, load_sample=False)
    try:
        assert m.count() == before + 2
        dev = m.get(DEV_PATEL)
        captured = [m.get(r.target_id) for r in dev.relations if r.predicate == "mentioned_in"]
        ours = [r for r in captured if r.payload.timeline[0].summary == "Pairing with Dev: idle buckets are never evicted"]
        assert len(ours) == 1 and ours[0].sensitivity.value == "low" and ours[0].scope == "project-alpha"
        assert m.audit_log(ours[0].id)[0].actor == "operator:e2e-curator"
        assert m.verify_audit() == []
    finally:
        m.close()


def test_the_capture_page_at_1024_px(new_console, capture_server):
    con = new_console(capture_server, role="curator", viewport=(1024, 900))
    con.open("capture", {**FORM, "sensitivity": "low", "source_kind": "observation", "subject": "dev",
                         "predicate": "reviews", "object": "the limiter fix"})
    con.assert_healthy()
    assert "Derived fact" in con.text()
    columns_apart(con)
    con.screenshot("capture-preview-1024")


def test_a_viewer_sees_the_page_disabled(new_console, capture_server):
    con = new_console(capture_server, role="viewer")
    con.open("capture", FORM)
    con.assert_healthy()
    assert "Capture is not available to you: capture needs the curator role" in con.text()
    assert con.page.get_by_role("button", name="Capture").count() == 0
    assert con.widget("stTextInput", "Source").locator("input").is_disabled()
