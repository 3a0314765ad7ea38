"""The Graph page and the neighbourhood view in a real browser: the sample agent's graph drawn
with its redacted nodes locked, and, on the canary store (tests/support/canaries.py), no
byte of a record the simulated agent or the operator's clearance may not see in full in the
HTML or the WebSocket frames."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane, TrustContext
from membrane_engine.rules.trust import Verdict

from .conftest import _serve
from tests.support.browser import PASSWORD, ConsoleServer
from tests.support.widgets import set_multiselect, set_select_slider
from .test_leaks import SENSITIVITIES, assert_no_leak, canary_docs, canary_engine, ctx_id, forbidden, gate  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e

CLEARANCES = {"hyper": ("hyper", []), "low:alpha": ("low", ["alpha"])}


@pytest.fixture(scope="module")
def canary_graph_server(canary_store_url, tmp_path_factory) -> Iterator[ConsoleServer]:
    """The canary store's console, with one viewer operator per clearance of CLEARANCES."""
    m = Membrane.open(canary_store_url, load_sample=False)
    try:
        have = {o.name for o in m.operators.list()}
        for name, (level, scopes) in CLEARANCES.items():
            operator = "graph-" + name.replace(":", "-")
            if operator not in have:
                m.operators.add(operator, "viewer", level, scopes=scopes, password=PASSWORD, actor="e2e-graph")
    finally:
        m.close()
    yield from _serve("graph-canary", canary_store_url, tmp_path_factory.mktemp("graph-canary"))


def set_agent(con, level: str, scopes: list[str], task: str = "") -> None:
    set_select_slider(con, 0, level, SENSITIVITIES)
    set_multiselect(con, 0, scopes)
    if task:
        box = con.widget("stTextInput", "Task descriptor").locator("input")
        con.act(lambda: (box.fill(task), box.press("Enter")), settle=0.8)


def test_sample_agents_graph_with_locked_nodes(sample_server, new_console) -> None:
    con = new_console(sample_server)
    con.open("graph")
    set_agent(con, "medium", ["project-alpha"], "rotate the JWT signing key")
    con.page.locator(".js-plotly-plot .nodes, .js-plotly-plot .scatterlayer").first.wait_for(timeout=20000)
    con.assert_healthy()
    con.screenshot("graph-sample-agent")
    text = con.dom_text()
    assert "\U0001F512 redacted" in text, "no locked node in the legend"
    locked = con.page.locator(".js-plotly-plot text", has_text="\U0001F512")
    assert locked.count() >= 2, "no locked node label drawn"


def test_record_explorer_neighbourhood(sample_server, new_console, sample_membrane) -> None:
    superseding = next(r for r in sample_membrane.retrieve_by_type("semantic", TrustContext(max_sensitivity="hyper"))
                       if any(rel.predicate == "supersedes" for rel in r.relations))
    con = new_console(sample_server)
    con.open("records", {"id": superseding.id})
    con.act(lambda: con.page.locator("[data-testid=stExpander] summary", has_text="Neighbourhood graph").click(),
            settle=1.0)
    con.page.locator(".js-plotly-plot:visible").first.wait_for(timeout=20000)  # the history tab holds a hidden chart
    con.assert_healthy()
    assert "supersedes" in con.dom_text()
    con.screenshot("graph-neighbourhood")


AGENTS = [("public", []), ("low", ["alpha"]), ("medium", []), ("high", ["alpha"]), ("hyper", [])]


@pytest.mark.parametrize("clearance", list(CLEARANCES))
@pytest.mark.parametrize("agent", AGENTS, ids=ctx_id)
def test_graph_leaks_nothing(agent, clearance, canary_graph_server, canary_docs, canary_engine, new_console) -> None:
    level, scopes = agent
    c_level, c_scopes = CLEARANCES[clearance]
    v_agent = gate(canary_engine, canary_docs, level, scopes)
    v_clear = gate(canary_engine, canary_docs, c_level, c_scopes)
    # what may be shown in full: full for the agent AND for the operator's clearance
    stricter = {rid: min(v_agent[rid], v_clear[rid], key=lambda v: ["hidden", "redacted", "full"].index(v.value))
                for rid in canary_docs}
    bad, good = forbidden(canary_docs, [stricter])
    con = new_console(canary_graph_server, role=None)
    con.sign_in("graph-" + clearance.replace(":", "-"), PASSWORD)
    con.open("graph")
    set_agent(con, level, scopes)
    con.mark()  # on the way here the page drew the form's default context (medium) and steps to this one
    for hops in ("2", "3"):
        group = con.widget("stButtonGroup", "Hops from the roots")
        con.act(lambda: group.get_by_text(hops, exact=True).click(), settle=0.8)
        assert_no_leak(con, bad, f"graph {ctx_id(agent)} under {clearance}, {hops}")
    if any(v is Verdict.FULL for v in stricter.values()):
        assert con.find(good), "no canary of a record shown in full was found: the search is blind"
    con.screenshot(f"graph-leaks-{ctx_id(agent)}-{clearance.replace(':', '-')}")

