"""The unfiltered audit activity, counted once per process and then only the new entries, equals
the GROUP BY over the whole log, also after another connection wrote."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from engine_kit import rec

from membrane_engine import Membrane
from membrane_engine.lookups import audit_activity

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
