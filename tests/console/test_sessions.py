"""Sessions follow the store (SPEC 10 "One door"): role and clearance are read from the store on
every script run whatever the sign-in mode (password session cookie, trusted proxy header,
OpenID Connect), so a demoted operator's next run has the new role and a removed one is signed
out; a doubled identity header names nobody; an identity provider's unverified e-mail names
nobody; and `streamlit run
console/app.py` (no gateway) refuses to serve the console."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from console import auth, signin
from membrane_engine import Membrane
from membrane_engine.accounts.operators import SESSION

from tests.support.sessions import sign_in

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "console" / "app.py")
TIMEOUT = 60
PASSWORD = "a password for these tests"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An empty store with an admin (ada) and a curator (cora, cora@example.org), the store the
    console's scripts read."""
    import streamlit as st

    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    m = Membrane.open(url, load_sample=False)
    try:
        m.operators.add("ada", "admin", "hyper", password=PASSWORD, email="ada@example.org", actor="test")
        m.operators.add("cora", "curator", "high", password=PASSWORD, email="cora@example.org", actor="test")
    finally:
        m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    monkeypatch.delenv(signin.PROXY_HEADER_ENV, raising=False)
    st.cache_resource.clear()
    yield url
    st.cache_resource.clear()


def change(url: str, what: str, **values) -> None:
    m = Membrane.open(url, load_sample=False)
    try:
        if what == "remove":
            m.operators.remove("cora", actor="test")
        else:
            m.operators.set("cora", actor="test", **values)
    finally:
        m.close()


def signed_in_as(at: AppTest) -> str | None:
    """The sidebar's "NAME · ROLE" line, or None on the sign-in page."""
    assert not at.exception, [e.value for e in at.exception]
    texts = [t.value for t in at.sidebar.text]
    if not texts:
        assert "Sign in" in [s.value for s in at.subheader]
        return None
    return texts[0].splitlines()[0]


def app() -> AppTest:
    return sign_in(AppTest.from_file(APP, default_timeout=TIMEOUT), None)  # nobody, until adopted


# ----------------------------------------------------------------------------- each mode, mid-session


def password_session(url: str, monkeypatch) -> AppTest:
    m = Membrane.open(url, load_sample=False)
    try:
        token = m.operators.issue_token("cora", SESSION, 3600)
    finally:
        m.close()
    monkeypatch.setattr(auth, "_cookie", lambda name: token if name == signin.COOKIE else None)
    return app()


def proxy_session(url: str, monkeypatch) -> AppTest:
    monkeypatch.setenv(signin.PROXY_HEADER_ENV, "X-Forwarded-User")
    monkeypatch.setattr(auth, "_headers", lambda name: ["cora"] if name.lower() == "x-forwarded-user" else [])
    return app()


def oidc_session(url: str, monkeypatch, verified=True) -> AppTest:
    at = app()
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "s" * 32,
                          "client_id": "x", "client_secret": "y",
                          "server_metadata_url": "https://idp.invalid/.well-known/openid-configuration"}
    at.user = {"is_logged_in": True, "email": "cora@example.org", "email_verified": verified}
    return at


MODES = {"password": password_session, "proxy": proxy_session, "oidc": oidc_session}


@pytest.mark.parametrize("mode", MODES)
def test_a_demoted_operator_has_the_new_role_on_the_next_run(store, monkeypatch, mode):
    at = MODES[mode](store, monkeypatch)
    assert signed_in_as(at.run()) == "cora · curator"
    change(store, "set", role="viewer")
    after = signed_in_as(at.run())
    # A password session is ended by the change (sign in again, as a viewer); the other modes
    # carry their identity on every request, so the next run has the viewer.
    assert after == (None if mode == "password" else "cora · viewer")


@pytest.mark.parametrize("mode", MODES)
def test_a_narrowed_clearance_applies_on_the_next_run(store, monkeypatch, mode):
    at = MODES[mode](store, monkeypatch)
    at.run()
    assert "clearance high" in " ".join(t.value for t in at.sidebar.text)
    change(store, "set", max_sensitivity="low")
    at.run()
    text = " ".join(t.value for t in at.sidebar.text)
    assert "clearance high" not in text
    if mode != "password":
        assert "clearance low" in text


@pytest.mark.parametrize("mode", MODES)
def test_a_removed_operator_is_signed_out_on_the_next_run(store, monkeypatch, mode):
    at = MODES[mode](store, monkeypatch)
    assert signed_in_as(at.run()) == "cora · curator"
    change(store, "remove")
    assert signed_in_as(at.run()) is None
    assert auth.SESSION_KEY not in at.session_state


def _authorize_curation():
    import streamlit as st

    from console import auth

    auth.gate()
    operator = auth.authorize("reinforce")
    st.success(f"may write as {operator.actor}")


def test_a_demoted_proxy_operator_cannot_write_on_the_next_run(store, monkeypatch):
    """The write check (authorize) sees the role of this run, not the one of the sign-in."""
    proxy_session(store, monkeypatch)
    at = sign_in(AppTest.from_function(_authorize_curation, default_timeout=TIMEOUT), None)
    at.run()
    assert [s.value for s in at.success] == ["may write as operator:cora"]
    change(store, "set", role="viewer")
    at.run()
    assert not at.success
    assert [e.value for e in at.error] == ["Not allowed: reinforce needs the curator role; cora is a viewer."]


# ----------------------------------------------------------------------------- doubled header, unverified e-mail


@pytest.mark.parametrize("values", [["cora", "ada"], ["ada", "cora"], ["ada, cora"], ["ada", "ada"], [" "]])
def test_a_doubled_or_empty_identity_header_names_nobody(store, monkeypatch, values):
    monkeypatch.setenv(signin.PROXY_HEADER_ENV, "X-Forwarded-User")
    monkeypatch.setattr(auth, "_headers", lambda name: list(values))
    assert signed_in_as(app().run()) is None


def test_a_doubled_identity_header_names_nobody_at_the_gateway(store, monkeypatch):
    monkeypatch.setenv(signin.PROXY_HEADER_ENV, "X-Forwarded-User")
    one = [("host", "127.0.0.1"), ("x-forwarded-user", "ada")]
    assert signin.request_operator(one, {}).name == "ada"
    assert signin.request_operator(one + [("X-Forwarded-User", "cora")], {}) is None
    assert signin.request_operator([("x-forwarded-user", "ada,cora")], {}) is None


@pytest.mark.parametrize("claim", [False, None, "false", "no", 1])
def test_an_unverified_identity_provider_email_names_nobody(store, monkeypatch, claim):
    at = oidc_session(store, monkeypatch, verified=claim)
    assert signed_in_as(at.run()) is None
    assert any("has not verified your e-mail" in e.value for e in at.error)


def test_a_verified_identity_provider_email_signs_in(store, monkeypatch):
    assert signed_in_as(oidc_session(store, monkeypatch, verified="true").run()) == "cora · curator"


# ----------------------------------------------------------------------------- no gateway


def test_streamlit_run_app_py_refuses_and_names_the_command(tmp_path):
    """`streamlit run console/app.py`: the page says to start with `membrane-console`, and no
    page of the console (nor its sign-in form, which would post nowhere) is served."""
    import socket

    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    import websocket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "server.log"
    env = {**os.environ, "MEMBRANE_DB_URL": f"sqlite:///{tmp_path / 'm.db'}", "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", APP, "--server.port", str(port),
                                 "--server.address", "127.0.0.1", "--server.headless", "true",
                                 "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.3)
        ws = websocket.create_connection(f"ws://127.0.0.1:{port}/_stcore/stream", timeout=30,
                                         subprotocol=["streamlit"], origin=url)
        texts: list[str] = []
        try:
            rerun = BackMsg()
            rerun.rerun_script.query_string = ""
            rerun.rerun_script.page_script_hash = ""
            ws.send_binary(rerun.SerializeToString())
            end = time.monotonic() + 30
            while time.monotonic() < end:
                msg = ForwardMsg()
                msg.ParseFromString(ws.recv())
                texts.append(str(msg))
                if msg.WhichOneof("type") == "script_finished":
                    break
        finally:
            ws.close()
        sent = "\n".join(texts)
        assert "Start the console with `membrane-console`" in sent
        assert "/-/signin" not in sent and "Overview" not in sent
        assert "Start the console with `membrane-console`" in log.read_text()
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)
