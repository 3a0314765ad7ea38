"""The URL holds every page's whole state, in a real browser: a trust context set on the
simulator goes with the sidebar's navigation to the selector *in the selector's URL*, so a
reload (a new session, nothing shared any more) or a copied link shows the same context, not
the form's defaults (medium, every scope)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from tests.support.widgets import multiselect_values, set_multiselect, set_select_slider

pytestmark = pytest.mark.e2e

SENSITIVITIES = ["public", "low", "medium", "high", "hyper"]
AS_OF = "2026-11-20T12:00:00Z"


def slider_value(con, index: int = 0) -> str:
    return con.page.locator("[data-testid=stSlider] input[type=range]").nth(index).get_attribute("aria-valuetext")


def title(con) -> str:
    return con.page.locator("[data-testid=stMain] h1").first.inner_text()


def query(con) -> dict[str, list[str]]:
    return parse_qs(urlparse(con.page.url).query, keep_blank_values=True)


def reload(con) -> None:
    """The browser's reload: a new page load, so a new Streamlit session."""
    con.generation += 1
    con.frames = []
    con.marked = 0
    con.page.reload(wait_until="commit")
    con.wait_idle(settle=0.8, runs_at_least=1)


def test_a_context_set_on_the_simulator_survives_the_sidebar_and_a_reload(console):
    con = console.open("simulator", {"as_of": AS_OF, "limit": "20"})
    con.assert_healthy()
    set_select_slider(con, 0, "high", SENSITIVITIES)
    set_multiselect(con, 0, ["infra-ops"])
    assert query(con)["max_sensitivity"] == ["high"] and query(con)["scopes"] == ["infra-ops"]

    con.act(lambda: con.page.locator("[data-testid=stSidebarNav] a", has_text="Selector inspector").first.click(),
            settle=0.8)
    assert title(con) == "Selector inspector"
    con.assert_healthy()
    assert slider_value(con) == "high"
    # The selector's own URL carries the context it shows (it used to stay a bare /selector).
    assert urlparse(con.page.url).path.endswith("/selector")
    carried = query(con)
    assert carried.get("max_sensitivity") == ["high"] and carried.get("scopes") == ["infra-ops"], con.page.url
    assert carried.get("actor_id") == ["agent-1"] and carried.get("authenticated") == ["true"]

    reload(con)
    con.assert_healthy()
    assert title(con) == "Selector inspector"
    assert slider_value(con) == "high", "after a reload the selector fell back to the form's default"
    box = con.page.locator("[data-testid=stMultiSelect]").first
    assert multiselect_values(box) == ["infra-ops"], "after a reload the selector's scopes were lost"
    assert query(con).get("max_sensitivity") == ["high"]
    con.screenshot("url-state-selector-after-reload")
