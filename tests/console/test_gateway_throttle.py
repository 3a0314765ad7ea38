"""The gateway's sign-in route under attack (SPEC 10), on a live server (uvicorn in a thread,
serving the gateway's routes behind its Guard): sixty wrong passwords sent at once are checked
at most as often as the throttle allows and do not lock the real operator out of another
address; X-Forwarded-For is believed only from a trusted proxy; an upload without a session is
refused before it reaches Streamlit's upload handler."""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from console import gateway, signin
from membrane_engine import Membrane
from membrane_engine.accounts.operators import SESSION

PASSWORD = "a password for these tests"
GUESSES = 60
UPLOADS: list[str] = []  # what reached the stand-in upload handler


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import streamlit as st

    url = f"sqlite:///{tmp_path / 'gateway.db'}"
    m = Membrane.open(url, load_sample=False)
    try:
        m.operators.add("ada", "admin", "hyper", password=PASSWORD, actor="test")
        m.operators.add("cora", "curator", "high", password=PASSWORD, actor="test")
    finally:
        m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    monkeypatch.delenv("MEMBRANE_TRUSTED_PROXIES", raising=False)
    monkeypatch.delenv(signin.PROXY_HEADER_ENV, raising=False)
    monkeypatch.setattr(gateway, "THROTTLE", gateway.Throttle())
    st.cache_resource.clear()
    yield url
    st.cache_resource.clear()


@pytest.fixture
def checks(monkeypatch) -> list[str]:
    """Every password the route checks (the scrypt work an attacker can make the server do)."""
    seen: list[str] = []
    real = signin.check_password
    lock = threading.Lock()

    def counted(name, password):
        with lock:
            seen.append(name)
        return real(name, password)

    monkeypatch.setattr(signin, "check_password", counted)
    return seen


@pytest.fixture
def server(store) -> Iterator[int]:
    UPLOADS.clear()

    async def upload(request):  # stands in for Streamlit's /_stcore/upload_file handler
        UPLOADS.append(request.url.path)
        return PlainTextResponse("stored")

    app = Starlette(routes=gateway.ROUTES + [Route("/_stcore/upload_file/{sid}/{fid}", upload,
                                                   methods=["PUT", "POST", "DELETE"])],
                    middleware=[Middleware(gateway.Guard)])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                        limit_concurrency=GUESSES * 2, backlog=GUESSES * 2))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


def post_sign_in(port: int, name: str, password: str, source: str = "127.0.0.1",
                 headers: dict[str, str] | None = None) -> tuple[int, str | None]:
    """(status, session cookie set or None), from ``source`` (another loopback address is
    another client to the server)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(source, 0))
    try:
        body = urllib.parse.urlencode({"operator": name, "password": password})
        conn.request("POST", "/-/signin", body=body, headers={
            "Host": "127.0.0.1", "Content-Type": "application/x-www-form-urlencoded", **(headers or {})})
        resp = conn.getresponse()
        resp.read()
        cookie = resp.getheader("set-cookie")
        return resp.status, cookie
    finally:
        conn.close()


def test_sixty_concurrent_wrong_passwords_check_at_most_the_limit(server, checks):
    with ThreadPoolExecutor(GUESSES) as pool:
        statuses = list(pool.map(lambda i: post_sign_in(server, "cora", f"wrong guess {i:02d}")[0], range(GUESSES)))
    assert len(checks) <= gateway.Throttle().free, f"{len(checks)} passwords checked for {GUESSES} guesses"
    assert statuses.count(401) == len(checks) and statuses.count(429) == GUESSES - len(checks)
    # The guesser's own address waits, even with the right password ...
    assert post_sign_in(server, "cora", PASSWORD)[0] == 429
    # ... the operator, from an address that has not failed, signs in at once.
    status, cookie = post_sign_in(server, "cora", PASSWORD, source="127.0.0.2")
    assert status == 303 and cookie and cookie.startswith(f"{signin.COOKIE}=")


def test_an_address_that_failed_too_waits_for_a_guessed_name(server, checks):
    for i in range(5):
        post_sign_in(server, "cora", f"wrong guess {i}", source="127.0.0.3")
    assert post_sign_in(server, "cora", "one more wrong", source="127.0.0.4")[0] == 401  # clean: checked
    # 127.0.0.4 has a failure now and "cora" is locked: it waits like the guesser.
    assert post_sign_in(server, "cora", PASSWORD, source="127.0.0.4")[0] == 429
    assert post_sign_in(server, "ada", PASSWORD, source="127.0.0.4")[0] == 303  # another name: fine


def test_a_rotating_forwarded_for_from_an_untrusted_peer_does_not_escape_the_limit(server, checks):
    statuses = [post_sign_in(server, "cora", f"wrong {i}", headers={"X-Forwarded-For": f"203.0.113.{i}"})[0]
                for i in range(12)]
    assert statuses == [401] * 5 + [429] * 7
    assert len(checks) == 5
    # Another name does not help either: the client is the socket's peer.
    assert post_sign_in(server, "ada", "wrong", headers={"X-Forwarded-For": "198.51.100.9"})[0] == 429


def test_forwarded_for_is_the_client_behind_a_trusted_proxy(server, checks, monkeypatch):
    monkeypatch.setenv(signin.TRUSTED_PROXIES_ENV, "127.0.0.1")
    for i in range(5):
        assert post_sign_in(server, "cora", f"wrong {i}", headers={"X-Forwarded-For": "203.0.113.7"})[0] == 401
    assert post_sign_in(server, "ada", "wrong", headers={"X-Forwarded-For": "203.0.113.7"})[0] == 429
    # Another client behind the same proxy is another client (and may sign in as cora: no failures).
    assert post_sign_in(server, "cora", PASSWORD, headers={"X-Forwarded-For": "203.0.113.8"})[0] == 303
    # What the client wrote before the proxy's own entry is not believed.
    assert post_sign_in(server, "ada", "wrong", headers={"X-Forwarded-For": "10.9.9.9, 203.0.113.7"})[0] == 429


@pytest.mark.parametrize("peer, forwarded, trusted, client", [
    ("10.0.0.5", ["1.2.3.4"], "", "10.0.0.5"),
    ("10.0.0.5", ["1.2.3.4"], "10.0.0.0/8", "1.2.3.4"),
    ("10.0.0.5", ["6.6.6.6, 1.2.3.4"], "10.0.0.0/8", "1.2.3.4"),
    ("10.0.0.5", ["6.6.6.6", "1.2.3.4, 10.0.0.9"], "10.0.0.0/8", "1.2.3.4"),
    ("10.0.0.5", [], "10.0.0.5", "10.0.0.5"),
    ("192.0.2.1", ["1.2.3.4"], "10.0.0.0/8", "192.0.2.1"),
])
def test_client_address(monkeypatch, peer, forwarded, trusted, client):
    monkeypatch.setenv(signin.TRUSTED_PROXIES_ENV, trusted)
    assert signin.client_address(peer, forwarded) == client


def test_trusted_proxies_are_checked(monkeypatch):
    monkeypatch.setenv(signin.TRUSTED_PROXIES_ENV, "10.0.0.1, proxy.example")
    with pytest.raises(ValueError, match="proxy.example"):
        signin.trusted_proxies()


def test_an_upload_without_a_session_is_refused(server, store):
    def put(cookie: str | None) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
        try:
            conn.request("PUT", "/_stcore/upload_file/some-session/some-file", body=b"x" * 4096,
                         headers={"Host": "127.0.0.1", **({"Cookie": cookie} if cookie else {})})
            resp = conn.getresponse()
            resp.read()
            return resp.status
        finally:
            conn.close()

    assert put(None) == 403
    assert put(f"{signin.COOKIE}=not-a-session-token-at-all") == 403
    assert not UPLOADS
    m = Membrane.open(store, load_sample=False)
    try:
        token = m.operators.issue_token("cora", SESSION, 3600)
    finally:
        m.close()
    assert put(f"{signin.COOKIE}={token}") == 200  # the control: a session's upload gets through


def test_the_command_line_refuses_a_malformed_trusted_proxy_list(monkeypatch, capsys):
    from console import cli

    monkeypatch.setenv("MEMBRANE_TRUSTED_PROXIES", "")
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "127.0.0.1")
    assert cli.main(["--trusted-proxies", "10.0.0.1,not-an-address", "--no-prewarm"]) == 2
    assert "MEMBRANE_TRUSTED_PROXIES must list IP addresses or networks (got 'not-an-address')" in capsys.readouterr().err


def test_the_throttle_forgets_stale_keys_when_it_grows():
    throttle = gateway.Throttle(window=10.0)
    throttle.MAX_KEYS = 100
    for i in range(150):
        throttle.failed([f"name:guess-{i}"], now=float(i) * 0.01)
    assert len(throttle._failures) == 150  # all within the window: nothing forgotten
    throttle.failed(["client:late"], now=1000.0)
    assert list(throttle._failures) == ["client:late"]
