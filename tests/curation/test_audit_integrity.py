"""Audit integrity (SPEC 6) against someone who can write the database but does not hold
MEMBRANE_AUDIT_KEY: erasing a record with its history, rolling a record back, editing a record
in place, moving an archived record back; checkpoints; keyed stores and keyless processes;
import naming the importer; upgrading a schema 1 store. Each attack is raw SQL that went
unreported before the store-wide chain and content digests existed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.support.curation import DAY, semantic, working
from tests.curation.test_curation_tamper import forge

from membrane_engine import Membrane
from membrane_engine.errors import AuditKeyError, ValidationError

KEY = "correct horse battery staple"
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "schema1_store.db"  # made with schema 1's code


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)


def kinds(problems) -> set[tuple[str | None, str]]:
    return {(p.record_id, p.kind) for p in problems}


def entries(raw) -> int:
    return raw.query("SELECT count(*) FROM audit_entries")[0][0]


def populate(m: Membrane) -> None:
    """x's entries sit between others' in the store-wide sequence (its import, then y's and z's
    work)."""
    m.import_records([semantic("x"), semantic("y"), working("z")])
    m.reinforce("x", "op", "used")
    m.reinforce("y", "op", "used")
    m.reclassify("z", "op", "tighter", sensitivity="high")



def live_row(raw, rid: str) -> dict:
    from membrane_engine.storage.store import RECORD_COLUMNS

    (row,) = raw.query(f"SELECT {', '.join(RECORD_COLUMNS)} FROM records WHERE id = '{rid}'")
    return dict(zip(RECORD_COLUMNS, row))


def insert_row(row: dict) -> tuple[str, dict]:
    names = list(row)
    return (f"INSERT INTO records ({', '.join(names)}) VALUES ({', '.join(':' + n for n in names)})", row)


# ----------------------------------------------------------------------------- (a) erasure


def test_a_record_erased_with_its_whole_history_is_reported(keyed, m, raw):
    populate(m)
    assert m.verify_audit() == []
    raw.execute("DELETE FROM records WHERE id = 'x'", "DELETE FROM audit_entries WHERE record_id = 'x'")
    problems = m.verify_audit()
    assert problems and all(p.record_id is None for p in problems)
    assert {p.kind for p in problems} == {"erased"}
    assert {p.store_position for p in problems} == {0, 3}  # x's create and its reinforce
    assert "erased" in str(problems[0]) and "store-wide position 0" in str(problems[0])


def test_erasing_the_newest_record_is_caught_against_a_checkpoint(keyed, m, raw, clock):
    populate(m)
    m.import_records([semantic("last")])
    cp = m.audit_checkpoint()
    raw.execute("DELETE FROM records WHERE id = 'last'", "DELETE FROM audit_entries WHERE record_id = 'last'")
    assert m.verify_audit() == []  # nothing left to see inside the store: its tail was cut
    (problem,) = m.verify_audit(checkpoint=cp)
    assert problem.kind == "rollback" and "before the checkpoint" in problem.problem
    assert problem.store_position == cp["position"]


# ----------------------------------------------------------------------------- (b) rollback


def test_a_record_rolled_back_to_an_older_copy_is_reported(keyed, m, raw, clock):
    populate(m)
    old = live_row(raw, "x")
    clock.advance(DAY)
    m.reinforce("x", "op", "again")
    m.penalize("x", 0.3, "op", "wrong after all")
    m.reinforce("y", "op", "later work")  # x's newer entries are not the store's newest
    raw.execute("DELETE FROM audit_entries WHERE record_id = 'x' AND position >= 2",
                "DELETE FROM records WHERE id = 'x'", insert_row(old))
    (problem,) = m.verify_audit()
    assert (problem.kind, problem.store_position) == ("erased", 6) and "places 6..7 are empty" in str(problem)


def test_a_rollback_at_the_store_tail_is_caught_against_a_checkpoint(keyed, m, raw, clock):
    populate(m)
    old = live_row(raw, "x")
    clock.advance(DAY)
    m.reinforce("x", "op", "again")
    cp = m.audit_checkpoint()
    raw.execute("DELETE FROM audit_entries WHERE record_id = 'x' AND position >= 2",
                "DELETE FROM records WHERE id = 'x'", insert_row(old))
    assert m.verify_audit() == []  # a consistent older copy: only the checkpoint knows better
    assert kinds(m.verify_audit(checkpoint=cp)) == {(None, "rollback")}
    # The engine writes on from the rolled-back tail: the checkpoint's place now holds another entry.
    m.reinforce("y", "op", "after the rollback")
    (problem,) = m.verify_audit(checkpoint=json.dumps(cp))
    assert problem.kind == "rollback" and "not the one the checkpoint saw" in problem.problem


# ----------------------------------------------------------------------------- (c) edit in place


@pytest.mark.parametrize("edit", [
    "UPDATE records SET sensitivity = 'public', sens_level = 0 WHERE id = 'z'",
    "UPDATE records SET doc = replace(doc, '\"thread_id\":\"th\"', '\"thread_id\":\"forged\"') WHERE id = 'z'",
    "UPDATE records SET scope = 'elsewhere' WHERE id = 'z'",
    "UPDATE records SET anchor_salience = 1.0 WHERE id = 'z'",
])
def test_a_record_edited_in_place_is_reported(keyed, m, raw, edit):
    populate(m)
    raw.execute(edit)
    problems = m.verify_audit()
    assert kinds(problems) == {("z", "content")}
    assert "reclassified" not in problems[0].problem and "entry 1, revise by op" in problems[0].problem


def test_payload_and_sensitivity_edited_together(keyed, m, raw):
    populate(m)
    doc = json.loads(live_row(raw, "x")["doc"])
    doc["payload"]["object"] = "forged"
    doc["sensitivity"] = "public"
    raw.execute(("UPDATE records SET doc = :d, sensitivity = 'public', sens_level = 0 WHERE id = 'x'",
                 {"d": json.dumps(doc)}))
    assert kinds(m.verify_audit()) == {("x", "content")}


# ----------------------------------------------------------------------------- (d) archive -> live


def test_an_archived_record_moved_back_to_the_live_table_is_reported(keyed, m, raw):
    populate(m)
    row = live_row(raw, "z")
    m.delete("z", "op", "obsolete")
    ((head,),) = raw.query("SELECT audit_head FROM archive WHERE id = 'z'")
    raw.execute("DELETE FROM archive WHERE id = 'z'", insert_row(dict(row, audit_head=head)))
    problems = m.verify_audit()
    assert kinds(problems) == {("z", "moved")}
    assert "brought back outside the engine" in problems[0].problem


def test_a_live_record_moved_into_the_archive_is_reported(keyed, m, raw):
    populate(m)
    row = live_row(raw, "x")
    raw.execute(("INSERT INTO archive (id, doc, audit_head, archived_at) VALUES ('x', :d, :h, 0)",
                 {"d": row["doc"], "h": row["audit_head"]}), "DELETE FROM records WHERE id = 'x'")
    assert ("x", "moved") in kinds(m.verify_audit())


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoint_is_json_and_signed_under_the_key(keyed, m, raw):
    populate(m)
    cp = m.audit_checkpoint()
    assert json.loads(json.dumps(cp)) == cp
    assert cp["position"] == entries(raw) - 1 and cp["keyed"] is True
    assert cp["signature"].startswith("hmac-sha256:") and cp["head"].startswith("hmac-sha256:")
    assert m.verify_audit(checkpoint=cp) == []
    edited = dict(cp, position=cp["position"] - 1)
    assert {p.kind for p in m.verify_audit(checkpoint=edited)} >= {"checkpoint"}
    other = dict(cp, store_id="another-store")
    assert any("another store" in p.problem for p in m.verify_audit(checkpoint=other))


def test_an_unkeyed_checkpoint_of_an_empty_store(m):
    cp = m.audit_checkpoint()
    assert cp["position"] == -1 and "signature" not in cp and cp["keyed"] is False
    assert m.verify_audit(checkpoint=cp) == []


@pytest.mark.parametrize("bad", [{"kind": "other"}, "not json", [], {"kind": "membrane-audit-checkpoint"},
                                 {"kind": "membrane-audit-checkpoint", "position": "x", "head": "h",
                                  "taken_at": "2026-01-01T00:00:00Z", "store_id": None, "keyed": False}])
def test_a_bad_checkpoint_is_refused_naming_the_field(m, bad):
    with pytest.raises(ValidationError, match="checkpoint"):
        m.verify_audit(checkpoint=bad)


def test_a_growing_store_verifies_clean_against_an_old_checkpoint(keyed, m, clock):
    """No false alarm: every kind of write after the checkpoint extends it."""
    populate(m)
    cp = m.audit_checkpoint()
    m.import_records([semantic("n1"), semantic("n2", audit_log=[
        {"action": "create", "actor": "agent", "timestamp": "2026-01-01T00:00:00Z", "rationale": "seen"}])])
    m.reinforce("n1", "op", "used")
    m.delete("y", "op", "gone")
    m.restore("y", "op", "back")
    m.supersede("x", semantic("x2"), "op", "newer")
    m.fork("n1", semantic("n3"), "op", "variant")
    m.merge(["n2", "n3"], semantic("n4"), "op", "together")
    clock.advance(DAY * 400)
    assert m.prune("op", "sweep", dry_run=False)
    assert m.verify_audit(checkpoint=cp) == []
    later = m.audit_checkpoint()
    assert later["position"] > cp["position"] and m.verify_audit(checkpoint=later) == []


# ----------------------------------------------------------------------------- mixed keys


def test_a_keyless_process_refuses_to_write_to_a_keyed_store(m, raw, monkeypatch):
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    populate(m)
    monkeypatch.delenv("MEMBRANE_AUDIT_KEY")
    before = (entries(raw), live_row(raw, "x"))
    for write in (lambda: m.reinforce("x", "op", "keyless"), lambda: m.import_records([semantic("q")]),
                  lambda: m.delete("y", "op", "keyless"), lambda: m.fork("x", semantic("f"), "op", "keyless")):
        with pytest.raises(AuditKeyError, match="MEMBRANE_AUDIT_KEY is not set"):
            write()
    assert (entries(raw), live_row(raw, "x")) == before  # nothing written
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", "another key")
    with pytest.raises(AuditKeyError, match="not the key"):
        m.reinforce("x", "op", "wrong key")
    assert entries(raw) == before[0]
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    m.reinforce("x", "op", "right key")
    assert m.verify_audit() == []


def test_verifying_a_keyed_store_without_the_key_is_never_empty(m, raw, monkeypatch):
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    populate(m)
    cp = m.audit_checkpoint()
    monkeypatch.delenv("MEMBRANE_AUDIT_KEY")
    assert kinds(m.verify_audit()) == {(None, "key")}
    forge(raw, "x", edit_position=1)  # rewritten with plain sha256 by someone without the key
    problems = m.verify_audit()
    assert problems and any("forged" in p.problem for p in problems)
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    assert ("x", "key") in kinds(m.verify_audit(checkpoint=cp))
    # Dropping the key row as well: the entries themselves still say they were keyed.
    raw.execute("DELETE FROM meta WHERE key = 'audit_key'")
    monkeypatch.delenv("MEMBRANE_AUDIT_KEY")
    assert any(p.kind == "key" for p in m.verify_audit())
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    assert any("no longer says so" in p.problem for p in m.verify_audit(checkpoint=cp))


def test_a_keyed_process_keys_an_unkeyed_store_from_its_first_entry(m, raw, monkeypatch):
    m.import_records([semantic("old")])
    monkeypatch.setenv("MEMBRANE_AUDIT_KEY", KEY)
    m.reinforce("old", "op", "keyed now")
    assert m.verify_audit() == []
    monkeypatch.delenv("MEMBRANE_AUDIT_KEY")
    with pytest.raises(AuditKeyError):
        m.reinforce("old", "op", "keyless again")


# ----------------------------------------------------------------------------- import names the importer


def test_import_ends_every_record_with_the_importers_create_entry(m, raw):
    brought = [{"action": "create", "actor": "someone", "timestamp": "2020-01-01T00:00:00Z", "rationale": "claimed"},
               {"action": "revise", "actor": "admin", "timestamp": "2020-02-01T00:00:00Z", "rationale": "approved"}]
    m.import_records([semantic("h", audit_log=brought), semantic("plain")], actor="alice@ops")
    log = m.audit_log("h")
    assert [(e.action.value, e.actor) for e in log] == [("create", "someone"), ("revise", "admin"),
                                                          ("create", "alice@ops")]
    assert log[-1].rationale.startswith("imported") and "2 earlier audit entries" in log[-1].rationale
    (only,) = m.audit_log("plain")
    assert (only.actor, only.rationale) == ("alice@ops", "imported without an audit log")
    assert m.verify_audit() == []


def test_import_file_names_the_importer_in_worker_processes_too(m, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(semantic(f"r{k}")) for k in range(5)))
    assert m.import_file(path, actor="bob", workers=2) == 5
    assert {m.audit_log(f"r{k}")[-1].actor for k in range(5)} == {"bob"}
    assert m.verify_audit() == []


# ----------------------------------------------------------------------------- upgrading a schema 1 store


def test_a_schema_1_store_upgrades_on_open_with_one_entry(tmp_path, clock):
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    m = Membrane.open(f"sqlite:///{path}", load_sample=False, clock=clock)
    try:
        assert m.ids() == ["a", "b", "c"] and m.archived_ids() == ["w"]
        assert [e.action.value for e in m.audit_log("c")] == ["create", "revise"]  # nothing lost
        total, rows = m.audit_query(actor="membrane-engine", limit=10)
        (upgrade,) = rows
        assert upgrade.record_id == "" and total == 1 and upgrade.entry.actor == "membrane-engine" and "schema 2" in upgrade.entry.rationale
        assert upgrade.details["legacy"]["entries"] == 8 and upgrade.details["heads_not_resealed"] == 0
        assert m.verify_audit() == []
        cp = m.audit_checkpoint()
        m.reinforce("a", "op", "after the upgrade")
        assert m.verify_audit(checkpoint=cp) == []
    finally:
        m.close()
    again = Membrane.open(f"sqlite:///{path}", load_sample=False, clock=clock)  # no second upgrade
    try:
        assert again.audit_query(actor="membrane-engine", limit=0)[0] == 1 and again.verify_audit() == []
    finally:
        again.close()


@pytest.mark.parametrize("attack", [
    "DELETE FROM audit_entries WHERE record_id = 'b'",  # a pre-upgrade history erased
    "UPDATE records SET sensitivity = 'public', sens_level = 0 WHERE id = 'b'",  # edited in place
])
def test_history_from_before_the_upgrade_stays_bound(tmp_path, clock, attack):
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    Membrane.open(f"sqlite:///{path}", load_sample=False, clock=clock).close()
    from tests.support.curation import Raw

    Raw(f"sqlite:///{path}").execute(attack)
    m = Membrane.open(f"sqlite:///{path}", load_sample=False, clock=clock)
    try:
        assert m.verify_audit()
    finally:
        m.close()


# ----------------------------------------------------------------------------- cost on PostgreSQL


def test_a_reinforce_on_postgresql_stays_two_round_trips_with_the_store_wide_chain(postgres_url, keyed):
    """The store-wide tail is read in the pipeline that takes the writers' lock and the record;
    the entry goes out in the pipeline that writes the row: two pipelines, nothing outside them."""
    psycopg = pytest.importorskip("psycopg")
    m = Membrane.open(postgres_url, load_sample=False)
    try:
        m.import_records([semantic("a")])
        m.reinforce("a", "op", "warm")
        m.columns.current()
        calls: list[tuple[str, bool, str]] = []
        originals = {}
        for cls, name in ((psycopg.Cursor, "execute"), (psycopg.Cursor, "executemany"),
                          (psycopg.Connection, "execute"), (psycopg.Connection, "pipeline")):
            original = getattr(cls, name)
            originals[(cls, name)] = original

            def spy(self, *a, _original=original, _name=name, **k):
                conn = self if isinstance(self, psycopg.Connection) else self.connection
                calls.append((_name, conn._pipeline is not None, str(a[0]) if a and _name != "pipeline" else ""))
                return _original(self, *a, **k)

            setattr(cls, name, spy)
        try:
            m.reinforce("a", "op", "counted")
        finally:
            for (cls, name), original in originals.items():
                setattr(cls, name, original)
        assert [c for c in calls if c[0] == "pipeline"] == [("pipeline", False, "")] * 2
        # (a connection the pool opens meanwhile sets its session once: not the write's)
        assert [c for c in calls if c[0] != "pipeline" and not c[1] and not c[2].startswith("SET ")] == []
        assert m.verify_audit() == []
    finally:
        m.close()


def _schema_1_on_postgres(url: str) -> None:
    """The fixture store's rows in a PostgreSQL schema laid out as schema 1 had it (the tables of
    today without the store-wide columns, the subjects table and the store id)."""
    import sqlite3

    from sqlalchemy import create_engine, text

    from membrane_engine.storage.store import metadata

    engine = create_engine(url)
    source = sqlite3.connect(FIXTURE)
    try:
        with engine.begin() as conn:
            metadata.create_all(conn)
            conn.execute(text("ALTER TABLE audit_entries DROP COLUMN digest, DROP COLUMN store_position, "
                              "DROP COLUMN store_hash"))
            conn.execute(text("DROP TABLE audit_subjects"))
            for table in ("records", "audit_entries", "archive", "changes", "meta"):
                cursor = source.execute(f"SELECT * FROM {table}")
                names = [d[0] for d in cursor.description]
                rows = [dict(zip(names, row)) for row in cursor.fetchall()]
                if table == "records":
                    for row in rows:
                        row["pinned"] = bool(row["pinned"])
                if rows:
                    conn.execute(text(f"INSERT INTO {table} ({', '.join(names)}) VALUES "
                                      f"({', '.join(':' + n for n in names)})"), rows)
            for table in ("audit_entries", "changes"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'seq'), "
                                  f"(SELECT max(seq) FROM {table}))"))
    finally:
        source.close()
        engine.dispose()


def test_a_schema_1_store_upgrades_on_postgresql(postgres_url, clock):
    _schema_1_on_postgres(postgres_url)
    m = Membrane.open(postgres_url, load_sample=False, clock=clock)
    try:
        assert m.ids() == ["a", "b", "c"] and m.archived_ids() == ["w"]
        (upgrade,) = m.audit_query(actor="membrane-engine", limit=10)[1]
        assert upgrade.details["legacy"]["entries"] == 8 and upgrade.details["heads_resealed"] == 4
        assert m.verify_audit() == []
        m.reinforce("a", "op", "after the upgrade")
        m.restore("w", "op", "back")
        assert m.verify_audit() == []
    finally:
        m.close()
