"""The operator tables and the access log under the audit key (SPEC 6, SPEC 10; row_seal.py): a
database writer without MEMBRANE_AUDIT_KEY who inserts an operator, mints a session token, puts
an older operator row back, or edits or deletes access-log entries with raw SQL signs no one in
and is reported by verify_audit, naming the table and the row; a process without the key cannot
add an operator to a keyed store. The attacker here knows the hashing: forged rows carry plain
sha256 MACs computed exactly as the engine would without a key. On SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, insert, select, text, update

from membrane_engine import Membrane
from membrane_engine.oversight import clearance as gate
from membrane_engine.errors import AuditKeyError
from membrane_engine.accounts.operators import SESSION, OperatorNotFoundError, hash_password, token_hash
from membrane_engine.audit.row_seal import Seal, operator_fields, token_fields
from membrane_engine.rules.chain import GENESIS
from membrane_engine.storage.store import access_log, operator_events, operator_tokens, operators

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
def keyed_store(store_url, monkeypatch) -> Membrane:
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    m = Membrane.open(store_url, load_sample=False)
    m.operators.add("ann", "admin", "hyper", password=PASSWORD, email="ann@example.org", actor="cli:root")
    m.operators.add("bob", "viewer", "low", password=PASSWORD, actor="cli:root")
    yield m
    m.close()


def problems_of(m: Membrane, kind: str) -> list[str]:
    return [str(p) for p in m.verify_audit() if p.kind == kind]


def test_an_intact_store_verifies_and_signs_in(store_url, keyed):
    m = Membrane.open(store_url, load_sample=False)
    try:
        m.operators.add("ann", "admin", "hyper", password=PASSWORD, actor="cli:root")
        m.operators.set("ann", email="ann@example.org", actor="cli:root")
        token = m.operators.issue_token("ann", SESSION, 60)
        gate.log_accesses(m, "operator:ann", [("r1", "high", ""), ("r2", "hyper", "alpha")], via="page:records")
        gate.log_access(m, "r3", "operator:ann", "high")
        assert m.operators.verify_password("ann", PASSWORD).name == "ann"
        assert m.operators.session(token)[0].name == "ann"
        assert m.operators.by_email("ann@example.org").name == "ann"
        assert m.verify_audit() == []
        with m.store.read() as conn:
            macs = [conn.execute(select(t.c.mac)).scalars().first() for t in (operators, operator_tokens)]
        assert all(mac.startswith("hmac-sha256:" if keyed else "sha256:") for mac in macs)
    finally:
        m.close()


def test_an_operator_row_inserted_with_raw_sql_is_refused_at_sign_in_and_reported(keyed_store):
    m = keyed_store
    row = {"name": "eve", "role": "admin", "max_sensitivity": "hyper", "scopes": "[]", "email": "eve@example.org",
           "password_hash": hash_password(PASSWORD), "created_at": 1.0, "updated_at": 1.0}
    with m.store.write() as conn:
        conn.execute(insert(operators).values(**row, mac=NO_KEY.make(operator_fields(row, GENESIS))))
    assert m.operators.verify_password("eve", PASSWORD) is None
    assert m.operators.by_email("eve@example.org") is None
    with pytest.raises(OperatorNotFoundError):
        m.operators.get("eve")
    found = problems_of(m, "operators")
    assert any("operators row 'eve'" in p and "added outside the engine" in p for p in found), found
    assert m.operators.verify_password("ann", PASSWORD).name == "ann"  # the others still sign in


def test_a_changed_or_put_back_operator_row_is_refused_and_reported(keyed_store):
    m = keyed_store
    with m.store.read() as conn:
        as_viewer = dict(conn.execute(select(operators).where(operators.c.name == "bob")).one()._mapping)
    # Promoted in the database: the MAC no longer holds.
    with m.store.write() as conn:
        conn.execute(update(operators).where(operators.c.name == "bob").values(role="admin"))
    assert m.operators.verify_password("bob", PASSWORD) is None
    assert any("operators row 'bob'" in p and "MAC does not match" in p for p in problems_of(m, "operators"))
    # Demoted by the engine (row and MAC rewritten), then the older row, with its own valid MAC,
    # put back: its MAC covers an older logged change, so it does not hold either.
    m.operators.set("ann", max_sensitivity="high", actor="operator:ann")
    with m.store.read() as conn:
        old_ann = dict(conn.execute(select(operators).where(operators.c.name == "ann")).one()._mapping)
    m.operators.set("ann", max_sensitivity="medium", actor="operator:ann")
    assert m.operators.verify_password("ann", PASSWORD).max_sensitivity.value == "medium"
    with m.store.write() as conn:
        conn.execute(update(operators).where(operators.c.name == "ann").values(**old_ann))
        conn.execute(update(operators).where(operators.c.name == "bob").values(**as_viewer))
    assert m.operators.verify_password("ann", PASSWORD) is None
    assert m.operators.verify_password("bob", PASSWORD).name == "bob"  # bob's own row back: his
    found = problems_of(m, "operators")
    assert [p for p in found if "'ann'" in p] and not [p for p in found if "'bob'" in p], found


def test_an_operator_row_deleted_with_raw_sql_is_reported(keyed_store):
    m = keyed_store
    with m.store.write() as conn:
        conn.execute(delete(operators).where(operators.c.name == "bob"))
    assert any("operators row 'bob'" in p and "deleted outside the engine" in p for p in problems_of(m, "operators"))


def test_a_session_token_minted_with_raw_sql_does_not_sign_in(keyed_store):
    m = keyed_store
    real = m.operators.issue_token("ann", SESSION, 3600)
    assert m.operators.session(real)[0].name == "ann"
    forged = "f" * 43
    row = {"token_hash": token_hash(forged), "kind": SESSION, "operator": "ann", "expires_at": 4e9, "used_at": None}
    with m.store.write() as conn:
        real_mac = conn.execute(select(operator_tokens.c.mac).where(operator_tokens.c.token_hash == token_hash(real))
                                ).scalar_one()
        conn.execute(insert(operator_tokens).values(**row, mac=NO_KEY.make(token_fields(row))))
    assert m.operators.session(forged) is None
    assert m.operators.redeem(forged, SESSION) is None
    # Nor with another session's (valid) MAC copied onto it.
    with m.store.write() as conn:
        conn.execute(update(operator_tokens).where(operator_tokens.c.token_hash == token_hash(forged))
                     .values(mac=real_mac))
    assert m.operators.session(forged) is None
    # A real session stretched in the database ends.
    with m.store.write() as conn:
        conn.execute(update(operator_tokens).where(operator_tokens.c.token_hash == token_hash(real))
                     .values(expires_at=4e9))
    assert m.operators.session(real) is None
    found = problems_of(m, "operators")
    assert sum("operator_tokens session of 'ann'" in p and "minted or changed" in p for p in found) == 2, found


def test_the_operator_log_cut_at_its_end_is_reported(keyed_store):
    m = keyed_store
    m.operators.set("bob", role="curator", actor="operator:ann")
    with m.store.write() as conn:
        last = conn.execute(select(operator_events.c.seq).order_by(operator_events.c.seq.desc())).scalars().first()
        conn.execute(delete(operator_events).where(operator_events.c.seq == last))
    found = problems_of(m, "operators")
    assert any(f"operator_events event {last}" in p and "deleted" in p for p in found), found


def test_a_process_without_the_key_cannot_write_to_a_keyed_stores_operator_tables(keyed_store, monkeypatch):
    url = keyed_store.store.url
    token = keyed_store.operators.issue_token("ann", SESSION, 3600)
    monkeypatch.delenv("MEMBRANE_AUDIT_KEY")
    m = Membrane.open(url, load_sample=False)
    try:
        before = m.operators.events()
        with pytest.raises(AuditKeyError, match="MEMBRANE_AUDIT_KEY"):
            m.operators.add("eve", "admin", "hyper", password=PASSWORD, actor="cli:eve")
        with pytest.raises(AuditKeyError, match="MEMBRANE_AUDIT_KEY"):
            m.operators.set("bob", role="admin", actor="cli:eve")
        with pytest.raises(AuditKeyError, match="MEMBRANE_AUDIT_KEY"):
            m.operators.issue_token("bob", SESSION, 3600)
        with pytest.raises(AuditKeyError, match="MEMBRANE_AUDIT_KEY"):
            gate.log_access(m, "r1", "operator:bob", "high")
        assert m.operators.events() == before
        with m.store.read() as conn:
            assert conn.execute(select(operators.c.name).order_by(operators.c.name)).scalars().all() == ["ann", "bob"]
            assert conn.execute(select(operators.c.role).where(operators.c.name == "bob")).scalar_one() == "viewer"
            assert conn.execute(select(access_log.c.seq)).first() is None
        # Without the key, keyed MACs cannot be checked: nothing is honoured.
        assert m.operators.session(token) is None
        assert m.operators.verify_password("ann", PASSWORD) is None
    finally:
        m.close()
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    assert keyed_store.operators.session(token)[0].name == "ann"
    assert keyed_store.verify_audit() == []


def _make_old(m: Membrane) -> None:
    """Back to the schema before MACs, the access chain and via (SQLite's DROP COLUMN)."""
    with m.store.write() as conn:
        for table, column in (("operators", "mac"), ("operator_tokens", "mac"), ("access_log", "prev_hash"),
                              ("access_log", "hash"), ("access_log", "via")):
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(text("DELETE FROM meta WHERE key IN ('operator_events_head', 'access_log_head')"))
        conn.execute(text("DELETE FROM audit_entries WHERE actor = 'membrane-engine:operator-seal'"))


@pytest.mark.parametrize("with_key", [False, True])
def test_an_older_store_migrates_and_its_operators_still_sign_in(sqlite_url, monkeypatch, with_key):
    monkeypatch.delenv("MEMBRANE_AUDIT_KEY", raising=False)
    m = Membrane.open(sqlite_url, load_sample=False)
    m.operators.add("ann", "admin", "hyper", password=PASSWORD, actor="cli:root")
    token = m.operators.issue_token("ann", SESSION, 3600)
    gate.log_access(m, "r1", "operator:ann", "high")
    gate.log_access(m, "r2", "operator:ann", "high")
    _make_old(m)
    m.close()
    if with_key:  # the first keyed open seals the rows written before it
        monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
        m = Membrane.open(sqlite_url, load_sample=False)
        m.import_records([])  # nothing: the store becomes keyed with its first keyed write
        m.operators.add("bob", "viewer", "low", actor="cli:root")
        m.close()
    m = Membrane.open(sqlite_url, load_sample=False)
    try:
        assert m.operators.verify_password("ann", PASSWORD).name == "ann"
        assert m.operators.session(token)[0].name == "ann"
        assert [a.via for a in m.access_log()[1]] == ["", ""]
        gate.log_access(m, "r3", "operator:ann", "high", via="page:records")
        assert m.verify_audit() == []
        with m.store.read() as conn:
            mac = conn.execute(select(operators.c.mac).where(operators.c.name == "ann")).scalar_one()
        assert mac.startswith("hmac-sha256:" if with_key else "sha256:")
        # Sealed once: a row added with a plain MAC after that is not sealed by a later open.
        if with_key:
            row = {"name": "eve", "role": "admin", "max_sensitivity": "hyper", "scopes": "[]", "email": None,
                   "password_hash": hash_password(PASSWORD), "created_at": 1.0, "updated_at": 1.0}
            with m.store.write() as conn:
                conn.execute(insert(operators).values(**row, mac=NO_KEY.make(operator_fields(row, GENESIS))))
            m.close()
            m = Membrane.open(sqlite_url, load_sample=False)
            assert m.operators.verify_password("eve", PASSWORD) is None
    finally:
        m.close()


def test_the_seal_is_one_entry_of_the_stores_own_audit_log(keyed_store):
    keyed_store.operators.add("cy", "viewer", "low", actor="cli:root")
    total, rows = keyed_store.audit_query(actor="membrane-engine:operator-seal")
    assert total == 1 and rows[0].record_id == ""
    assert rows[0].entry.rationale.startswith("operator tables and access log sealed")
