"""The column cache after small writes: the refresh writes changed rows into the buffers in place
when nobody but the cache holds the snapshot it replaces, copies the changed columns when
someone does (a snapshot, its decay columns, one view or a slice of a buffer), and either way
ends equal to a cold load of the store."""

from __future__ import annotations

import threading
import time

import numpy as np

from bench.generate import NOW, records
from membrane_engine import Membrane
from membrane_engine.storage.columns import DEAD, ColumnCache, gate_codes



def _columns_by_id(snap) -> dict[str, tuple]:
    """Every live row's columns, by record id (row order differs between refreshed and cold caches)."""
    out = {}
    d = snap.decay
    for i in np.flatnonzero(snap.alive):
        out[str(snap.ids[i])] = (
            int(snap.type_code[i]), int(snap.sens_level[i]), snap.scope_names[snap.scope_code[i]],
            float(snap.confidence[i]), float(snap.created_at[i]), float(d.anchor_salience[i]), float(d.anchor_at[i]),
            int(d.curve[i]), float(d.half_life[i]), float(d.min_salience[i]), float(d.max_age[i]), bool(d.pinned[i]),
            int(d.path[i]), d.custom_points.get(int(i)), int(snap.policy[i]), repr(float(snap.last_reinforced_at[i])),
            float(snap.success_signal[i]), repr(float(snap.runs[i])))
    # gate codes name scopes by the cache's own numbering: checked against the columns instead
    live = snap.alive
    assert np.array_equal(snap.gate[live], gate_codes(snap.type_code, snap.sens_level, snap.scope_code)[live])
    assert (snap.gate[~live] == DEAD).all()
    return out


def _buffer_ids(m: Membrane) -> dict[str, int]:
    """id() of each buffer (ints: holding the buffers themselves would make them shared)."""
    return {name: id(buf) for name, buf in m.columns._columns.buffers.items()}


def _deletable(m: Membrane) -> list[str]:
    return [rid for rid in m.ids() if m.get(rid).lifecycle.deletion_policy.value != "never"]


def _cold(m: Membrane) -> dict[str, tuple]:
    return _columns_by_id(ColumnCache(m.store).current())


def test_refresh_after_writes_elsewhere_is_in_place_and_equals_a_cold_load(store_url):
    reader = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    writer = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    try:
        writer.import_records(list(records(400, seed=31)))
        assert len(reader.columns.current()) == 400
        ids = _deletable(writer)
        steps = [
            (lambda: writer.reinforce(ids[0], "t", "r"), {"anchor_salience", "anchor_at", "last_reinforced_at"}),
            (lambda: writer.penalize(ids[1], 0.3, "t", "p"), {"anchor_salience", "anchor_at"}),
            (lambda: writer.reclassify(ids[2], "t", "c", scope="brand-new-scope", sensitivity="hyper"),
             {"scope_code", "sens_level", "gate"}),
            (lambda: writer.pin(ids[3], "t", "pin"), {"pinned", "path"}),
            (lambda: writer.delete(ids[4], "t", "d"), {"alive", "gate"}),
        ]
        for write, columns in steps:
            before = _buffer_ids(reader)
            write()
            assert _columns_by_id(reader.columns.current()) == _cold(reader)  # the snapshot is not kept
            after = _buffer_ids(reader)
            assert after == before, {k for k in after if after[k] != before[k]}  # nothing copied
            assert columns <= reader.columns._columns.views.keys()
        writer.restore(ids[4], "t", "back")
        writer.import_records(list(records(300, seed=32)))  # beyond the spare capacity: buffers grow
        assert _columns_by_id(reader.columns.current()) == _cold(reader)
        assert len(reader.columns.current()) == 700
    finally:
        writer.close()
        reader.close()


def test_a_held_snapshot_view_or_slice_is_never_written(store_url):
    reader = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    writer = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    try:
        writer.import_records(list(records(300, seed=41)))
        ids = _deletable(writer)

        def held(snap):
            return [("snapshot", snap), ("decay", snap.decay), ("view", snap.decay.anchor_salience),
                    ("slice", snap.decay.anchor_salience[: len(snap.ids)]), ("alive slice", snap.alive[1:])]

        for k in range(5):
            snap = reader.columns.current()
            name, obj = held(snap)[k]
            del snap
            anchors = reader.columns._snapshot.decay.anchor_salience.copy()
            alive = reader.columns._snapshot.alive.copy()
            before = _buffer_ids(reader)
            rid = ids[k]
            row = reader.columns._snapshot.row_of[rid]
            writer.reinforce(rid, "t", "r", gain=0.5)
            writer.delete(ids[10 + k], "t", "d")
            fresh = reader.columns.current()
            assert fresh.decay.anchor_salience[row] != anchors[row]
            assert _columns_by_id(fresh) == _cold(reader)
            after = _buffer_ids(reader)
            assert after["anchor_salience"] != before["anchor_salience"], name  # copied, not written
            if name == "snapshot":
                assert np.array_equal(obj.decay.anchor_salience, anchors) and np.array_equal(obj.alive, alive)
            elif name == "decay":
                assert np.array_equal(obj.anchor_salience, anchors)
            elif name in ("view", "slice"):
                assert np.array_equal(obj, anchors)
            else:
                assert np.array_equal(obj, alive[1:])
                assert after["alive"] != before["alive"]
            del obj, fresh
    finally:
        writer.close()
        reader.close()


def test_concurrent_queries_never_see_their_snapshot_change(sqlite_url):
    """Threads take snapshots and read them slowly while another thread writes and refreshes
    the same cache: every snapshot keeps the values it had when it was handed out."""
    m = Membrane.open(sqlite_url, load_sample=False, clock=lambda: NOW)
    try:
        m.import_records(list(records(300, seed=51)))
        ids = m.ids()
        stop = threading.Event()
        problems: list[str] = []
        reads = [0]

        def reader():
            while not stop.is_set():
                snap = m.columns.current()
                first = (snap.decay.anchor_salience.copy(), snap.alive.copy(), snap.gate.copy())
                for _ in range(5):
                    time.sleep(0.0005)  # let the writer run while this snapshot is held
                    if not (np.array_equal(first[0], snap.decay.anchor_salience)
                            and np.array_equal(first[1], snap.alive) and np.array_equal(first[2], snap.gate)):
                        problems.append(f"snapshot {snap.seq} changed while held")
                        return
                reads[0] += 1
                del snap

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            for k in range(60):
                m.reinforce(ids[k % 50], "t", "r")
                if k % 10 == 9:
                    m.reclassify(ids[50 + k // 10], "t", "c", sensitivity="hyper")
                m.columns.current()
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert problems == []
        assert reads[0] > 0
        assert _columns_by_id(m.columns.current()) == _cold(m)
    finally:
        m.close()


def test_changed_columns_are_found_for_few_rows_and_many():
    from membrane_engine.storage.columns import _differs

    nan = float("nan")
    for size in (3, 200):  # compared as Python scalars, and by numpy
        a = np.arange(size, dtype=float)
        a[0] = nan
        assert not _differs(a, a.copy())
        b = a.copy()
        b[0] = 1.0
        assert _differs(a, b) and _differs(b, a)
        b = a.copy()
        b[-1] = nan
        assert _differs(a, b)
        ids = np.array([f"r{k}" for k in range(size)], dtype=object)
        other = ids.copy()
        other[-1] = "x"
        assert not _differs(ids, ids.copy()) and _differs(ids, other)


def test_a_backlog_above_the_threshold_reloads_once_and_a_cold_start_loads_once(store_url, monkeypatch):
    from membrane_engine.storage import columns

    reader = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    # The writer makes no ranking vectors: those need its own cache, whose load would count here.
    writer = Membrane.open(store_url, load_sample=False, clock=lambda: NOW, embedder=None)
    try:
        writer.import_records(list(records(300, seed=61)))
        loads = []
        original = columns._load
        monkeypatch.setattr(columns, "_load", lambda *a: loads.append(1) or original(*a))
        threads = [threading.Thread(target=reader.columns.current) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(loads) == 1  # the threads that waited used the first one's load
        held = reader.columns.current()
        writer.import_records(list(records(1300, seed=62)))  # > 20% of max(n, 1000) changes
        refreshed = _columns_by_id(reader.columns.current())
        assert len(loads) == 2 and len(held) == 300
        assert refreshed == _cold(reader)
    finally:
        writer.close()
        reader.close()


def test_writes_after_the_cache_check_are_still_transactions(store_url):
    """The cache checks the change log outside a transaction (Store.peek) on a pooled
    connection; a write on that connection afterwards is a transaction again."""
    m = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    try:
        m.import_records(list(records(20, seed=71)))
        for _ in range(3):
            m.columns.current()
            with m.store.write() as conn:
                raw = conn.connection.driver_connection
                if m.store.is_sqlite:
                    assert raw.in_transaction
                else:  # in a server transaction (begun with the writers' lock, see Store._lock_writers)
                    assert raw.info.transaction_status.name == "INTRANS"
            with m.store.read() as conn:
                raw = conn.connection.driver_connection
                assert raw.in_transaction if m.store.is_sqlite else raw.autocommit is False
    finally:
        m.close()


def test_an_in_memory_store_checks_inside_a_transaction():
    """One connection serves every thread of an in-memory store: outside a transaction the
    cache's check could read another thread's uncommitted writes, so it takes one there."""
    m = Membrane.open("sqlite://", load_sample=False, clock=lambda: NOW)
    try:
        m.import_records(list(records(20, seed=81)))
        with m.store.peek() as conn:
            assert conn.connection.driver_connection.in_transaction
        m.reinforce(m.ids()[0], "t", "r")
        assert _columns_by_id(m.columns.current()) == _cold(m)
    finally:
        m.close()
