"""Console sessions for AppTest: the store a page script reads, and who is signed in (SPEC 10).
``sign_in`` puts an operator in a script's session as console/app.py's gate leaves it after a
sign-in; tests/conftest.py signs every AppTest in as ``TEST_ADMIN``, and a test that needs
someone else calls ``sign_in(at, operator_or_None)``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

from membrane_engine import Membrane
from membrane_engine.rules.roles import Operator, Role

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "membrane_sample.json"

TEST_ADMIN = Operator(name="test-admin", role=Role.ADMIN, max_sensitivity="hyper")


def sign_in(at, operator: Operator | None, hours: float = 1.0):
    """Put ``operator`` (None: nobody) in AppTest ``at``'s session; ``hours`` until it expires."""
    from console import auth

    if operator is None:
        at.session_state[auth.SESSION_KEY] = None
    else:
        at.session_state[auth.SESSION_KEY] = auth.Session(operator, datetime.now(timezone.utc) + timedelta(hours=hours))
    _stored_at_each_run(at)
    return at


def _stored_at_each_run(at) -> None:
    """Before the first run, the store the page reads holds the signed-in operator as the
    session has them (added, or set to the session's role and clearance): a real sign-in needs a
    stored operator, and a page's view (``Membrane.as_operator``) reads role and clearance from
    the store at each call. Later runs leave the store alone, so a test that demotes or removes
    the operator after the first run sees the page follow."""
    if getattr(at, "_operator_kept", False):
        return
    at._operator_kept = True
    run = at._run
    first = [True]

    def run_with_operator(*args, **kwargs):
        if first[0]:
            first[0] = False
            _store_signed_in(at)
        return run(*args, **kwargs)

    at._run = run_with_operator


def _store_signed_in(at) -> None:
    import os

    from console import auth, state
    from membrane_engine.errors import MembraneError, NotFoundError

    session = at.session_state[auth.SESSION_KEY] if auth.SESSION_KEY in at.session_state else None
    url = os.environ.get("MEMBRANE_DB_URL")
    if not isinstance(session, auth.Session) or not url:
        return
    who = session.operator
    try:
        operators = state._open(url).operators  # the page's own cached engine
    except MembraneError:
        return  # a store that cannot be opened: the page says so itself (what fault tests check)
    try:
        stored = operators.get(who.name)
    except NotFoundError:
        operators.add(who.name, who.role, who.max_sensitivity, list(who.scopes), actor="test-kit")
        return
    if (stored.role, stored.max_sensitivity, tuple(stored.scopes)) != (who.role, who.max_sensitivity, tuple(who.scopes)):
        operators.set(who.name, actor="test-kit", role=who.role, max_sensitivity=who.max_sensitivity,
                      scopes=list(who.scopes))


def sample_store(path: Path, monkeypatch) -> Iterator[str]:
    """A SQLite store at ``path`` holding the bundled sample, the store the console's pages read
    (MEMBRANE_DB_URL), with the console's cached engine cleared before and after: for a fixture
    to ``yield from``."""
    import streamlit as st

    url = f"sqlite:///{path}"
    m = Membrane.open(url, load_sample=False)
    m.import_file(SAMPLE)
    m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    st.cache_resource.clear()
    yield url
    st.cache_resource.clear()
