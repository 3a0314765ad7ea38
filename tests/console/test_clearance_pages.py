"""Every page through the signed-in operator's clearance (SPEC 10), with AppTest on the canary
store (tests/support/canaries.py: every byte a gate must withhold is a unique CANARY).

The clearance leak grid: operators at each clearance (public .. hyper, every scope and scope
alpha) x every page, each page driven to show records (a record opened by ``?id=``, the simulator
and the selector asked for a context wider than the clearance, what-if up to hyper, the audit
log's largest page, an export prepared): no canary of a record the clearance may not see in full
is in anything the page sends (every element's protobuf, which is what the browser's WebSocket
receives; st.dataframe cells included). The browser variant of the grid (HTML and frames) is in
tests/e2e/test_clearance_grid.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane

from membrane_engine.rules.roles import Operator, Role
from tests.support.sessions import TEST_ADMIN as ROOT
from tests.support.sessions import sign_in
from tests.support import canaries as cs

ROOT_DIR = Path(__file__).resolve().parents[2]

PAGES = ROOT_DIR / "console" / "app_pages"
TIMEOUT = 90
RECORDS = cs.build_canary_records()
BY_ID = {r["id"]: r for r in RECORDS}
CLEARANCES = [(s, scopes) for s in cs.SENSITIVITIES for scopes in ((), ("alpha",))]
PAGE_NAMES = ["overview", "simulator", "what_if", "records", "decay", "selector", "audit", "curate", "import_export",
              "review"]
GRID_PAGES = PAGE_NAMES + ["policies"]  # the Policies page gates by the clearance itself


def clearance_id(c) -> str:
    return f"{c[0]}-{'+'.join(c[1]) or 'all-scopes'}"


@pytest.fixture(scope="module")
def canary_url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('clearance_pages') / 'canary.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_records(cs.copy_records(RECORDS))
    m.close()
    return url


@pytest.fixture(autouse=True)
def store_env(canary_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MEMBRANE_DB_URL", canary_url)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


def sent(at: AppTest) -> str:
    """Everything the page sends to the browser: each element's protobuf, as text."""
    parts = []
    for node in at._tree:
        proto = getattr(node, "proto", None)
        if proto is not None:
            parts.append(proto.SerializeToString().decode("utf-8", "replace"))
    return "\n".join(parts)


def leaked(at: AppTest, bad: set[str]) -> list[str]:
    return sorted(set(cs.CANARY_RE.findall(sent(at))) & bad)


def one(sensitivity: str, scope: str, type_: str = "semantic") -> str:
    return f"rec-{type_}-{sensitivity}-{scope or 'unscoped'}"


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def operator(name: str, max_sensitivity: str, scopes=(), role: str = "viewer") -> Operator:
    return Operator(name=name, role=Role(role), max_sensitivity=max_sensitivity, scopes=list(scopes))


def page(name: str, who=ROOT) -> AppTest:
    return sign_in(AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT), who)


def drive(name: str, who, wide: bool = True) -> Iterator[AppTest]:
    """Run page ``name`` as ``who`` so that it shows records, yielding after each run (the
    caller checks every state the page goes through)."""
    at = page(name, who)
    if name in ("simulator", "selector") and wide:
        at.query_params.update({"max_sensitivity": "hyper", "scopes": "", "limit": "0"})
    if name == "records":
        at.query_params["id"] = one("hyper", "")  # hidden or redacted below hyper: never shown whole
    if name == "decay":
        at.query_params["id"] = [one(s, "alpha") for s in cs.SENSITIVITIES] + [one(s, "") for s in cs.SENSITIVITIES]
    if name == "curate":
        at.query_params["id"] = one("medium", "alpha")
        at.query_params["op"] = "fork"
    if name == "audit":
        at.session_state["audit_page_size"] = 250
    if name == "what_if":
        at.session_state["wa_max_sensitivity"] = "public"
        at.session_state["wb_max_sensitivity"] = "hyper"
        at.session_state["wa_scopes"] = []
        at.session_state["wb_scopes"] = []
    yield at.run()
    if name == "records":
        at.query_params["id"] = one("medium", "alpha")
        yield at.run()
    if name == "simulator":
        # Explain a record the clearance may not see: absent, not described.
        yield at.text_input(key="sim_explain_id").set_value(one("hyper", "vault")).run()
    if name == "import_export":
        yield at.button(key="ie_prepare").click().run()


@pytest.mark.parametrize("name", GRID_PAGES)
@pytest.mark.parametrize("clearance", CLEARANCES, ids=clearance_id)
def test_clearance_leak_grid(name, clearance):
    sens, scopes = clearance
    # A curator (the curate page shows records), named by the clearance: the store is shared by
    # the module and a page's view reads the operator as stored (tests/support/sessions.py).
    who = operator(f"op-{clearance_id(clearance)}", sens, scopes, role="curator")
    bad = cs.forbidden_canaries(RECORDS, sens, scopes)
    for at in drive(name, who):
        no_exception(at)
        found = leaked(at, bad)
        assert not found, f"{name} as {clearance_id(clearance)}: {len(found)} canaries beyond the clearance, e.g. {found[:3]}"
    if name == "import_export":
        prepared = at.session_state["ie_export"] if "ie_export" in at.session_state else None
        assert prepared is not None, "no export was prepared"
        text = Path(prepared["path"]).read_text(encoding="utf-8")
        assert not set(cs.CANARY_RE.findall(text)) & bad
        exported = {d["id"] for d in json.loads(text)}
        assert exported == {r["id"] for r in RECORDS if cs.verdict(r, sens, scopes) != "hidden"}


@pytest.mark.parametrize("name", ["records", "simulator", "selector", "decay", "audit", "curate"])
def test_the_grid_is_not_blind(name):
    """Positive control: as an admin with full clearance the same pages show canaries, so the
    search above would find a leak."""
    shown = set()
    for at in drive(name, ROOT):
        no_exception(at)
        shown |= set(cs.CANARY_RE.findall(sent(at)))
    assert shown, f"{name}: root sees no canary at all; the grid's search would be blind"


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_pages_stop_when_nobody_is_signed_in(name):
    at = sign_in(AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT), None)
    if name == "records":
        at.query_params["id"] = one("low", "")
    at.run()
    no_exception(at)
    assert any("Sign in" in i.value for i in at.info), [i.value for i in at.info]
    assert not at.dataframe and not at.metric
    assert not cs.CANARY_RE.findall(sent(at))


# ------------------------------------------------------------------------------ one page at a time,
# as a low-clearance operator (max low, scope alpha)

LOW = operator("lowly", "low", ["alpha"])
LOW_BAD = cs.forbidden_canaries(RECORDS, "low", ["alpha"])


def frame_with(at: AppTest, column: str):
    """The first table with ``column`` (AppTest does not expose st.dataframe keys), else None."""
    return next((d.value for d in at.dataframe if column in d.value.columns), None)


def texts(at: AppTest) -> str:
    return "\n".join([e.value for e in at.markdown] + [e.value for e in at.caption] + [e.value for e in at.text]
                     + [e.value for e in at.info] + [e.value for e in at.error] + [str(e.value) for e in at.code])


def test_record_explorer_counts_and_opens_within_the_clearance(canary_url):
    at = page("records", LOW).run()
    no_exception(at)
    visible = [r for r in RECORDS if cs.verdict(r, "low", ["alpha"]) != "hidden"]
    assert at.metric[0].value == f"{len(visible):,}"
    ids = set(at.dataframe[0].value["id"])
    assert ids <= {r["id"] for r in visible}
    # A redacted record opens as its redacted view; a hidden one is "not found".
    at.query_params["id"] = one("medium", "alpha")
    at.run()
    assert "Redacted: the payload is withheld" in texts(at) and not leaked(at, LOW_BAD)
    at.query_params["id"] = one("medium", "beta")
    at.run()
    assert "within your clearance" in texts(at)
    # Searching for text inside a record the clearance does not see in full finds nothing.
    needle = BY_ID[one("medium", "alpha")]["payload"]["x_payload_extra"]
    at.text_input(key="rx_text").set_value(needle).run()
    assert at.metric[0].value == "0"


def test_opening_a_sensitive_record_in_full_is_listed_under_who_looked(canary_url):
    admin = operator("ann", "hyper", role="admin")
    at = page("records", admin)
    at.query_params["id"] = one("high", "")
    at.run()
    no_exception(at)
    m = Membrane.open(canary_url, load_sample=False)
    try:
        total, entries = m.access_log(record_id=one("high", ""))
    finally:
        m.close()
    assert total >= 1 and entries[0].actor == "operator:ann"
    audit = page("audit", admin).run()
    frame = frame_with(audit, "operator")
    assert f"/records?id={one('high', '')}" in set(frame["record_id"]) and "operator:ann" in set(frame["operator"])
    # An operator whose clearance does not see that record does not see who looked at it.
    low = page("audit", LOW).run()
    who = frame_with(low, "operator")
    assert who is None or f"/records?id={one('high', '')}" not in set(who["record_id"])


def test_simulator_wider_than_the_clearance_shows_counts_not_content():
    at = page("simulator", LOW)
    at.query_params.update({"max_sensitivity": "hyper", "scopes": "", "limit": "0"})
    at.run()
    no_exception(at)
    # The counts are the context's over what the clearance sees (SPEC 10, the operator's view):
    # hyper with every scope sees each of them in full; the rest is the one total below.
    full = next(m for m in at.metric if m.label == "Full")
    seen = [r for r in RECORDS if cs.verdict(r, LOW.max_sensitivity.value, LOW.scopes) != "hidden"]
    assert full.value == f"{len(seen):,}" and 0 < len(seen) < len(RECORDS)
    assert "beyond your clearance" in "\n".join(i.value for i in at.info)
    assert not leaked(at, LOW_BAD)


def test_audit_masks_and_leaves_out():
    at = page("audit", LOW)
    at.session_state["audit_page_size"] = 250
    at.run()
    no_exception(at)
    frame = frame_with(at, "rationale")
    frame["record_id"] = frame["record_id"].str.removeprefix("/records?id=")  # each id links to the explorer
    redacted_ids = {r["id"] for r in RECORDS if cs.verdict(r, "low", ["alpha"]) == "redacted"}
    hidden_ids = {r["id"] for r in RECORDS if cs.verdict(r, "low", ["alpha"]) == "hidden"}
    assert not set(frame["record_id"]) & hidden_ids
    masked = frame[frame["record_id"].isin(redacted_ids)]
    assert len(masked) and set(masked["rationale"]) == {"(withheld: beyond your clearance)"}
    assert not leaked(at, LOW_BAD)
    assert not set(cs.CANARY_RE.findall(" ".join(at.selectbox(key="audit_actor").options))) & LOW_BAD


def test_curate_offers_only_records_seen_in_full():
    at = page("curate", operator("lowly-curator", "low", ["alpha"], role="curator"))
    at.query_params["id"] = [one("medium", "alpha"), one("low", "alpha")]
    at.query_params["op"] = "fork"
    at.run()
    no_exception(at)
    assert at.multiselect(key="curate_ids").value == [one("low", "alpha")]
    assert not leaked(at, LOW_BAD)


def test_audit_csv_goes_through_the_clearance(canary_url):
    from console.components.audit_table import filtered_csv

    m = Membrane.open(canary_url, load_sample=False)
    try:
        text = filtered_csv(m, {"clearance": LOW.clearance}).decode("utf-8")
        everything = filtered_csv(m, {}).decode("utf-8")
    finally:
        m.close()
    assert not set(cs.CANARY_RE.findall(text)) & LOW_BAD
    assert set(cs.CANARY_RE.findall(everything)) & LOW_BAD  # the same export without it would leak
    assert "(withheld: beyond your clearance)" in text


# ------------------------------------------------------------------------------ the Review page, on a
# canary store with a queue: every semantic record contested by a working record of another
# sensitivity and scope, and every episodic record decayed below the prune threshold.

REVIEW_LEVEL_SHIFT = {s: cs.SENSITIVITIES[(i + 2) % len(cs.SENSITIVITIES)] for i, s in enumerate(cs.SENSITIVITIES)}
REVIEW_SCOPE_SHIFT = {s: cs.SCOPES[(i + 1) % len(cs.SCOPES)] for i, s in enumerate(cs.SCOPES)}


def review_contester(rid: str) -> str:
    record = BY_ID[rid]
    return one(REVIEW_LEVEL_SHIFT[record["sensitivity"]], REVIEW_SCOPE_SHIFT[record["scope"]], "working")


@pytest.fixture(scope="module")
def review_url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('clearance_review') / 'canary_review.db'}"
    docs = cs.copy_records(RECORDS)
    for doc in docs:
        if doc["type"] == "episodic":
            doc["lifecycle"]["decay"]["half_life_seconds"] = 3600  # long since below the prune threshold
    m = Membrane.open(url, load_sample=False)
    m.import_records(docs)
    for doc in docs:
        if doc["type"] == "semantic" and doc["id"].startswith("rec-"):
            m.contest(doc["id"], review_contester(doc["id"]), "canary-admin", "contested for the grid")
    m.close()
    return url


def drive_review(who, url: str, monkeypatch) -> Iterator[AppTest]:
    """The Review page as ``who``: the queue, the prune list all selected with a bulk preview, and
    a supersede previewed (its template is the contested record's JSON)."""
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = page("review", who)
    yield at.run()
    if any(b.key == "rv_prune_all" for b in at.button):
        at.button(key="rv_prune_all").click().run()
        yield at.text_input(key="rv_prune_rationale").set_value("keep").run()
    if any(s.key == "rv_target" for s in at.selectbox):
        at.radio(key="rv_action").set_value("supersede")
        yield at.text_input(key="rv_rationale").set_value("corrected").run()


@pytest.mark.parametrize("clearance", CLEARANCES, ids=clearance_id)
def test_review_page_leak_grid(clearance, review_url, monkeypatch):
    sens, scopes = clearance
    who = operator(f"op-{clearance_id(clearance)}", sens, scopes, role="curator")
    bad = cs.forbidden_canaries(RECORDS, sens, scopes)
    # Not even the id of a record the clearance does not see (a contester, a contested record or
    # one about to be pruned) is on the page: it is counted, never named.
    hidden_ids = {r["id"] for r in RECORDS if cs.verdict(r, sens, scopes) == "hidden"}
    for at in drive_review(who, review_url, monkeypatch):
        no_exception(at)
        found = leaked(at, bad)
        assert not found, f"review as {clearance_id(clearance)}: {len(found)} canaries beyond the clearance, e.g. {found[:3]}"
        page_text = sent(at)
        named = sorted(rid for rid in hidden_ids if rid in page_text)
        assert not named, f"review as {clearance_id(clearance)} names hidden records: {named[:3]}"
    # The queue's counts are the clearance's: contested records it does not see are only counted.
    contested = [r for r in RECORDS if r["type"] == "semantic" and r["id"].startswith("rec-")]
    visible = [r for r in contested if cs.verdict(r, sens, scopes) != "hidden"]
    assert at.header[0].value == f"Contested ({len(visible):,})"
    hidden = len(contested) - len(visible)
    if hidden:
        assert any(f"{hidden:,} more contested record" in c.value for c in at.caption)


def test_review_grid_is_not_blind(review_url, monkeypatch):
    """Positive control: with full clearance the Review page shows contested records' and
    contesters' canaries (labels) and the prune list's."""
    shown = set()
    for at in drive_review(ROOT, review_url, monkeypatch):
        no_exception(at)
        shown |= set(cs.CANARY_RE.findall(sent(at)))
    contester = BY_ID[review_contester(one("low", "alpha"))]
    assert cs._canary(contester["id"], "summary") in shown  # a contester's label
    assert cs._canary(one("low", "alpha", "episodic"), "timeline.summary") in shown  # about to be pruned
    assert cs._canary(one("low", "alpha"), "subject") in shown  # the contested record itself
