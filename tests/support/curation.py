"""Helpers of the curation tests: a settable clock, record factories, a full dump of every table,
and raw SQL access that bypasses the engine."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import create_engine, select, text

from membrane_engine import Membrane
from membrane_engine.storage.store import metadata

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)


class Clock:
    """A settable clock: ``Membrane(..., clock=Clock())``."""

    def __init__(self, t: datetime = T0):
        self.t = t

    def __call__(self) -> datetime:
        return self.t

    def advance(self, delta: timedelta) -> None:
        self.t = self.t + delta


def semantic(rid: str, salience: float = 0.5, evidence: bool = True, **fields: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"kind": "semantic", "subject": "service", "predicate": "runs_on", "object": rid}
    if evidence:
        payload["evidence"] = [{"source_type": "doc", "source_id": f"doc-{rid}"}]
    rec = {"id": rid, "type": "semantic", "sensitivity": "low", "confidence": 0.9, "salience": salience,
           "scope": "alpha", "tags": ["t1"], "created_at": "2026-02-01T00:00:00Z", "updated_at": "2026-03-01T12:00:00Z",
           "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 86400, "min_salience": 0.0,
                                   "max_age_seconds": 0, "reinforcement_gain": 0.1},
                         "pinned": False, "deletion_policy": "auto_prune"},
           "payload": payload}
    rec.update(fields)
    return rec


def episodic(rid: str, **fields: Any) -> dict[str, Any]:
    rec = {"id": rid, "type": "episodic", "sensitivity": "low", "salience": 0.8,
           "created_at": "2026-02-01T00:00:00Z", "updated_at": "2026-03-01T12:00:00Z", "lifecycle": lifecycle(),
           "payload": {"kind": "episodic", "timeline": [{"t": "2026-02-01T00:00:00Z", "event_kind": "tool",
                                                          "ref": "r", "summary": "ran tests"}]}}
    rec.update(fields)
    return rec


def working(rid: str, **fields: Any) -> dict[str, Any]:
    rec = {"id": rid, "type": "working", "sensitivity": "medium", "salience": 0.7,
           "created_at": "2026-02-01T00:00:00Z", "updated_at": "2026-03-01T12:00:00Z", "lifecycle": lifecycle(),
           "payload": {"kind": "working", "thread_id": "th", "state": "executing"}}
    rec.update(fields)
    return rec


def lifecycle(**kw: Any) -> dict[str, Any]:
    decay = {"curve": "exponential", "half_life_seconds": 86400, "min_salience": 0.0, "max_age_seconds": 0,
             "reinforcement_gain": 0.1}
    decay.update(kw.pop("decay", {}))
    out = {"decay": decay, "pinned": False, "deletion_policy": "auto_prune"}
    out.update(kw)
    return out


def dump(mem: Membrane) -> dict[str, list[tuple]]:
    """Every row of every table, in primary-key order: equal dumps mean byte-for-byte equal stores."""
    out: dict[str, list[tuple]] = {}
    with mem.store.engine.connect() as conn:
        for table in metadata.sorted_tables:
            q = select(table).order_by(*table.primary_key.columns)
            out[table.name] = [tuple(r) for r in conn.execute(q)]
    return out


class Raw:
    """SQL straight on the database, around the engine (an attacker with the DB file)."""

    def __init__(self, url: str):
        self.url = url
        self.sqlite_path = url.split("///", 1)[1] if url.startswith("sqlite") else None

    def execute(self, *statements: str | tuple[str, dict[str, Any]]) -> None:
        """Statements, each SQL text or (SQL with :name parameters, params), in one transaction."""
        pairs = [(s, {}) if isinstance(s, str) else s for s in statements]
        if self.sqlite_path:
            con = sqlite3.connect(self.sqlite_path)
            try:
                for sql, params in pairs:
                    con.execute(sql, params)
                con.commit()
            finally:
                con.close()
        else:
            engine = create_engine(self.url)
            with engine.begin() as conn:
                for sql, params in pairs:
                    conn.execute(text(sql), params)
            engine.dispose()

    def query(self, statement: str) -> list[tuple]:
        if self.sqlite_path:
            con = sqlite3.connect(self.sqlite_path)
            try:
                return [tuple(r) for r in con.execute(statement)]
            finally:
                con.close()
        engine = create_engine(self.url)
        with engine.connect() as conn:
            rows = [tuple(r) for r in conn.execute(text(statement))]
        engine.dispose()
        return rows


