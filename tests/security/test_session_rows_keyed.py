"""Browser sessions under the operator log (SPEC 10, issue 29; rules/sessions.py): a live
session's row deleted with raw SQL, a row put back after a sign-out, and a row inserted by a
writer without the audit key are named by verify_audit, by the session's id (never its token
or stored hash); the engine's own endings (sign-out, expiry sweep, password or access change,
operator removal) and sessions that merely expired are not. A store holding sessions from before
they were logged still verifies, and its sessions are accounted for from the first one logged.
Keyed and unkeyed, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import delete, insert, select

from membrane_engine import Membrane
from membrane_engine.accounts.operators import SESSION, Operators, token_hash
from membrane_engine.audit.row_seal import Seal, token_fields
from membrane_engine.rules.sessions import session_id
from membrane_engine.storage.store import operator_tokens

PASSWORD = "a long enough passphrase"
KEY = "correct horse battery staple"
NO_KEY = Seal(None, False)  # what a writer without the key can compute


@pytest.fixture(params=["keyed", "unkeyed"])
def keyed(request, monkeypatch) -> bool:
    if request.param == "keyed":
        monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    else:
        monkeypatch.delenv("MEMBRANE_AUDIT_KEY", raising=False)
    return request.param == "keyed"


@pytest.fixture
def m(store_url, keyed) -> Membrane:
    m = Membrane.open(store_url, load_sample=False)
    m.operators.add("ann", "admin", "hyper", password=PASSWORD, actor="cli:root")
    m.operators.add("bob", "curator", "high", password=PASSWORD, actor="cli:root")
    yield m
    m.close()


def found(m: Membrane) -> list[str]:
    return [str(p) for p in m.verify_audit() if p.kind == "operators"]


def raw_delete(m: Membrane, token: str) -> None:
    with m.store.write() as conn:
        assert conn.execute(delete(operator_tokens).where(operator_tokens.c.token_hash == token_hash(token))
                            ).rowcount == 1


def row_of(m: Membrane, token: str) -> dict:
    with m.store.read() as conn:
        return dict(conn.execute(select(operator_tokens).where(operator_tokens.c.token_hash == token_hash(token)))
                    .one()._mapping)


def test_a_live_session_row_deleted_with_raw_sql_is_named_by_its_id(m):
    kept = m.operators.issue_token("ann", SESSION, 3600)
    gone = m.operators.issue_token("bob", SESSION, 3600)
    assert m.verify_audit() == []
    raw_delete(m, gone)
    problems = found(m)
    sid = session_id(token_hash(gone))
    assert len(problems) == 1, problems
    assert f"operator_tokens session {sid} of 'bob'" in problems[0] and "deleted outside the engine" in problems[0]
    assert gone not in problems[0] and token_hash(gone) not in problems[0]  # names it, gives nothing away
    # The engine writing on afterwards (a sign-out, a new session) does not paper over it.
    m.operators.end_session(kept)
    m.operators.issue_token("bob", SESSION, 3600)
    assert [p for p in found(m) if sid in p] == problems


def test_the_engines_own_endings_are_not_reported(m):
    ops = m.operators
    signed_out = ops.issue_token("ann", SESSION, 3600)
    ops.end_session(signed_out)
    ops.end_session(signed_out)  # twice: the second changes nothing
    for change in (lambda: ops.passwd("bob", "a new long passphrase", actor="operator:ann"),
                   lambda: ops.set("bob", role="viewer", actor="operator:ann"),
                   lambda: ops.set("bob", scopes=["ops"], actor="operator:ann"),
                   lambda: ops.remove("bob", actor="operator:ann")):
        token = ops.issue_token("bob", SESSION, 3600)
        ops.issue_token("bob", SESSION, 3600)  # a second browser of the same operator
        change()
        assert ops.session(token) is None
    assert m.verify_audit() == []
    ends = [(e.actor, e.operator, e.details["why"], len(e.details["sessions"]))
            for e in ops.events() if e.action == "session_end"]
    assert ends == [("operator:ann", "ann", "signed out", 1), ("operator:ann", "bob", "password changed", 2),
                    ("operator:ann", "bob", "role, clearance or scopes changed", 2),
                    ("operator:ann", "bob", "role, clearance or scopes changed", 2),
                    ("operator:ann", "bob", "operator removed", 2)]
    assert all(e.actor == f"operator:{e.operator}" for e in ops.events() if e.action == "session_start")


def test_an_e_mail_change_keeps_sessions_and_logs_no_ending(m):
    token = m.operators.issue_token("bob", SESSION, 3600)
    m.operators.set("bob", email="bob@example.org", actor="operator:ann")
    assert m.operators.session(token)[0].name == "bob"
    assert [e.action for e in m.operators.events()][-2:] == ["session_start", "set"]
    assert m.verify_audit() == []


def test_expired_sessions_are_no_alarm_swept_or_deleted(m):
    store = m.store
    # Sessions that expired by the wall clock: their rows deleted with raw SQL are no finding
    # (an expired session signs no one in), nor are they when left in place.
    past = Operators(store, clock=lambda: time.time() - 7200)
    stale = past.issue_token("ann", SESSION, 60)
    left = past.issue_token("bob", SESSION, 60)
    raw_delete(m, stale)
    assert m.verify_audit() == []
    # The engine's sweep (at the next token it issues) ends expired rows and says so, so a sweep
    # by a clock ahead of the one verify reads raises no alarm either.
    ahead = [time.time() + 86400]
    later = Operators(store, clock=lambda: ahead[0])
    early = later.issue_token("bob", SESSION, 60)
    ahead[0] += 61
    later.issue_token("ann", SESSION, 60)
    with store.read() as conn:
        assert conn.execute(select(operator_tokens).where(operator_tokens.c.token_hash == token_hash(early))
                            ).first() is None
    swept = [e for e in m.operators.events() if e.action == "session_end" and e.details["why"] == "expired"]
    assert {(e.actor, e.operator) for e in swept} == {("membrane-engine:session-expiry", "bob")}
    # The first sweep took the stale row left in place, the second the one that expired since.
    assert [e.details["sessions"] for e in swept] == [[session_id(token_hash(left))],
                                                      [session_id(token_hash(early))]]
    assert m.verify_audit() == []


def test_a_session_row_inserted_without_the_key_is_named(m, keyed):
    m.operators.issue_token("ann", SESSION, 3600)
    forged = "f" * 43
    row = {"token_hash": token_hash(forged), "kind": SESSION, "operator": "ann", "expires_at": time.time() + 3600,
           "used_at": None}
    with m.store.write() as conn:
        conn.execute(insert(operator_tokens).values(**row, mac=NO_KEY.make(token_fields(row))))
    problems = found(m)
    assert len(problems) == 1, problems
    if keyed:  # the plain MAC gives it away
        assert "session of 'ann'" in problems[0] and "minted or changed outside the engine" in problems[0]
        assert m.operators.session(forged) is None
    else:  # the MAC holds (anyone can compute it), but the log never started it
        assert f"session {session_id(token_hash(forged))} of 'ann'" in problems[0]
        assert "has no 'session_start' in the operator log: minted outside the engine" in problems[0]


def test_a_session_row_put_back_or_stretched_is_named(m, keyed):
    ended = m.operators.issue_token("bob", SESSION, 3600)
    copy = row_of(m, ended)
    m.operators.end_session(ended)
    with m.store.write() as conn:
        conn.execute(insert(operator_tokens).values(**copy))
    problems = found(m)
    sid = session_id(token_hash(ended))
    assert len(problems) == 1 and f"session {sid} of 'bob'" in problems[0], problems
    assert "the operator log ended it (signed out, event" in problems[0] and "put back" in problems[0]
    raw_delete(m, ended)
    assert found(m) == []
    if not keyed:  # a keyless writer stretches a session, MAC and all: the log's expiry differs
        live = m.operators.issue_token("ann", SESSION, 3600)
        row = {**row_of(m, live), "expires_at": 4e9}
        with m.store.write() as conn:
            conn.execute(operator_tokens.update().where(operator_tokens.c.token_hash == row["token_hash"])
                         .values(expires_at=4e9, mac=NO_KEY.make(token_fields(row))))
        problems = found(m)
        assert len(problems) == 1 and f"session {session_id(token_hash(live))} of 'ann'" in problems[0], problems
        assert "operator or expiry differ from its start" in problems[0]


def test_a_store_with_sessions_from_before_they_were_logged(m, keyed):
    """Sessions minted by an engine that did not log them (rows with a valid MAC, no entry): the
    store verifies; the first session logged adopts them, and from then on they are checked."""
    seal = Seal(KEY.encode() if keyed else None, keyed)
    old = {"ann": "a" * 43, "bob": "b" * 43}
    with m.store.write() as conn:
        for name, token in old.items():
            row = {"token_hash": token_hash(token), "kind": SESSION, "operator": name,
                   "expires_at": time.time() + 3600, "used_at": None}
            conn.execute(insert(operator_tokens).values(**row, mac=seal.make(token_fields(row))))
    assert m.operators.session(old["ann"])[0].name == "ann"
    assert m.verify_audit() == []
    raw_delete(m, old["bob"])  # before the log starts: nothing to compare with
    assert m.verify_audit() == []
    m.operators.issue_token("bob", SESSION, 3600)
    first = next(e for e in m.operators.events() if e.action == "session_start")
    assert [a["session"] for a in first.details["adopted"]] == [session_id(token_hash(old["ann"]))]
    assert m.verify_audit() == []
    raw_delete(m, old["ann"])
    problems = found(m)
    assert len(problems) == 1 and f"session {session_id(token_hash(old['ann']))} of 'ann'" in problems[0], problems
    assert "in the store when sessions began to be logged" in problems[0]


def test_a_store_from_before_gets_the_operator_log_index(sqlite_url):
    """The log grows with every sign-in; a session check reads it by operator through an index,
    which a store made before it gets on open."""
    from sqlalchemy import inspect, text

    m = Membrane.open(sqlite_url, load_sample=False)
    with m.store.write() as conn:
        conn.execute(text("DROP INDEX ix_operator_events_operator"))
    m.close()
    m = Membrane.open(sqlite_url, load_sample=False)
    try:
        with m.store.read() as conn:
            indexes = {ix["name"]: ix["column_names"] for ix in inspect(conn).get_indexes("operator_events")}
        assert indexes["ix_operator_events_operator"] == ["operator", "action", "seq"]
    finally:
        m.close()
