"""Page tests (AppTest) for "nothing untrue on a page": the selector's confidence in its terms,
link parameters never ignored silently, one name per action, records that share a name told
apart, and retracted / superseded records flagged where an agent would get them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.rules.labels import label

from tests.support.sessions import sample_store

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "console" / "app_pages"
UTC = timezone.utc
AS_OF = "2026-11-20T12:00:00Z"
TIMEOUT = 60
MEDIUM = TrustContext(max_sensitivity="medium", authenticated=True, actor_id="agent-1", scopes=[])
HYPER = TrustContext(max_sensitivity="hyper", authenticated=True, actor_id="agent-1", scopes=[])


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from sample_store(tmp_path / "one_door.db", monkeypatch)


def opened(name: str, query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(elements) -> str:
    """The elements' text as shown: Markdown escapes (``console.components.safe.md``) undone."""
    return re.sub(r"\\(.)", r"\1", "\n".join(str(e.value) for e in elements))


def selection_of(url: str, trust: TrustContext = MEDIUM):
    m = Membrane.open(url, load_sample=False)
    try:
        return m.retrieve(RetrieveRequest(trust=trust, memory_types=["competence", "plan_graph"],
                                          as_of=datetime(2026, 11, 20, 12, tzinfo=UTC))).selection
    finally:
        m.close()


# ----------------------------------------------------------------------------- selector


def test_selector_shows_the_confidence_formula_with_the_engines_values_and_why_needs_more(store):
    at = opened("selector", {"as_of": AS_OF, "max_sensitivity": "medium"})
    selection = selection_of(store)
    best, second = list(selection.scores.values())[:2]
    code = texts(at.code)
    assert f"= ({best:.4f} − {second:.4f}) / {best:.4f}" in code
    assert f"= {selection.confidence:.4f}" in code
    assert f"margin = confidence − threshold\n  = {selection.confidence:.4f} − 0.70 = " \
           f"{selection.confidence - 0.7:+.4f}" in code
    assert selection.needs_more
    why = texts(at.markdown)
    assert (f"needs_more is **true** because the confidence {selection.confidence:.4f} is below the threshold 0.70: "
            f"the best candidate leads the runner-up by {best - second:.4f}") in why
    # At a threshold under the confidence, the page says why it is false.
    at.slider(key="sel_threshold").set_value(0.0).run()
    assert "needs_more is **false**" in texts(at.markdown)


def test_selector_names_every_ignored_link_parameter(store):
    at = opened("selector", {"threshold": "abc", "max_hops": "abc", "min_salience": "-1"})
    warnings = texts(at.warning)
    assert "ignored link parameter threshold='abc': expected a number from 0 to 1" in warnings
    assert "ignored link parameter max_hops='abc': not a parameter of this page" in warnings
    assert "ignored link parameter min_salience '-1' must be a non-negative number" in warnings
    assert at.slider(key="sel_threshold").value == pytest.approx(0.7)


@pytest.mark.parametrize("page", ["selector", "simulator", "graph"])
def test_a_task_longer_than_the_engine_takes_is_named_not_used(store, page):
    at = opened(page, {"task": "x" * 45_000})
    warnings = texts(at.warning)
    assert "task of 45,000 characters: a task descriptor has at most 2,000" in warnings
    assert not [e for e in at.error if "task_descriptor" in e.value]  # nothing was sent to the engine
    assert "x" * 2001 not in "".join(str(v) for v in at.query_params.values())


def test_graph_names_every_ignored_link_parameter(store):
    at = opened("graph", {"hops": "9", "roots": "abc", "nodes": "0", "edges": "12", "max_hops": "abc"})
    warnings = texts(at.warning)
    assert "ignored link parameter hops='9': expected 1, 2, 3, none" in warnings
    assert "ignored link parameter roots='abc': expected a whole number 1-100" in warnings
    assert "ignored link parameter nodes='0': expected a whole number 1-500" in warnings
    assert "ignored link parameter max_hops='abc': not a parameter of this page" in warnings
    assert "edges=" not in warnings  # a good value is taken, not reported
    assert at.number_input(key="gr_edges").value == 12


def test_candidates_that_share_a_name_carry_a_short_id(store):
    at = opened("selector", {"as_of": AS_OF, "max_sensitivity": "hyper"})
    frame = next(el.value for el in at.dataframe if "record" in el.value.columns and "score" in el.value.columns)
    m = Membrane.open(store, load_sample=False)
    names = [label(m.get(rid)) for rid in frame["id"]]
    m.close()
    shared = {n for n in names if names.count(n) > 1}
    assert shared, "the sample's selector candidates include names that repeat"
    assert len(set(frame["record"])) == len(frame)  # every row tells its record apart
    for rid, name, shown in zip(frame["id"], names, frame["record"]):
        if name in shared:
            short = shown[len(name):].strip(" []…")
            assert shown.startswith(name + " [") and rid.startswith(short) and len(short) < len(rid)
        else:
            assert shown == name


# ----------------------------------------------------------------------------- audit


def test_the_audit_activity_calls_a_penalize_penalize(store):
    at = opened("audit")
    names = [t.get("name", "") for el in at.get("plotly_chart") for t in json.loads(el.proto.spec)["data"]]
    assert "penalize" in names and "decay" not in names
    box = next(s for s in at.selectbox if s.key == "audit_action")
    assert box.format_func("decay") == "penalize (stored as decay)"


# ----------------------------------------------------------------------------- retracted records


def test_simulator_warns_when_retracted_and_superseded_records_reach_the_agent(store):
    m = Membrane.open(store, load_sample=False)
    sim = m.simulate(RetrieveRequest(trust=HYPER, limit=0, as_of=datetime(2026, 11, 20, 12, tzinfo=UTC)))
    m.close()
    counts = sim.revised
    assert counts["retracted"] and counts["superseded"]
    at = opened("simulator", {"as_of": AS_OF, "max_sensitivity": "hyper", "limit": "0"})
    warnings = texts(at.warning)
    assert (f"{counts['retracted']:,} retracted records and {counts['superseded']:,} superseded records would reach "
            "this agent") in warnings
    at = opened("simulator", {"as_of": AS_OF, "max_sensitivity": "hyper", "limit": "0", "min_salience": "0.01"})
    assert "would reach this agent" not in texts(at.warning)


def test_a_record_card_flags_a_retracted_and_a_superseded_record(store):
    def cards(url: str) -> None:
        from console.components.record_card import record_card
        from membrane_engine import Membrane as M, RetrieveRequest, TrustContext

        m = M.open(url, load_sample=False)
        for record in m.retrieve(RetrieveRequest(trust=TrustContext(max_sensitivity="hyper"), limit=0)).records:
            record_card(record, key=record.id)
        m.close()

    at = AppTest.from_function(cards, args=(store,), default_timeout=TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at.markdown)
    assert ":red-badge[RETRACTED] retracted: kept at salience 0" in shown
    assert ":violet-badge[SUPERSEDED] superseded by " in shown
