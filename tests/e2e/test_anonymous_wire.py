"""What a client nobody signed in to can do on the wire (SPEC 10, issue "One door"), against a
real console server: Streamlit's upload endpoint refuses it (a file would sit in server memory),
and its WebSocket carries nothing beyond running the sign-in page (clear_cache, which empties
every user's caches, is dropped). Controls: the same requests under a session do get through,
so the refusals are the gateway's and the observation is real. And a trusted proxy header's
operator, demoted or removed between two runs of one WebSocket session, has the new role on
the next run or is signed out."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
import websocket  # websocket-client
from google.protobuf import text_format
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from membrane_engine import Membrane

from .conftest import SAMPLE, _serve, build_store
from tests.support.browser import OPERATORS, PASSWORD, ConsoleServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ConsoleServer]:
    tmp = tmp_path_factory.mktemp("e2e-anonymous-wire")
    yield from _serve("anonymous-wire", build_store(tmp / "membrane.db", json_file=SAMPLE), tmp)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def session_cookie(server: ConsoleServer, role: str = "admin") -> str:
    body = urllib.parse.urlencode({"operator": OPERATORS[role][0], "password": PASSWORD}).encode()
    req = urllib.request.Request(f"{server.url}/-/signin", data=body, method="POST",
                                 headers={"Origin": server.url})
    try:
        urllib.request.build_opener(_NoRedirect).open(req, timeout=30)
    except urllib.error.HTTPError as err:  # the 303 that sets the cookie
        cookie = err.headers.get("set-cookie", "")
        return re.match(r"(membrane_session=[^;]+)", cookie).group(1)
    raise AssertionError("no sign-in redirect")


def connect(server: ConsoleServer, cookie: str | None = None, headers: list[str] | None = None):
    return websocket.create_connection(server.url.replace("http", "ws") + "/_stcore/stream", timeout=60,
                                       subprotocol=["streamlit"], origin=server.url, cookie=cookie,
                                       header=headers or [])


def rerun(ws, page: str = "") -> str:
    """Run the script (the default page, or ``page``'s path) and return what the server sent for
    it, as text, up to the end of the run."""
    msg = BackMsg()
    msg.rerun_script.query_string = ""
    msg.rerun_script.page_script_hash = ""
    msg.rerun_script.page_name = page
    ws.send_binary(msg.SerializeToString())
    texts, end = [], time.monotonic() + 60
    while time.monotonic() < end:
        fwd = ForwardMsg()
        fwd.ParseFromString(ws.recv())
        texts.append(text_format.MessageToString(fwd, as_utf8=True))
        if fwd.WhichOneof("type") == "script_finished" and fwd.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
            break
    return "\n".join(texts)


def send(ws, **fields) -> None:
    msg = BackMsg()
    for name, value in fields.items():
        setattr(msg, name, value)
    ws.send_binary(msg.SerializeToString())


def store_opens(server: ConsoleServer) -> int:
    """How often the console's cached store was opened (Streamlit's cache misses of state._open)."""
    text = urllib.request.urlopen(f"{server.url}/_stcore/metrics", timeout=30).read().decode()
    found = re.search(r'cache_lookups_total\{cache="console\.state\._open",[^}]*result="miss"\} (\d+)', text)
    return int(found.group(1)) if found else 0


def xsrf_cookie(server: ConsoleServer) -> str:
    """The XSRF cookie the health check hands out (to anyone: it proves nothing about a sign-in)."""
    with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=30) as resp:
        cookies = resp.headers.get_all("set-cookie") or []
    return next(re.match(r"_streamlit_xsrf=([^;]+)", c).group(1) for c in cookies if c.startswith("_streamlit_xsrf="))


def session_id(ws) -> str:
    """The Streamlit session id a fresh WebSocket is given (its first run's new_session)."""
    msg = BackMsg()
    msg.rerun_script.query_string = ""
    msg.rerun_script.page_script_hash = ""
    ws.send_binary(msg.SerializeToString())
    end = time.monotonic() + 60
    while time.monotonic() < end:
        fwd = ForwardMsg()
        fwd.ParseFromString(ws.recv())
        if fwd.WhichOneof("type") == "new_session":
            return fwd.new_session.initialize.session_id
    raise AssertionError("no new_session message")


def upload(server: ConsoleServer, sid: str, cookie: str | None, size: int = 1 << 20) -> tuple[int, bytes]:
    """PUT a file to Streamlit's upload endpoint as its frontend does (multipart, XSRF token)."""
    xsrf = xsrf_cookie(server)
    boundary = "membrane-test-boundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"uploadedFile\"; filename=\"a.json\"\r\n"
            f"Content-Type: application/json\r\n\r\n").encode() + b"x" * size + f"\r\n--{boundary}--\r\n".encode()
    cookies = f"_streamlit_xsrf={xsrf}" + (f"; {cookie}" if cookie else "")
    req = urllib.request.Request(f"{server.url}/_stcore/upload_file/{sid}/file-1", data=body, method="PUT", headers={
        "Origin": server.url, "X-Xsrftoken": xsrf, "Cookie": cookies,
        "Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_an_anonymous_upload_is_refused(server):
    anonymous = connect(server)
    try:
        sid = session_id(anonymous)
        for cookie in (None, "membrane_session=not-a-session-token-anywhere"):
            status, body = upload(server, sid, cookie)
            assert status == 403 and b"sign in first" in body, (status, body)
    finally:
        anonymous.close()
    # The control: the same upload from a signed-in session is stored (so the attack is real).
    cookie = session_cookie(server)
    admin = connect(server, cookie=cookie)
    try:
        assert upload(server, session_id(admin), cookie)[0] == 204
    finally:
        admin.close()


def test_an_anonymous_clear_cache_does_not_clear_the_cache(server):
    admin = connect(server, cookie=session_cookie(server))
    anonymous = connect(server)
    try:
        assert "Sign in" in rerun(anonymous)
        rerun(admin)  # a page: the store is opened and cached
        opened = store_opens(server)
        assert opened >= 1
        send(anonymous, clear_cache=True)
        assert "Sign in" in rerun(anonymous)  # the anonymous session's messages are handled in order
        rerun(admin)
        assert store_opens(server) == opened, "a client nobody signed in to emptied the caches"
        send(admin, clear_cache=True)  # the control: from a session it does clear them
        rerun(admin)
        assert store_opens(server) == opened + 1, "clear_cache did not clear: the test observes nothing"
    finally:
        admin.close()
        anonymous.close()


def test_a_rotating_forwarded_for_does_not_escape_the_throttle(tmp_path_factory):
    """On the real server: Streamlit's uvicorn would believe X-Forwarded-For from 127.0.0.1 and
    make each guess a new client; the gateway has it trust no proxy unless configured."""
    tmp = tmp_path_factory.mktemp("e2e-forwarded-for")
    for srv in _serve("forwarded-for", build_store(tmp / "membrane.db", json_file=SAMPLE), tmp):
        codes = []
        for i in range(7):
            # A new name each time too: only the client's own count can stop this.
            body = urllib.parse.urlencode({"operator": f"guess-{i}", "password": f"wrong {i}"}).encode()
            req = urllib.request.Request(f"{srv.url}/-/signin", data=body, method="POST",
                                         headers={"Origin": srv.url, "X-Forwarded-For": f"203.0.113.{i}"})
            try:
                urllib.request.urlopen(req, timeout=30)
            except urllib.error.HTTPError as err:
                codes.append(err.code)
        assert codes == [401] * 5 + [429] * 2


# ----------------------------------------------------------------------------- a proxy header's session


@pytest.fixture(scope="module")
def proxy_server(tmp_path_factory) -> Iterator[ConsoleServer]:
    tmp = tmp_path_factory.mktemp("e2e-proxy-session")
    yield from _serve("proxy-session", build_store(tmp / "membrane.db", json_file=SAMPLE), tmp,
                      env={"MEMBRANE_TRUSTED_PROXY_HEADER": "X-Forwarded-User"})


def change_curator(server: ConsoleServer, **values) -> None:
    m = Membrane.open(server.db_url, load_sample=False)
    try:
        if values.pop("remove", False):
            m.operators.remove(OPERATORS["curator"][0], actor="e2e-test")
        else:
            m.operators.set(OPERATORS["curator"][0], actor="e2e-test", **values)
    finally:
        m.close()


def test_a_proxy_operator_demoted_then_removed_mid_session(proxy_server):
    name = OPERATORS["curator"][0]
    ws = connect(proxy_server, headers=[f"X-Forwarded-User: {name}"])
    try:
        assert f"{name} · curator" in rerun(ws)
        change_curator(proxy_server, role="viewer", max_sensitivity="low")
        sent = rerun(ws)  # the same WebSocket, the same Streamlit session: its next run
        assert f"{name} · viewer" in sent and "clearance low" in sent and f"{name} · curator" not in sent
        change_curator(proxy_server, remove=True)
        sent = rerun(ws)
        assert f"{name} ·" not in sent and "Sign in" in sent
    finally:
        ws.close()


def test_a_doubled_proxy_header_names_nobody(proxy_server):
    admin = OPERATORS["admin"][0]
    for headers in ([f"X-Forwarded-User: {admin}", "X-Forwarded-User: nobody-known"],
                    [f"X-Forwarded-User: nobody-known, {admin}"], [f"X-Forwarded-User: {admin}, {admin}"]):
        ws = connect(proxy_server, headers=headers)
        try:
            sent = rerun(ws)
            assert f"{admin} · admin" not in sent and "Sign in" in sent, headers
        finally:
            ws.close()
    ws = connect(proxy_server, headers=[f"X-Forwarded-User: {admin}"])  # the control: one header signs in
    try:
        assert f"{admin} · admin" in rerun(ws)
    finally:
        ws.close()
