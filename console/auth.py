"""Who is signed in to this console session (SPEC 10).

The session's operator lives in server-side session state only (never sent to the browser).
Pages ask ``current()``; writes ask ``authorize(action)`` at the moment of writing. app.py
calls ``gate()`` before any page: it adopts the browser's session (console/signin.py: a cookie,
an OpenID Connect identity or a trusted proxy header) or shows only the sign-in page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import streamlit as st

from membrane_engine import Operator, permits

from console import keys
from console.components.colours import BRAND

SESSION_KEY = keys.SIGNED_IN
# The cookie session this Streamlit session was adopted from (server-side only): checked against
# the store on every run, so signing out elsewhere or a change to the operator ends it.
TOKEN_KEY = keys.SESSION_TOKEN


@dataclass(frozen=True)
class Session:
    operator: Operator
    expires_at: datetime
    # How this session was adopted ("cookie", "proxy", "oidc"). The gate adopts afresh on every
    # run, so a session with a source is only ever as old as the run. One without a source was
    # put there directly (tests/support/sessions.py for AppTest, which has no browser to sign in).
    source: str | None = None


def sign_in_session(operator: Operator, expires_at: datetime, source: str | None = None) -> None:
    st.session_state[SESSION_KEY] = Session(operator, expires_at, source)


def sign_out_session() -> None:
    st.session_state.pop(SESSION_KEY, None)
    st.session_state.pop(TOKEN_KEY, None)


def current() -> Operator | None:
    """The signed-in operator, or None (never signed in, signed out, or the session expired)."""
    session = st.session_state.get(SESSION_KEY)
    if not isinstance(session, Session):
        return None
    if session.expires_at <= datetime.now(timezone.utc):
        sign_out_session()
        return None
    return session.operator


def authorize(action: str) -> Operator:
    """The signed-in operator if they may do ``action``; else the page stops with the reason."""
    operator = current()
    allowed, reason = permits(operator, action)
    if not allowed:
        st.error(f"Not allowed: {reason}.")
        st.stop()
    return operator  # type: ignore[return-value]


NOT_THROUGH_GATEWAY = ("This console is served without its gateway (its sign-in routes and its Host / "
                       "Origin guard). Start the console with `membrane-console` (or `streamlit run "
                       "console/gateway.py`), not `streamlit run console/app.py`.")


def served_through_gateway() -> bool:
    """Is console/gateway.py serving this script? False under `streamlit run console/app.py`.
    AppTest runs scripts with a stand-in Runtime and serves nothing, so it counts as served."""
    from streamlit.runtime import Runtime

    from console import signin

    return signin.GATEWAY_LOADED or type(Runtime._instance) is not Runtime


def _headers(name: str) -> list[str]:
    """Every value the browser's WebSocket handshake sent for header ``name`` (all lines)."""
    return st.context.headers.get_all(name)


def _cookie(name: str) -> str | None:
    return st.context.cookies.get(name)


def _adopt() -> Operator | None:
    """The operator the browser's request names, by the sign-in modes in console/signin.py, with
    role and clearance as the store has them now (so this runs on every script run: a demoted
    operator's next run has the new role, a removed one's finds nobody)."""
    from console import signin

    # The token adopted before, then the browser's cookie (a new sign-in in this browser replaces
    # it while the Streamlit session, and so its state, lives on).
    for token in dict.fromkeys(t for t in (st.session_state.get(TOKEN_KEY), _cookie(signin.COOKIE)) if t):
        found = signin.session_operator(token)
        if found is not None:
            operator, expires = found
            sign_in_session(operator, datetime.fromtimestamp(expires, timezone.utc), "cookie")
            st.session_state[TOKEN_KEY] = token
            return operator
    header = signin.proxy_header()
    if header:
        operator = signin.match_identity(signin.operators(), signin.single_value(_headers(header)))
        if operator is not None:
            sign_in_session(operator, datetime.now(timezone.utc) + timedelta(seconds=signin.session_ttl()), "proxy")
            return operator
    if signin.oidc_configured() and st.user.is_logged_in and signin.email_verified(st.user.get("email_verified")):
        operator = signin.match_identity(signin.operators(), st.user.get("email"))
        if operator is not None:
            sign_in_session(operator, datetime.now(timezone.utc) + timedelta(seconds=signin.session_ttl()), "oidc")
            return operator
    return None


def gate(paths: list[str] = ()) -> Operator:
    """The signed-in operator, or the sign-in page and a stopped script: nothing of the store
    is read or sent for a session nobody has signed in to. ``paths``: the console's page
    addresses, each of which then shows the sign-in page (so a link to one asks to sign in)."""
    session = st.session_state.get(SESSION_KEY)
    if isinstance(session, Session) and session.source is None:
        operator = current()  # placed by a test kit, not adopted from a browser
    else:
        # One look-up in the store per run (by token, header or e-mail), as the cookie check
        # before it did: a session never outlives a change to its operator.
        operator = _adopt()
        if operator is None:
            sign_out_session()  # signed out elsewhere, expired, demoted away or removed
    if operator is None:
        # A navigation of one hidden page: whatever path was asked for, the sign-in page is all
        # there is, and a sidebar drawn before a sign-out goes away.
        st.navigation([st.Page(_sign_in_page, title="Sign in", url_path="signin", default=True)]
                      + [st.Page(_sign_in_page, title="Sign in", url_path=p) for p in paths if p != "signin"],
                      position="hidden").run()
        from console import state

        state.script_ran()
        st.stop()
    return operator  # type: ignore[return-value]


def sign_out() -> None:
    """End this session: the cookie's token is revoked in the store, so the cookie is dead too."""
    from console import signin

    token = st.session_state.get(TOKEN_KEY) or _cookie(signin.COOKIE)
    if token:
        signin.operators().end_session(token)
    sign_out_session()
    if signin.oidc_configured() and st.user.is_logged_in:
        st.logout()


SIGN_IN_FORM = f"""<form method="post" action="/-/signin" style="max-width:22rem">
<label>Operator name<br><input name="operator" autocomplete="username" required style="width:100%;padding:.4rem;margin:.2rem 0 .8rem"></label><br>
<label>Password<br><input name="password" type="password" autocomplete="current-password" required style="width:100%;padding:.4rem;margin:.2rem 0 .8rem"></label><br>
<button type="submit" style="padding:.45rem 1.1rem;background:{BRAND};color:#fff;border:0;border-radius:.4rem">Sign in</button>
</form>"""


def _sign_in_page() -> None:
    from console import signin

    st.title("Membrane Console")
    st.subheader("Sign in")
    if signin.oidc_configured():
        st.button("Sign in with your identity provider", type="primary", on_click=st.login)
        if st.user.is_logged_in:
            if not signin.email_verified(st.user.get("email_verified")):
                st.error("Your identity provider has not verified your e-mail address: verify it there, "
                         "then sign in again.")
            else:
                st.error("Your identity provider's e-mail matches no operator: ask an admin to add it "
                         "(`membrane-console operators set NAME --email ADDRESS`).")
    if signin.proxy_header():
        if len(_headers(signin.proxy_header())) > 1:
            st.caption("Behind the trusted proxy: its user header came more than once, so it names nobody.")
        else:
            st.caption("Behind the trusted proxy: its user header named no known operator.")
    # (Field "operator", not "name": the HTML sanitizer drops names that shadow form properties.)
    # A plain HTML form posting to the gateway's /-/signin, which sets the session cookie: a
    # Streamlit widget could not (its values travel over the WebSocket, cookies do not).
    st.html(SIGN_IN_FORM)
    st.caption("New store? `membrane-console` prints a one-time sign-in link for its first admin. "
               "Operators are managed with `membrane-console operators`.")
