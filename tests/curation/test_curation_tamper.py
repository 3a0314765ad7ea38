"""Tamper evidence (SPEC 6): edits, deletions, reorderings and truncations of the audit trail made
with raw SQL on the database are reported by verify_audit(), naming the record and position; with
MEMBRANE_AUDIT_KEY set, even recomputed plain sha256 hashes are caught. The engine itself never
updates or deletes an audit row."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from tests.support.curation import DAY, semantic, working
from sqlalchemy import event

from membrane_engine import Membrane

ENTRY = ("SELECT record_id, position, action, actor, timestamp, rationale, details, extra, digest, store_position, hash "
         "FROM audit_entries")


def history(m: Membrane) -> None:
    """Record "a" gets 6 entries (create + 5), "b" 2."""
    m.import_records([semantic("a"), semantic("b")])
    for k in range(3):
        m.reinforce("a", "op", f"reinforce {k}")
    m.penalize("a", 0.05, "op", "slightly off")
    m.reclassify("a", "op", "internal", sensitivity="medium")
    m.pin("b", "op", "keep")


def where(problems) -> set[tuple[str, int | None]]:
    """Where the record problems are (the store-wide ones, record_id None, are left out)."""
    return {(p.record_id, p.position) for p in problems if p.record_id is not None}


def sha(fields) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


def content_digest(raw, rid: str) -> str:
    from membrane_engine.storage.audit_log import CONTENT_COLUMNS, live_digest

    (row,) = raw.query(f"SELECT {', '.join(CONTENT_COLUMNS)} FROM records WHERE id = '{rid}'")
    return live_digest(row)


def forge(raw, rid: str, edit_position: int | None = None, keep: int | None = None) -> None:
    """An attacker without the key who knows the hashing: optionally rewrite one rationale and/or
    cut the record's chain to ``keep`` entries, bind the record's current content into its new
    last entry, then recompute every hash with plain sha256 (the record's chain, the whole
    store-wide sequence renumbered without holes, the head)."""
    statements = []
    if keep is not None:
        statements.append((f"DELETE FROM audit_entries WHERE record_id = :rid AND position >= {keep}", {"rid": rid}))
    rows = [r for r in raw.query(ENTRY + " WHERE store_position IS NOT NULL ORDER BY store_position")
            if not (keep is not None and r[0] == rid and r[1] >= keep)]
    mine = [r for r in rows if r[0] == rid]
    digest_now = content_digest(raw, rid)
    prev, hashes = "0" * 64, {}
    for record_id, position, action, actor, timestamp, rationale, details, extra, digest, _sp, _h in mine:
        if position == edit_position:
            rationale = "nothing to see here"
        if position == mine[-1][1]:
            digest = digest_now
        hashes[position] = (sha([prev, record_id, position, action, actor, timestamp, rationale, details, extra, digest]),
                            prev, rationale, digest)
        prev = hashes[position][0]
    store_prev = "0" * 64
    for new_sp, (record_id, position, *_rest, old_sp, old_hash) in enumerate(rows):
        new_hash = hashes[position][0] if record_id == rid else old_hash
        store_prev = sha(["store", new_sp, store_prev, new_hash])
        params = {"sp": new_sp, "sh": store_prev, "old": old_sp, "rid": record_id, "pos": position}
        if record_id == rid:
            h, p, r, d = hashes[position]
            statements.append(("UPDATE audit_entries SET rationale = :r, prev_hash = :p, hash = :h, digest = :d, "
                               "store_position = :sp, store_hash = :sh WHERE record_id = :rid AND position = :pos",
                               {**params, "r": r, "p": p, "h": h, "d": d}))
        else:
            statements.append(("UPDATE audit_entries SET store_position = :sp, store_hash = :sh "
                                "WHERE record_id = :rid AND position = :pos", params))
    statements.append(("UPDATE records SET audit_head = :h WHERE id = :rid",
                       {"h": sha(["head", rid, mine[-1][1], prev, digest_now]), "rid": rid}))
    # store positions are unique: move them out of the way first
    raw.execute("UPDATE audit_entries SET store_position = -1000 - store_position WHERE store_position IS NOT NULL",
                *statements)


def test_intact_store_verifies(m, raw):
    history(m)
    assert m.verify_audit() == []
    assert raw.query("SELECT count(*) FROM audit_entries WHERE record_id = 'a'") == [(6,)]


def test_edited_rationale(m, raw):
    history(m)
    raw.execute("UPDATE audit_entries SET rationale = 'edited' WHERE record_id = 'a' AND position = 2")
    problems = m.verify_audit()
    assert where(problems) == {("a", 2)}
    assert "edited" in problems[0].problem and "record a, entry 2" in str(problems[0])


def test_edited_details_actor_and_timestamp(m, raw):
    history(m)
    raw.execute("UPDATE audit_entries SET details = '{}' WHERE record_id = 'a' AND position = 1",
                "UPDATE audit_entries SET actor = 'mallory' WHERE record_id = 'a' AND position = 3",
                "UPDATE audit_entries SET ts = 0 WHERE record_id = 'b' AND position = 1")
    assert where(m.verify_audit()) == {("a", 1), ("a", 3), ("b", 1)}


def test_deleted_entry(m, raw):
    history(m)
    raw.execute("DELETE FROM audit_entries WHERE record_id = 'a' AND position = 3")
    problems = m.verify_audit()
    assert ("a", 3) in where(problems)
    assert all(p.record_id in ("a", None) for p in problems)
    assert [p.kind for p in problems if p.record_id is None] == ["erased"]  # its store-wide place is empty
    assert any("deleted" in p.problem for p in problems)
    raw.execute("DELETE FROM audit_entries WHERE record_id = 'b' AND position = 0")  # the first one
    assert ("b", 0) in where(m.verify_audit())


def test_reordered_entries(m, raw):
    history(m)
    raw.execute("UPDATE audit_entries SET position = -1 WHERE record_id = 'a' AND position = 1",
                "UPDATE audit_entries SET position = 1 WHERE record_id = 'a' AND position = 3",
                "UPDATE audit_entries SET position = 3 WHERE record_id = 'a' AND position = -1")
    problems = m.verify_audit()
    assert {("a", 1), ("a", 3)} <= where(problems)
    assert {p.record_id for p in problems} == {"a"}


def test_swapped_contents_and_storage_order(m, raw):
    history(m)
    rows = raw.query("SELECT seq, position FROM audit_entries WHERE record_id = 'a' ORDER BY position")
    (s1, _), (s2, _) = rows[1], rows[2]
    raw.execute(f"UPDATE audit_entries SET seq = -5 WHERE seq = {s1}",
                f"UPDATE audit_entries SET seq = {s1} WHERE seq = {s2}",
                f"UPDATE audit_entries SET seq = {s2} WHERE seq = -5")
    assert ("a", 2) in where(m.verify_audit())


def test_truncated_tail(m, raw):
    history(m)
    raw.execute("DELETE FROM audit_entries WHERE record_id = 'a' AND position >= 4")
    problems = [p for p in m.verify_audit() if p.record_id is not None]
    # the head no longer seals the chain, and the record's content is not what entry 3 recorded
    assert {(p.record_id, p.position, p.kind) for p in problems} == {("a", 4, "head"), ("a", 3, "content")}
    assert "truncated" in [p for p in problems if p.kind == "head"][0].problem


def test_truncated_tail_with_head_pointed_at_the_new_last_entry(m, raw):
    history(m)
    ((last_hash,),) = raw.query("SELECT hash FROM audit_entries WHERE record_id = 'a' AND position = 3")
    raw.execute("DELETE FROM audit_entries WHERE record_id = 'a' AND position >= 4",
                ("UPDATE records SET audit_head = :h WHERE id = 'a'", {"h": last_hash}))
    assert "a" in {p.record_id for p in m.verify_audit()}


def test_whole_history_deleted(m, raw):
    history(m)
    raw.execute("DELETE FROM audit_entries WHERE record_id = 'b'")
    assert where(m.verify_audit()) == {("b", 0)}
    raw.execute("UPDATE records SET audit_head = NULL WHERE id = 'b'")
    assert where(m.verify_audit()) == {("b", None)}


def test_archived_log_copy_and_archived_chain(m, raw, clock):
    history(m)
    m.import_records([working("w")])
    m.delete("w", "op", "archive")
    assert m.verify_audit() == []
    doc = raw.query("SELECT doc FROM archive WHERE id = 'w'")[0][0]
    edited = doc.replace('"archive"', '"nothing happened"').replace("deleted: archive", "deleted: nothing happened")
    assert edited != doc
    raw.execute(("UPDATE archive SET doc = :d WHERE id = 'w'", {"d": edited}))
    assert {(p.record_id, p.position, p.kind) for p in m.verify_audit()} == {("w", None, "archive"), ("w", 1, "content")}
    raw.execute(("UPDATE archive SET doc = :d WHERE id = 'w'", {"d": doc}),
                "DELETE FROM audit_entries WHERE record_id = 'w' AND position = 1")  # the delete entry
    assert "w" in {p.record_id for p in m.verify_audit()}


def test_without_a_key_a_full_recompute_goes_unnoticed(m, raw):
    """The forger below is exact: without MEMBRANE_AUDIT_KEY nothing distinguishes its chain (which
    is why the key exists, and why the keyed tests below are not vacuous)."""
    history(m)
    forge(raw, "a", edit_position=2)
    assert m.verify_audit() == []
    forge(raw, "a", keep=3)
    assert m.verify_audit() == []


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", "correct horse battery staple")


def test_keyed_chain_catches_recomputed_sha256_edit(keyed, m, raw):
    history(m)
    assert m.verify_audit() == []
    assert raw.query("SELECT hash FROM audit_entries WHERE record_id = 'a' AND position = 0")[0][0].startswith("hmac-sha256:")
    forge(raw, "a", edit_position=2)
    problems = m.verify_audit()
    assert problems and {p.record_id for p in problems} == {"a", None}
    assert any("forged" in p.problem for p in problems if p.record_id == "a")
    assert any("forged" in p.problem for p in problems if p.record_id is None)  # the store-wide chain too


def test_keyed_chain_catches_recomputed_truncation(keyed, m, raw):
    history(m)
    forge(raw, "a", keep=3)
    assert "a" in {p.record_id for p in m.verify_audit()}


def test_keyed_chain_catches_truncation_with_a_reused_genuine_hash(keyed, m, raw):
    history(m)
    ((last_hash,),) = raw.query("SELECT hash FROM audit_entries WHERE record_id = 'a' AND position = 3")
    raw.execute("DELETE FROM audit_entries WHERE record_id = 'a' AND position >= 4",
                ("UPDATE records SET audit_head = :h WHERE id = 'a'", {"h": last_hash}))
    assert "a" in {p.record_id for p in m.verify_audit()}


def test_a_store_written_with_a_key_does_not_verify_without_it(m, raw, monkeypatch):
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", "k1")
    history(m)
    monkeypatch.delenv("MEMBRANE_AUDIT_KEY")
    (problem,) = m.verify_audit()
    assert (problem.record_id, problem.kind) == (None, "key") and "cannot be verified" in problem.problem
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", "k2")
    (problem,) = m.verify_audit()
    assert (problem.record_id, problem.kind) == (None, "key") and "not the key" in problem.problem


def test_the_engine_never_updates_or_deletes_audit_rows(m, clock):
    statements: list[str] = []

    def spy(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    event.listen(m.store.engine, "before_cursor_execute", spy)
    history(m)
    m.import_records([semantic("c"), semantic("d"), semantic("e"), semantic("f", updated_at="2026-01-01T00:00:00Z")])
    m.supersede("c", semantic("c2"), "op", "r")
    m.fork("c2", semantic("c3"), "op", "r")
    m.merge(["d", "e"], semantic("de"), "op", "r")
    m.contest("c2", "c3", "op", "r")
    m.retract("c3", "op", "r")
    m.delete("de", "op", "r")
    m.restore("de", "op", "r")
    clock.advance(DAY)
    m.prune("op", "r", dry_run=False)
    m.unpin("b", "op", "r")
    event.remove(m.store.engine, "before_cursor_execute", spy)
    assert statements
    touching = [s for s in statements if re.search(r"^\s*(UPDATE|DELETE\s+FROM)\s+\"?audit_entries", s, re.I)]
    assert touching == []
    assert m.verify_audit() == []
