"""Page tests (AppTest) for a record's past: the decay page's true past curve, the audit page's
before/after values, links and retracts, and the record detail's history with "restore this
version". The store is built with a clock in the past, so the console (on the real clock)
reads a record that was reinforced and retracted days ago."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane
from membrane_engine.rules.labels import label
from membrane_engine.rules.roles import Operator, Role

from console.components.chart_safety import plot_text
from console.components.words import ACTION_COLORS
from tests.support.sessions import sign_in

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "console" / "app_pages"
UTC = timezone.utc
DAY = 86400
TIMEOUT = 60
RID = "7d1f0c2e-5b8a-4c3d-9e61-0a2b3c4d5e6f"
OTHER = "8e2a1d3f-6c9b-4d4e-8f72-1b3c4d5e6f70"
# Midnight six days ago: the record is created then, reinforced two days later, retracted a
# day after that (the console reads it on the real clock, today).
T0 = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=6)


def doc(rid: str, subject: str, sensitivity: str = "low", scope: str = "") -> dict:
    t = T0.isoformat().replace("+00:00", "Z")
    return {"id": rid, "type": "semantic", "sensitivity": sensitivity, "confidence": 0.9, "salience": 1.0,
            "scope": scope, "tags": ["a"], "created_at": t, "updated_at": t,
            "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": DAY, "min_salience": 0.0,
                                    "max_age_seconds": 0, "reinforcement_gain": 0.1},
                          "pinned": False, "deletion_policy": "auto_prune"},
            "provenance": {"sources": []}, "relations": [],
            "payload": {"kind": "semantic", "subject": subject, "predicate": "runs on", "object": "postgres 16",
                        "validity": {"mode": "global"}}}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """RID: created at T0 (S 1, half-life a day), reinforced at T0 + 2 d (0.25 -> 0.35),
    retracted at T0 + 3 d (0.175 -> 0). OTHER: reclassified low -> medium at T0 + 1 d."""
    url = f"sqlite:///{tmp_path / 'history.db'}"
    clock = Clock()
    m = Membrane.open(url, load_sample=False, clock=clock)
    m.import_records([doc(RID, "billing service"), doc(OTHER, "search service")])
    clock.now = T0 + timedelta(days=1)
    m.reclassify(OTHER, "operator:ann", "tighten", sensitivity="medium", scope="team", tags=["a", "b"])
    clock.now = T0 + timedelta(days=2)
    m.reinforce(RID, "operator:bob", "useful", gain=0.1)
    clock.now = T0 + timedelta(days=3)
    m.retract(RID, "operator:bob", "wrong host")
    m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    st.cache_resource.clear()
    yield url
    st.cache_resource.clear()


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def page(name: str) -> AppTest:
    return run(AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT))


def numbers(data) -> list[float]:
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"])).tolist()
    return [math.nan if v is None else v for v in data]


def instants(data) -> list[datetime]:
    return [pd.Timestamp(x).tz_localize(UTC).to_pydatetime() if pd.Timestamp(x).tzinfo is None
            else pd.Timestamp(x).to_pydatetime() for x in data]


def figure(at: AppTest) -> dict:
    (el,) = at.get("plotly_chart")
    return json.loads(el.proto.spec)


def table(at: AppTest, *columns: str) -> pd.DataFrame:
    for el in at.dataframe:
        if all(c in el.value.columns for c in columns):
            return el.value
    raise AssertionError(f"no table with columns {columns}")


def by_hand(t: datetime) -> float:
    """S(t) of RID as it really was: from 1 at T0, 0.35 from the reinforce, 0 from the retract."""
    d = (t - T0).total_seconds() / DAY
    if d < 0:
        return math.nan
    if d < 2:
        return 2 ** -d
    if d < 3:
        return 0.35 * 2 ** -(d - 2)
    return 0.0


# ----------------------------------------------------------------------------- decay


def test_decay_past_curve_of_a_record_reinforced_and_retracted_inside_the_window(store):
    at = page("decay")
    start = T0 + timedelta(hours=12)
    at.datetime_input(key="decay_start").set_value(start.astimezone(UTC).replace(tzinfo=None))
    at.select_slider(key="decay_horizon").set_value("1 week")
    at.text_input(key="decay_query").set_value(RID[:13])
    run(at)
    at.multiselect(key="decay_ids").set_value([RID])
    run(at)

    m = Membrane.open(store, load_sample=False)
    name = plot_text(label(m.get(RID), 40), 80)
    m.close()
    spec = figure(at)
    line = next(t for t in spec["data"] if t.get("name") == name)  # named by what it says
    assert RID in json.dumps(line.get("meta"))  # the id on hover
    xs, ys = instants(line["x"]), numbers(line["y"])
    assert len(xs) == len(ys) == 400 and abs((xs[0] - start).total_seconds()) < 1
    expected = [by_hand(t) for t in xs]
    assert np.allclose(ys, expected, atol=1e-6, equal_nan=True)
    assert ys[0] == pytest.approx(2 ** -0.5)  # not 0 (today's anchor) and not 1
    assert max(ys) == pytest.approx(2 ** -0.5)

    marks = {t["name"]: t for t in spec["data"] if t.get("mode") == "markers"}
    assert set(marks) == {"reinforce", "retract"}
    assert marks["reinforce"]["marker"]["color"] == ACTION_COLORS["reinforce"]
    assert marks["retract"]["marker"]["color"] == ACTION_COLORS["retract"]
    (when,) = instants(marks["reinforce"]["x"])
    assert abs((when - (T0 + timedelta(days=2))).total_seconds()) < 1
    assert numbers(marks["reinforce"]["y"]) == pytest.approx([0.35])
    assert numbers(marks["retract"]["y"]) == pytest.approx([0.0])
    assert "retract</b> of" in marks["retract"]["text"][0] and "S 0.1750 → 0.0000" in marks["retract"]["text"][0]

    row = table(at, "below at (UTC)").iloc[0]
    assert row["id"] == RID
    assert row["S(start)"] == pytest.approx(2 ** -0.5)
    assert row["S(end)"] == pytest.approx(0.0)
    # Below 0.1 at the retract (0.175 then), not "already below at the window start".
    assert row["status"] == "drops below"
    assert abs(row["below at (UTC)"].to_pydatetime().replace(tzinfo=UTC) - (T0 + timedelta(days=3))) < timedelta(seconds=1)


# ----------------------------------------------------------------------------- audit


def test_audit_names_a_retract_shows_before_and_after_and_links_each_record(store):
    at = page("audit")
    frame = table(at, "before", "after", "rationale")
    mine = frame[frame["record_id"] == f"/records?id={RID}"]  # every id links to the explorer
    assert len(mine) == len(frame[frame["record_id"].str.contains(RID)]) == 3
    retract = mine[mine["rationale"].str.startswith("retracted:")].iloc[0]
    assert retract["action"] == "retract"  # stored as delete; the record stays
    assert retract["before"] == "salience: 0.175; status: active"
    assert retract["after"] == "salience: 0; status: retracted"
    reinforce = mine[mine["action"] == "reinforce"].iloc[0]
    assert reinforce["before"] == "salience: 0.25" and reinforce["after"] == "salience: 0.35; gain: 0.1"
    m = Membrane.open(store, load_sample=False)
    assert set(mine["record"]) == {label(m.get(RID), 80)}  # records named by what they say
    m.close()
    other = frame[frame["record_id"] == f"/records?id={OTHER}"]
    revise = other[other["action"] == "revise"].iloc[0]
    assert revise["before"] == 'scope: ""; sensitivity: low; tags: ["a"]'
    assert revise["after"] == 'scope: team; sensitivity: medium; tags: ["a", "b"]'
    # The activity chart names the retract a retract (not the delete it is stored as) and
    # colours each action as every other chart does.
    spec = next(json.loads(el.proto.spec) for el in at.get("plotly_chart") if "audit_activity" in el.proto.id)
    assert {t["name"]: t["marker"]["color"] for t in spec["data"]} == {
        name: ACTION_COLORS[name] for name in ("create", "reinforce", "revise", "retract")}


def test_audit_timeline_and_csv_carry_before_and_after(store):
    from console.components.audit_table import filtered_csv

    at = page("audit")
    at.text_input(key="audit_record").set_value(RID)
    run(at)
    spec = next(json.loads(el.proto.spec) for el in at.get("plotly_chart") if "audit_timeline" in el.proto.id)
    marks = {t["name"]: t for t in spec["data"] if t.get("mode") == "markers"}
    assert set(marks) == {"create", "reinforce", "retract"}
    assert marks["retract"]["marker"]["color"] == ACTION_COLORS["retract"]
    assert "0.175" in json.dumps(marks["retract"]["customdata"])

    m = Membrane.open(store, load_sample=False)
    m.reclassify(OTHER, "operator:ann", "=HYPERLINK(\"http://x\")", tags=["-1+1"])
    text = filtered_csv(m, {"record_id": None}, lambda ids: {}).decode()
    m.close()
    got = pd.read_csv(__import__("io").StringIO(text), keep_default_na=False)
    assert list(got.columns[:7]) == ["timestamp", "record_id", "record", "position", "action", "before", "after"]
    retract = got[got["action"] == "retract"].iloc[0]
    assert retract["record_id"] == RID and retract["after"] == "salience: 0; status: retracted"
    formula = got[got["rationale"].str.contains("HYPERLINK")].iloc[0]
    assert formula["rationale"].startswith("reclassified")  # the rationale text leads with the change
    assert formula["after"] == "tags: [\"-1+1\"]" and formula["before"] == 'tags: ["a", "b"]'
    assert not any(str(v).startswith(("=", "+", "-", "@")) for v in got.to_numpy().ravel())


# ----------------------------------------------------------------------------- record detail: history


def detail_script() -> None:
    """The record detail for the record named in the query string, as the explorer draws it."""
    import streamlit as st

    from console.components.clearance import operator_view
    from console.components.record_detail import render_record

    view = operator_view("records")
    record = view.get(st.query_params["id"])
    render_record(view, record, key="rx_detail")


def detail(rid: str, operator: Operator) -> AppTest:
    at = AppTest.from_function(detail_script, default_timeout=TIMEOUT)
    sign_in(at, operator)
    at.query_params["id"] = rid
    return run(at)


CURATOR = Operator(name="cory", role=Role.CURATOR, max_sensitivity="hyper")
VIEWER = Operator(name="vic", role=Role.VIEWER, max_sensitivity="hyper")


def test_history_lists_versions_shows_the_past_and_a_curator_restores_one(store):
    at = detail(RID, CURATOR)
    versions = table(at, "when (UTC)", "who", "before", "after")
    assert list(versions["action"]) == ["create", "reinforce", "retract"]
    retract = versions.iloc[2]
    assert (retract["who"], retract["before"], retract["after"]) == \
        ("operator:bob", "salience: 0.175; status: active", "salience: 0.0; status: retracted")
    # The curve: 1 at creation, the reinforce and the retract as markers in their colours.
    (el,) = [e for e in at.get("plotly_chart") if "hist_curve" in e.proto.id]
    marks = {t["name"]: t for t in json.loads(el.proto.spec)["data"] if t.get("mode") == "markers"}
    assert set(marks) == {"reinforce", "retract"}
    assert marks["retract"]["marker"]["color"] == ACTION_COLORS["retract"]

    # The record right after the reinforce: active, salience 0.35 then.
    at.selectbox(key="rx_detail_hist_version").set_value(1)
    run(at)
    then = table(at, "field", "now", "changed")
    row = then.set_index("field")
    assert row.loc["status"].iloc[0] == "active" and row.loc["status", "now"] == "retracted"
    assert float(row.loc["salience"].iloc[0]) == pytest.approx(0.35)

    at.text_input(key="rx_detail_hist_why").set_value("the retract was a mistake")
    run(at)
    plan = table(at, "field", "before", "after", "changed")
    assert plan.set_index("field").loc["status", "after"] == "active"
    assert at.button(key="rx_detail_hist_restore").disabled  # not confirmed yet
    at.checkbox(key="rx_detail_hist_confirm").check()
    run(at)
    at.button(key="rx_detail_hist_restore").click()
    run(at)
    assert any("Restored the version of" in s.value for s in at.success)

    m = Membrane.open(store, load_sample=False)
    try:
        record = m.get(RID)
        assert record.revision_status == "active"
        assert record.salience == pytest.approx(0.35, abs=1e-3)  # S then, re-anchored seconds ago
        last = m.audit_rows(RID)[-1]
        assert last.entry.actor == "operator:cory" and last.details["version"].startswith((T0 + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"))
        assert last.details["salience"]["after"] == pytest.approx(0.35)
        assert m.history(RID)[-1].kind == "restore version"
        assert m.verify_audit() == []
    finally:
        m.close()


def test_a_viewer_sees_the_history_but_no_restore(store):
    at = detail(RID, VIEWER)
    assert list(table(at, "when (UTC)", "who")["action"]) == ["create", "reinforce", "retract"]
    assert not [b for b in at.button if b.key == "rx_detail_hist_restore"]
    assert not [t for t in at.text_input if t.key == "rx_detail_hist_why"]
    assert "Curators and admins can restore a version" in "\n".join(c.value for c in at.caption)


def test_a_version_beyond_the_clearance_shows_no_content(store):
    # OTHER: low until T0 + 1 d, medium in scope team since; now raised to high ("secret plan")
    # and lowered back to medium. An operator cleared for medium in team sees it in full now,
    # but not the changes into and out of high.
    m = Membrane.open(store, load_sample=False)
    m.reclassify(OTHER, "operator:ann", "secret plan", sensitivity="high")
    m.reclassify(OTHER, "operator:ann", "declassified", sensitivity="medium")
    m.close()
    team = Operator(name="tea", role=Role.CURATOR, max_sensitivity="medium", scopes=["team"])
    at = detail(OTHER, team)
    versions = table(at, "when (UTC)", "who", "before", "after")
    assert list(versions["action"]) == ["create", "revise", "revise", "revise"]
    assert "sensitivity: low" in versions.iloc[1]["before"]  # low -> medium: both within the clearance
    hidden = versions.iloc[2:]
    assert set(hidden["before"]) == set(hidden["after"]) == {""}
    assert set(hidden["why"]) == set(hidden["who"]) == {"(withheld: beyond your clearance)"}
    page_text = json.dumps([e.value for e in at.dataframe], default=str) + "".join(str(c.value) for c in at.markdown)
    assert "secret plan" not in page_text and "declassified" not in page_text
    # A curator who sees it redacted today sees no history at all.
    at = detail(OTHER, Operator(name="lou", role=Role.CURATOR, max_sensitivity="low"))
    assert "history of a record you see redacted is withheld" in "".join(i.value for i in at.info)
    assert not [d for d in at.dataframe if "who" in d.value.columns]
    assert not [e for e in at.get("plotly_chart") if "hist_curve" in e.proto.id]


def test_a_restore_that_widens_access_needs_its_own_confirmation(store):
    # OTHER is medium in scope team now; its first version was low and unscoped, which the
    # project agent (medium, project-alpha) would see in full: a widening, confirmed apart.
    at = detail(OTHER, CURATOR)
    at.selectbox(key="rx_detail_hist_version").set_value(0)
    run(at)
    at.text_input(key="rx_detail_hist_why").set_value("back to how it was")
    run(at)
    at.checkbox(key="rx_detail_hist_confirm").check()
    run(at)
    assert any("widens access" in w.value for w in at.warning)
    assert at.button(key="rx_detail_hist_restore").disabled  # the widening is not confirmed yet
    m = Membrane.open(store, load_sample=False)
    trail = len(m.audit_rows(OTHER))
    m.close()
    at.checkbox(key="rx_detail_hist_widen").check()
    run(at)
    at.button(key="rx_detail_hist_restore").click()
    run(at)
    m = Membrane.open(store, load_sample=False)
    try:
        record = m.get(OTHER)
        assert (record.sensitivity.value, record.scope, record.tags) == ("low", "", ["a"])
        assert len(m.audit_rows(OTHER)) == trail + 1 and m.verify_audit() == []
    finally:
        m.close()
