"""The console's web server: Streamlit's own ASGI app (``st.App``) with the console's sign-in
routes and a guard in front of every request. `membrane-console` runs
`streamlit run console/gateway.py`, which serves console/app.py through it.

- ``/-/signin``: the local-account sign-in form (GET) and its check (POST), throttled per name
  and per client; success sets an HttpOnly, SameSite=Strict cookie holding a random session
  token whose hash is in the store (Datasette's signed-cookie idea, revocable server-side).
- ``/-/first-run?token=``: the one-time link `membrane-console` prints on a store without
  operators; it signs the admin in and redirects to ``/`` so the token leaves the address bar.
- The guard refuses a Host outside ``server.allowedHosts`` (DNS rebinding) and an Origin other
  than the console's own (another site's page or another localhost port), and forbids framing by
  any other origin (CSP frame-ancestors and X-Frame-Options). A request without a session (no
  live cookie session, trusted proxy header or identity-provider sign-in naming an operator)
  gets the sign-in page and nothing else: no upload (/_stcore/upload_file), and no WebSocket
  message beyond running the page (ANONYMOUS_BACK_MSGS).
"""

from __future__ import annotations

import html
import os
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from starlette.concurrency import run_in_threadpool  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import HTMLResponse, RedirectResponse, Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from console import keys, signin  # noqa: E402
from console.components.colours import BRAND, SIGN_IN_ERROR, SIGN_IN_TEXT  # noqa: E402

# console/app.py refuses to run in a server that did not load this module (`streamlit run
# console/app.py` would serve it without the sign-in routes and the guard).
signin.GATEWAY_LOADED = True
# Uvicorn (Streamlit's server) believes X-Forwarded-For from 127.0.0.1 by default and rewrites
# the client address with it: any local process could pose as a new client per request and walk
# past the sign-in throttle. It must trust what the console trusts (MEMBRANE_TRUSTED_PROXIES,
# nothing by default). `streamlit run` builds uvicorn's Config (which reads FORWARDED_ALLOW_IPS)
# before it imports this module, and wraps the app in ProxyHeadersMiddleware after: so besides
# the variable (for a server configured later, and console/cli.py sets it first), the middleware
# uvicorn is about to use is given the console's list whatever it was configured with.
_FORWARDED_ALLOW = ",".join(str(net) for net in signin.trusted_proxies())
os.environ["FORWARDED_ALLOW_IPS"] = _FORWARDED_ALLOW


def _trust_the_consoles_proxies() -> None:
    import uvicorn.config
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    class ConsoleProxyHeaders(ProxyHeadersMiddleware):
        def __init__(self, app, trusted_hosts="") -> None:
            super().__init__(app, trusted_hosts=_FORWARDED_ALLOW)

    uvicorn.config.ProxyHeadersMiddleware = ConsoleProxyHeaders


_trust_the_consoles_proxies()

SECURITY_HEADERS = [
    (b"content-security-policy", b"frame-ancestors 'self'"),
    (b"x-frame-options", b"SAMEORIGIN"),
    (b"x-content-type-options", b"nosniff"),
    # A first-run token never leaves in a Referer to another site ("no-referrer" would also make
    # the browser send "Origin: null" on the sign-in form, which the guard refuses).
    (b"referrer-policy", b"same-origin"),
]


def host_allowed(host: str | None) -> bool:
    from streamlit.web.server.starlette.starlette_websocket import is_host_allowed

    return is_host_allowed(host)


def origin_allowed(origin: str | None, host: str | None) -> bool:
    """Same origin only: a page of another site, or of another port on this machine, may not
    open the console's WebSocket or post to it. No Origin (curl, a typed URL) is fine."""
    if origin is None:
        return True
    return urlparse(origin).netloc.lower() == (host or "").lower()


UPLOAD_PATH = "/_stcore/upload_file"
# What a browser nobody has signed in to may send over the WebSocket: enough to run (and stop,
# and keep alive) the sign-in page. Everything else (clear_cache empties every user's caches,
# file_urls_request opens uploads, backend operations fetch deferred files) needs a session.
ANONYMOUS_BACK_MSGS = frozenset({"rerun_script", "stop_script", "app_heartbeat"})


async def _signed_in_operator(scope):
    """The operator the request's cookie, proxy header or identity-provider cookie names now."""
    from starlette.requests import HTTPConnection

    conn = HTTPConnection(scope)
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", [])]
    scheme = "https" if conn.url.scheme in ("https", "wss") else "http"
    origin = conn.headers.get("origin") or f"{scheme}://{conn.headers.get('host', '')}"
    return await run_in_threadpool(signin.request_operator, headers, dict(conn.cookies), origin)


def _back_msg_type(data: bytes | None) -> str | None:
    from streamlit.proto.BackMsg_pb2 import BackMsg

    msg = BackMsg()
    try:
        msg.ParseFromString(data or b"")
    except Exception:  # Streamlit closes the connection on it (protocol error)
        return None
    return msg.WhichOneof("type")


def _session_checked(scope, receive):
    """``receive`` that drops the WebSocket messages a client without a session may not send
    (ANONYMOUS_BACK_MSGS). The store is asked at each such message, not at the handshake: a
    session signed out, expired or removed since then sends nothing more."""

    async def checked():
        while True:
            message = await receive()
            if message.get("type") != "websocket.receive" or message.get("bytes") is None:
                return message
            kind = _back_msg_type(message["bytes"])
            if kind is None or kind in ANONYMOUS_BACK_MSGS or await _signed_in_operator(scope) is not None:
                return message

    return checked


class Guard:
    """Pure ASGI middleware (HTTP and WebSocket alike): Host and Origin, framing, and nothing
    beyond the sign-in page for a client nobody has signed in to (no upload, no WebSocket
    message other than running the page)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host, origin = headers.get("host"), headers.get("origin")
        reason = None
        if not host_allowed(host):
            reason = f"host {host!r} is not one this console is served under (server.allowedHosts)"
        elif not origin_allowed(origin, host):
            reason = f"origin {origin!r} is not this console's"
        if reason is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": "refused"})
                return
            await Response(f"Refused: {reason}.\n", status_code=403, media_type="text/plain",
                           headers={"content-security-policy": "frame-ancestors 'none'"})(scope, receive, send)
            return

        if scope["type"] == "http" and scope.get("path", "").startswith(UPLOAD_PATH):
            if await _signed_in_operator(scope) is None:
                # A file is held in server memory until its session ends: nobody who has not
                # signed in may put one there.
                await Response("Refused: sign in first.\n", status_code=403, media_type="text/plain")(
                    scope, receive, send)
                return
        if scope["type"] == "websocket":
            receive = _session_checked(scope, receive)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": list(message.get("headers", []))
                           + [(k, v) for k, v in SECURITY_HEADERS if k not in names]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# ----------------------------------------------------------------------------- throttling


class Throttle:
    """Failed sign-ins per key (a name, a client address), kept in this server process. After
    ``free`` failures within ``window`` seconds a key waits, doubling from ``base`` seconds per
    further failure up to ``cap``; a success clears the name's count.

    Concurrency: ``reserve`` checks the keys and counts the attempt as a failure in one step under
    the lock, before the password is checked; ``succeeded`` takes it back. So sixty guesses sent
    at once cannot all pass the check before the first one fails: at most ``free`` of them are
    checked, the rest wait.

    Lock-out: a name's count stops only the clients that have failed recently themselves. Whoever
    guesses at a name locks out their own address (the client key) and the name for addresses
    that have also guessed wrong; the operator signing in from a clean address is not stopped.
    The price: a guesser with many addresses gets one try per fresh address while the name is
    locked (rather than ``free`` per address with no name limit at all), which the client key and
    a real password's length have to bear. Behind a proxy the client is its X-Forwarded-For only
    when the proxy is listed in MEMBRANE_TRUSTED_PROXIES (signin.client_address)."""

    MAX_KEYS = 100_000

    def __init__(self, free: int = 5, base: float = 30.0, cap: float = 900.0, window: float = 900.0):
        self.free, self.base, self.cap, self.window = free, base, cap, window
        self._failures: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    def wait(self, keys: list[str], now: float | None = None) -> float:
        """Seconds before any of ``keys`` may try again (0: now)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return max((self._wait(k, now) for k in keys), default=0.0)

    def _wait(self, key: str, now: float) -> float:
        count, last = self._failures.get(key, (0, 0.0))
        if now - last > self.window or count < self.free:
            return 0.0
        return max(0.0, last + min(self.base * 2 ** (count - self.free), self.cap) - now)

    def _count(self, key: str, now: float) -> int:
        count, last = self._failures.get(key, (0, 0.0))
        return 0 if now - last > self.window else count

    def reserve(self, client: str, name: str | None = None, now: float | None = None) -> float:
        """0 and the attempt counted as a failure of ``client`` (and ``name``), or the seconds to
        wait and nothing counted. The name's count applies only to a client with failures of its
        own (see the class)."""
        now = time.monotonic() if now is None else now
        keys = [client] + ([name] if name is not None else [])
        with self._lock:
            waits = [self._wait(client, now)]
            if name is not None and self._count(client, now) > 0:
                waits.append(self._wait(name, now))
            wait = max(waits)
            if wait > 0:
                return wait
            self._failed(keys, now)
            return 0.0

    def failed(self, keys: list[str], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            self._failed(keys, now)

    def _failed(self, keys: list[str], now: float) -> None:
        if len(self._failures) > self.MAX_KEYS:  # made-up names and addresses must not fill memory
            self._failures = {k: v for k, v in self._failures.items() if now - v[1] <= self.window}
        for k in keys:
            count, last = self._failures.get(k, (0, 0.0))
            self._failures[k] = (1 if now - last > self.window else count + 1, now)

    def succeeded(self, client: str, name: str | None = None) -> None:
        """The reserved attempt was right: it is no failure of the client, and the name is clear."""
        with self._lock:
            count, last = self._failures.get(client, (0, 0.0))
            if count <= 1:
                self._failures.pop(client, None)
            else:
                self._failures[client] = (count - 1, last)
            if name is not None:
                self._failures.pop(name, None)


THROTTLE = Throttle()


# ----------------------------------------------------------------------------- routes


def _page(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>Sign in · Membrane Console</title>"
        "<meta name=viewport content='width=device-width'><style>body{font-family:system-ui,sans-serif;"
        f"max-width:22rem;margin:12vh auto;color:{SIGN_IN_TEXT}}}input{{display:block;width:100%;margin:.3rem 0 1rem;"
        "padding:.5rem;font-size:1rem;box-sizing:border-box}button{padding:.5rem 1.2rem;font-size:1rem;"
        f"background:{BRAND};color:#fff;border:0;border-radius:.3rem}}.err{{color:{SIGN_IN_ERROR}}}</style></head>"
        f"<body><h1>Membrane Console</h1>{body}</body></html>", status_code=status,
        headers={"cache-control": "no-store", "content-security-policy": "frame-ancestors 'none'; default-src 'self';"
                 " style-src 'unsafe-inline'; form-action 'self'"})


def _form(message: str = "", name: str = "") -> str:
    note = f"<p class=err role=alert>{html.escape(message)}</p>" if message else ""
    return (f"{note}<form method=post action=signin><label>Operator name<input name=operator autocomplete=username "
            f"required value='{html.escape(name, quote=True)}'></label><label>Password<input name=password "
            "type=password autocomplete=current-password required></label><button type=submit>Sign in</button>"
            "</form>")


def _signed_in(request: Request, name: str) -> Response:
    token, ttl = signin.open_session(name)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(signin.COOKIE, token, max_age=int(ttl), httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    return response


async def signin_route(request: Request) -> Response:
    if request.method == "GET":
        return _page(_form())
    try:  # read no large body: a name and a password fit in a few hundred bytes
        size = int(request.headers.get("content-length", "0"))
    except ValueError:
        size = -1
    if not 0 <= size <= 8192 or len(await request.body()) > 8192:
        return _page(_form("The form is too large."), 413)
    form = await request.form()
    name, password = str(form.get("operator", ""))[:64], str(form.get("password", ""))[:1024]
    client, name_key = _client_key(request), f"name:{name.lower()}"
    wait = THROTTLE.reserve(client, name_key)  # counted as failed until the password is right
    if wait > 0:
        return _page(_form(f"Too many failed sign-ins: try again in {int(wait) + 1} s.", name), 429)
    operator = await run_in_threadpool(signin.check_password, name, password)
    if operator is None:
        return _page(_form("Unknown name or wrong password.", name), 401)
    THROTTLE.succeeded(client, name_key)
    return await run_in_threadpool(_signed_in, request, operator.name)


def _client_key(request: Request) -> str:
    peer = request.client.host if request.client else None
    return "client:" + signin.client_address(peer, request.headers.getlist("x-forwarded-for"))


async def first_run_route(request: Request) -> Response:
    token = request.query_params.get(keys.Param.TOKEN, "")
    client = _client_key(request)
    if THROTTLE.reserve(client) > 0:
        return _page("<p class=err>Too many failed attempts: try again later.</p>", 429)
    operator = await run_in_threadpool(signin.redeem_first_run, token)
    if operator is None:
        return _page("<p class=err>This sign-in link is not valid: it was used already, it expired, or it was "
                     "mistyped. Restart <code>membrane-console</code> for a new one, or <a href=signin>sign in"
                     "</a>.</p>", 403)
    THROTTLE.succeeded(client)
    return await run_in_threadpool(_signed_in, request, operator.name)


ROUTES = [Route("/-/signin", signin_route, methods=["GET", "POST"]),
          Route("/-/first-run", first_run_route, methods=["GET"])]

# `streamlit run console/gateway.py` finds this st.App and serves it with uvicorn.
app = st.App(os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py"), routes=ROUTES,
             middleware=[Middleware(Guard)])
