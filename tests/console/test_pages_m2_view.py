"""Records, decay, audit, curate and review through the operator's view (SPEC 10, "One door";
migration group M2), with AppTest on the canary store (tests/support/canaries.py).

- Forged widget values: the browser sends a picker the id of a record beyond the clearance (a
  hyper record in another scope). Nothing is written, the record is unchanged, and nothing of it
  (no canary, not even its id as an option) is in what the page sends.
- Who looked: the explorer's table and curate's fork / supersede templates show content, so the
  view logs them, naming the operator and the page.
- The explorer's time control never shows a redacted record's salience at another instant.
- The audit page counts and filters by actor only over what the clearance sees.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
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
UTC = timezone.utc
RECORDS = cs.build_canary_records()
BY_ID = {r["id"]: r for r in RECORDS}
HIDDEN = "rec-semantic-hyper-beta"  # hidden from low/[alpha]: another scope, far above low
VISIBLE = "rec-semantic-low-alpha"  # full for low/[alpha]
REDACTED = "rec-semantic-medium-alpha"  # one level above low: redacted for low/[alpha]
HIGH = "rec-semantic-high-alpha"  # logged when shown in full (access-log level high)

LOW_CURATOR = Operator(name="low-curator", role=Role.CURATOR, max_sensitivity="low", scopes=["alpha"])
LOW_ADMIN = Operator(name="low-admin", role=Role.ADMIN, max_sensitivity="low", scopes=["alpha"])
LOW_VIEWER = Operator(name="low-viewer", role=Role.VIEWER, max_sensitivity="low", scopes=["alpha"])
HYPER_CURATOR = Operator(name="hyper-curator", role=Role.CURATOR, max_sensitivity="hyper")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'canary.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_records(cs.copy_records(RECORDS))
    m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield url
    st.cache_resource.clear()
    st.cache_data.clear()


def fresh(url: str) -> Membrane:
    return Membrane.open(url, load_sample=False)


def page(name: str, who: Operator) -> AppTest:
    return sign_in(AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT), who)


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def sent(at: AppTest) -> str:
    """Everything the page sends to the browser: each element's protobuf, as text."""
    return "\n".join(node.proto.SerializeToString().decode("utf-8", "replace")
                     for node in at._tree if getattr(node, "proto", None) is not None)


def shows_nothing_of(at: AppTest, record_id: str) -> None:
    text = sent(at)
    found = set(cs.CANARY_RE.findall(text)) & set(cs.canaries_for(BY_ID[record_id]))
    assert not found, f"{len(found)} canaries of {record_id} sent, e.g. {sorted(found)[:2]}"
    assert record_id not in text, f"{record_id} is named in the page (an option made of the forged value?)"


def state_of(url: str, record_id: str) -> tuple:
    """What a forged write would change: the record's labels, pinned, status, and its audit chain."""
    m = fresh(url)
    try:
        r = m.get(record_id)
        return (r.sensitivity.value, r.scope, r.lifecycle.pinned, r.revision_status, r.lifecycle.anchor_salience,
                [(e.entry.action, e.entry.actor) for e in m.audit_rows(record_id)])
    finally:
        m.close()


def apply_if_offered(at: AppTest, prefix: str) -> AppTest:
    """Tick every confirmation the page asks for, then press its Apply button, as a client would."""
    for box in at.checkbox:
        if box.key and box.key.startswith(prefix) and ("confirm" in box.key or "widen" in box.key):
            box.check()
    run(at)
    for box in at.checkbox:  # a widening confirmation appears once the preview is shown
        if box.key and box.key.startswith(prefix) and ("confirm" in box.key or "widen" in box.key) and not box.value:
            box.check()
    run(at)
    for button in at.button:
        if button.key and button.key.startswith(f"{prefix}_apply") and not button.disabled:
            button.click()
            run(at)
            break
    return at


# ----------------------------------------------------------------------------- forged picker values


@pytest.mark.parametrize("op, params, who", [
    ("reclassify", {"curate_sens": "public"}, LOW_CURATOR),  # declassify it, then read it
    ("pin", {}, LOW_CURATOR),
    ("delete", {}, LOW_ADMIN),  # archive a record the admin cannot see
], ids=["reclassify", "pin", "delete"])
def test_curate_writes_nothing_for_a_forged_record_id(store, op, params, who):
    before = state_of(store, HIDDEN)
    at = page("curate", who)
    at.session_state["curate_op"] = op
    at.session_state["curate_ids"] = [HIDDEN]  # as the browser's WebSocket would send it
    at.session_state["curate_rationale"] = "forged"
    for k, v in params.items():
        at.session_state[k] = v
    run(at)
    apply_if_offered(at, "curate")
    assert state_of(store, HIDDEN) == before
    assert at.multiselect(key="curate_ids").value == []
    shows_nothing_of(at, HIDDEN)


def test_curate_many_records_with_a_forged_one_changes_only_the_visible(store):
    """Several records at once (curate's bulk mode): the forged id is dropped, the others are done."""
    before = state_of(store, HIDDEN)
    at = page("curate", LOW_CURATOR)
    at.session_state["curate_op"] = "pin"
    at.session_state["curate_ids"] = [VISIBLE, HIDDEN]
    at.session_state["curate_rationale"] = "keep both"
    run(at)
    assert at.multiselect(key="curate_ids").value == [VISIBLE]
    apply_if_offered(at, "curate")
    assert state_of(store, HIDDEN) == before
    assert state_of(store, VISIBLE)[2] is True  # pinned, by the view, as the operator
    assert state_of(store, VISIBLE)[5][-1] == ("revise", "operator:low-curator")
    shows_nothing_of(at, HIDDEN)


def test_decay_offers_no_forged_record(store):
    at = page("decay", LOW_CURATOR)
    at.session_state["decay_ids"] = [HIDDEN, "no-such-record"]
    run(at)
    assert at.multiselect(key="decay_ids").value == []
    assert not at.get("plotly_chart")
    shows_nothing_of(at, HIDDEN)
    # A forged id beyond the clearance reads exactly as an id that does not exist.
    other = page("decay", LOW_CURATOR)
    other.session_state["decay_ids"] = ["rec-semantic-hyper-vault", "no-such-record"]
    run(other)
    assert sent(other).replace("rec-semantic-hyper-vault", "X") == sent(at).replace(HIDDEN, "X")


def test_review_resolves_no_forged_record(store):
    """The queue is the view's: a contested record beyond the clearance is neither listed nor
    resolved when its id is sent as the chosen one."""
    m = fresh(store)
    m.contest(HIDDEN, "external:ticket-1", "operator:someone", "doubtful")
    m.contest(VISIBLE, "external:ticket-2", "operator:someone", "doubtful")
    m.close()
    before = state_of(store, HIDDEN)
    at = page("review", LOW_CURATOR)
    at.session_state["rv_target"] = HIDDEN
    at.session_state["rv_action"] = "retract"
    at.session_state["rv_rationale"] = "forged"
    at.session_state["rv_prune_ids"] = [HIDDEN]
    run(at)
    assert at.selectbox(key="rv_target").value == VISIBLE
    assert state_of(store, HIDDEN) == before
    shows_nothing_of(at, HIDDEN)


def test_explorer_opens_no_forged_record(store):
    at = page("records", LOW_CURATOR)
    at.query_params["id"] = HIDDEN
    run(at)
    assert any("within your clearance" in e.value for e in at.error)
    assert not set(cs.CANARY_RE.findall(sent(at))) & set(cs.canaries_for(BY_ID[HIDDEN]))


# ----------------------------------------------------------------------------- who looked


def looked(url: str, actor: str) -> list:
    m = fresh(url)
    try:
        return m.access_log(actor=actor, limit=1000)[1]
    finally:
        m.close()


def test_the_explorer_table_is_a_logged_read(store):
    at = run(page("records", HYPER_CURATOR))
    shown = set(at.dataframe[0].value["id"])
    logged = {(a.record_id, a.via) for a in looked(store, "operator:hyper-curator")}
    wanted = {rid for rid in shown if BY_ID.get(rid, {}).get("sensitivity") in ("high", "hyper")}
    assert wanted, "the first page shows no high or hyper record: the test would be blind"
    assert {(rid, "page:records") for rid in wanted} <= logged


@pytest.mark.parametrize("op", ["fork", "supersede"])
def test_a_template_prefilled_from_a_record_is_a_logged_read(store, op):
    at = page("curate", HYPER_CURATOR)
    at.session_state["curate_op"] = op
    at.session_state["curate_ids"] = [HIGH]
    run(at)
    template = at.text_area(key="curate_json").value
    assert json.loads(template)["payload"] == BY_ID[HIGH]["payload"] | json.loads(template)["payload"]
    assert (HIGH, "page:curate") in {(a.record_id, a.via) for a in looked(store, "operator:hyper-curator")}


def test_reviews_supersede_template_is_a_logged_read(store):
    m = fresh(store)
    m.contest(HIGH, "external:ticket-3", "operator:someone", "doubtful")
    m.close()
    at = page("review", HYPER_CURATOR)
    at.session_state["rv_target"] = HIGH
    at.session_state["rv_action"] = "supersede"
    run(at)
    assert any(t.key == "rv_json" for t in at.text_area)
    assert (HIGH, "page:review") in {(a.record_id, a.via) for a in looked(store, "operator:hyper-curator")}


# ----------------------------------------------------------------------------- the explorer's time control


def fading_store(url: str) -> float:
    """A store of one record, medium in alpha (redacted for low/[alpha]), made an hour ago with a
    half-life of a day; its salience now."""
    fading = cs.copy_records([BY_ID[REDACTED]])[0]
    fading["lifecycle"]["decay"]["half_life_seconds"] = 86400
    fading["relations"] = []  # its target is not in this store
    fading["created_at"] = fading["updated_at"] = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    m = Membrane.open(url, load_sample=False)
    try:
        m.import_records([fading])
        m.operators.add(LOW_VIEWER.name, LOW_VIEWER.role, LOW_VIEWER.max_sensitivity, list(LOW_VIEWER.scopes),
                        actor="test")
        return m.get(REDACTED).salience
    finally:
        m.close()


def test_the_explorers_search_matches_a_redacted_record_by_its_salience_now(tmp_path):
    """Filtering or sorting by the salience at another instant would tell a redacted record's
    decay just as showing it would."""
    from membrane_engine import Filters
    from membrane_engine.oversight.record_query import search

    url = f"sqlite:///{tmp_path / 'fade.db'}"
    now_salience = fading_store(url)
    m = fresh(url)
    try:
        view = m.as_operator(LOW_VIEWER.name, via="page:records")
        later = datetime.now(UTC) + timedelta(days=30)
        assert view.search(Filters(salience_max=0.5), as_of=later) == (0, [])
        total, (record,) = view.search(Filters(salience_min=0.5), as_of=later)
        assert record.redacted and record.salience == pytest.approx(now_salience, abs=1e-3)
        assert search(m, Filters(salience_max=0.5), as_of=later)[0] == 1  # unrestricted: it has decayed by then
    finally:
        m.close()


def test_the_time_control_shows_no_decay_of_a_redacted_record(tmp_path, monkeypatch):
    """A redacted record's salience at another instant would tell its decay profile, which the
    redacted view withholds: the table leaves it out, the dialog shows it as it is now."""
    url = f"sqlite:///{tmp_path / 'fade.db'}"
    now_salience = fading_store(url)
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = page("records", LOW_VIEWER)
    at.session_state["rx_as_of"] = (datetime.now(UTC) + timedelta(days=30)).replace(tzinfo=None, microsecond=0)
    at.query_params["id"] = REDACTED
    run(at)
    table = at.dataframe[0].value.set_index("id")
    assert table.loc[REDACTED, "salience"] is None or math.isnan(table.loc[REDACTED, "salience"])
    shown = {e.label: e.value for e in at.metric}
    assert shown.get("Salience now") == f"{now_salience:.3f}", shown  # now, not thirty days on
    assert not [e for e in at.metric if e.label == "Salience at as-of"]
    st.cache_resource.clear()


# ----------------------------------------------------------------------------- the audit log


def numbers(data) -> list[float]:
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"])).tolist()
    return list(data)


def test_audit_activity_counts_only_what_the_clearance_sees(store):
    at = run(page("audit", LOW_VIEWER))
    total = int(next(e for e in at.metric if e.label == "Matching entries").value.replace(",", ""))
    (chart,) = [e for e in at.get("plotly_chart") if "audit_activity" in e.proto.id]
    bars = sum(sum(numbers(t["y"])) for t in json.loads(chart.proto.spec)["data"])
    m = fresh(store)
    everything = m.audit_query(limit=1)[0]
    m.close()
    assert total < everything  # the store has entries beyond the clearance
    assert bars == total


def test_filtering_the_audit_log_by_a_hidden_actor_shows_nothing(store):
    """operator:ghost wrote only to a record hidden from low/[alpha] and to one it sees redacted
    (whose entries' actors it does not see): neither the filter's options, nor its counts, nor
    the page tell that ghost wrote anything."""
    m = fresh(store)
    try:
        m.reinforce(HIDDEN, "operator:ghost", "haunting")
        m.reinforce(REDACTED, "operator:ghost", "haunting")
        m.operators.add(LOW_VIEWER.name, LOW_VIEWER.role, LOW_VIEWER.max_sensitivity, list(LOW_VIEWER.scopes),
                        actor="test")
        view = m.as_operator(LOW_VIEWER.name, via="page:audit")
        assert "operator:ghost" not in view.audit_actors()
        assert view.audit_query(actor="operator:ghost") == (0, [])
        assert view.audit_activity(actor="operator:ghost") == []
        assert m.audit_query(actor="operator:ghost")[0] == 2  # the entries are there
    finally:
        m.close()
    at = page("audit", LOW_VIEWER)
    at.session_state["audit_actor"] = "operator:ghost"  # forged: not an option
    run(at)
    assert "operator:ghost" not in at.selectbox(key="audit_actor").options
    assert "ghost" not in sent(at) and "haunting" not in sent(at)
