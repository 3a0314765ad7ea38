"""Operators in a real browser and on the wire (SPEC 10): the sign-in form, sign-out, expiry,
throttling, the first-run link, what each role can reach and do, and the hardening around them:
a foreign Host or Origin gets nothing, another site cannot frame the console, a session nobody
signed in to receives no record content, and a viewer replaying a curator's WebSocket events
writes nothing (the same replay under a curator's cookie does write, so the replay is real)."""

from __future__ import annotations

import http.server
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import websocket  # websocket-client

from membrane_engine import Membrane

from .conftest import SAMPLE, _serve, build_store
from tests.support.browser import OPERATORS, PASSWORD, Console, ConsoleServer, free_port
from tests.support.widgets import fill_text, open_dropdown
from .test_curate import reinforceable

pytestmark = pytest.mark.e2e

SIGN_IN_TEXT = "New store? membrane-console prints a one-time sign-in link"


def serve(name: str, tmp: Path, **options) -> Iterator[ConsoleServer]:
    """A server of the test's own on a fresh copy of the sample store."""
    yield from _serve(name, build_store(tmp / "membrane.db", json_file=SAMPLE), tmp, **options)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ConsoleServer]:
    yield from serve("signin", tmp_path_factory.mktemp("e2e-signin"))


def signed_out(con: Console) -> bool:
    return (con.page.locator("[data-testid=stMain] h3", has_text="Sign in").count() == 1
            and con.page.locator("[data-testid=stSidebarNav]").count() == 0)


def sign_in_through_the_form(con: Console, name: str, password: str, page: str | None = "/-/signin") -> None:
    """Fill and send the sign-in form: the gateway's own page, or (page None) the console's."""
    if page is not None:
        con.page.goto(f"{con.server.url}{page}")
    con.generation += 1  # the answer may be a new console page: record its frames afresh
    con.frames = []
    con.page.fill("input[name=operator]", name)
    con.page.fill("input[name=password]", password)
    con.page.click("button[type=submit]")
    con.page.wait_for_load_state()


def session_token(con: Console) -> str:
    return next(c["value"] for c in con.context.cookies() if c["name"] == "membrane_session")


# ----------------------------------------------------------------------------- sign-in, sign-out


def test_sign_in_through_the_form_then_sign_out(server, new_console):
    con = new_console(server, role=None)
    con.open("overview")
    assert signed_out(con)
    con.screenshot("signin-page")
    name = OPERATORS["curator"][0]
    sign_in_through_the_form(con, name, "not the password", page=None)  # the form on the console's page
    assert con.page.url.endswith("/-/signin") and "Unknown name or wrong password." in con.page.content()
    sign_in_through_the_form(con, name, PASSWORD, page=None)  # again, on the answer's form
    con.wait_idle(runs_at_least=1)
    assert re.match(rf"{re.escape(server.url)}/(overview)?$", con.page.url), con.page.url
    assert con.page.locator("[data-testid=stMain] h1", has_text="Overview").count() == 1
    assert f"{name} · curator" in con.text()
    cookie = next(c for c in con.context.cookies() if c["name"] == "membrane_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert PASSWORD not in con.html() and all(PASSWORD.encode() not in f for f in con.frame_bytes())

    con.open("records")  # a fresh page load: the cookie carries the sign-in
    assert f"{name} · curator" in con.text()
    con.act(lambda: con.page.get_by_role("button", name="Sign out").click())
    assert signed_out(con)
    con.open("overview")  # the cookie is still in the browser, but its session has ended
    assert signed_out(con)
    con.assert_healthy()


def test_a_session_nobody_signed_in_to_receives_no_record_content(server, new_console, sample_membrane):
    con = new_console(server, role=None)
    ids = sample_membrane.ids()[:40]
    for path, query in [("records", {"id": ids[0]}), ("curate", {"op": "delete", "id": ids[1]}), ("audit", None),
                        ("simulator", {"max_sensitivity": "hyper"}), ("overview", None)]:
        con.open(path, query)
        assert signed_out(con), path
        assert not con.find(ids + [sample_membrane.get(ids[0]).scope or "no-scope-x"]), path
        assert not con.page.locator("[data-testid=stMetric]").count() and not con.page.locator(
            "[data-testid=stDataFrame]").count()


# ----------------------------------------------------------------------------- roles


def test_what_each_role_can_reach_and_do(server, new_console):
    rid = None
    m = Membrane.open(server.db_url, load_sample=False)
    try:
        rid = reinforceable(m)
    finally:
        m.close()
    for role in ("viewer", "curator", "admin"):
        con = new_console(server, role=role)
        con.open("records")
        assert con.page.locator("[data-testid=stMain] h1", has_text="Record explorer").count() == 1
        con.open("curate", {"id": rid})
        text = con.text()
        con.screenshot(f"signin-curate-{role}")
        if role == "viewer":
            assert f"Curation needs the curator role; {OPERATORS['viewer'][0]} is a viewer" in text
            assert con.page.get_by_role("button", name=re.compile("Apply")).count() == 0
        else:
            assert f"Acting as operator:{OPERATORS[role][0]}" in text
        con.open("import-export")
        uploader = con.page.locator("[data-testid=stFileUploader]").count()
        if role == "admin":
            assert uploader == 1
        else:
            assert uploader == 0 and "Import is not available to you: import needs the admin role" in con.text()
        con.assert_healthy()


def test_a_curator_cannot_delete_and_an_admin_can(server, new_console):
    m = Membrane.open(server.db_url, load_sample=False)
    try:
        rid = next(r for r in m.ids() if m.get(r).lifecycle.deletion_policy.value != "never"
                   and r != reinforceable(m))
    finally:
        m.close()
    for role in ("curator", "admin"):
        con = new_console(server, role=role)
        con.open("curate", {"id": rid})
        box = con.page.locator("[data-testid=stSelectbox]").filter(has_text="Operation")
        open_dropdown(con, box)  # the list opens in the browser: no rerun to wait for
        option = con.page.get_by_role("option", name=re.compile("^Delete"))
        label = option.inner_text()
        con.act(lambda: option.click())
        fill_text(con, "Rationale", "e2e delete by role", area=True)
        if role == "curator":
            assert label.endswith("(admin only)")
            assert "delete needs the admin role" in con.text()
            assert con.page.get_by_role("button", name=re.compile("Apply")).count() == 0
        else:
            # A new operation forgets the records chosen before it: choose the record again.
            fill_text(con, "Find records by id", rid)
            records = con.widget("stMultiSelect", "Records")
            open_dropdown(con, records)
            con.act(lambda: con.page.locator("[role=listbox] [role=option]").first.click())
            con.page.keyboard.press("Escape")
            con.act(lambda: con.page.get_by_text("I confirm").click())
            con.act(lambda: con.page.get_by_role("button", name="Apply: delete (archive)").click())
            assert "Delete (archive) done" in con.text()
    m = Membrane.open(server.db_url, load_sample=False)
    try:
        assert rid in m.archived_ids()
        entry = m.audit_query(record_id=rid, action="delete")[1][0]
        assert entry.entry.actor == f"operator:{OPERATORS['admin'][0]}"
    finally:
        m.close()


# ----------------------------------------------------------------------------- replayed events


def _record_sent(con: Console) -> list[bytes]:
    sent: list[bytes] = []
    con.page.on("websocket", lambda ws: ws.on("framesent", lambda p: sent.append(
        p if isinstance(p, bytes) else str(p).encode())))
    return sent


def _replay(server: ConsoleServer, token: str, frames: list[bytes]) -> None:
    ws = websocket.create_connection(server.url.replace("http", "ws") + "/_stcore/stream", timeout=30,
                                     subprotocol=["streamlit"], origin=server.url,
                                     cookie=f"membrane_session={token}")
    try:
        for data in frames:
            ws.send_binary(data)
            time.sleep(0.8)
        end = time.monotonic() + 6
        ws.settimeout(1)
        while time.monotonic() < end:
            try:
                ws.recv()
            except websocket.WebSocketTimeoutException:
                pass
    finally:
        ws.close()


def test_a_viewer_replaying_a_curators_events_writes_nothing(server, new_console):
    m = Membrane.open(server.db_url, load_sample=False)
    try:
        rid = reinforceable(m)
        before = len(m.audit_log(rid))
    finally:
        m.close()
    curator = new_console(server, role="curator")
    sent = _record_sent(curator)
    curator.open("curate", {"op": "reinforce", "id": rid})
    fill_text(curator, "Rationale", "replayed", area=True)
    curator.act(lambda: curator.page.get_by_role("button", name="Apply: reinforce").click())
    assert "Reinforce done" in curator.text()
    m = Membrane.open(server.db_url, load_sample=False)
    try:
        assert len(m.audit_log(rid)) == before + 1
    finally:
        m.close()
    frames = [f for f in sent if len(f) > 8]

    viewer = new_console(server, role="viewer")
    _replay(server, session_token(viewer), frames)
    m = Membrane.open(server.db_url, load_sample=False)
    try:
        assert len(m.audit_log(rid)) == before + 1, "a viewer's replayed events wrote to the store"
    finally:
        m.close()

    other = new_console(server, role="curator")  # the control: the same replay as a curator writes
    _replay(server, session_token(other), frames)
    m = Membrane.open(server.db_url, load_sample=False)
    try:
        log = m.audit_log(rid)
        assert len(log) == before + 2, "the replay itself did not work: the viewer test proves nothing"
        assert log[-1].actor == f"operator:{OPERATORS['curator'][0]}"
    finally:
        m.close()


# ----------------------------------------------------------------------------- Host, Origin, framing


@pytest.mark.parametrize("host, origin", [
    ("attacker.example:{port}", "http://attacker.example:{port}"),  # DNS rebinding
    ("127.0.0.1:{port}", "http://127.0.0.1:{other}"),  # another local port's page
    ("127.0.0.1:{port}", "http://localhost:{port}"),
    ("127.0.0.1:{port}", "https://attacker.example"),
])
def test_a_foreign_host_or_origin_gets_no_websocket_and_no_page(server, host, origin):
    port, other = server.port, free_port()
    host, origin = host.format(port=port, other=other), origin.format(port=port, other=other)
    with pytest.raises((websocket.WebSocketBadStatusException, websocket.WebSocketConnectionClosedException,
                        ConnectionError)):
        ws = websocket.create_connection(f"ws://127.0.0.1:{port}/_stcore/stream", timeout=10, host=host,
                                         origin=origin, subprotocol=["streamlit"])
        try:
            ws.settimeout(5)
            ws.recv()  # a closed handshake shows here
            ws.recv()
        finally:
            ws.close()
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"{server.url}/", headers={"Host": host, "Origin": origin})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 403


def test_the_own_origin_gets_its_websocket(server):
    ws = websocket.create_connection(f"ws://127.0.0.1:{server.port}/_stcore/stream", timeout=10,
                                     origin=server.url, subprotocol=["streamlit"])
    ws.close()


def test_another_site_cannot_frame_the_console(server, new_console, tmp_path):
    (tmp_path / "frame.html").write_text(f"<h1>evil</h1><iframe id=c src='{server.url}/overview' width=800 "
                                         "height=600></iframe>")
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        con = new_console(server, role="admin")
        con.page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/frame.html")
        con.page.wait_for_timeout(4000)
        framed = [f for f in con.page.frames if f != con.page.main_frame]
        assert framed, "the iframe is missing"
        assert all(f.locator("[data-testid=stApp]").count() == 0 for f in framed), "the console rendered in a frame"
        con.screenshot("signin-framed-by-another-site")
    finally:
        httpd.shutdown()


# ----------------------------------------------------------------------------- expiry, throttling, first run


def test_a_session_expires(tmp_path_factory, new_console):
    for srv in serve("expiry", tmp_path_factory.mktemp("e2e-expiry"), env={"MEMBRANE_SESSION_HOURS": "0.002"}):
        con = new_console(srv, role="admin")  # 7.2 s sessions
        con.open("overview")
        assert not signed_out(con)
        time.sleep(8)
        con.open("overview")
        assert signed_out(con)


def test_repeated_failed_sign_ins_are_throttled(tmp_path_factory, new_console):
    for srv in serve("throttle", tmp_path_factory.mktemp("e2e-throttle")):
        con = new_console(srv, role=None)
        name = OPERATORS["viewer"][0]
        assert [con.sign_in(name, f"wrong password {i}") for i in range(5)] == [401] * 5
        assert con.sign_in(name, PASSWORD, check=False) == 429  # even the right password waits now
        sign_in_through_the_form(con, name, PASSWORD)
        assert "Too many failed sign-ins: try again in" in con.page.content()
        assert con.sign_in(OPERATORS["admin"][0], PASSWORD, check=False) == 429  # same client, another name
        assert not [c for c in con.context.cookies() if c["name"] == "membrane_session"]


def test_the_first_run_link_signs_in_as_admin_once(tmp_path_factory, new_console):
    tmp = tmp_path_factory.mktemp("e2e-first-run")
    for srv in serve("first-run", tmp, launcher="cli", operators=False):
        link = re.search(r"http://\S+/-/first-run\?token=\S+", srv.log_path.read_text()).group(0)
        con = new_console(srv, role=None)
        con.generation += 1
        con.frames = []
        con.page.goto(link)
        con.wait_idle(runs_at_least=1)
        assert "token" not in con.page.url, "the token stays in the address bar"
        assert "admin · admin" in con.text() and "clearance hyper" in con.text()
        con.screenshot("signin-first-run")
        again = new_console(srv, role=None)
        again.page.goto(link)
        assert "This sign-in link is not valid" in again.page.content()
        again.open("overview")
        assert signed_out(again)


def test_a_proxy_header_signs_in_only_when_switched_on(server, tmp_path_factory, new_console):
    name = OPERATORS["curator"][0]
    con = new_console(server, role=None)
    con.context.set_extra_http_headers({"X-Forwarded-User": name})
    con.open("overview")
    assert signed_out(con), "a proxy header was trusted without being switched on"
    for srv in serve("proxy", tmp_path_factory.mktemp("e2e-proxy"),
                     env={"MEMBRANE_TRUSTED_PROXY_HEADER": "X-Forwarded-User"}):
        con = new_console(srv, role=None)
        con.context.set_extra_http_headers({"X-Forwarded-User": name})
        con.open("overview")
        assert f"{name} · curator" in con.text()
        stranger = new_console(srv, role=None)
        stranger.context.set_extra_http_headers({"X-Forwarded-User": "eve@example.org"})
        stranger.open("overview")
        assert signed_out(stranger), "an unknown identity got in"


def test_a_first_run_link_is_refused_once_the_admin_has_a_password(tmp_path_factory):
    import urllib.error
    import urllib.request

    tmp = tmp_path_factory.mktemp("e2e-first-run-passwd")
    for srv in serve("first-run-passwd", tmp, launcher="cli", operators=False):
        link = re.search(r"http://\S+/-/first-run\?token=\S+", srv.log_path.read_text()).group(0)
        m = Membrane.open(srv.db_url, load_sample=False)
        try:
            m.operators.passwd("admin", PASSWORD, actor="operator:admin")
        finally:
            m.close()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(link, timeout=30)
        assert err.value.code == 403 and b"This sign-in link is not valid" in err.value.read()
        assert not [h for h in err.value.headers.get_all("set-cookie") or [] if h.startswith("membrane_session=")]
