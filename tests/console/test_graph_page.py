"""The Graph page and the record explorer's neighbourhood view (AppTest): what is drawn is what
the engine's retrieve_graph returns for the agent's context, cut to the operator's clearance."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.sessions import sample_store, sign_in
from membrane_engine import Membrane, RetrieveGraphRequest, TrustContext
from membrane_engine.rules.roles import Operator

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "console" / "app_pages"
SAMPLE = ROOT / "sample_data" / "membrane_sample.json"
TIMEOUT = 60


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from sample_store(tmp_path / "graph.db", monkeypatch)


TYPES = {"working", "entity", "semantic", "competence", "plan_graph", "episodic", "\U0001F512 redacted"}


def signed_in(at: AppTest, level: str = "hyper", scopes: tuple[str, ...] = ()) -> AppTest:
    return sign_in(at, Operator(name="olive", role="viewer", max_sensitivity=level, scopes=scopes))


def graph_page(level: str = "hyper", scopes: tuple[str, ...] = ()) -> AppTest:
    at = signed_in(AppTest.from_file(str(PAGES / "graph.py"), default_timeout=TIMEOUT), level, scopes)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def figure(at: AppTest) -> dict:
    """The page's one graph figure (the one whose traces include record types), as its Plotly
    JSON spec; the record detail also draws the record's salience history."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    graphs = [s for s in specs if any(t.get("name") in TYPES for t in s["data"])]
    assert len(graphs) == 1, f"{len(graphs)} graph figures among {len(specs)} on the page"
    return graphs[0]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def sample_agent(at: AppTest, task: str) -> AppTest:
    """The "Project agent (medium, project-alpha)" preset and a task."""
    at.selectbox(key="gr_preset").set_value("Project agent (medium, project-alpha)").run()
    at.text_input(key="gr_task").set_value(task).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_nobody_signed_in_sees_nothing(store: str) -> None:
    at = sign_in(AppTest.from_file(str(PAGES / "graph.py"), default_timeout=TIMEOUT), None)
    at.run()
    assert not at.exception
    assert not at.get("plotly_chart") and any("Sign in" in i.value for i in at.info)


@pytest.mark.parametrize("task", ["fix flaky pytest test in CI", "rotate the JWT signing key", ""])
def test_page_draws_the_engines_graph_with_redacted_nodes_locked(store: str, task: str) -> None:
    at = sample_agent(graph_page(), task)
    trust = TrustContext(max_sensitivity="medium", authenticated=True, actor_id="agent-1", scopes=["project-alpha"])
    m = Membrane.open(store, load_sample=False)
    expected = m.retrieve_graph(RetrieveGraphRequest(trust=trust, task_descriptor=task))
    m.close()
    shown = metrics(at)
    assert shown["Nodes"] == str(len(expected.nodes)) and shown["Edges"] == str(len(expected.edges))
    assert "Withheld" not in shown  # a count per context would tell what is beyond a clearance
    spec = figure(at)
    traces = {t["name"]: t for t in spec["data"]}
    redacted = [n for n in expected.nodes if n.record.redacted]
    assert shown["Redacted"] == str(len(redacted))
    if redacted:
        locked = traces["\U0001F512 redacted"]
        assert locked["marker"]["symbol"] == "square" and len(locked["x"]) == len(redacted)
        assert all(text.startswith("\U0001F512") for text in locked["text"])
        assert all("redacted (metadata only)" in h for h in locked["hovertext"])
    table = at.dataframe[0].value
    assert set(table["id"]) == {n.record.id for n in expected.nodes}
    # typed edges: one legend entry per predicate
    assert {e.predicate for e in expected.edges} <= set(traces)


def test_the_sample_agents_graph_has_locked_nodes(store: str) -> None:
    """Issue 21's "done when": the sample agent's graph shows redacted nodes locked."""
    at = sample_agent(graph_page(), "rotate the JWT signing key")
    assert int(metrics(at)["Redacted"]) >= 1
    assert "\U0001F512 redacted" in {t["name"] for t in figure(at)["data"]}


def test_clearance_narrower_than_the_agent_withholds_nodes(store: str) -> None:
    """SPEC 10: simulating a context wider than one's clearance shows counts, never content."""
    at = graph_page(level="low", scopes=("project-alpha",))
    at.selectbox(key="gr_preset").set_value("Administrator (hyper, every scope)").run()
    at.text_input(key="gr_task").set_value("rotate the JWT signing key").run()
    assert not at.exception
    # Not how many nodes of this graph were withheld (trying contexts would tell the scopes and
    # levels beyond the clearance): the store's one total.
    assert "Withheld" not in metrics(at)
    assert any("beyond your clearance: a graph that reaches them is drawn without them" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert set(table["sensitivity"]) <= {"public", "low", "medium"}  # high and hyper: beyond the clearance
    assert table[table["sensitivity"] == "medium"]["redacted"].all()
    page_text = json.dumps(figure(at)) + table.to_json()
    m = Membrane.open(store, load_sample=False)
    above = {r.id for r in m.retrieve_by_type("competence", TrustContext(max_sensitivity="hyper"))
             if r.sensitivity.value in ("high", "hyper")}
    m.close()
    for rid in above:
        assert rid not in page_text
    assert "FAKE-AWS-KEY" not in page_text and "drain a self-hosted runner" not in page_text


def test_hops_and_edge_types(store: str) -> None:
    at = sample_agent(graph_page(), "fix flaky pytest test in CI")
    one = int(metrics(at)["Nodes"])
    at.segmented_control(key="gr_hops").set_value("none").run()
    assert metrics(at)["Edges"] == "0" and int(metrics(at)["Nodes"]) <= one
    at.segmented_control(key="gr_hops").set_value("2").run()
    pills = next(p for p in at.pills if p.label == "Edge types")
    predicates = pills.options
    pills.set_value([predicates[0]]).run()
    drawn = [t["name"] for t in figure(at)["data"] if t.get("mode") == "lines"]
    assert drawn == [predicates[0]]


def test_record_explorer_neighbourhood(store: str) -> None:
    records = json.loads(SAMPLE.read_text())
    superseding = next(r for r in records if any(x["predicate"] == "supersedes" for x in r.get("relations") or []))
    at = signed_in(AppTest.from_file(str(PAGES / "records.py"), default_timeout=TIMEOUT))
    at.query_params["id"] = superseding["id"]
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    spec = figure(at)
    names = {t["name"] for t in spec["data"]}
    assert "supersedes" in names and "mentions_entity" in names
    entity_hover = [h for t in spec["data"] if t["name"] == "entity" for h in t["hovertext"]]
    assert any("aliases:" in h or "identifiers:" in h for h in entity_hover)


def test_scopes_offered_are_those_the_clearance_sees(store: str) -> None:
    """A scope only records beyond the operator's clearance carry is not named in the form."""
    at = graph_page(level="low", scopes=("project-alpha",))
    offered = set(at.multiselect(key="gr_scopes").options)
    assert offered == {"project-alpha"}
    m = Membrane.open(store, load_sample=False)
    assert len(m.scopes()) > 1  # the store has others
    m.close()
