"""Unknown extra fields on audit entries (SPEC 1: kept on import, written back on export). They
are stored with the entry (``audit_entries.extra``), covered by its hash, carried into the
archive and back, and untouched by curation, whose own entries have none (and hash as they
always have)."""

from __future__ import annotations

import hashlib
import json

import pytest
from tests.support.curation import DAY, semantic

from membrane_engine import Membrane
from membrane_engine.rules.chain import GENESIS

EXTRA_1 = {"x_trace_id": "trace-123", "x_span": {"parent": None, "ids": [1, 2.5, True], "note": "naïve ✓ \u2028"},
           "_fields_set": ["not", "an", "argument"], "zz_first": 1}
EXTRA_2 = {"x_nul": "a\x00b", "x_empty": {}}


def with_log(rid: str) -> dict:
    return semantic(rid, audit_log=[
        {"action": "create", "actor": "agent-7", "timestamp": "2026-02-01T00:00:00Z", "rationale": "observed",
         **EXTRA_1},
        {"x_before": "fields in any order", "action": "revise", "actor": "agent-7",
         "timestamp": "2026-02-02T00:00:00Z", "rationale": "refined", **EXTRA_2},
        {"action": "reinforce", "actor": "agent-8", "timestamp": "2026-02-03T00:00:00Z", "rationale": "plain"},
    ])


def extras(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k not in ("action", "actor", "timestamp", "rationale")}


def exported(m: Membrane, rid: str) -> dict:
    (doc,) = m.iter_export(ids=[rid])
    return doc


def test_extra_fields_round_trip_through_import_and_export(m, tmp_path, clock):
    m.import_records([with_log("a")])
    log = exported(m, "a")["audit_log"]
    # the brought history, then the importer's own entry (SPEC 6), which has no extras
    assert [extras(e) for e in log] == [EXTRA_1, {"x_before": "fields in any order", **EXTRA_2}, {}, {}]
    assert list(extras(log[0])) == list(EXTRA_1)  # written back in the order given
    assert m.verify_audit() == []
    # get() and audit_log() carry them too
    assert m.get("a").audit_log[0].model_extra == EXTRA_1
    assert m.audit_log("a")[1].model_extra["x_nul"] == "a\x00b"

    # A file round trip into another store gives the same export.
    path = tmp_path / "a.json"
    m.export_file(path, ids=["a"])
    other = Membrane.open(f"sqlite:///{tmp_path / 'other.db'}", load_sample=False, clock=clock)
    try:
        assert other.import_file(path) == 1
        # the same history, and the second importer's own entry after it
        again = exported(other, "a")["audit_log"]
        assert again[:-1] == log and again[-1]["rationale"] == "imported with 4 earlier audit entries from the file"
        assert other.verify_audit() == []
    finally:
        other.close()


def test_curation_keeps_extras_and_writes_entries_without_them(m, raw):
    m.import_records([with_log("a"), semantic("b")])
    m.reinforce("a", "op", "more")
    m.contest("a", "b", "op", "disputed")
    log = exported(m, "a")["audit_log"]
    assert len(log) == 6 and [extras(e) for e in log[3:]] == [{}, {}, {}]  # import's entry, reinforce, contest
    assert extras(log[0]) == EXTRA_1
    assert m.verify_audit() == []
    # The engine's own entries store no extra (their hash covers it as null, with the content digest).
    rows = raw.query("SELECT record_id, position, action, actor, timestamp, rationale, details, extra, digest, "
                     "prev_hash, hash FROM audit_entries WHERE record_id = 'b' ORDER BY position")
    prev = GENESIS
    for record_id, position, action, actor, timestamp, rationale, details, extra, digest, prev_hash, hash_ in rows:
        assert extra is None and prev_hash == prev and len(digest) == 64
        content = json.dumps([prev, record_id, position, action, actor, timestamp, rationale, details, extra, digest],
                             separators=(",", ":"), ensure_ascii=False).encode()
        assert hash_ == "sha256:" + hashlib.sha256(content).hexdigest()
        prev = hash_


def test_edited_or_removed_extra_fields_are_detected(m, raw):
    m.import_records([with_log("a"), with_log("b"), with_log("c")])
    edit = "UPDATE audit_entries SET extra = :x WHERE record_id = :rid AND position = :pos"
    raw.execute((edit, {"x": '{"x_trace_id":"forged"}', "rid": "a", "pos": 0}),
                (edit, {"x": None, "rid": "b", "pos": 1}),
                (edit, {"x": '{"x_added":1}', "rid": "c", "pos": 2}))
    problems = m.verify_audit()
    assert {(p.record_id, p.position) for p in problems} == {("a", 0), ("b", 1), ("c", 2)}
    assert all("content does not match its hash" in p.problem for p in problems)


@pytest.mark.parametrize("how", ["delete", "prune"])
def test_archive_and_restore_keep_extras(m, raw, clock, how):
    m.import_records([with_log("a")])
    before = exported(m, "a")["audit_log"]
    if how == "delete":
        m.delete("a", "op", "archive it")
    else:
        clock.advance(DAY * 60)
        assert m.prune("op", "sweep", dry_run=False) == ["a"]
    ((doc,),) = raw.query("SELECT doc FROM archive WHERE id = 'a'")
    archived_log = json.loads(doc)["audit_log"]
    assert archived_log[:-1] == before and extras(archived_log[-1]) == {}
    assert m.verify_audit() == []
    m.restore("a", "op", "bring it back")
    assert exported(m, "a")["audit_log"][:len(before)] == before
    assert m.verify_audit() == []


def test_edited_extras_in_an_archived_copy_are_detected(m, raw):
    m.import_records([with_log("a")])
    m.delete("a", "op", "archive it")
    ((doc,),) = raw.query("SELECT doc FROM archive WHERE id = 'a'")
    data = json.loads(doc)
    data["audit_log"][0]["x_trace_id"] = "forged"
    raw.execute(("UPDATE archive SET doc = :d WHERE id = 'a'", {"d": json.dumps(data)}))
    problems = m.verify_audit()
    # the copy differs from the chain, and the archived content from what the delete entry recorded
    assert [(p.record_id, p.position, p.kind) for p in problems] == [("a", None, "archive"), ("a", 4, "content")]
    assert "archived copy" in problems[0].problem


def test_store_made_before_the_extra_column_gets_it_on_open(store_url, raw, clock):
    first = Membrane.open(store_url, load_sample=False, clock=clock)
    first.import_records([semantic("old")])
    first.reinforce("old", "op", "history")
    first.close()
    raw.execute("ALTER TABLE audit_entries DROP COLUMN extra")
    again = Membrane.open(store_url, load_sample=False, clock=clock)
    try:
        assert again.verify_audit() == []
        assert len(again.audit_log("old")) == 2
        again.import_records([with_log("new")])
        assert extras(exported(again, "new")["audit_log"][0]) == EXTRA_1
        assert again.verify_audit() == []
    finally:
        again.close()
