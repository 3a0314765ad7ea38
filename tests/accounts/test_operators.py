"""Operators in the store (SPEC 10): managed through audited operations, passwords only as scrypt
hashes, sign-in tokens only as hashes, first-run tokens single-use and expiring, and the change
log hash-linked so an edit of it is found. On SQLite and PostgreSQL alike."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, text, update

from membrane_engine import Membrane
from membrane_engine.errors import AlreadyExistsError, NotFoundError, ValidationError
from membrane_engine.accounts.operators import FIRST_RUN, SESSION, Operators, password_matches
from membrane_engine.rules.roles import Role, permits
from membrane_engine.storage.store import operator_events, operator_tokens, operators

PASSWORD = "a long enough passphrase"


def _dump(m: Membrane) -> str:
    """Every operator table's rows as text: what a copy of the store would give away."""
    with m.store.read() as conn:
        return json.dumps([[list(r) for r in conn.execute(select(t))] for t in (operators, operator_events,
                                                                                 operator_tokens)], default=str)


def test_add_get_list_set_remove_are_audited_with_their_actor(membrane):
    ops = membrane.operators
    ops.add("ann", "admin", "hyper", actor="cli:root")
    bob = ops.add("bob", "viewer", "medium", "b,a", password=PASSWORD, email="Bob@Example.org", actor="cli:root")
    assert (bob.role, bob.max_sensitivity.value, bob.scopes, bob.email) == (Role.VIEWER, "medium", ("a", "b"),
                                                                             "bob@example.org")
    assert bob.actor == "operator:bob" and bob.clearance.scopes == ("a", "b")
    assert [o.name for o in ops.list()] == ["ann", "bob"]
    assert ops.set("bob", role="curator", max_sensitivity="high", scopes="", actor="operator:ann").scopes == ()
    assert permits(ops.get("bob"), "reinforce")[0] and not permits(ops.get("bob"), "delete")[0]
    ops.remove("bob", actor="operator:ann")
    with pytest.raises(NotFoundError, match="no operator named 'bob'"):
        ops.get("bob")
    log = [(e.actor, e.action, e.operator) for e in ops.events()]
    assert log == [("cli:root", "add", "ann"), ("cli:root", "add", "bob"), ("operator:ann", "set", "bob"),
                   ("operator:ann", "remove", "bob")]
    assert ops.events("bob")[1].details == {"role": "curator", "clearance": "high", "scopes": []}
    assert ops.verify_events() == []


@pytest.mark.parametrize("call, field", [
    (lambda ops: ops.add("bad name", "viewer", "low", actor="t"), "name"),
    (lambda ops: ops.add("x", "owner", "low", actor="t"), "role"),
    (lambda ops: ops.add("x", "viewer", "secret", actor="t"), "clearance"),
    (lambda ops: ops.add("x", "viewer", "low", password="short", actor="t"), "password"),
    (lambda ops: ops.add("x", "viewer", "low", email="not-an-address", actor="t"), "email"),
    (lambda ops: ops.add("x", "viewer", "low", actor=""), "actor"),
])
def test_bad_input_is_refused_naming_the_field(membrane, call, field):
    with pytest.raises(ValidationError) as err:
        call(membrane.operators)
    assert err.value.problems[0][0] == field
    assert membrane.operators.count() == 0 and membrane.operators.events() == []  # nothing half-written


def test_names_and_emails_are_unique_and_the_last_admin_stays(membrane):
    ops = membrane.operators
    ops.add("ann", "admin", "hyper", email="a@x.org", actor="t")
    with pytest.raises(AlreadyExistsError, match="operator 'ann' already exists"):
        ops.add("ann", "viewer", "low", actor="t")
    with pytest.raises(AlreadyExistsError, match="already belongs to operator 'ann'"):
        ops.add("bob", "viewer", "low", email="A@X.org", actor="t")
    with pytest.raises(ValidationError, match="last admin"):
        ops.remove("ann", actor="t")
    with pytest.raises(ValidationError, match="last admin"):
        ops.set("ann", role="viewer", actor="t")
    ops.add("bea", "admin", "hyper", actor="t")
    ops.set("ann", role="viewer", actor="t")  # another admin exists now


def test_passwords_are_scrypt_hashes_checked_in_constant_time(membrane):
    ops = membrane.operators
    ops.add("ann", "admin", "hyper", password=PASSWORD, actor="t")
    dump = _dump(membrane)
    assert PASSWORD not in dump
    with membrane.store.read() as conn:
        stored = conn.execute(select(operators.c.password_hash)).scalar_one()
    assert stored.startswith("scrypt$32768$8$1$")
    assert ops.verify_password("ann", PASSWORD).name == "ann"
    assert ops.verify_password("ann", PASSWORD + "x") is None
    assert ops.verify_password("nobody", PASSWORD) is None
    assert ops.verify_password("ann", None) is None
    assert not password_matches(PASSWORD, "md5$abc")  # an unknown scheme never matches
    ops.passwd("ann", "another long passphrase", actor="operator:ann")
    assert ops.verify_password("ann", PASSWORD) is None
    assert ops.events()[-1].action == "passwd" and "another" not in _dump(membrane)


def test_first_run_token_works_once_expires_and_is_kept_only_as_a_hash(membrane):
    clock = [1_000_000.0]
    ops = Operators(membrane.store, clock=lambda: clock[0])
    ops.add("admin", "admin", "hyper", actor="membrane-console:first-run")
    token = ops.issue_token("admin", FIRST_RUN, 3600)
    assert token not in _dump(membrane)
    assert ops.redeem(token, SESSION) is None  # a first-run token is not a session
    assert ops.redeem(token, FIRST_RUN).name == "admin"
    assert ops.redeem(token, FIRST_RUN) is None  # single use
    late = ops.issue_token("admin", FIRST_RUN, 3600)
    clock[0] += 3601
    assert ops.redeem(late, FIRST_RUN) is None  # expired
    assert ops.redeem("x" * 43, FIRST_RUN) is None and ops.redeem("", FIRST_RUN) is None
    assert [e.action for e in ops.events()] == ["add", "first_run_link", "first_run_used", "first_run_link"]


def test_sessions_end_on_expiry_password_role_change_and_removal(membrane):
    clock = [1_000_000.0]
    ops = Operators(membrane.store, clock=lambda: clock[0])
    ops.add("ann", "admin", "hyper", actor="t")
    ops.add("bob", "curator", "high", password=PASSWORD, actor="t")
    s = ops.issue_token("bob", SESSION, 60)
    assert ops.session(s)[0].name == "bob" and ops.session(s)[1] == clock[0] + 60
    clock[0] += 61
    assert ops.session(s) is None
    for change in (lambda: ops.passwd("bob", "a new long passphrase", actor="t"),
                   lambda: ops.set("bob", role="viewer", actor="t"),
                   lambda: ops.set("bob", max_sensitivity="low", actor="t"),
                   lambda: ops.remove("bob", actor="t")):
        s = ops.issue_token("bob", SESSION, 60)
        assert ops.session(s) is not None
        change()
        assert ops.session(s) is None
    s = ops.issue_token("ann", SESSION, 60)
    ops.end_session(s)
    assert ops.session(s) is None


def test_identities_match_by_email_only_when_known(membrane):
    ops = membrane.operators
    ops.add("ann", "curator", "medium", email="ann@example.org", actor="t")
    assert ops.by_email("ANN@example.org ").name == "ann"
    assert ops.by_email("eve@example.org") is None
    assert ops.by_email(None) is None and ops.by_email("ann") is None


def test_an_edited_or_removed_log_entry_is_found(membrane):
    ops = membrane.operators
    ops.add("ann", "admin", "hyper", actor="t")
    ops.add("bob", "viewer", "low", actor="t")
    ops.set("bob", role="curator", actor="t")
    with membrane.store.write() as conn:
        conn.execute(update(operator_events).where(operator_events.c.seq == 2)
                     .values(details=json.dumps({"role": "admin"})))
    assert any("event 2: hash" in p for p in ops.verify_events())
    with membrane.store.write() as conn:
        conn.execute(text("DELETE FROM operator_events WHERE seq = 2"))
    assert any("event 3: prev_hash" in p for p in ops.verify_events())


def test_a_store_made_before_operators_gets_their_tables(sqlite_url):
    m = Membrane.open(sqlite_url, load_sample=False)
    with m.store.write() as conn:
        for table in ("operator_tokens", "operator_events", "operators"):
            conn.execute(text(f"DROP TABLE {table}"))
    m.close()
    m = Membrane.open(sqlite_url, load_sample=False)
    try:
        assert m.operators.count() == 0
        m.operators.add("ann", "admin", "hyper", actor="t")
        assert m.operators.get("ann").role is Role.ADMIN
    finally:
        m.close()
