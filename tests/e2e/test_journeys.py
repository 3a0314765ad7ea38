"""Moving between pages in a real browser: the simulated trust context goes with the operator
from the simulator to what-if and back, and the browser's Back / Forward restore each page's
state (it lives in the page's URL, one history entry per change)."""

from __future__ import annotations

import pytest

from tests.support.widgets import set_select_slider

pytestmark = pytest.mark.e2e

SENSITIVITIES = ["public", "low", "medium", "high", "hyper"]
AS_OF = "2026-11-20T12:00:00Z"


def slider_value(con, index: int = 0) -> str:
    return con.page.locator("[data-testid=stSlider] input[type=range]").nth(index).get_attribute("aria-valuetext")


def title(con) -> str:
    return con.page.locator("[data-testid=stMain] h1").first.inner_text()


def history(con, step) -> None:
    """Back or Forward, then wait for the page's run."""
    runs = con.runs_finished()
    step()
    con.wait_idle(settle=0.8, runs_at_least=runs + 1)


def test_context_follows_the_operator_and_back_forward_restore_it(console):
    con = console.open("simulator", {"max_sensitivity": "medium", "as_of": AS_OF, "limit": "20"})
    con.assert_healthy()
    assert slider_value(con) == "medium"
    set_select_slider(con, 0, "high", SENSITIVITIES)
    assert "max_sensitivity=high" in con.page.url  # the change is in the URL

    # The sidebar's What-if: context A is the one just simulated.
    con.act(lambda: con.page.locator("[data-testid=stSidebarNav] a", has_text="What-if").first.click(), settle=0.8)
    assert title(con) == "What-if"
    con.assert_healthy()
    assert slider_value(con, 0) == "high", "what-if's context A is not the simulator's context"
    con.screenshot("journey-what-if-from-simulator")
    # A change on what-if (context B) is an entry of its own: Back shows B as it was.
    b_before = slider_value(con, 1)
    b_after = SENSITIVITIES[SENSITIVITIES.index(b_before) - 1]  # one key press: one change
    set_select_slider(con, 1, b_after, SENSITIVITIES)
    assert f"b_max_sensitivity={b_after}" in con.page.url
    history(con, con.page.go_back)
    assert title(con) == "What-if" and slider_value(con, 1) == b_before and slider_value(con, 0) == "high"

    # Back: the simulator as it was left (high), then as it was opened (medium); Forward: high again.
    history(con, con.page.go_back)
    assert title(con) == "What can this agent see?" and slider_value(con) == "high"
    history(con, con.page.go_back)
    assert slider_value(con) == "medium", "Back did not restore the simulator's earlier context"
    assert "max_sensitivity=medium" in con.page.url
    history(con, con.page.go_forward)
    assert slider_value(con) == "high", "Forward did not restore the simulator's later context"
    con.assert_healthy()
    con.screenshot("journey-simulator-after-forward")
