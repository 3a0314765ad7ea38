"""The three sign-in modes, apart from Streamlit's pages (the web routes, the command line and
the page gate share them):

- local accounts (default): a name and a password checked against the store's scrypt hash;
- OpenID Connect through ``st.login`` when secrets have an ``[auth]`` section: the identity
  provider's e-mail is matched to an operator's e-mail (role and clearance still from the store);
- a trusted reverse proxy's header, only when MEMBRANE_TRUSTED_PROXY_HEADER names it.

A browser session is a random token in an HttpOnly cookie; the store keeps its hash and expiry,
so signing out, a changed password, role or clearance, or a removed operator ends it at once.
Whatever the mode, role and clearance are read from the store on every script run
(console/auth.py gate), and the gateway asks ``request_operator`` before it lets a request
upload a file or send the WebSocket anything beyond a rerun.
"""

from __future__ import annotations

import logging
import os
import threading

from membrane_engine import FIRST_RUN, SESSION, Operator, Operators

COOKIE = "membrane_session"
SESSION_HOURS_ENV = "MEMBRANE_SESSION_HOURS"
DEFAULT_SESSION_HOURS = 12.0
PROXY_HEADER_ENV = "MEMBRANE_TRUSTED_PROXY_HEADER"
# Addresses (or networks) of reverse proxies whose X-Forwarded-For names the client, comma-
# separated; default none: the client is the socket's peer, whatever headers it sends.
TRUSTED_PROXIES_ENV = "MEMBRANE_TRUSTED_PROXIES"
# Set by console/gateway.py when it is loaded: the console is being served through it.
GATEWAY_LOADED = False
FIRST_RUN_TTL = 3600.0  # a first-run link works once, within the hour after it was printed


def session_ttl() -> float:
    """Seconds a browser session lasts (MEMBRANE_SESSION_HOURS, default 12 hours)."""
    raw = os.environ.get(SESSION_HOURS_ENV, "")
    try:
        hours = float(raw) if raw else DEFAULT_SESSION_HOURS
    except ValueError:
        raise ValueError(f"{SESSION_HOURS_ENV} must be a number of hours (got {raw!r})") from None
    if not 0 < hours <= 24 * 30:
        raise ValueError(f"{SESSION_HOURS_ENV} must be between 0 and 720 hours (got {raw!r})")
    return hours * 3600.0


def proxy_header() -> str | None:
    """The header a trusted reverse proxy puts the operator's name or e-mail in, if switched on."""
    name = os.environ.get(PROXY_HEADER_ENV, "").strip()
    return name or None


def trusted_proxies() -> list:
    """The networks of MEMBRANE_TRUSTED_PROXIES (addresses or CIDR networks, comma-separated)."""
    import ipaddress

    raw = os.environ.get(TRUSTED_PROXIES_ENV, "")
    nets = []
    for part in (p.strip() for p in raw.split(",")):
        if part:
            try:
                nets.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ValueError(f"{TRUSTED_PROXIES_ENV} must list IP addresses or networks (got {part!r})") from None
    return nets


def _trusted(address: str, nets: list) -> bool:
    import ipaddress

    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(ip in net for net in nets)


def client_address(peer: str | None, forwarded_for: list[str]) -> str:
    """Who is asking, for throttling: the socket's peer, unless that peer is a trusted proxy; then
    the nearest X-Forwarded-For hop that is not one. Entries left of it are whatever the client
    wrote, so a client that rotates them gets nothing from it; without trusted proxies the header
    is not read at all."""
    peer = peer or "?"
    nets = trusted_proxies()
    if not nets or not _trusted(peer, nets):
        return peer
    hops = [h.strip() for line in forwarded_for for h in line.split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, nets):
            return hop
    return hops[0] if hops else peer


def single_value(values: list[str]) -> str | None:
    """The one value of an identity header, or None when it came twice (two header lines, or two
    values in one line): which copy the proxy wrote and which the client smuggled is unknowable,
    so neither is believed."""
    if len(values) != 1 or "," in values[0] or not values[0].strip():
        return None
    return values[0].strip()


def email_verified(claim) -> bool:
    """An identity provider's ``email_verified`` claim, true only when it says so: an unverified
    address (anyone can type an admin's e-mail into some providers) names nobody."""
    return claim is True or (isinstance(claim, str) and claim.strip().lower() == "true")


def oidc_configured() -> bool:
    """Is an ``[auth]`` section configured in Streamlit's secrets (st.login available)?"""
    try:
        import streamlit as st

        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def _quiet_outside_scripts() -> None:
    # The store is opened through the console's cached engine from web routes too, which run no
    # script; Streamlit would warn about that once per call.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        lambda record: not threading.current_thread().name.startswith(("AnyIO", "asyncio", "ThreadPool")))


_quiet_outside_scripts()


def operators() -> Operators:
    from console import state

    return state._open(state.store_url()).operators


def check_password(name: str, password: str) -> Operator | None:
    return operators().verify_password(name, password)


def open_session(name: str) -> tuple[str, float]:
    """A new browser session for ``name``: (token for the cookie, seconds it lasts)."""
    ttl = session_ttl()
    return operators().issue_token(name, SESSION, ttl), ttl


def redeem_first_run(token: str) -> Operator | None:
    return operators().redeem(token, FIRST_RUN)


def session_operator(token: str | None) -> tuple[Operator, float] | None:
    return operators().session(token) if token else None


def match_identity(ops: Operators, identity: str | None) -> Operator | None:
    """The operator an outside identity (an OpenID Connect e-mail, a proxy's user header) names:
    by e-mail, else (proxy headers often carry a user name) by operator name. Unknown: None."""
    if not isinstance(identity, str) or not identity.strip():
        return None
    identity = identity.strip()
    found = ops.by_email(identity)
    if found is None and "@" not in identity:
        try:
            found = ops.get(identity)
        except Exception:  # NotFoundError, or a name the store refuses
            return None
    return found


def request_operator(headers: list[tuple[str, str]], cookies: dict[str, str],
                     origin: str | None = None) -> Operator | None:
    """The operator a web request (or WebSocket handshake) is signed in as now, by any of the three
    modes, or None: the gateway's question before anything but the sign-in page is served."""
    token = cookies.get(COOKIE)
    if token:
        found = session_operator(token)
        if found is not None:
            return found[0]
    header = proxy_header()
    if header:
        values = [v for k, v in headers if k.lower() == header.lower()]
        operator = match_identity(operators(), single_value(values))
        if operator is not None:
            return operator
    if oidc_configured() and origin:
        user = _oidc_user(cookies, origin)
        if user and user.get("is_logged_in") and email_verified(user.get("email_verified")):
            return match_identity(operators(), user.get("email"))
    return None


def _oidc_user(cookies: dict[str, str], origin: str) -> dict | None:
    """Streamlit's signed identity cookie (st.login), checked as its WebSocket handler checks it."""
    try:
        from streamlit.web.server.starlette.starlette_websocket import (
            USER_COOKIE_NAME, _get_signed_cookie_with_chunks, _parse_decoded_user_cookie)

        raw = _get_signed_cookie_with_chunks(cookies, USER_COOKIE_NAME)
        return _parse_decoded_user_cookie(raw, origin) if raw else None
    except Exception:  # a forged, stale or unreadable cookie is no identity
        return None
