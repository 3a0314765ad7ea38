"""The unfiltered audit activity, counted once per process and then only the new entries, equals
the GROUP BY over the whole log, also after another connection wrote."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from tests.support.records import rec

from membrane_engine import Membrane
from membrane_engine.oversight.finders import audit_activity

EVER = datetime(1970, 1, 1, tzinfo=timezone.utc)  # a bound that keeps every entry: the SQL path


def by_sql(m: Membrane, bucket: float) -> list[tuple[float, str, int]]:
    return audit_activity(m, bucket_seconds=bucket, since=EVER)


def test_activity_follows_writes_by_another_connection(store_url):
    reader = Membrane.open(store_url, load_sample=False)
    writer = Membrane.open(store_url, load_sample=False)
    try:
        writer.import_records([rec(f"r{i}") for i in range(30)])
        for bucket in (3600.0, 86400.0, 7 * 86400.0):
            assert audit_activity(reader, bucket_seconds=bucket) == by_sql(reader, bucket) != []
        writer.reinforce("r1", "someone", "seen")
        writer.reclassify("r2", "someone", "tags", tags=["x"])
        writer.delete("r3", "someone", "gone")
        writer.import_records([rec("late")])
        for bucket in (3600.0, 86400.0, 7 * 86400.0):
            assert audit_activity(reader, bucket_seconds=bucket) == by_sql(reader, bucket)
        actions = {a for _, a, _ in audit_activity(reader, bucket_seconds=86400.0)}
        assert {"reinforce", "delete"} <= actions
    finally:
        reader.close()
        writer.close()


def test_other_buckets_and_filters_take_the_query(membrane):
    membrane.import_records([rec("r1"), rec("r2")])
    assert audit_activity(membrane, bucket_seconds=900.0) == audit_activity(membrane, bucket_seconds=900.0, since=EVER)
    assert sum(n for *_, n in audit_activity(membrane, actor="nobody")) == 0
    with pytest.raises(ValueError):
        audit_activity(membrane, bucket_seconds=0)


def test_counts_on_disk_are_used_when_they_are_this_logs(store_url, tmp_path, monkeypatch):
    from sqlalchemy import text

    from membrane_engine.audit import activity

    monkeypatch.setattr(activity, "SAVE_AFTER", 1)
    m = Membrane.open(store_url, load_sample=False)
    try:
        m.import_records([rec(f"r{i}") for i in range(20)])
        first = activity.AuditActivity(m.store, tmp_path)
        assert first.buckets(86400.0) == by_sql(m, 86400.0)
        assert first.file_status.startswith("ignored: no snapshot")
        [path] = tmp_path.glob("*.activity")
        m.reinforce("r1", "someone", "seen")  # after the file: counted on top of it
        again = activity.AuditActivity(m.store, tmp_path)
        assert again.buckets(3600.0) == by_sql(m, 3600.0)
        assert again.file_status.startswith("used: up to entry")
        seq = int(again.file_status.rsplit(" ", 1)[1])

        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 1  # corrupted: its MAC fails
        path.write_bytes(bytes(data))
        broken = activity.AuditActivity(m.store, tmp_path)
        assert broken.buckets(86400.0) == by_sql(m, 86400.0)
        assert "its MAC does not match" in broken.file_status

        activity.AuditActivity(m.store, tmp_path).buckets(86400.0)  # written anew (SAVE_AFTER 1)
        with m.store.write() as conn:  # the log differs at the entry the file was counted up to
            conn.execute(text(f"UPDATE audit_entries SET hash = 'other' WHERE seq = {seq + 1}"))
        other = activity.AuditActivity(m.store, tmp_path)
        assert other.buckets(86400.0) == by_sql(m, 86400.0)
        assert other.file_status == f"ignored: the log's entry {seq + 1} is not the one it was counted up to"
    finally:
        m.close()


def by_words(m: Membrane, bucket: float) -> dict[tuple[float, str], int]:
    """The oracle: every entry read back and named as the audit table names it."""
    from collections import Counter

    from membrane_engine.rules.history import kind_of

    rows = m.audit_query(limit=10_000)[1]
    return dict(Counter((r.entry.timestamp.timestamp() // bucket * bucket, kind_of(r.entry.action, r.entry.rationale,
                                                                                  r.details)) for r in rows))


def test_a_retract_is_counted_as_a_retract_not_a_delete(store_url):
    reader = Membrane.open(store_url, load_sample=False)
    writer = Membrane.open(store_url, load_sample=False)
    try:
        writer.import_records([rec(f"r{i}") for i in range(6)])
        assert audit_activity(reader, bucket_seconds=3600.0)  # counted once before the writes below
        writer.retract("r1", "someone", "wrong")
        writer.retract("r2", "someone", "stale")
        writer.delete("r3", "someone", "gone")
        writer.reinforce("r4", "someone", "retracted: only the words of a retract")  # a reinforce stays one
        for bucket in (3600.0, 86400.0):
            incremental = {(b, a): n for b, a, n in audit_activity(reader, bucket_seconds=bucket)}
            filtered = {(b, a): n for b, a, n in by_sql(reader, bucket)}
            assert incremental == filtered == by_words(reader, bucket)
        totals = {a: n for _, a, n in audit_activity(reader, bucket_seconds=86400.0 * 365)}
        assert totals["retract"] == 2 and totals["delete"] == 1 and totals["reinforce"] == 1
        only_deletes = audit_activity(reader, bucket_seconds=86400.0, action="delete")  # the stored action
        assert sorted({a for _, a, _ in only_deletes}) == ["delete", "retract"]
    finally:
        reader.close()
        writer.close()


def test_counts_on_disk_from_before_retracts_were_apart_are_not_used(store_url, tmp_path, monkeypatch):
    from membrane_engine.audit import activity
    from membrane_engine.storage import snapshot_file

    monkeypatch.setattr(activity, "SAVE_AFTER", 1)
    m = Membrane.open(store_url, load_sample=False)
    try:
        m.import_records([rec(f"r{i}") for i in range(3)])
        m.retract("r1", "someone", "wrong")
        activity.AuditActivity(m.store, tmp_path).buckets(3600.0)  # writes the file
        [path] = tmp_path.glob("*.activity")
        header, _ = snapshot_file.header_of(path)
        with m.store.read() as conn:
            _, key = m.store.snapshot_identity(conn)
        old = {**header, "kind": "audit activity",  # the older format: its retracts among the deletes
               "hours": [[h, "delete" if a == "retract" else a, n] for h, a, n in header["hours"]]}
        snapshot_file.write(path, key, old, {}, [])
        again = activity.AuditActivity(m.store, tmp_path)
        assert again.buckets(3600.0) == by_sql(m, 3600.0)
        assert "retract" in {a for _, a, _ in again.buckets(3600.0)}
        assert again.file_status == "ignored: counted as 'audit activity', not 'audit activity v2'"
    finally:
        m.close()
