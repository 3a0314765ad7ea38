"""The Capture page (AppTest), SPEC 12 through the operator's view: the preview shows the
entities a capture would match and create, its edges and derived fact, and writes nothing;
Capture writes it as the signed-in operator; a viewer sees the form disabled; a value the page
never offered (beyond the clearance) is refused with nothing written; the form is kept in the
URL; the Graph page draws the edges a capture wrote."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane
from membrane_engine.rules.roles import Operator, Role

from tests.support.sessions import sample_store, sign_in

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "console" / "app_pages"
TIMEOUT = 60
CURATOR = Operator(name="cora", role=Role.CURATOR, max_sensitivity="hyper")
VIEWER = Operator(name="vera", role=Role.VIEWER, max_sensitivity="hyper")
MEDIUM = Operator(name="mel", role=Role.CURATOR, max_sensitivity="medium", scopes=("project-alpha",))

DEV_PATEL = "5dc05140-cde6-5fba-bd02-4fe9e2d738fe"  # the sample's Dev Patel (low, project-alpha, alias "dev")
AUTH_MIDDLEWARE = "cd250bc0-2823-56c3-966e-781ebad6ca30"  # alias "pkg/auth/middleware.go" (low, project-alpha)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from sample_store(tmp_path / "capture.db", monkeypatch)


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def page(operator: Operator = CURATOR, query: dict[str, str] | None = None) -> AppTest:
    at = sign_in(AppTest.from_file(str(PAGES / "capture.py"), default_timeout=TIMEOUT), operator)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return ok(at.run())


def shown(at: AppTest) -> str:
    """The page's words, Markdown escapes undone."""
    parts = [str(getattr(el, "value", "")) for kind in ("markdown", "caption", "info", "error", "text", "warning",
                                                         "success", "subheader")
             for el in getattr(at, kind)]
    return re.sub(r"\\(.)", r"\1", "\n".join(parts))


def frames(at: AppTest) -> list[list[dict]]:
    return [d.value.to_dict("records") for d in at.dataframe]


def counts(url: str) -> tuple[int, int]:
    """Records and audit entries of the store (a write changes both)."""
    m = Membrane.open(url, load_sample=False)
    try:
        return m.count(), m.audit_query(limit=1)[0]
    finally:
        m.close()


def pairing(at: AppTest, sensitivity: str = "low") -> AppTest:
    """An event in project-alpha naming Dev Patel (in another case), a file by its alias, and a
    concept the sample does not know."""
    at.text_input(key="cap_source").set_value("kestrel")
    at.text_area(key="cap_f_text").set_value("Paired on the limiter leak")
    at.text_input(key="cap_f_file").set_value("pkg/auth/middleware.go")
    at.text_area(key="cap_entities").set_value("DEV PATEL\nidle bucket eviction")
    at.selectbox(key="cap_scope").set_value("project-alpha")
    at.selectbox(key="cap_sens").set_value(sensitivity)
    return ok(at.run())


def mentions(at: AppTest) -> dict[str, tuple[str, str]]:
    """The preview's mentions (the last table of them: a capture written is shown above it)."""
    rows = [rows for rows in frames(at) if rows and "mention" in rows[0]][-1]
    return {r["mention"]: (r["entity"], r["resolution"]) for r in rows}


def test_the_preview_shows_matches_creations_and_edges_and_writes_nothing(store):
    before = counts(store)
    at = pairing(page())
    found = mentions(at)
    assert found["DEV PATEL"] == ("Dev Patel", "matched")
    assert found["pkg/auth/middleware.go"] == ("auth middleware", "matched")
    assert found["idle bucket eviction"] == ("idle bucket eviction", "new entity")
    text = shown(at)
    assert "Would write an episodic record (low, scope project-alpha), 1 new entity, 6 edges" in text, text
    edges = next(rows for rows in frames(at) if rows and "predicate" in rows[0])
    assert {(e["predicate"], e["to"]) for e in edges} >= {("mentions_entity", "Dev Patel"),
                                                          ("mentions_entity", "(new) idle bucket eviction")}
    assert any(e["from"] == "Dev Patel" and e["predicate"] == "mentioned_in" for e in edges)
    assert counts(store) == before, "the preview wrote"
    assert [b.key for b in at.button] == ["cap_apply", "cap_clear"]


def test_capture_writes_what_the_preview_showed_as_the_operator(store):
    before = counts(store)
    at = pairing(page())
    ok(at.button(key="cap_apply").click().run())
    text = shown(at)
    assert "Captured." in text and "Wrote" in text, text
    records = next(rows for rows in frames(at) if rows and "role" in rows[0])
    assert sorted(r["role"] for r in records) == ["captured", "new entity"]
    assert all(r["explorer"].startswith("records?id=") for r in records)
    m = Membrane.open(store, load_sample=False)
    try:
        assert m.count() == before[0] + 2
        captured = next(m.get(r["id"]) for r in records if r["role"] == "captured")
        assert captured.scope == "project-alpha" and captured.sensitivity.value == "low"
        assert {(r.predicate, r.target_id) for r in captured.relations} >= {("mentions_entity", DEV_PATEL),
                                                                            ("mentions_entity", AUTH_MIDDLEWARE)}
        assert m.audit_log(captured.id)[0].actor == "operator:cora"
        assert any(r.predicate == "mentioned_in" and r.target_id == captured.id for r in m.get(DEV_PATEL).relations)
        assert m.verify_audit() == []
    finally:
        m.close()
    # The same form again: the concept now resolves to the entity just created.
    assert mentions(at)["idle bucket eviction"] == ("idle bucket eviction", "matched")


def test_an_observation_previews_its_derived_fact(store):
    at = page()
    ok(at.segmented_control(key="cap_kind").set_value("observation").run())
    at.text_input(key="cap_source").set_value("kestrel")
    at.text_input(key="cap_f_subject").set_value("dev")
    at.text_input(key="cap_f_predicate").set_value("reviews")
    at.text_area(key="cap_f_object").set_value("the limiter fix")
    at.selectbox(key="cap_scope").set_value("project-alpha")
    ok(at.run())
    assert "Derived fact" in shown(at)
    assert "Dev Patel · reviews · the limiter fix" in [t.value for t in at.text]
    records = next(rows for rows in frames(at) if rows and "role" in rows[0])
    assert [r["role"] for r in records] == ["captured", "derived fact"]


def test_a_viewer_sees_the_form_disabled_with_the_reason(store):
    before = counts(store)
    at = page(VIEWER)
    assert "Capture is not available to you: capture needs the curator role; vera is a viewer" in shown(at)
    assert at.text_input(key="cap_source").disabled and at.selectbox(key="cap_sens").disabled
    assert not at.button, "a viewer is offered a button"
    assert counts(store) == before


def test_only_sensitivities_and_scopes_within_the_clearance_are_offered(store):
    at = page(MEDIUM)
    assert at.selectbox(key="cap_sens").options == ["public", "low", "medium"]
    assert at.selectbox(key="cap_scope").options == ["(unscoped)", "project-alpha"]


@pytest.mark.parametrize("widget, value, refusal, back_to", [
    ("cap_sens", "hyper", "sensitivity 'hyper' is not one you may choose here (your clearance: up to medium)", "low"),
    ("cap_scope", "infra-ops", "scope 'infra-ops' is not one you may choose here", ""),
], ids=["sensitivity", "scope"])
def test_a_forged_value_beyond_the_clearance_is_refused_and_nothing_written(store, widget, value, refusal, back_to):
    before = counts(store)
    at = pairing(page(MEDIUM))
    assert [b.key for b in at.button] == ["cap_apply", "cap_clear"]
    # The browser sends a value the page never offered (Streamlit hands a selectbox's unknown
    # value to the script as it came).
    box = at.selectbox(key=widget)
    box.options = [*box.options, value]
    box.set_value(value)
    ok(at.button(key="cap_apply").click().run())
    assert f"Refused: {refusal}. Nothing was previewed or written." in shown(at)
    assert "Captured." not in shown(at) and "Would write" not in shown(at)
    assert counts(store) == before
    assert at.selectbox(key=widget).value == back_to  # back to what the page offers


def test_a_clearance_lowered_after_the_preview_is_held_at_the_moment_of_writing(store):
    before = counts(store)
    at = pairing(page(), sensitivity="high")
    m = Membrane.open(store, load_sample=False)
    try:
        m.operators.set("cora", actor="test", max_sensitivity="medium")
    finally:
        m.close()
    ok(at.button(key="cap_apply").click().run())
    assert counts(store) == before
    assert "Captured." not in shown(at)


def test_a_refused_request_names_the_field_and_value(store):
    at = page()
    ok(at.segmented_control(key="cap_kind").set_value("tool_output").run())
    at.text_input(key="cap_source").set_value("kestrel")
    at.text_area(key="cap_f_args").set_value('["not", "an", "object"]')
    ok(at.run())
    assert "Arguments must be a JSON object (got list)" in shown(at)
    at.text_area(key="cap_f_args").set_value("")
    ok(at.run())
    assert "tool name is required for tool output candidates" in shown(at)
    refused = next(rows for rows in frames(at) if rows and "problem" in rows[0])
    assert refused == [{"field": "content.tool_name", "problem": "required for tool_output"}]
    assert not at.button
    at.text_input(key="cap_f_tool_name").set_value("rg")
    at.text_input(key="cap_tags").set_value("ok, " + "x" * 300)
    ok(at.run())
    assert "tags: tag is 300 characters; the limit is 256 (got ['ok', 'xxx" in shown(at)
    assert not at.button


def test_the_form_is_kept_in_the_url_and_restored_from_it(store):
    at = pairing(page())
    query = dict(at.query_params)
    flat = {k: (v[0] if isinstance(v, list) else v) for k, v in query.items()}
    assert flat["source"] == "kestrel" and flat["scope"] == "project-alpha" and flat["sensitivity"] == "low"
    assert flat["entities"] == "DEV PATEL\nidle bucket eviction" and flat["file"] == "pkg/auth/middleware.go"
    again = page(query=flat)
    assert again.text_input(key="cap_source").value == "kestrel"
    assert again.selectbox(key="cap_scope").value == "project-alpha"
    assert mentions(again)["DEV PATEL"] == ("Dev Patel", "matched")


def test_a_link_beyond_the_clearance_is_said_and_not_taken(store):
    at = page(MEDIUM, {"source": "kestrel", "sensitivity": "hyper", "scope": "infra-ops"})
    text = shown(at)
    assert "ignored link parameter sensitivity='hyper': expected a sensitivity within your clearance" in text
    assert "ignored link parameter scope='infra-ops': expected a scope within your clearance" in text
    assert at.selectbox(key="cap_sens").value == "low" and at.selectbox(key="cap_scope").value == ""


def test_the_graph_page_draws_the_edges_a_capture_wrote(store):
    at = pairing(page())
    ok(at.button(key="cap_apply").click().run())
    graph = sign_in(AppTest.from_file(str(PAGES / "graph.py"), default_timeout=TIMEOUT), CURATOR)
    ok(graph.run())
    graph.text_input(key="gr_task").set_value("idle bucket eviction")
    ok(graph.run())
    spec = [json.loads(c.proto.spec) for c in graph.get("plotly_chart")]
    drawn = {t.get("name") for s in spec for t in s["data"]}
    assert {"mentions_entity", "mentioned_in"} <= drawn, drawn
    nodes = next(d.value for d in graph.dataframe if "node" in d.value.columns)
    assert "idle bucket eviction" in set(nodes["name"])
