"""Helpers for the security suites: whole-store dumps (to prove a refused call wrote nothing),
PostgreSQL schemas of their own, a fixed clock, and the "full run" switch."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import create_engine, select, text

from membrane_engine import Membrane
from membrane_engine.storage.store import metadata

UTC = timezone.utc
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
POSTGRES_URL = os.environ.get("MEMBRANE_TEST_POSTGRES_URL", "")
# MEMBRANE_SECURITY_FULL=1 runs the long variants (more fuzz examples, bigger fault imports).
FULL = os.environ.get("MEMBRANE_SECURITY_FULL", "") not in ("", "0")


_ENGINES: dict[str, Any] = {}


def dump(url_or_membrane: str | Membrane) -> dict[str, list[tuple]]:
    """Every row of every table, in a stable order, read through an engine of its own (not the
    Membrane's, so no cache or open transaction of the engine under test is in between)."""
    url = url_or_membrane.store.url if isinstance(url_or_membrane, Membrane) else url_or_membrane
    engine = _ENGINES.get(url)
    if engine is None:
        engine = _ENGINES[url] = create_engine(url, pool_pre_ping=True)
    out: dict[str, list[tuple]] = {}
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            if not engine.dialect.has_table(conn, table.name):
                continue
            order = list(table.primary_key.columns) or list(table.columns)
            rows = conn.execute(select(table).order_by(*order)).all()
            out[table.name] = [tuple(r) for r in rows]
    return out


def forget(url: str) -> None:
    """Close dump()'s engine for ``url`` (before its database is dropped)."""
    engine = _ENGINES.pop(url, None)
    if engine is not None:
        engine.dispose()


def checksum(url_or_membrane: str | Membrane) -> tuple[int, str]:
    """(record count, sha256 over every table's rows)."""
    tables = dump(url_or_membrane)
    digest = hashlib.sha256(json.dumps(tables, default=repr, sort_keys=True).encode()).hexdigest()
    return len(tables.get("records", [])), digest


def _with_search_path(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@contextmanager
def pg_schema() -> Iterator[str]:
    """A URL to a fresh PostgreSQL schema, dropped afterwards."""
    schema = "sec_" + uuid.uuid4().hex[:12]
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = _with_search_path(POSTGRES_URL, schema)
    try:
        yield url
    finally:
        forget(url)
        with admin.connect() as conn:
            # A killed client's backend may still hold locks for a moment; end it first.
            conn.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE :q"
            ), {"q": f"%{schema}%"})
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def iso(when: datetime) -> str:
    return when.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def simple(record_id: str, type_: str = "semantic", **over: Any) -> dict[str, Any]:
    """A small valid record of any type."""
    payloads = {
        "episodic": {"kind": "episodic", "timeline": [{"t": iso(T0), "event_kind": "e", "ref": "r", "summary": "s"}]},
        "working": {"kind": "working", "thread_id": "t", "state": "executing"},
        "semantic": {"kind": "semantic", "subject": "s", "predicate": "p", "object": "o",
                     "evidence": [{"source_type": "doc", "source_id": "d1"}]},
        "competence": {"kind": "competence", "skill_name": "k",
                       "performance": {"success_count": 1, "failure_count": 1, "success_rate": 0.5}},
        "plan_graph": {"kind": "plan_graph", "plan_id": "p", "nodes": [{"id": "a"}, {"id": "b"}],
                       "edges": [{"from": "a", "to": "b", "kind": "control"}]},
        "entity": {"kind": "entity", "canonical_name": "E"},
    }
    doc: dict[str, Any] = {
        "id": record_id, "type": type_, "sensitivity": "low", "confidence": 0.9, "salience": 0.8,
        "scope": "", "tags": [], "created_at": iso(T0), "updated_at": iso(T0),
        "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 86400, "min_salience": 0.0,
                                "max_age_seconds": 0, "reinforcement_gain": 0.1},
                      "pinned": False, "deletion_policy": "auto_prune"},
        "provenance": {"sources": [{"kind": "observation", "ref": "obs-1"}]},
        "relations": [], "payload": payloads[type_],
    }
    doc.update(over)
    return doc


def open_loaded(db: str, tmp_path_factory, records: list[dict[str, Any]], actor: str = "security-suite"):
    """Generator for fixtures: a Membrane at T0 on ``db`` ("sqlite" or "postgres") holding
    ``records``; closed (and its PostgreSQL schema dropped) afterwards."""
    import pytest

    if db == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('sec') / 'membrane.db'}"
        m = Membrane.open(url, load_sample=False, clock=lambda: T0)
        if records:
            m.import_records(records, actor=actor)
        yield m
        m.close()
        forget(url)
        return
    if not POSTGRES_URL:
        pytest.skip("MEMBRANE_TEST_POSTGRES_URL is not set")
    with pg_schema() as url:
        m = Membrane.open(url, load_sample=False, clock=lambda: T0)
        if records:
            m.import_records(records, actor=actor)
        yield m
        m.close()
