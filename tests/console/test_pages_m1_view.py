"""The overview, simulator, what-if, selector and graph pages through the operator's view (SPEC 10,
"One door"): what a narrow clearance learns of records beyond it (nothing but one total), what
a sensitive record shown in full leaves in the access log, and what a forged widget value gets.

A small store of its own (tests/support/canaries.py's records, dated and pinned here):
visible to the low/[alpha] viewer, a few low records in scope alpha; beyond it, records in
scope "zeta-secret-scope", among them a hyper competence created between the two instants the
overview is asked about.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane
from membrane_engine.rules.roles import Operator, Role
from tests.support.sessions import sign_in
from tests.support import canaries as cs

ROOT = Path(__file__).resolve().parents[2]

PAGES = ROOT / "console" / "app_pages"
TIMEOUT = 90
SECRET_SCOPE = "zeta-secret-scope"
EARLY, LATE = "2026-05-01T12:00:00Z", "2026-06-15T12:00:00Z"  # the hyper record is made at LATE
BEFORE, AFTER = "2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"  # the two instants asked
LOW_ALPHA = Operator(name="lena", role=Role.VIEWER, max_sensitivity="low", scopes=["alpha"])
LOW_CURATOR = Operator(name="carl", role=Role.CURATOR, max_sensitivity="low", scopes=["alpha"])
HYPER = Operator(name="hal", role=Role.CURATOR, max_sensitivity="hyper")


def record(rid: str, type_: str, sensitivity: str, scope: str, created: str = EARLY, success: float | None = None,
           target: str | None = None) -> dict:
    """A canary record created at ``created`` with its audit entries then, pinned (its salience
    is the same at every instant, so only what was created or written moves a number)."""
    out = cs._record(rid, type_, sensitivity, scope, target)
    out["created_at"] = out["updated_at"] = created
    out["lifecycle"]["pinned"] = True
    for entry in out["audit_log"]:
        entry["timestamp"] = created
    out["provenance"]["sources"][0]["timestamp"] = created
    for relation in out["relations"]:
        relation["created_at"] = created
    if success is not None:
        out["payload"]["performance"]["success_rate"] = success
    if type_ == "episodic":
        out["payload"]["timeline"][0]["t"] = created
    return out


VISIBLE = [record("seen-semantic", "semantic", "low", "alpha"),
           record("seen-competence", "competence", "public", "alpha", success=0.5),
           record("seen-plan", "plan_graph", "low", "alpha")]
# Beyond the low/[alpha] clearance: another scope, or hyper in alpha; the first one is made late.
LATE_HYPER = record("late-hyper-competence", "competence", "hyper", SECRET_SCOPE, created=LATE, success=0.123)
BEYOND = [LATE_HYPER,
          record("early-secret-semantic", "semantic", "low", SECRET_SCOPE),
          record("early-hyper-alpha", "episodic", "hyper", "alpha")]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('m1_view') / 'store.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_records(cs.copy_records(VISIBLE + BEYOND))
    m.close()
    return url


@pytest.fixture(autouse=True)
def store_env(store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MEMBRANE_DB_URL", store)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


def page(name: str, who: Operator) -> AppTest:
    return sign_in(AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT), who)


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def sent(at: AppTest) -> str:
    """Everything the page sends to the browser: each element's protobuf, as text."""
    parts = []
    for node in at._tree:
        proto = getattr(node, "proto", None)
        if proto is not None:
            parts.append(proto.SerializeToString().decode("utf-8", "replace"))
    return "\n".join(parts)


def canaries(rec: dict) -> set[str]:
    return set(cs.canaries_for(rec))


# ---------------------------------------------------------------------------- overview


def overview_numbers(at: AppTest) -> dict[str, object]:
    """Every number the overview shows, by where it is: metrics, tables, captions and infos
    (the caption naming the instant itself left out: it differs by design)."""
    out: dict[str, object] = {f"metric {m.label}": m.value for m in at.metric}
    for frame in at.dataframe:
        out[f"table {frame.proto.id or len(out)}"] = frame.value.astype(str).to_dict("list")
    for i, c in enumerate(at.caption):
        if not c.value.startswith("Metrics at"):
            out[f"caption {i}"] = c.value
    for i, e in enumerate(at.info):
        out[f"info {i}"] = e.value
    return out


def test_overview_at_two_instants_tells_a_narrow_clearance_nothing_of_what_is_beyond_it(store: str) -> None:
    """Between the two instants, a hyper competence in another scope was created (with its audit
    entries). The low/[alpha] viewer's overview is the same at both: none of its success rate,
    type, sensitivity, scope or creation time moves a number, and no scope but alpha is named.
    What is beyond the clearance is one line, counted now."""
    shown = {}
    for instant in (BEFORE, AFTER):
        at = page("overview", LOW_ALPHA)
        at.query_params["as_of"] = instant
        at.run()
        no_exception(at)
        shown[instant] = overview_numbers(at)
        text = sent(at)
        assert SECRET_SCOPE not in text
        assert not canaries(LATE_HYPER) & set(cs.CANARY_RE.findall(text))
        assert "3 records beyond your clearance" in [c.value.split(":")[0] for c in at.caption]
        assert not any("change counter" in c.value for c in at.caption)  # it moves with hidden writes too
        assert at.metric[0].label == "Records" and at.metric[0].value == "3"  # not blind: the visible three
    assert shown[BEFORE] == shown[AFTER]


# ---------------------------------------------------------------------------- what-if


def what_if(who: Operator) -> AppTest:
    at = page("what_if", who)
    at.query_params.update({"a_max_sensitivity": "public", "a_scopes": "", "b_max_sensitivity": "hyper",
                            "b_scopes": ""})
    return at.run()


def test_what_if_counts_over_what_the_clearance_sees_and_names_the_rest_once(store: str) -> None:
    at = what_if(LOW_ALPHA)
    no_exception(at)
    shown = {m.label: m.value for m in at.metric}
    seen = [r for r in VISIBLE + BEYOND if cs.verdict(r, "low", ["alpha"]) != "hidden"]
    assert shown["Records compared"] == str(len(seen)) == "3"
    assert "3 records beyond your clearance" in [c.value.split(":")[0] for c in at.caption]
    text = sent(at)
    for rec in BEYOND:
        assert rec["id"] not in text and not canaries(rec) & set(cs.CANARY_RE.findall(text))
    assert SECRET_SCOPE not in text


def test_what_if_showing_a_hyper_record_in_full_names_the_operator_in_the_access_log(store: str) -> None:
    at = what_if(HYPER)
    # The first changed row (gains first, then by id: the hyper episodic in alpha), selected.
    at.session_state["wi_rows_0_all"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    no_exception(at)
    assert cs._canary("early-hyper-alpha", "timeline.summary") in sent(at)
    m = Membrane.open(store, load_sample=False)
    try:
        entries = m.access_log(record_id="early-hyper-alpha", limit=100)[1]
    finally:
        m.close()
    assert [(a.actor, a.via) for a in entries] == [("operator:hal", "page:what_if")]
