"""Sign-in and roles in the console's scripts (AppTest), SPEC 10: nobody signed in sees the
sign-in page only; an expired session is signed out; roles are checked at the moment of
writing (a viewer's session sending a curator's widget events writes nothing); the actor of a
write is the signed-in operator; a URL never pre-selects a destructive operation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from console import auth, signin
from membrane_engine import Membrane
from membrane_engine.rules.roles import Operator, Role

from tests.support.sessions import sample_store, sign_in

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "console" / "app.py")
PAGES = ROOT / "console" / "app_pages"
TIMEOUT = 60
VIEWER = Operator(name="vera", role=Role.VIEWER, max_sensitivity="hyper")
CURATOR = Operator(name="cora", role=Role.CURATOR, max_sensitivity="hyper")
ADMIN = Operator(name="ada", role=Role.ADMIN, max_sensitivity="hyper")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from sample_store(tmp_path / "signin.db", monkeypatch)


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown(at: AppTest) -> str:
    parts = [str(getattr(el, "value", "")) for kind in ("title", "markdown", "caption", "info", "error", "text",
                                                         "warning", "success", "subheader")
             for el in getattr(at, kind)]
    return "\n".join(parts)


def free_record(url: str) -> str:
    m = Membrane.open(url, load_sample=False)
    try:
        return next(r for r in m.retrieve_by_type("semantic", auth.Operator(
            name="x", role="admin", max_sensitivity="hyper").clearance) if not r.lifecycle.pinned).id
    finally:
        m.close()


def audit_count(url: str, rid: str) -> int:
    m = Membrane.open(url, load_sample=False)
    try:
        return len(m.audit_log(rid))
    finally:
        m.close()


def test_nobody_signed_in_sees_the_sign_in_page_and_no_record(store):
    m = Membrane.open(store, load_sample=False)
    ids = m.ids()
    m.close()
    at = ok(sign_in(AppTest.from_file(APP, default_timeout=TIMEOUT), None).run())
    text = shown(at)
    assert "Sign in" in text and "Overview" not in [t.value for t in at.title]
    assert not at.sidebar.button and not at.dataframe and not at.metric
    assert not any(rid in text for rid in ids)
    forms = [h.proto.body for h in at.get("html")]
    assert len(forms) == 1 and 'action="/-/signin"' in forms[0] and 'type="password"' in forms[0]


def test_an_expired_session_is_signed_out(store):
    at = ok(sign_in(AppTest.from_file(APP, default_timeout=TIMEOUT), ADMIN, hours=-0.01).run())
    assert "Sign in" in shown(at) and auth.SESSION_KEY not in at.session_state
    assert not at.metric


def test_signed_in_the_sidebar_names_the_operator_and_signs_out(store):
    at = ok(sign_in(AppTest.from_file(APP, default_timeout=TIMEOUT), CURATOR).run())
    assert [t.value for t in at.title] == ["Overview"]
    assert "cora · curator" in " ".join(t.value for t in at.sidebar.text)
    ok(at.sidebar.button(key="auth_sign_out").click().run())
    assert auth.SESSION_KEY not in at.session_state
    assert "Sign in" in shown(at) and not at.metric


def test_a_viewer_cannot_curate_or_import(store):
    at = ok(sign_in(AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT), VIEWER).run())
    assert "Curation needs the curator role; vera is a viewer" in shown(at)
    assert not at.button and not at.selectbox
    at = ok(sign_in(AppTest.from_file(str(PAGES / "import_export.py"), default_timeout=TIMEOUT), VIEWER).run())
    assert "Import is not available to you: import needs the admin role; vera is a viewer" in shown(at)
    assert not at.get("file_uploader")


def test_a_curator_sees_admin_operations_marked_and_cannot_preview_them(store):
    rid = free_record(store)
    at = sign_in(AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT), CURATOR)
    at.query_params["id"] = rid
    ok(at.run())
    op = at.selectbox(key="curate_op")
    assert op.format_func("delete").endswith("(admin only)") and op.format_func("pin") == "Pin"
    ok(op.set_value("delete").run())
    ok(at.text_area(key="curate_rationale").set_value("no").run())
    assert "Delete (archive) is not available to you: delete needs the admin role; cora is a curator" in shown(at)
    assert not [b for b in at.button if b.key == "curate_apply"]


def test_a_viewer_session_replaying_a_curators_events_writes_nothing(store):
    """The page is drawn for a curator, then the session's operator becomes a viewer (a forged or
    downgraded session) before Apply is clicked: the write is refused where it happens."""
    rid = free_record(store)
    before = audit_count(store, rid)
    at = sign_in(AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT), CURATOR)
    at.query_params["id"] = rid
    ok(at.run())
    ok(at.text_area(key="curate_rationale").set_value("forged").run())
    assert [b for b in at.button if b.key == "curate_apply"]
    sign_in(at, VIEWER)
    ok(at.button(key="curate_apply").click().run())
    assert audit_count(store, rid) == before
    assert not at.success


def test_a_write_names_the_signed_in_operator(store):
    rid = free_record(store)
    at = sign_in(AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT), CURATOR)
    at.query_params["id"] = rid
    ok(at.run())
    ok(at.text_area(key="curate_rationale").set_value("worth keeping").run())
    ok(at.button(key="curate_apply").click().run())
    m = Membrane.open(store, load_sample=False)
    try:
        last = m.audit_log(rid)[-1]
    finally:
        m.close()
    assert (last.action.value, last.actor, last.rationale) == ("reinforce", "operator:cora", "worth keeping")
    assert not at.get("text_input") or all(t.key != "curate_operator" for t in at.text_input)


@pytest.mark.parametrize("op", ["delete", "retract", "merge", "supersede", "penalize", "restore"])
def test_a_url_never_preselects_a_destructive_or_admin_operation(store, op):
    at = sign_in(AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT), ADMIN)
    at.query_params["op"] = op
    at.query_params["id"] = free_record(store)
    ok(at.run())
    assert at.selectbox(key="curate_op").value == "reinforce"


def test_a_url_may_preselect_a_harmless_operation(store):
    at = sign_in(AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT), CURATOR)
    at.query_params["op"] = "pin"
    ok(at.run())
    assert at.selectbox(key="curate_op").value == "pin"


def test_an_admin_gets_the_uploader(store):
    at = ok(sign_in(AppTest.from_file(str(PAGES / "import_export.py"), default_timeout=TIMEOUT), ADMIN).run())
    assert at.get("file_uploader")


def test_identities_match_operators_by_email_or_name_and_unknown_ones_get_nothing(tmp_path):
    m = Membrane.open(f"sqlite:///{tmp_path / 'm.db'}", load_sample=False)
    try:
        m.operators.add("ann", "curator", "medium", email="ann@example.org", actor="t")
        assert signin.match_identity(m.operators, "Ann@Example.org").name == "ann"
        assert signin.match_identity(m.operators, "ann").name == "ann"  # a proxy's user name
        for unknown in ("eve@example.org", "eve", "", "  ", None, "../ann", "ann@example.org.evil"):
            assert signin.match_identity(m.operators, unknown) is None, unknown
    finally:
        m.close()


def test_session_hours_come_from_the_environment_and_are_checked(monkeypatch):
    monkeypatch.delenv(signin.SESSION_HOURS_ENV, raising=False)
    assert signin.session_ttl() == 12 * 3600
    monkeypatch.setenv(signin.SESSION_HOURS_ENV, "0.5")
    assert signin.session_ttl() == 1800
    for bad in ("0", "-1", "abc", "100000"):
        monkeypatch.setenv(signin.SESSION_HOURS_ENV, bad)
        with pytest.raises(ValueError, match=signin.SESSION_HOURS_ENV):
            signin.session_ttl()


def test_proxy_headers_are_off_unless_named(monkeypatch):
    monkeypatch.delenv(signin.PROXY_HEADER_ENV, raising=False)
    assert signin.proxy_header() is None
    monkeypatch.setenv(signin.PROXY_HEADER_ENV, " X-Forwarded-Email ")
    assert signin.proxy_header() == "X-Forwarded-Email"


def _write_after_authorize():
    import streamlit as st

    from console import auth

    operator = auth.authorize("delete")
    st.success(f"written by {operator.actor}")


@pytest.mark.parametrize("operator, allowed", [(VIEWER, False), (CURATOR, False), (ADMIN, True), (None, False)])
def test_authorize_stops_the_script_before_the_write_with_the_reason(operator, allowed):
    at = ok(sign_in(AppTest.from_function(_write_after_authorize, default_timeout=TIMEOUT), operator).run())
    assert [s.value for s in at.success] == (["written by operator:ada"] if allowed else [])
    if not allowed:
        reason = "nobody is signed in" if operator is None else \
            f"delete needs the admin role; {operator.name} is a {operator.role.value}"
        assert [e.value for e in at.error] == [f"Not allowed: {reason}."]
