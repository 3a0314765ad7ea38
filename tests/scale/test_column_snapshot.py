"""The persisted column snapshot: used when it is this store's, intact and within the change log
(then brought up to date by the log, ending equal to a cold load, also after another process
wrote meanwhile); ignored, with the store loaded in full instead, when it is of another store,
ahead of the store or from a log that differs, too far behind, truncated, corrupted, forged
without the store's key, or open to other users."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from bench.generate import NOW, records
from membrane_engine import Membrane
from membrane_engine.storage import snapshot_file
from membrane_engine.storage.columns import DEAD, ColumnCache, gate_codes, tag_counts

ROOT = Path(__file__).resolve().parents[2]


def by_id(snap) -> dict[str, tuple]:
    """Every row's columns by record id, codes resolved to names (row order and code numbering
    may differ between a cache from a snapshot and a cold one)."""
    d = snap.decay
    out = {}
    for i in range(len(snap.ids)):
        if not snap.alive[i]:
            continue
        out[str(snap.ids[i])] = (
            int(snap.type_code[i]), int(snap.sens_level[i]), snap.scope_names[snap.scope_code[i]],
            float(snap.confidence[i]), float(snap.created_at[i]), float(d.anchor_salience[i]), float(d.anchor_at[i]),
            int(d.curve[i]), float(d.half_life[i]), float(d.min_salience[i]), float(d.max_age[i]), bool(d.pinned[i]),
            int(d.path[i]), d.custom_points.get(int(i)), int(snap.policy[i]), repr(float(snap.last_reinforced_at[i])),
            float(snap.success_signal[i]), repr(float(snap.runs[i])), repr(float(snap.success_rate[i])),
            snap.tag_sets.texts[snap.tagset[i]])
    live = snap.alive
    assert np.array_equal(snap.gate[live], gate_codes(snap.type_code, snap.sens_level, snap.scope_code)[live])
    assert (snap.gate[~live] == DEAD).all()
    return out


def cold(m: Membrane) -> dict[str, tuple]:
    return by_id(ColumnCache(m.store, snapshots=None).current())


def cache(m: Membrane, where: Path) -> ColumnCache:
    c = ColumnCache(m.store, snapshots=where)
    c.snapshot_min_rows = 0
    return c


def snapshot_path(m: Membrane, where: Path) -> Path:
    with m.store.read() as conn:
        store_id, _ = m.store.snapshot_identity(conn)
    return where / f"{store_id}.columns"


def written(m: Membrane, where: Path) -> Path:
    """A snapshot of ``m``'s store as it is now, on disk."""
    c = cache(m, where)
    c.current()
    c.wait_for_snapshot()
    assert c.snapshot_saved.startswith("written"), c.snapshot_saved
    return snapshot_path(m, where)


def loaded(m: Membrane, where: Path) -> tuple[ColumnCache, dict[str, tuple]]:
    c = cache(m, where)
    rows = by_id(c.current())
    c.wait_for_snapshot()
    return c, rows


WRITES = """
import sys
from bench.generate import NOW, records
from membrane_engine import Membrane
m = Membrane.open(sys.argv[1], load_sample=False, clock=lambda: NOW)
ids = [i for i in m.ids() if m.get(i).lifecycle.deletion_policy.value != "never"]
m.reinforce(ids[0], "other-process", "seen")
m.reclassify(ids[1], "other-process", "retag", tags=["moved", "brand-new-tag"], scope="brand-new-scope")
m.reclassify(ids[2], "other-process", "up", sensitivity="hyper")
m.delete(ids[3], "other-process", "gone")
m.import_records(list(records(25, seed=991)))
m.close()
"""


def other_process_writes(url: str) -> None:
    subprocess.run([sys.executable, "-c", WRITES, url], cwd=ROOT, check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture
def store(store_url):
    m = Membrane.open(store_url, load_sample=False, clock=lambda: NOW)
    m.import_records(list(records(400, seed=5)))
    yield m
    m.close()


def test_snapshot_is_private_and_then_used_with_the_changes_another_process_made(store, store_url, tmp_path):
    where = tmp_path / "snapshots"
    path = written(store, where)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert not [p for p in where.iterdir() if p != path]  # no temporary file left behind
    other_process_writes(store_url)
    c, rows = loaded(store, where)
    assert c.snapshot_status.startswith("used") and "changes applied" in c.snapshot_status
    assert " 0 changes" not in c.snapshot_status
    assert rows == cold(store)
    snap = c.current()
    assert tag_counts(snap, snap.alive)["brand-new-tag"] == 1
    # and the cache goes on following writes as one loaded cold does
    store.reinforce(store.ids()[5], "t", "again")
    assert by_id(c.current()) == cold(store)


def test_the_id_index_is_built_on_first_use(store, store_url, tmp_path):
    """From its snapshot the cache counts and charts without its id -> row index (a noticeable
    wait at 1M, which the first page after a start does not need). The first look-up by id builds it,
    from the rows the cache had then; rows another process adds later are indexed as they come."""
    where = tmp_path / "snapshots"
    written(store, where)
    c = cache(store, where)
    snap = c.current()
    assert c.snapshot_status.startswith("used")
    tag_counts(snap, snap.alive)
    assert c._columns._row_of is None
    other_process_writes(store_url)  # a refresh looks its rows up by id: that builds the index
    fresh = c.current()
    assert c._columns._row_of is not None
    ids = [str(x) for x in fresh.ids]
    assert len(ids) == len(snap.ids) + 25
    assert {rid: fresh.row_of[rid] for rid in ids} == {rid: k for k, rid in enumerate(ids)}
    assert ids[-1] not in snap.row_of and "no-such-id" not in fresh.row_of  # each snapshot its own rows
    assert by_id(fresh) == cold(store)


def test_a_snapshot_of_another_store_is_ignored(store, tmp_path):
    where = tmp_path / "snapshots"
    other = Membrane.open(f"sqlite:///{tmp_path / 'other.db'}", load_sample=False, clock=lambda: NOW)
    try:
        other.import_records(list(records(300, seed=6)))
        foreign = written(other, where)
    finally:
        other.close()
    os.replace(foreign, snapshot_path(store, where))  # put where this store's would be
    c, rows = loaded(store, where)
    assert c.snapshot_status == "ignored: of another store"
    assert rows == cold(store)


def test_a_snapshot_ahead_of_the_store_is_ignored(store, tmp_path):
    """The store went back (restored from an older copy): its change counter is below the
    snapshot's."""
    where = tmp_path / "snapshots"
    written(store, where)
    with store.store.write() as conn:  # around the engine: drop the newest changes, as a restore would
        conn.execute(text("DELETE FROM changes WHERE seq > 350"))
    c, rows = loaded(store, where)
    assert c.snapshot_status.startswith("ignored: at change 400, ahead of the store's 350")
    assert rows == cold(store)


def test_a_snapshot_from_a_log_that_differs_is_ignored(store, tmp_path):
    """Restored from an older copy and written again up to the same change number: the change
    the snapshot was made at is another one now."""
    where = tmp_path / "snapshots"
    written(store, where)
    with store.store.write() as conn:
        conn.execute(text("UPDATE changes SET record_id = 'someone-else' WHERE seq = 400"))
    c, rows = loaded(store, where)
    assert c.snapshot_status == "ignored: the store's change 400 is not the one it was made at"
    assert rows == cold(store)


def test_a_snapshot_too_far_behind_the_log_is_ignored(store, tmp_path):
    where = tmp_path / "snapshots"
    written(store, where)
    store.import_records(list(records(300, seed=77)))  # more changes than 20% of its rows (of 1,000 at least)
    c, rows = loaded(store, where)
    assert c.snapshot_status.startswith("ignored: too far behind the store")
    assert rows == cold(store)
    c.wait_for_snapshot()
    assert by_id(loaded(store, where)[0].current()) == cold(store)  # the full load wrote a new one, used now


def _tamper(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        data = data[:len(data) - 1000]
    elif how == "truncated-header":
        data = data[:40]
    elif how == "corrupted":
        data[len(data) // 2] ^= 0x01  # one bit in a column
    elif how == "forged":  # a changed column under a MAC made without the store's key
        data[len(data) // 2] ^= 0x01
        data[-snapshot_file.MAC_SIZE:] = _mac_of(bytes(data[:-snapshot_file.MAC_SIZE]), os.urandom(32))
    elif how == "old-version":  # as an earlier engine wrote it (a BLAKE2b MAC)
        at = data.index(b'"version":%d' % snapshot_file.VERSION)
        data[at:at + 11] = b'"version":1'
    elif how == "header":
        # another change number in the header (say, to make it look current), same length
        at = data.index(b'"seq":400')
        data[at:at + 9] = b'"seq":399'
    path.write_bytes(bytes(data))


def _mac_of(body: bytes, key: bytes) -> bytes:
    mac = snapshot_file._mac(key)
    mac.update(body)
    return mac.digest()


@pytest.mark.parametrize("how,reason", [
    ("truncated", "its MAC does not match"),
    ("truncated-header", "not a column snapshot, or truncated"),
    ("corrupted", "its MAC does not match"),
    ("forged", "its MAC does not match"),
    ("header", "the store's change 399 is not the one it was made at"),
    ("old-version", "of another version"),
])
def test_a_damaged_or_forged_snapshot_is_ignored(store, tmp_path, how, reason):
    where = tmp_path / "snapshots"
    path = written(store, where)
    _tamper(path, how)
    c, rows = loaded(store, where)
    assert c.snapshot_status.startswith("ignored") and reason in c.snapshot_status, c.snapshot_status
    assert rows == cold(store)


def test_a_snapshot_others_may_write_or_a_link_is_ignored(store, tmp_path):
    where = tmp_path / "snapshots"
    path = written(store, where)
    os.chmod(path, 0o644)
    c, rows = loaded(store, where)
    assert c.snapshot_status == "ignored: readable or writable by others than its owner"
    assert rows == cold(store)
    os.chmod(path, 0o600)
    target = tmp_path / "elsewhere.columns"
    os.replace(path, target)
    os.symlink(target, path)
    c, rows = loaded(store, where)
    assert c.snapshot_status.startswith("ignored: cannot open it")
    assert rows == cold(store)


def test_membrane_open_writes_and_uses_the_snapshot_beside_a_sqlite_store(tmp_path, monkeypatch):
    from membrane_engine.storage import columns

    monkeypatch.setattr(columns, "SNAPSHOT_MIN_ROWS", 0)
    url = f"sqlite:///{tmp_path / 'm.db'}"
    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    m.import_records(list(records(200, seed=8)))
    m.columns.current()
    m.columns.wait_for_snapshot()
    m.close()
    assert [p.suffix for p in (tmp_path / "m.db-columns").iterdir()] == [".columns"]
    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    try:
        assert by_id(m.columns.current()) == cold(m)
        assert m.columns.snapshot_status == "used: change 200, 0 changes applied"
    finally:
        m.close()
    monkeypatch.setenv(columns.SNAPSHOT_ENV, "off")
    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    try:
        m.columns.current()
        assert m.columns.snapshot_status == "none"
    finally:
        m.close()
