"""Storage on SQLAlchemy 2: the only module that speaks SQL.

Layout:
- ``records``: one row per live record, the full Membrane JSON in ``doc`` (without its audit
  log) plus scalar columns for everything queries filter and sort on.
- ``audit_entries``: append-only, hash-chained per record (see audit_log.py). Nothing in the code
  updates or deletes a row of it.
- ``archive``: records taken out by prune or delete, with their full JSON; restore puts them back.
- ``changes``: one row per write to a record, so other processes' column caches can catch up.
- ``meta``: the schema version, the store's id and, once a keyed process wrote, its audit key
  check (audit_log.py).
- ``audit_subjects``: chain heads of audit subjects that are not records (the store itself).

SQLite runs in WAL mode and takes its write lock when a write transaction begins
(``BEGIN IMMEDIATE``), so two writers never interleave a read-modify-write; PostgreSQL locks
the rows a write touches with ``SELECT ... FOR UPDATE``.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import uuid
from datetime import datetime, timezone
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import orjson
from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    create_engine,
    event,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, DisconnectionError
from pydantic import BaseModel

from membrane_engine.storage import libpq
from membrane_engine.errors import StoreUnavailableError, ValidationError
from membrane_engine.storage.probe import ChangeProbe
from membrane_engine.storage.vectors import VECTOR_DTYPE, from_blob, to_blob
from membrane_engine.rules.salience import CURVE_CODES
from membrane_engine.model.records import LAYER_RANK, MemoryRecord, format_time, sensitivity_level, to_epoch
from membrane_engine.model.records import EntityAlias, MembraneModel, PlanEdge, membrane_shape
from membrane_engine.model.records import CompetencePayload, PlanGraphPayload, RevisionStatus, SemanticPayload
from membrane_engine.rules.selector import success_signal

# Errors of the drivers themselves (the bulk paths use driver cursors, which SQLAlchemy does
# not wrap); read() and write() translate them like SQLAlchemy's.
_DRIVER_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error,)
try:
    import psycopg

    _DRIVER_ERRORS += (psycopg.Error,)
except ImportError:  # pragma: no cover - PostgreSQL support is optional
    pass

T = TypeVar("T")

# An open connection as the layers above storage hold it (``Store.read``, ``Store.write``): they
# pass it back to storage's functions and never run SQL on it, so they name it by this alias
# rather than import sqlalchemy (only storage speaks SQL).
StoreConnection = Connection

# The key that signs this store's persisted column snapshots (storage/snapshot_file.py): kept
# in the store, so whoever can write a snapshot file but cannot read the store cannot forge one.
SNAPSHOT_KEY = "column_snapshot_key"
SCHEMA_VERSION = 2  # 2: the store-wide audit chain and content digests (audit_log.upgrade)
DEFAULT_DB_PATH = Path(os.environ.get("MEMBRANE_HOME", Path.home() / ".membrane")) / "membrane.db"

metadata = MetaData()

records = Table(
    "records",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("type", String(16), nullable=False),
    Column("sensitivity", String(16), nullable=False),
    Column("sens_level", SmallInteger, nullable=False),
    Column("scope", String(256), nullable=False, default=""),
    Column("confidence", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("anchor_salience", Float, nullable=False),
    Column("anchor_at", Float, nullable=False),
    Column("curve", SmallInteger, nullable=False),
    Column("half_life", Float, nullable=False),
    Column("min_salience", Float, nullable=False),
    Column("max_age", Float, nullable=False),
    Column("decay_points", Text, nullable=True),
    Column("pinned", Boolean, nullable=False),
    Column("deletion_policy", String(16), nullable=False),
    Column("last_reinforced_at", Float, nullable=True),
    Column("success_signal", Float, nullable=False),
    # Runs behind the success signal (competence: successes + failures; plan: executions);
    # NULL when the record carries no performance / metrics object (SPEC 7 metrics).
    Column("runs", Float, nullable=True),
    # A competence record's stored performance.success_rate (0 when left out); NULL without a
    # performance object (SPEC 7's competence_success_rate, as Membrane's GetMetrics).
    Column("success_rate", Float, nullable=True),
    Column("status", String(16), nullable=True),
    Column("tags", Text, nullable=False, default="[]"),
    Column("doc", Text, nullable=False),
    Column("audit_head", String(128), nullable=True),
    Index("ix_records_gate", "type", "sens_level", "scope"),
    Index("ix_records_scope", "scope"),
    Index("ix_records_created", "created_at"),
)
# The review queue's contested records, found and gated without reading the table (a few in a
# million: a partial index, so it costs the other writes nothing). A query uses it only with
# this very condition, as SQL text, not a bound parameter.
CONTESTED = "status = 'contested'"
contested_index = Index("ix_records_contested", records.c.id, records.c.sensitivity, records.c.scope,
                        sqlite_where=text(CONTESTED), postgresql_where=text(CONTESTED))


def _has_index(conn: Connection, table: str, name: str) -> bool:
    return any(ix["name"] == name for ix in inspect(conn).get_indexes(table))


audit_entries = Table(
    "audit_entries",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("record_id", String(128), nullable=False),
    Column("position", Integer, nullable=False),
    Column("action", String(16), nullable=False),
    Column("actor", String(256), nullable=False),
    Column("timestamp", String(40), nullable=False),
    Column("ts", Float, nullable=False),
    Column("rationale", Text, nullable=False),
    Column("details", Text, nullable=True),
    Column("extra", Text, nullable=True),  # an imported entry's unknown extra JSON fields (SPEC 1)
    Column("prev_hash", String(128), nullable=False),
    Column("hash", String(128), nullable=False),
    # The record's stored content after the change (audit_log.live_digest / chain.archived_digest), on the
    # entry that made it; NULL on entries of a history brought by an import and before schema 2.
    Column("digest", String(64), nullable=True),
    # The store-wide sequence (audit_log.py): every entry's place in commit order and the chain
    # value through it. NULL only on entries written before schema 2.
    Column("store_position", Integer, nullable=True),
    Column("store_hash", String(128), nullable=True),
    UniqueConstraint("record_id", "position", name="uq_audit_record_position"),
    UniqueConstraint("store_position", name="uq_audit_store_position"),
    # With the action: entries written after an instant are counted by action from the index
    # alone (metrics at a past instant), not by reading each entry's row.
    Index("ix_audit_ts_action", "ts", "action"),
    # Newest first (ts, then seq) from the index: an import writes its entries at one instant,
    # and ordering a million equal times by seq was a sort of all of them.
    Index("ix_audit_ts_seq", "ts", "seq"),
    Index("ix_audit_actor", "actor"),
    Index("ix_audit_action", "action"),
)
ts_action_index = next(ix for ix in audit_entries.indexes if ix.name == "ix_audit_ts_action")
ts_seq_index = next(ix for ix in audit_entries.indexes if ix.name == "ix_audit_ts_seq")
# Contest entries (a few among millions): the review queue orders contested records by their
# newest one without reading each record's other entries. Used only with this very condition.
# An entry is one by its details (as this engine writes it) or by its rationale alone, which is
# all that is left of it after a round trip through Membrane's format (entries carry no details;
# substr, not LIKE, which SQLite compares without case and PostgreSQL with it).
CONTEST_ENTRY = ("(details LIKE '%\"contesting_ref\"%' OR (action = 'revise'"
                 " AND (substr(rationale, 1, 13) = 'contested by ' OR substr(rationale, 1, 11) = 'contested: ')))")
contest_index = Index("ix_audit_contest_entries", audit_entries.c.record_id, audit_entries.c.ts,
                      sqlite_where=text(CONTEST_ENTRY), postgresql_where=text(CONTEST_ENTRY))
_OLD_CONTEST_INDEX = "ix_audit_contests"  # details only: entries imported from Membrane's format were missed

archive = Table(
    "archive",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("doc", Text, nullable=False),
    Column("audit_head", String(128), nullable=True),
    Column("archived_at", Float, nullable=False),
)

# "Who looked" (SPEC 10): an operator opening a sensitive record in full. Not a SPEC 6 audit
# action, so not in audit_entries; append-only like it (the engine never updates or deletes a row).
access_log = Table(
    "access_log",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("record_id", String(128), nullable=False),
    Column("actor", String(256), nullable=False),
    Column("sensitivity", String(16), nullable=False),
    Column("scope", String(256), nullable=False, default=""),
    Column("ts", Float, nullable=False),
    # The console page or command that read it ("page:records", "command:export"); "" on
    # entries written before it was kept.
    Column("via", String(64), nullable=False, default=""),
    # The chain (row_seal.py): each entry's hash covers the one before it, under the audit key
    # when the store is keyed. NULL only on entries written before it, until the store is opened.
    Column("prev_hash", String(128), nullable=True),
    Column("hash", String(128), nullable=True),
    Index("ix_access_log_record", "record_id", "ts"),
    Index("ix_access_log_ts", "ts"),
)

# Each record's ranking vector (SPEC 9), derived from its text by the named provider
# (ranking.py): a cache the engine can always recompute, so it carries no audit of its own.
record_vectors = Table(
    "record_vectors",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("model", String(64), nullable=False),
    Column("vector", LargeBinary, nullable=False),  # float16, little-endian (vectors.VECTOR_DTYPE)
)

changes = Table(
    "changes",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("record_id", String(128), nullable=False),
)

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

# The console's operators (SPEC 10): people, not agents. Their changes go to operator_events,
# an append-only, hash-linked log of its own; sign-in tokens (first-run links, browser
# sessions) are kept only as hashes.
operators = Table(
    "operators",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("role", String(16), nullable=False),
    Column("max_sensitivity", String(16), nullable=False),
    Column("scopes", Text, nullable=False, default="[]"),
    Column("email", String(256), nullable=True, unique=True),
    Column("password_hash", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # HMAC under the audit key over the row and its newest logged change (row_seal.py): a row
    # written outside the engine, or an older copy put back, does not sign anyone in.
    Column("mac", String(128), nullable=True),
)

operator_events = Table(
    "operator_events",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("timestamp", String(40), nullable=False),
    Column("actor", String(256), nullable=False),
    Column("action", String(32), nullable=False),
    Column("operator", String(64), nullable=False),
    Column("details", Text, nullable=False),
    Column("prev_hash", String(128), nullable=False),
    Column("hash", String(128), nullable=False),
    # Every session check reads an operator's newest row-writing entry (row_seal.latest_row_event);
    # the log grows with each sign-in (rules/sessions.py), so that read goes by index.
    Index("ix_operator_events_operator", "operator", "action", "seq"),
)
operator_events_index = next(iter(operator_events.indexes))

operator_tokens = Table(
    "operator_tokens",
    metadata,
    Column("token_hash", String(128), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("operator", String(64), nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("used_at", Float, nullable=True),
    Column("mac", String(128), nullable=True),  # row_seal.py: a token minted outside the engine is refused
    Index("ix_operator_tokens_operator", "operator"),
)
OPERATOR_TABLES = (operators, operator_events, operator_tokens)

audit_subjects = Table(
    "audit_subjects",
    metadata,
    Column("subject", String(256), primary_key=True),
    Column("audit_head", String(128), nullable=True),
)

# The newest entry of the store-wide chain and the store's audit key check, in one statement
# (a write transaction reads it once, on PostgreSQL in its first round trip: ``_lock_writers``).
AUDIT_TAIL = ("SELECT (SELECT value FROM meta WHERE key = 'audit_key'), e.store_position, e.store_hash "
              "FROM (SELECT 1 AS one) o LEFT JOIN (SELECT store_position, store_hash FROM audit_entries "
              "WHERE store_position IS NOT NULL ORDER BY store_position DESC LIMIT 1) e ON 1 = 1")

# What the numpy column cache reads of each record (columns.py decodes it; order matters
# there). A cold load of a million records is bound by the Python objects the driver makes,
# one per value, so the small codes (layer, curve, pinned, deletion policy, sensitivity level)
# arrive packed into one integer computed in SQL: no string per row for type and policy.
# "": Membrane's empty policy (the field left out), which its prune treats as not auto_prune.
POLICY_CODES = {"auto_prune": 0, "manual_only": 1, "never": 2, "": 3}
_TYPE_CASE = "CASE type " + " ".join(f"WHEN '{t}' THEN {code}" for t, code in LAYER_RANK.items()) + " END"
_POLICY_CASE = "CASE deletion_policy " + " ".join(f"WHEN '{p}' THEN {c}" for p, c in POLICY_CODES.items()) + " END"
PACKED_CODES = (f"({_TYPE_CASE}) + 8 * curve + 64 * (CASE WHEN pinned THEN 1 ELSE 0 END) "
                f"+ 128 * ({_POLICY_CASE}) + 512 * (sens_level + 1)")
SCALAR_COLUMNS = (
    "id", "scope", "confidence", "created_at", "anchor_salience", "anchor_at", "half_life", "min_salience",
    "max_age", "decay_points", "last_reinforced_at", "success_signal", "runs", "success_rate", "packed", "tags",
)
SCALAR_SELECT = tuple(PACKED_CODES if name == "packed" else name for name in SCALAR_COLUMNS)
_CHANGED_ROW_COLUMNS = ", ".join(f"r.{c}" if c != "packed" else PACKED_CODES for c in SCALAR_COLUMNS)
# SQLite keeps a record's scalars on the same pages as its ~1.5 KB document: a covering index
# lets the cold load scan 100-byte index entries instead (-20% at 1M). PostgreSQL reads its
# heap fast enough and would pay the index on every write for nothing.
SQLITE_SCALAR_INDEX_NAME = "ix_records_scalars3"
# Before success_rate, before tags (the cache's tag-set codes): dropped on open.
_OLD_SQLITE_SCALAR_INDEXES = ("ix_records_scalars", "ix_records_scalars2")
SQLITE_SCALAR_INDEX = (
    f"CREATE INDEX IF NOT EXISTS {SQLITE_SCALAR_INDEX_NAME} ON records (scope, sens_level, type, id, confidence, "
    "created_at, anchor_salience, anchor_at, curve, half_life, min_salience, max_age, decay_points, pinned, "
    "deletion_policy, last_reinforced_at, success_signal, runs, success_rate, tags)")


SQLITE_PAGE_SIZE = 16384
BULK_ROWS = 5000  # imports at least this large get Store.bulk_write() settings
# SQLite page cache during a bulk write, in KiB: about 2 KiB per record written (the index
# pages its inserts touch at random stay in memory, so a large import is not I/O bound), from
# 16 MiB up to 1 GiB. The cache fills with the import's pages, so a floor above what an import
# needs is memory it holds for nothing: an upload imported by a console server (bench/README.md).
BULK_CACHE_KIB = (16_384, 1_048_576)
RECORD_COLUMNS = tuple(c.name for c in records.columns)
_ROW_DEFAULTS = {"scope": "", "tags": "[]"}


def insert_tuples(conn: Connection, table: Table, columns: Sequence[str], rows: list[tuple]) -> None:
    """Bulk insert of plain tuples through the driver, inside the caller's transaction: one
    ``executemany`` on SQLite, ``COPY ... FROM STDIN`` on PostgreSQL (psycopg 3); other drivers
    go through SQLAlchemy. Values must already be what the column stores (no type processing:
    floats, ints, bools, str, None)."""
    if not rows:
        return
    dialect = conn.dialect.name
    names = ", ".join(columns)
    if dialect == "sqlite":
        statement = f"INSERT INTO {table.name} ({names}) VALUES ({', '.join('?' * len(columns))})"
    elif dialect == "postgresql" and conn.dialect.driver == "psycopg":
        statement = f"COPY {table.name} ({names}) FROM STDIN"
    else:
        conn.execute(table.insert(), [dict(zip(columns, row)) for row in rows])
        return
    dbapi = conn.dialect.loaded_dbapi
    try:
        if dialect == "sqlite":
            cur = conn.connection.driver_connection.cursor()
            try:
                cur.executemany(statement, rows)
            finally:
                cur.close()
        else:
            with conn.connection.driver_connection.cursor() as cur, cur.copy(statement) as copy:
                write = copy.write_row
                for row in rows:
                    write(row)
    except dbapi.Error as exc:  # the same exception classes SQLAlchemy would have raised
        raise DBAPIError.instance(statement, None, exc, dbapi.Error, dialect=conn.dialect) from exc


def default_db_path() -> Path:
    """$MEMBRANE_HOME/membrane.db, else ~/.membrane/membrane.db, read when called (so a
    MEMBRANE_HOME set after import counts; DEFAULT_DB_PATH is only the value at import)."""
    home = os.environ.get("MEMBRANE_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".membrane") / "membrane.db"


def private_file(path: Path) -> None:
    """Make a new store file, and every directory missing on its way, readable by its owner
    only (0600, 0700): records hold whatever agents remembered, and the default umask would
    leave them readable by every user of the machine. SQLite gives its -wal, -shm and -journal
    files the database file's mode, so they follow. A file or directory that already exists
    keeps the mode its owner gave it."""
    missing = [parent for parent in (path.parent, *path.parent.parents) if not parent.exists()]
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another process: its mode is its own
            continue
        os.chmod(directory, 0o700)  # mkdir's mode is cut by the umask; a umask never adds bits here
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def default_url() -> str:
    return os.environ.get("MEMBRANE_DB_URL") or f"sqlite:///{default_db_path()}"


def lock_timeout() -> float:
    """Seconds a SQLite write waits for another writer's lock before the call fails with
    StoreUnavailableError ("locked"): ``MEMBRANE_LOCK_TIMEOUT``, default 60."""
    try:
        value = float(os.environ.get("MEMBRANE_LOCK_TIMEOUT", "60"))
    except ValueError:
        return 60.0
    return value if value >= 0 and value == value else 60.0


def durable_commits() -> bool:
    """``MEMBRANE_DURABLE_COMMITS`` (1/true/yes/on): every commit waits until it is on disk.
    The default, on both databases, is the guarantee of SQLite's WAL mode with synchronous=NORMAL
    and of PostgreSQL's synchronous_commit=off: a crash or power cut may lose the last commits
    (under a second of them), never corrupts the store or breaks an audit chain, and a commit
    does not wait for the disk (on PostgreSQL that wait was most of a reinforce)."""
    return os.environ.get("MEMBRANE_DURABLE_COMMITS", "").strip().lower() in ("1", "true", "yes", "on")


def _sqlite_pragmas(dbapi_conn, _record, timeout_ms: int = 60000, durable: bool = False) -> None:
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (see _sqlite_begin)
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
    cur.execute("PRAGMA foreign_keys = ON")
    # A new store's page size (an existing file keeps its own). Records are about 2 KB, which
    # fill 4 KiB pages (SQLite's default) unevenly; 16 KiB pages hold them, and the index entries
    # of a bulk import, with a quarter of the page splits and page writes (the import's time
    # with each: bench/README.md).
    cur.execute(f"PRAGMA page_size = {SQLITE_PAGE_SIZE}")
    try:
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
    except Exception:  # read-only files cannot switch journal mode; reading still works
        pass
    cur.close()


# Whether a server connection taken from the pool is checked first (a round trip): a server
# restart leaves the pool holding dead connections. read() asks for the check, because its
# statements are the caller's and cannot be sent again once one has failed. peek() and write()
# do not: their first statement is the store's own, and when it finds the connection lost it is
# sent again on a checked one (Store.peeking, Store.write). That saves a PostgreSQL round trip
# in each freshness check of a column cache, each record read by id and each write.
_PING_ON_CHECKOUT: ContextVar[bool] = ContextVar("membrane_ping_on_checkout", default=True)


# Connection.info key of the rows a write transaction read with its first round trip.
_PREFETCHED = "membrane_prefetched_rows"
# Connection.info keys of the store-wide audit chain's tail: as read with a write transaction's
# first round trip, and as the transaction's own appends leave it (audit_log.py). Both end with it.
_PREFETCHED_TAIL = "membrane_prefetched_audit_tail"
AUDIT_TAIL_STATE = "membrane_audit_tail"
# Connection.info key set while a SQLite write runs with a rollback journal (Store._direct_pages).
_DIRECT_PAGES = "membrane_direct_pages"


class ConnectionLostError(StoreUnavailableError):
    """The server connection a statement went out on was gone (a server restart, a terminated
    backend); nothing was done on it. Store.peeking and Store.write send their statement again
    on another connection."""


def _ping_on_checkout(dialect) -> Callable[..., None]:
    def checkout(dbapi_conn, _record, _proxy) -> None:
        if not _PING_ON_CHECKOUT.get():
            return
        try:
            dialect.do_ping(dbapi_conn)
        except Exception as exc:  # the pool replaces the connection and tries again
            raise DisconnectionError(f"a pooled connection was lost: {exc}") from exc
    return checkout


def _postgres_async_commit(dbapi_conn, _record) -> None:
    """The session default of a new PostgreSQL connection: commits do not wait for the disk
    (see ``durable_commits``)."""
    autocommit = dbapi_conn.autocommit
    dbapi_conn.autocommit = True  # a SET outside any transaction: it stays for the session
    try:
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute("SET synchronous_commit TO off")
        finally:
            cursor.close()
    finally:
        dbapi_conn.autocommit = autocommit


def _sqlite_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get("membrane_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


# orjson writes an aware UTC datetime exactly as schema.format_time does ("...Z", microseconds
# only when non-zero); naive ones are taken as UTC, as format_time does.
_ORJSON_TIME = orjson.OPT_UTC_Z | orjson.OPT_NAIVE_UTC


def _plain_dump(obj: Any) -> Any:
    """orjson's ``default`` for the record's models: what ``model_dump(mode="python",
    by_alias=True)`` gives for the object, one level deep (orjson walks the values, calling this
    again for nested models). Per class, the rules of that class's serializer (see
    ``_DUMP_RULES``); any other object is refused (TypeError), so the caller takes the general
    path. tests/scale checks this against model_dump on generated and odd records."""
    rule = _DUMP_RULES.get(obj.__class__)
    if rule is None:
        if isinstance(obj, BaseModel):  # a foreign model inside an ``Any`` value: pydantic dumps it
            return obj.model_dump(mode="python", by_alias=True)
        raise TypeError(f"{obj.__class__.__name__} is not a record model")
    return rule(obj)


def _fields(obj: Any) -> dict[str, Any]:
    """Declared fields in order, then the extra ones: the dump of a model that Membrane's JSON
    writes whole (no omitempty field, no nil list)."""
    extra = obj.__pydantic_extra__
    return {**obj.__dict__, **extra} if extra else obj.__dict__


def _shaped_fields(obj: Any) -> dict[str, Any]:
    """``_fields`` shaped as the class's serializer shapes them (schema.membrane_shape: Go's
    omitempty, nil lists as null, plain aliases as strings), on a copy."""
    extra = obj.__pydantic_extra__
    return membrane_shape(obj, {**obj.__dict__, **extra} if extra else dict(obj.__dict__))


def _edge_fields(obj: PlanEdge) -> dict[str, Any]:
    d = obj.__dict__
    out = {"from": d["from_"], "to": d["to"], "kind": d["kind"]}
    if obj.__pydantic_extra__:
        out.update(obj.__pydantic_extra__)
    return out


def _model_classes() -> list[type]:
    out, todo = [], list(MembraneModel.__subclasses__())
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


# Every record model dumps its fields shaped by schema.membrane_shape (the rule its pydantic
# serializer applies); PlanEdge also renames ``from_``.
_DUMP_RULES: dict[type, Any] = {
    cls: _shaped_fields if (cls.omitempty or cls.omitnil or cls.null_lists or cls is EntityAlias) else _fields
    for cls in _model_classes() if cls.__module__ == MemoryRecord.__module__}
_DUMP_RULES[PlanEdge] = _edge_fields


def _doc_text(record: MemoryRecord, anchor_salience: float, anchor_at: float, validated: bool) -> str:
    anchor_stamp = format_time(datetime.fromtimestamp(anchor_at, timezone.utc))
    if validated:
        # Fast path for records that just came out of validation (every datetime is aware UTC):
        # the fields go straight to orjson (``_plain_dump`` applies each model's serializer rules),
        # which gives the bytes pydantic's python-mode dump plus orjson gives, several times
        # cheaper than the JSON-mode dump (a Python call per timestamp). tests/scale checks it
        # against the general path; values orjson cannot write (ints beyond 64 bits, non-string
        # keys) fall back to the general path.
        try:
            doc = _shaped_fields(record)
            doc["audit_log"] = []
            doc.pop("redacted", None)
            lifecycle = _shaped_fields(record.lifecycle)
            lifecycle["anchor_salience"] = anchor_salience
            lifecycle["anchor_at"] = anchor_stamp
            doc["lifecycle"] = lifecycle
            return orjson.dumps(doc, default=_plain_dump, option=_ORJSON_TIME).decode()
        except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
            pass
    doc = record.to_json_dict()
    doc["audit_log"] = []
    doc.pop("redacted", None)
    doc["lifecycle"]["anchor_salience"] = anchor_salience
    doc["lifecycle"]["anchor_at"] = anchor_stamp
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def placeholder(conn: Connection) -> str:
    """The driver's parameter placeholder (sqlite3: qmark, psycopg: format)."""
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


@contextmanager
def driver_cursor(conn: Connection) -> Iterator[Any]:
    """A cursor of the driver itself (SQLAlchemy does not see its statements), closed after use."""
    cursor = conn.connection.driver_connection.cursor()
    try:
        yield cursor
    finally:
        cursor.close()


_STREAMS = itertools.count()


def stream_rows(conn: Connection, statement: str, size: int = 5000, binary: bool = False) -> Iterator[list[tuple]]:
    """Rows of ``statement`` in chunks of plain tuples straight from the driver, without holding
    the whole result: a server-side cursor on PostgreSQL (``binary``: binary rows), inside the
    caller's transaction."""
    raw = conn.connection.driver_connection
    if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg":
        cur = raw.cursor(name=f"membrane_stream_{next(_STREAMS)}", binary=binary)
        cur.itersize = size
    else:
        cur = raw.cursor()
    try:
        cur.execute(statement)
        while True:
            chunk = cur.fetchmany(size)
            if not chunk:
                return
            yield chunk
    finally:
        cur.close()


def rows_in(conn: Connection, table: str, columns: Sequence[str], key: str, values: Sequence[str],
            order_by: Sequence[str] = (), prepare: bool = True) -> list[tuple]:
    """Plain tuples of ``columns`` from ``table`` where ``key`` is one of ``values``, straight
    from the driver: a retrieval page reads a few dozen records and their audit entries, and
    SQLAlchemy's per-statement IN expansion and per-row processing cost several times the query
    itself there. Table and column names are this module's constants, never user input.
    ``prepare=False``: never a prepared statement on PostgreSQL (see ``existing_ids``)."""
    unique = list(dict.fromkeys(values))
    if not unique:
        return []
    mark = placeholder(conn)
    options = {"prepare": False} if not prepare and conn.dialect.driver == "psycopg" else {}
    out: list[tuple] = []
    with driver_cursor(conn) as cursor:
        for start in range(0, len(unique), 900):
            chunk = unique[start:start + 900]
            sql = (f"SELECT {', '.join(columns)} FROM {table} WHERE {key} IN ({', '.join([mark] * len(chunk))})"
                   + (f" ORDER BY {', '.join(order_by)}" if order_by else ""))
            cursor.execute(sql, chunk, **options)
            out.extend(cursor.fetchall())
    return out


def archive_text(doc: dict[str, Any]) -> str:
    """How the archive stores a record's full JSON (its audit digest covers this text)."""
    return json.dumps(doc, ensure_ascii=False)


def tags_json(tags: list[str]) -> str:
    """How the ``tags`` column stores a record's tags (ASCII-escaped JSON); searches for one tag
    must encode it the same way (``tag_json``)."""
    return json.dumps(list(tags))


def tag_json(tag: str) -> str:
    """One tag as it appears inside the ``tags`` column, quotes included."""
    return json.dumps(tag)


def like_contains(text: str) -> str:
    """A LIKE pattern (escape character backslash) for values that contain ``text`` literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# The columns record_values() fills, in its order (every column of ``records``).
ROW_COLUMNS = ("id", "type", "sensitivity", "sens_level", "scope", "confidence", "created_at", "updated_at",
               "anchor_salience", "anchor_at", "curve", "half_life", "min_salience", "max_age", "decay_points",
               "pinned", "deletion_policy", "last_reinforced_at", "success_signal", "runs", "success_rate", "status",
               "tags", "doc",
               "audit_head")


def record_values(record: MemoryRecord, anchor_salience: float, anchor_at: float, audit_head: str | None,
                  *, validated: bool = False) -> tuple:
    """``record_row`` as a tuple in ROW_COLUMNS order (what bulk inserts hand the driver)."""
    lifecycle = record.lifecycle
    decay = lifecycle.decay
    payload = record.payload
    # isinstance, not getattr(payload, name, None): payloads allow extra fields, so another
    # layer's payload may carry one of that name (and pydantic's __getattr__ for a missing
    # name costs microseconds a call, three times a record in an import).
    status = None
    if isinstance(payload, SemanticPayload) and payload.revision is not None:
        status = (payload.revision.status or RevisionStatus.ACTIVE)._value_  # none set: active
    lri = lifecycle.last_reinforced_at
    curve = decay.curve._value_  # an enum's _value_ is .value, without the descriptor call
    return (
        record.id,
        record.type._value_,
        record.sensitivity._value_,
        sensitivity_level(record.sensitivity),
        record.scope,
        record.confidence,
        to_epoch(record.created_at),
        to_epoch(record.updated_at),
        anchor_salience,
        anchor_at,
        CURVE_CODES[curve],
        float(decay.half_life_seconds),
        decay.min_salience,
        float(decay.max_age_seconds),
        json.dumps(decay.points) if curve == "custom" and decay.points else None,
        lifecycle.pinned,
        lifecycle.deletion_policy._value_ if lifecycle.deletion_policy is not None else "",
        None if lri is None or lri.year <= 1 else to_epoch(lri),
        success_signal(record),
        _runs(record),
        _success_rate(record),
        status,
        tags_json(record.tags),
        _doc_text(record, anchor_salience, anchor_at, validated),
        audit_head,
    )


def record_row(record: MemoryRecord, anchor_salience: float, anchor_at: float, audit_head: str | None,
               *, validated: bool = False) -> dict[str, Any]:
    """The row of a record, with the anchor written into its lifecycle as well (the doc is
    what reads return; the columns are what queries use: both come from here). ``validated``:
    the record was just built by validation (not edited since), which allows a faster dump."""
    return dict(zip(ROW_COLUMNS, record_values(record, anchor_salience, anchor_at, audit_head, validated=validated)))


def _success_rate(record: MemoryRecord) -> float | None:
    payload = record.payload
    if isinstance(payload, CompetencePayload) and payload.performance is not None:
        return float(payload.performance.success_rate)
    return None


def _runs(record: MemoryRecord) -> float | None:
    payload = record.payload
    if isinstance(payload, CompetencePayload) and payload.performance is not None:
        return float(payload.performance.success_count + payload.performance.failure_count)
    if isinstance(payload, PlanGraphPayload) and payload.metrics is not None:
        return float(payload.metrics.execution_count)
    return None


@dataclass
class StoredRow:
    """A record's doc plus the columns a caller needs without parsing it."""

    id: str
    doc: dict[str, Any]
    anchor_salience: float
    anchor_at: float
    audit_head: str | None


def _add_success_rate(conn: Connection) -> None:
    """``records.success_rate`` came after the first stores of schema version 1 were made
    (development stores: none has shipped). Such a store gets the column on open, filled from
    its competence records' documents; SQLite's covering index is made anew with it."""
    if "success_rate" in {c["name"] for c in inspect(conn).get_columns("records")}:
        return
    conn.exec_driver_sql("ALTER TABLE records ADD COLUMN success_rate FLOAT")
    rows = conn.execute(select(records.c.id, records.c.doc).where(records.c.type == "competence")).all()
    values = []
    for rid, doc in rows:
        performance = (json.loads(doc).get("payload") or {}).get("performance")
        if isinstance(performance, dict):
            values.append({"rid": rid, "rate": float(performance.get("success_rate") or 0.0)})
    if values:
        conn.execute(records.update().where(records.c.id == bindparam("rid")).values(success_rate=bindparam("rate")),
                     values)
    if conn.dialect.name == "sqlite":
        for name in _OLD_SQLITE_SCALAR_INDEXES:
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")


def _add_audit_extra(conn: Connection) -> None:
    """``audit_entries.extra`` came after the first stores of schema version 1 were made
    (development stores: none has shipped). Such a store gets the nullable column on open;
    its entries have no extras, so their hashes are unchanged."""
    if "extra" not in {c["name"] for c in inspect(conn).get_columns("audit_entries")}:
        conn.exec_driver_sql("ALTER TABLE audit_entries ADD COLUMN extra TEXT")


def _add_access_via(conn: Connection) -> None:
    """``access_log.via`` came after "who looked" did: an older store's entries get "" (not said)."""
    if "via" not in {c["name"] for c in inspect(conn).get_columns("access_log")}:
        conn.exec_driver_sql("ALTER TABLE access_log ADD COLUMN via VARCHAR(64) NOT NULL DEFAULT ''")


def _add_row_seals(conn: Connection) -> bool:
    """The MAC columns of the operator tables and the access log's chain came after those
    tables did: an older store gets them empty on open (row_seal.on_open fills them, this once).
    Returns whether any was added."""
    added = False
    for table, names in (("operators", ("mac",)), ("operator_tokens", ("mac",)), ("access_log", ("prev_hash", "hash"))):
        have = {c["name"] for c in inspect(conn).get_columns(table)}
        for name in names:
            if name not in have:
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {name} VARCHAR(128)")
                added = True
    return added


class Store:
    """Owns the SQLAlchemy engine; every transaction goes through ``read()`` or ``write()``."""

    def __init__(self, url: str, create_directory: bool = False):
        """``create_directory``: make a SQLite file's missing directory (the default store's
        ~/.membrane); a store named by URL must be in a directory that exists, so a mistyped
        path is an error rather than a new, empty store somewhere else."""
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self._file: Path | None = None  # a SQLite store's file, once it has been opened
        self._file_path: Path | None = None
        kwargs: dict[str, Any] = {"future": True}
        if self.is_sqlite:
            path = url.split("///", 1)[1] if "///" in url else ""
            timeout = lock_timeout()
            if path.split("?", 1)[0] not in ("", ":memory:") and not path.startswith("file:"):
                self._file_path = Path(path.split("?", 1)[0]).expanduser()
                if not create_directory and not self._file_path.parent.is_dir():
                    raise StoreUnavailableError(
                        f"cannot open store {self.display_url}: the directory {str(self._file_path.parent)!r} "
                        "does not exist (create it first, or name a file in an existing directory)")
                try:
                    private_file(self._file_path)
                except OSError as exc:
                    what = "the directory" if exc.filename != str(self._file_path) else "the file"
                    raise StoreUnavailableError(
                        f"cannot open store {self.display_url}: {what} {exc.filename or str(self._file_path.parent)!r} "
                        f"cannot be created ({exc.strerror or exc})") from None
            elif path.startswith("file:") and "mode=memory" not in path:
                self._file_path = Path(path[len("file:"):].split("?", 1)[0]).expanduser()
            kwargs["connect_args"] = {"timeout": timeout, "check_same_thread": False}
            if path in ("", ":memory:"):
                from sqlalchemy.pool import StaticPool

                kwargs["poolclass"] = StaticPool
        try:
            self.engine: Engine = create_engine(url, **kwargs)
        except ModuleNotFoundError as exc:  # the URL names a driver that is not installed
            hint = (" (install the postgres extra: pip install 'membrane-console[postgres]')"
                    if url.startswith("postgresql") else "")
            raise StoreUnavailableError(f"cannot open store {self.display_url}: the database driver "
                                        f"{exc.name!r} is not installed{hint}") from exc
        except Exception as exc:  # bad URL
            raise StoreUnavailableError(f"cannot open store {self.display_url}: {exc}") from exc
        if self.is_sqlite:
            timeout_ms = int(lock_timeout() * 1000)
            durable = durable_commits()
            self._timeout_ms = timeout_ms
            event.listen(self.engine, "connect", lambda c, r: _sqlite_pragmas(c, r, timeout_ms, durable))
            event.listen(self.engine, "begin", _sqlite_begin)
        else:
            event.listen(self.engine, "checkout", _ping_on_checkout(self.engine.dialect))
            if self.engine.dialect.name == "postgresql" and not durable_commits():
                event.listen(self.engine, "connect", _postgres_async_commit)
        # On a server, the column cache's "anything new?" goes through a connection of its own.
        self.probe: ChangeProbe | None = ChangeProbe(self.engine) if ChangeProbe.supports(self.engine) else None
        self._created = False

    @property
    def display_url(self) -> str:
        """The URL without a password, for pages and messages."""
        try:
            from sqlalchemy.engine import make_url

            return make_url(self.url).render_as_string(hide_password=True)
        except Exception:
            return self.url

    def create(self, upgrade_audit: Callable[[Connection, int], None],
               open_audit: Callable[[Connection, bool], None],
               index_entities: Callable[[Connection], None]) -> bool:
        """Create the schema on first open, or bring an existing store's up to date, in one write
        transaction. Returns True when the store was new. The audit log's part of opening an
        existing store belongs to the audit package, which sits above storage, so the caller
        hands it in: ``upgrade_audit(conn, from_version)`` brings an older schema's audit log up
        to this one (``storage.audit_log.upgrade``); ``open_audit(conn, migrated)`` runs at every open,
        after the migrations (``audit.row_seal.on_open``); ``index_entities(conn)`` keeps capture's
        entity term index (``storage.entity_index.on_open``, a module built on this one's tables)."""
        with self.write() as conn:
            existed = self.engine.dialect.has_table(conn, "meta")
            if not existed:
                metadata.create_all(conn)
                conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
                conn.execute(meta.insert().values(key="store_id", value=str(uuid.uuid4())))
                conn.execute(meta.insert().values(key=SNAPSHOT_KEY, value=os.urandom(32).hex()))
            else:
                version = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")).scalar()
                if version is None or int(version) > SCHEMA_VERSION:
                    raise StoreUnavailableError(
                        f"store {self.display_url} has schema version {version}; this engine knows {SCHEMA_VERSION}"
                    )
                _add_audit_extra(conn)
                _add_success_rate(conn)
                # Stores made before operators existed get their (empty) tables on open.
                metadata.create_all(conn, tables=OPERATOR_TABLES)
                operator_events_index.create(conn, checkfirst=True)  # stores made before sessions were logged
                access_log.create(conn, checkfirst=True)  # stores made before "who looked"
                _add_access_via(conn)
                sealed_rows_added = _add_row_seals(conn)
                contested_index.create(conn, checkfirst=True)  # stores made before the review queue
                if _has_index(conn, "audit_entries", _OLD_CONTEST_INDEX):
                    conn.exec_driver_sql(f"DROP INDEX {_OLD_CONTEST_INDEX}")
                contest_index.create(conn, checkfirst=True)  # and before it read contests by index
                ts_seq_index.create(conn, checkfirst=True)  # stores made before the audit page read it
                if _has_index(conn, "audit_entries", "ix_audit_ts"):  # stores made before it held the action
                    ts_action_index.create(conn, checkfirst=True)
                    conn.exec_driver_sql("DROP INDEX ix_audit_ts")
                record_vectors.create(conn, checkfirst=True)  # stores made before vectors existed
                if int(version) < SCHEMA_VERSION:
                    upgrade_audit(conn, int(version))
                if conn.execute(select(meta.c.value).where(meta.c.key == SNAPSHOT_KEY)).scalar() is None:
                    conn.execute(meta.insert().values(key=SNAPSHOT_KEY, value=os.urandom(32).hex()))
                open_audit(conn, sealed_rows_added)
            index_entities(conn)  # capture's entity terms (SPEC 12); an older store's indexed now
            if conn.dialect.name == "sqlite":
                for name in _OLD_SQLITE_SCALAR_INDEXES:
                    conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
                conn.exec_driver_sql(SQLITE_SCALAR_INDEX)
        self._file = self._file_path  # from now on, the file must stay where it is
        return not existed

    # transactions -------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Connection]:
        self._check_file()
        try:
            with self.engine.connect() as conn, conn.begin():
                yield conn
        except (DBAPIError, *_DRIVER_ERRORS) as exc:
            raise self._translate(exc) from exc

    def _checkout(self, ping: bool) -> Connection:
        """A pooled connection, checked first (one round trip on a server) when ``ping``."""
        token = _PING_ON_CHECKOUT.set(ping)
        try:
            return self.engine.connect()
        except (DBAPIError, *_DRIVER_ERRORS) as exc:
            raise self._translate(exc) from exc
        finally:
            _PING_ON_CHECKOUT.reset(token)

    @contextmanager
    def peek(self, ping: bool = False) -> Iterator[Connection]:
        """A connection outside any transaction, for single statements through the driver
        (``changes_with_rows``, ``records_with_logs``): each sees the newest committed state on
        its own, and no BEGIN and COMMIT are sent for it (on PostgreSQL, round trips that would
        outnumber the statement's own). SQLAlchemy statements on it would start a transaction:
        use read() for those. The connection is not checked before use (see _PING_ON_CHECKOUT):
        a statement that finds it lost raises ConnectionLostError; ``peeking`` sends it again."""
        if self.is_sqlite and self.engine.pool.__class__.__name__ == "StaticPool":
            # An in-memory store has one connection for every thread: outside a transaction a
            # statement could read another thread's uncommitted writes.
            with self.read() as conn:
                yield conn
            return
        self._check_file()
        with self._checkout(ping) as conn:
            raw = None if self.is_sqlite else conn.connection.driver_connection
            try:
                if raw is not None:
                    # Autocommit set on the driver connection, not through SQLAlchemy's isolation
                    # level, whose setting and resetting costs as much as a round trip; SQLite
                    # connections already run without implicit BEGIN.
                    raw.autocommit = True
                yield conn
            except (DBAPIError, *_DRIVER_ERRORS) as exc:
                raise self._translate_on(conn, exc) from exc
            finally:
                if raw is not None and not (raw.closed or raw.broken):
                    try:
                        raw.autocommit = False
                    except _DRIVER_ERRORS:
                        # Terminated under a statement, the driver may not know yet that the
                        # connection is gone (it still reads as mid-statement): drop it from
                        # the pool rather than hide the loss, which ``peeking`` retries on.
                        conn.invalidate()

    def peeking(self, statement: Callable[[Connection], T]) -> T:
        """``statement(conn)`` on a ``peek()`` connection; sent once more, on a connection checked
        first, when the pooled one turned out to be lost. ``statement`` only reads."""
        try:
            with self.peek() as conn:
                return statement(conn)
        except ConnectionLostError:
            with self.peek(ping=True) as conn:
                return statement(conn)

    @contextmanager
    def write(self, prefetch: Sequence[str] = (), direct: bool = False) -> Iterator[Connection]:
        """One write transaction: all of it commits or none of it does. ``prefetch``: ids of
        records the transaction will read with ``rows_for_update``; on PostgreSQL they are read
        and locked in the transaction's first round trip, with its BEGIN and the writers' lock.
        ``direct``: a bulk import's transaction, written straight into the file when it can be
        (``_direct_pages``)."""
        self._check_file()
        conn, transaction = self._begin_write(prefetch, direct)
        with conn:
            try:
                with transaction:
                    yield conn
            except (DBAPIError, *_DRIVER_ERRORS) as exc:
                raise self._translate(exc) from exc
            except UnicodeEncodeError as exc:  # a lone surrogate that got past validation
                raise ValidationError(f"a value is not valid Unicode text, nothing was written ({exc.reason}: "
                                      f"{exc.object[exc.start:exc.end]!r})", [("value", "not valid Unicode")]) from exc
            finally:
                self._end_write(conn)

    def _begin_write(self, prefetch: Sequence[str] = (), direct: bool = False) -> tuple[Connection, Any]:
        """A connection in a new write transaction, the writers' lock held on a server. The
        connection is not checked first: when the lock's statement finds it lost, a checked one
        is taken instead."""
        for attempt in (1, 2):
            conn = self._checkout(ping=attempt == 2)
            try:
                if direct and self.is_sqlite:
                    self._direct_pages(conn)
                conn.execution_options(membrane_write=True)
                transaction = conn.begin()
                if not self.is_sqlite:
                    self._lock_writers(conn, prefetch)
                return conn, transaction
            except (DBAPIError, *_DRIVER_ERRORS) as exc:
                error = self._translate_on(conn, exc)
                self._end_write(conn)
                conn.close()
                if attempt == 2 or not isinstance(error, ConnectionLostError):
                    raise error from exc
        raise AssertionError("unreachable")  # pragma: no cover

    _LOCK_WRITERS = "SELECT pg_advisory_xact_lock(7264321, hashtext(current_schema()))"

    def _lock_writers(self, conn: Connection, prefetch: Sequence[str] = ()) -> None:
        """Serialize writers so the change log's sequence order is commit order (column caches
        read "everything after N" and must not miss a change). The key names the schema: stores
        in other schemas of the same database have change logs of their own and need not wait.

        With psycopg, the BEGIN goes out with it, and the read of the ``prefetch`` rows after it,
        in one round trip instead of two or three: the connection is put in autocommit mode, so
        the driver sends no BEGIN of its own (in a pipeline it would wait for that BEGIN's answer
        before sending on), and stays so until the transaction ends (the driver's commit and
        rollback act on the server's transaction status; ``_end_write`` turns autocommit off)."""
        if conn.dialect.driver != "psycopg":
            conn.exec_driver_sql(self._LOCK_WRITERS)
            return
        raw = conn.connection.driver_connection
        raw.autocommit = True
        if not prefetch or not self._pipelines():
            raw.execute(f"BEGIN; {self._LOCK_WRITERS}", prepare=False)
            return
        requested = sorted(set(prefetch))
        with raw.pipeline():
            raw.execute("BEGIN", prepare=False)
            raw.execute(self._LOCK_WRITERS)
            cursors = self._send_rows_for_update(conn, requested)
            tail = raw.cursor()  # the store-wide chain's tail, after the lock: no round trip of its own
            cursors.append(tail)
            tail.execute(AUDIT_TAIL)
        # Read after the pipeline's end: its Sync brought every answer back with it (reading
        # inside would ask for them with a Flush first, a round trip more).
        conn.info[_PREFETCHED_TAIL] = tail.fetchone()
        conn.info[_PREFETCHED] = (frozenset(requested), self._rows_read(cursors[:-1]))
        tail.close()

    def _direct_pages(self, conn: Connection) -> None:
        """Before the transaction of a bulk import on SQLite: when the store is an empty file that
        no other connection has open, its journal becomes a rollback journal for the length of
        the transaction (``_end_write`` puts the write-ahead log back). The import's pages then go
        into the file once; through the write-ahead log they are written twice, the second time
        by the checkpoint after the commit (the inserts themselves cost the same). Only into an
        empty store: readers wait for a transaction that writes pages into the file (in WAL mode
        they read the state before it), and an empty store has nothing to read. Anything else,
        another connection included (the switch needs the file to itself), leaves the write-ahead
        log on; it is only slower (bench/README.md has both times)."""
        if self._file is None or not self.is_empty(conn):
            return
        self.engine.pool.dispose()  # this process's idle connections would keep the file open
        with driver_cursor(conn) as cursor:  # the driver's: SQLAlchemy would begin a transaction
            cursor.execute("PRAGMA busy_timeout = 0")  # another connection: give up at once, not wait
            try:
                switched = cursor.execute("PRAGMA journal_mode = DELETE").fetchall() == [("delete",)]
            except sqlite3.OperationalError:  # "database is locked": someone else has the file open
                switched = False
            finally:
                cursor.execute(f"PRAGMA busy_timeout = {self._timeout_ms}")
        if switched:
            conn.info[_DIRECT_PAGES] = True

    def _end_write(self, conn: Connection) -> None:
        """Back to the driver's own transactions on a connection ``_lock_writers`` put in
        autocommit mode, its transaction over, before the pool hands it out again; on SQLite,
        back to the write-ahead log after ``_direct_pages``."""
        if not (conn.invalidated or conn.closed):  # (an invalidated connection's info goes with it)
            conn.info.pop(AUDIT_TAIL_STATE, None)  # a transaction's own: never carried into the next
            conn.info.pop(_PREFETCHED_TAIL, None)
        if self.is_sqlite and not (conn.invalidated or conn.closed) and conn.info.pop(_DIRECT_PAGES, False):
            try:
                conn.connection.driver_connection.execute("PRAGMA journal_mode = WAL").fetchall()
            except sqlite3.Error:  # the next connection opened switches it back (_sqlite_pragmas)
                pass
            # Not pooled again: a checkpoint on this connection right after the switch is refused
            # ("database table is locked"), one on a new connection is not.
            conn.invalidate()
        if conn.dialect.driver != "psycopg" or conn.invalidated or conn.closed:
            return
        conn.info.pop(_PREFETCHED, None)
        raw = conn.connection.driver_connection
        if not raw.autocommit or raw.closed or raw.broken:
            return
        try:
            if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                raw.rollback()
            raw.autocommit = False
        except Exception as exc:  # a connection in an unknown state is not pooled again
            conn.invalidate(exc)

    def _check_file(self) -> None:
        """A SQLite file deleted (or its directory) while the store is open: pooled connections
        would go on reading and writing the unlinked file, and every write would be lost."""
        if self._file is not None and not self._file.exists():
            raise StoreUnavailableError(
                f"the database file is gone ({self.display_url}: {str(self._file)!r} no longer exists); "
                "nothing was read or written")

    # rewriting existing records (curation's update path) -------------------------------
    # A curation operation that only rewrites existing records (reinforce, penalize, pin, ...)
    # reads each row together with its audit chain end in one statement, then writes the audit
    # entries, the changed columns and the change log in one batch (a single round trip on
    # PostgreSQL: a pipeline). Both go through the driver, as rows_in does: on PostgreSQL every
    # statement is a round trip, and SQLAlchemy's per-statement work costs about what SQLite's own does.

    def rows_for_update(self, conn: Connection, ids: Sequence[str]
                        ) -> dict[str, tuple[dict[str, Any], tuple[int, str] | None]]:
        """Every column of the records of ``ids`` that exist, each with its audit chain end
        ((newest position, its hash), None when it has no entries), in one statement. On
        PostgreSQL the rows are locked FOR UPDATE; a SQLite write transaction holds the database.
        Rows the transaction prefetched (``write(prefetch=...)``) are not read again: they are
        locked, and nothing has written them since but this transaction, which reads first."""
        prefetched = conn.info.pop(_PREFETCHED, None)
        if prefetched is not None and prefetched[0].issuperset(ids):
            return {rid: prefetched[1][rid] for rid in ids if rid in prefetched[1]}
        return self._rows_for_update(conn, ids)

    def _rows_for_update(self, conn: Connection, ids: Sequence[str]
                         ) -> dict[str, tuple[dict[str, Any], tuple[int, str] | None]]:
        return self._rows_read(self._send_rows_for_update(conn, ids))

    def _send_rows_for_update(self, conn: Connection, ids: Sequence[str]) -> list[Any]:
        """The statements of ``rows_for_update``, sent on driver cursors (in a pipeline, only
        queued) for ``_rows_read``."""
        unique = sorted(set(ids))
        mark = placeholder(conn)
        columns = ", ".join(f"r.{c}" for c in RECORD_COLUMNS)
        cursors = []
        raw = conn.connection.driver_connection
        try:
            for start in range(0, len(unique), 900):
                chunk = unique[start:start + 900]
                where = f"WHERE r.id IN ({', '.join([mark] * len(chunk))})"
                if self.is_sqlite:
                    statement = (f"SELECT {columns}, a.position, a.hash FROM records r LEFT JOIN audit_entries a "
                                 "ON a.record_id = r.id AND a.position = "
                                 f"(SELECT max(e.position) FROM audit_entries e WHERE e.record_id = r.id) {where}")
                else:
                    statement = (f"SELECT {columns}, a.position, a.hash FROM records r LEFT JOIN LATERAL "
                                 "(SELECT e.position, e.hash FROM audit_entries e WHERE e.record_id = r.id "
                                 f"ORDER BY e.position DESC LIMIT 1) a ON true {where} ORDER BY r.id FOR UPDATE OF r")
                cursors.append(raw.cursor())
                cursors[-1].execute(statement, chunk)
        except BaseException:
            for cursor in cursors:
                cursor.close()
            raise
        return cursors

    @staticmethod
    def _rows_read(cursors: list[Any]) -> dict[str, tuple[dict[str, Any], tuple[int, str] | None]]:
        """The rows of ``_send_rows_for_update``'s statements; closes their cursors."""
        width = len(RECORD_COLUMNS)
        out: dict[str, tuple[dict[str, Any], tuple[int, str] | None]] = {}
        try:
            for cursor in cursors:
                for row in cursor.fetchall():
                    end = None if row[width] is None else (int(row[width]), row[width + 1])
                    out[row[0]] = (dict(zip(RECORD_COLUMNS, row[:width])), end)
        finally:
            for cursor in cursors:
                cursor.close()
        return out

    @staticmethod
    def audit_tail(conn: Connection) -> tuple[str | None, int | None, str | None]:
        """(the store's audit key check from ``meta``, the newest store-wide position, its chain
        value) inside a write transaction: what ``_lock_writers`` read with the transaction's
        first round trip, else one statement."""
        prefetched = conn.info.pop(_PREFETCHED_TAIL, None)
        if prefetched is not None:
            return tuple(prefetched)  # type: ignore[return-value]
        with driver_cursor(conn) as cursor:
            cursor.execute(AUDIT_TAIL)
            return tuple(cursor.fetchone())  # type: ignore[return-value]

    _pipeline_mode: bool | None = None

    @classmethod
    def _pipelines(cls) -> bool:
        """psycopg's pipeline mode is available (libpq 14 or later)."""
        if cls._pipeline_mode is None:
            import psycopg

            cls._pipeline_mode = bool(psycopg.Pipeline.is_supported())
        return cls._pipeline_mode

    _AUDIT_ROW_COLUMNS = tuple(c.name for c in audit_entries.columns if c.name != "seq")
    _UPDATABLE = frozenset(RECORD_COLUMNS) - {"id"}

    def write_updates(self, conn: Connection, audit_rows: list[dict[str, Any]],
                      updates: list[tuple[str, dict[str, Any]]], last: bool = False) -> list[tuple[int, str, tuple]]:
        """Inside the caller's write transaction: append ``audit_rows`` (every audit_entries column
        but ``seq``; hashes computed by the caller), set the given columns of each record of
        ``updates`` ((id, {column: value})) and log each of those records
        in ``changes``. Returns those change log entries as ``changes_with_rows`` gives them
        ((seq, record id, SCALAR_COLUMNS as written), by seq): once the transaction has committed,
        a column cache of this process can take them without reading them back
        (``ColumnCache.written``).

        ``last``: the caller writes nothing more in this transaction. On PostgreSQL its COMMIT
        then goes out in the same round trip as these statements; the server skips it when one
        of them fails (the transaction is then rolled back as usual), and the driver's commit
        at the end of ``write()`` finds nothing left to do."""
        mark = placeholder(conn)
        names = self._AUDIT_ROW_COLUMNS
        audit_values = [tuple(row[c] for c in names) for row in audit_rows]
        audit_sql = f"INSERT INTO audit_entries ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))})"
        returning = ", ".join(SCALAR_SELECT)
        statements = []
        for record_id, values in updates:
            unknown = set(values) - self._UPDATABLE
            if unknown:
                raise ValueError(f"not an updatable column of records: {sorted(unknown)}")
            if values:
                statements.append((f"UPDATE records SET {', '.join(f'{c} = {mark}' for c in values)} "
                                   f"WHERE id = {mark} RETURNING {returning}", [*values.values(), record_id]))
            else:  # nothing of the row changes, but the change is logged: its row as it is
                statements.append((f"SELECT {returning} FROM records WHERE id = {mark}", [record_id]))
        raw = conn.connection.driver_connection
        pipelined = conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg" and self._pipelines()
        rows: dict[str, tuple] = {}
        logged: list[tuple] = []
        cursors = []
        try:
            with raw.pipeline() if pipelined else nullcontext():
                cursor = raw.cursor()
                cursors.append(cursor)
                if audit_values:
                    cursor.executemany(audit_sql, audit_values)
                updated = []
                for statement, params in statements:
                    cursor = raw.cursor()
                    cursors.append(cursor)
                    cursor.execute(statement, params)
                    updated.append(cursor)
                logs = []
                for start in range(0, len(updates), 900):
                    # Many entries a statement (not executemany), so that it can return their numbers.
                    chunk = [record_id for record_id, _ in updates[start:start + 900]]
                    cursor = raw.cursor()
                    cursors.append(cursor)
                    cursor.execute(f"INSERT INTO changes (record_id) VALUES {', '.join([f'({mark})'] * len(chunk))} "
                                   "RETURNING seq, record_id", chunk)
                    logs.append(cursor)
                if last and pipelined:
                    raw.execute("COMMIT", prepare=False)
            # Read after a pipeline's end: its Sync sent every statement and brought every answer
            # back in one round trip (reading inside would first ask for them with a Flush).
            for cursor in updated:
                for row in cursor.fetchall():
                    rows[row[0]] = tuple(row)
            logged = sorted(row for cursor in logs for row in cursor.fetchall())
        finally:
            for cursor in cursors:
                cursor.close()
        # Each change log entry carries the row as this transaction leaves it (a record updated
        # twice: its last version), as changes_with_rows would read it after the commit.
        return [(int(seq), record_id, rows[record_id]) for seq, record_id in logged]

    def _translate_on(self, conn: Connection, exc: Exception) -> Exception:
        """``_translate`` for an error on ``conn``: a ConnectionLostError (and ``conn`` dropped
        from the pool) when the connection itself is gone. Driver cursors bypass SQLAlchemy,
        which would otherwise notice that itself."""
        lost = bool(getattr(exc, "connection_invalidated", False))
        if not lost and not self.is_sqlite:
            try:
                raw = conn.connection.driver_connection
                lost = bool(getattr(raw, "closed", False) or getattr(raw, "broken", False))
            except Exception:
                lost = conn.invalidated
        error = self._translate(exc)
        if not lost:
            return error
        if not conn.invalidated:
            conn.invalidate(exc)
        return ConnectionLostError(str(error))

    def _translate(self, exc: Exception) -> Exception:
        """The engine's error for a database error: a value the database refuses (DataError,
        IntegrityError) is a ValidationError; anything else (locked, read-only, unreachable,
        damaged) a StoreUnavailableError. Raw driver errors (bulk paths) are classified alike."""
        orig = getattr(exc, "orig", None) or exc
        names = {c.__name__ for c in type(orig).__mro__} | {c.__name__ for c in type(exc).__mro__}
        if ("DataError" in names or "IntegrityError" in names) and not getattr(exc, "connection_invalidated", False):
            first = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
            return ValidationError(f"the database refused a value, nothing was written ({first})",
                                   [("value", first)])
        return StoreUnavailableError(self._explain_db_error(exc))

    def _explain_db_error(self, exc: Exception) -> str:
        text_ = str(getattr(exc, "orig", exc)).strip().splitlines()[0] if str(exc) else type(exc).__name__
        lowered = text_.lower()
        if "locked" in lowered or "busy" in lowered:
            hint = "the database is locked by another process; try again in a moment"
        elif "readonly" in lowered or "read-only" in lowered:
            hint = "the database is read-only; writes are not possible"
        elif "unable to open" in lowered or "no such file" in lowered:
            hint = "the database file cannot be opened"
        elif ("connection" in lowered or "server" in lowered or "terminat" in lowered or "resolve" in lowered
              or "translate host" in lowered):
            hint = "the database server is unreachable"
        else:
            hint = "the database refused the operation"
        return f"{hint} ({self.display_url}: {text_})"

    # rows ---------------------------------------------------------------------

    def lock(self, conn: Connection, ids: Sequence[str]) -> dict[str, StoredRow]:
        """Rows of ``ids`` (those that exist), locked for this write transaction."""
        q = select(records.c.id, records.c.doc, records.c.anchor_salience, records.c.anchor_at, records.c.audit_head)
        q = q.where(records.c.id.in_(sorted(set(ids))))
        if not self.is_sqlite:
            q = q.order_by(records.c.id).with_for_update()
        return {r.id: StoredRow(r.id, json.loads(r.doc), r.anchor_salience, r.anchor_at, r.audit_head)
                for r in conn.execute(q)}

    def fetch(self, conn: Connection, ids: Sequence[str]) -> dict[str, StoredRow]:
        out: dict[str, StoredRow] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 900):
            chunk = unique[start:start + 900]
            q = select(records.c.id, records.c.doc, records.c.anchor_salience, records.c.anchor_at, records.c.audit_head)
            for r in conn.execute(q.where(records.c.id.in_(chunk))):
                out[r.id] = StoredRow(r.id, json.loads(r.doc), r.anchor_salience, r.anchor_at, r.audit_head)
        return out

    def records_with_logs(self, conn: Connection, ids: Sequence[str]) -> tuple[dict[str, str], list[tuple]]:
        """The stored JSON text of the records of ``ids`` that exist, and their audit entries as
        (record_id, position, action, actor, timestamp, rationale, extra), for readers that
        validate the JSON text directly (retrieval's page). Each record comes with its entries
        from the same statement, so from one snapshot even outside a transaction (``peek``):
        a write in between cannot pair a record with another version's log. Through the driver,
        as rows_in."""
        unique = list(dict.fromkeys(ids))
        if self.probe is not None:  # psycopg 3 on PostgreSQL
            texts, entries = self._records_with_logs_libpq(conn, unique)
        else:
            texts, entries = self._records_with_logs_cursor(conn, unique)
        # An archived record keeps its entries: only those of records still here are theirs.
        entries = sorted((e for e in entries if e[0] in texts), key=lambda e: (e[0], e[1]))
        return texts, entries

    _RECORDS_WITH_LOGS = (b"SELECT id, -1, doc, NULL, NULL, NULL, NULL FROM records WHERE id = ANY($1::text[]) "
                          b"UNION ALL SELECT record_id, position, action, actor, timestamp, rationale, extra "
                          b"FROM audit_entries WHERE record_id = ANY($1::text[])")

    def _records_with_logs_libpq(self, conn: Connection, ids: list[str]) -> tuple[dict[str, str], list[tuple]]:
        """``records_with_logs`` on PostgreSQL: one prepared statement for any number of ids,
        through libpq (a read by id is mostly this statement; psycopg's cursor doubled it)."""
        raw = conn.connection.driver_connection
        pgconn, encoding = raw.pgconn, raw.info.encoding
        # Cleared with the connection, so a new one prepares again.
        prepared = conn.connection.info.setdefault("membrane_prepared", set())
        result = libpq.execute(pgconn, prepared, b"membrane_records_with_logs", self._RECORDS_WITH_LOGS,
                               [libpq.text_array(ids)])
        texts: dict[str, str] = {}
        entries: list[tuple] = []
        for r in range(result.ntuples):
            row = [None if v is None else v.decode(encoding) for v in (result.get_value(r, c) for c in range(7))]
            if row[1] == "-1":
                texts[row[0]] = row[2]
            else:
                row[1] = int(row[1])
                entries.append(tuple(row))
        return texts, entries

    def _records_with_logs_cursor(self, conn: Connection, unique: list[str]) -> tuple[dict[str, str], list[tuple]]:
        mark = placeholder(conn)
        texts: dict[str, str] = {}
        entries: list[tuple] = []
        with driver_cursor(conn) as cursor:
            for start in range(0, len(unique), 450):
                chunk = unique[start:start + 450]
                marks = ", ".join([mark] * len(chunk))
                cursor.execute(f"SELECT id, -1, doc, NULL, NULL, NULL, NULL FROM records WHERE id IN ({marks}) "
                               "UNION ALL SELECT record_id, position, action, actor, timestamp, rationale, extra "
                               f"FROM audit_entries WHERE record_id IN ({marks})", [*chunk, *chunk])
                for row in cursor.fetchall():
                    if row[1] == -1:
                        texts[row[0]] = row[2]
                    else:
                        entries.append(row)
        return texts, entries

    # ranking vectors (SPEC 9) ------------------------------------------------------

    def vectors_of(self, conn: Connection, ids: Sequence[str], model: str) -> dict[str, Any]:
        """Stored vectors of ``ids`` made by ``model``, as float32 arrays."""
        out: dict[str, Any] = {}
        for start in range(0, len(ids), 900):
            q = select(record_vectors.c.id, record_vectors.c.vector).where(
                record_vectors.c.id.in_(ids[start:start + 900]), record_vectors.c.model == model)
            for rid, blob in conn.execute(q):
                out[rid] = from_blob(blob)
        return out

    def all_vectors(self, conn: Connection, model: str) -> tuple[list[str], Any]:
        """Every stored vector made by ``model``, as (ids, one float32 matrix), in one scan (a
        cold start of a large store: one buffer, not an array per record)."""
        q = select(record_vectors.c.id, record_vectors.c.vector).where(record_vectors.c.model == model)
        rows = conn.execute(q).all()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        width = len(rows[0][1])
        rows = [r for r in rows if len(r[1]) == width]  # a provider's vectors share one width
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=VECTOR_DTYPE).reshape(len(rows), -1)
        return [r[0] for r in rows], matrix.astype(np.float32)

    def vector_chunks(self, conn: Connection, model: str, size: int = 65536) -> Iterator[list[tuple[str, bytes]]]:
        """Every stored (id, vector bytes) made by ``model``, in chunks of plain tuples straight
        from the driver (binary rows, a server-side cursor on PostgreSQL): a cold start of a
        large store reads them in one scan, with no object per row but the tuple."""
        name = str(model).replace("'", "''")
        yield from stream_rows(conn, f"SELECT id, vector FROM record_vectors WHERE model = '{name}'", size,
                               binary=True)

    def entity_names(self, conn: Connection, ids: Sequence[str] | None = None,
                     size: int = 20000) -> Iterator[list[tuple[str, str | None, str | None]]]:
        """(id, canonical name, aliases as JSON text) of the live entity records (of ``ids``, or
        all), in chunks: the database reads the two fields out of each stored document, so
        neither the documents nor a model of each cross to this process (the graph's entity
        roots, ``graph.EntityTerms``)."""
        if self.is_sqlite:
            fields = "json_extract(doc, '$.payload.canonical_name'), json_extract(doc, '$.payload.aliases')"
        else:
            fields = "(doc::json)->'payload'->>'canonical_name', ((doc::json)->'payload'->'aliases')::text"
        statement = f"SELECT id, {fields} FROM records WHERE type = 'entity'"
        if ids is None:
            yield from stream_rows(conn, statement, size)
            return
        for start in range(0, len(ids), 900):
            chunk = list(ids[start:start + 900])
            marks = ", ".join("?" if self.is_sqlite else "%s" for _ in chunk)
            with driver_cursor(conn) as cursor:
                cursor.execute(f"{statement} AND id IN ({marks})", chunk)
                yield [tuple(row) for row in cursor.fetchall()]

    def docs_of(self, conn: Connection, ids: Sequence[str]) -> dict[str, str]:
        """The stored JSON text of the live records of ``ids``."""
        out: dict[str, str] = {}
        for start in range(0, len(ids), 900):
            q = select(records.c.id, records.c.doc).where(records.c.id.in_(ids[start:start + 900]))
            out.update(conn.execute(q).all())
        return out

    def insert_vectors(self, conn: Connection, vectors: list[tuple[str, str, bytes]], replace: bool = False) -> None:
        """(id, model, vector bytes) rows. An import's ids are new (check_and_write made sure,
        archive included), so only ``replace`` deletes what those ids had first."""
        if not vectors:
            return
        if replace:
            ids = [v[0] for v in vectors]
            for start in range(0, len(ids), 900):
                conn.execute(record_vectors.delete().where(record_vectors.c.id.in_(ids[start:start + 900])))
        if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg":
            # COPY in binary: a vector goes as its bytes, not as twice as many hex digits to parse
            statement = "COPY record_vectors (id, model, vector) FROM STDIN (FORMAT BINARY)"
            dbapi = conn.dialect.loaded_dbapi
            try:
                with conn.connection.driver_connection.cursor() as cur, cur.copy(statement) as copy:
                    copy.set_types(["text", "text", "bytea"])
                    write = copy.write_row
                    for row in vectors:
                        write(row)
            except dbapi.Error as exc:
                raise DBAPIError.instance(statement, None, exc, dbapi.Error, dialect=conn.dialect) from exc
            return
        insert_tuples(conn, record_vectors, ("id", "model", "vector"), vectors)

    def save_vectors(self, vectors: dict[str, Any], model: str) -> None:
        """Vectors computed at query time, in a transaction of their own."""
        with self.write() as conn:
            self.insert_vectors(conn, [(rid, model, to_blob(v)) for rid, v in vectors.items()], replace=True)

    def existing_ids(self, conn: Connection, ids: Iterable[str], include_archive: bool = True) -> set[str]:
        unique = list(dict.fromkeys(ids))
        # Not prepared: psycopg 3 prepares a statement run five times on a connection, and
        # PostgreSQL may then keep a generic plan for it; during a bulk import one made while the
        # table was still empty is a sequential scan, kept as the table grows (bench/README.md).
        found = {row[0] for row in rows_in(conn, "records", ("id",), "id", unique, prepare=False)}
        if include_archive:
            found.update(row[0] for row in rows_in(conn, "archive", ("id",), "id", unique, prepare=False))
        return found

    def is_empty(self, conn: Connection) -> bool:
        """No record in the store, live or archived. Through the driver, so it may also be asked
        before a transaction begins (``_direct_pages``) without SQLAlchemy beginning one."""
        with driver_cursor(conn) as cursor:
            for table in ("records", "archive"):
                cursor.execute(f"SELECT 1 FROM {table} LIMIT 1")
                if cursor.fetchall():
                    return False
        return True

    def insert_values(self, conn: Connection, rows: list[tuple]) -> None:
        """``insert_rows`` for rows made by ``record_values`` (tuples in ROW_COLUMNS order)."""
        if rows:
            insert_tuples(conn, records, ROW_COLUMNS, rows)
            insert_tuples(conn, changes, ("record_id",), [(r[0],) for r in rows])

    def insert_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        if rows:
            insert_tuples(conn, records, RECORD_COLUMNS, [tuple(r.get(c, _ROW_DEFAULTS.get(c)) for c in RECORD_COLUMNS)
                                                          for r in rows])
            insert_tuples(conn, changes, ("record_id",), [(r["id"],) for r in rows])

    def update_row(self, conn: Connection, row: dict[str, Any]) -> None:
        values = {k: v for k, v in row.items() if k != "id"}
        conn.execute(records.update().where(records.c.id == row["id"]).values(**values))
        conn.execute(changes.insert().values(record_id=row["id"]))

    def set_audit_head(self, conn: Connection, record_id: str, head: str) -> None:
        conn.execute(records.update().where(records.c.id == record_id).values(audit_head=head))

    def remove_row(self, conn: Connection, record_id: str) -> None:
        conn.execute(records.delete().where(records.c.id == record_id))
        conn.execute(changes.insert().values(record_id=record_id))

    @contextmanager
    def bulk_write(self, rows: int) -> Iterator[Connection]:
        """The write transaction of an import of ``rows`` records: from BULK_ROWS on, written
        straight into an empty SQLite file when it can be (``write(direct=True)``) and with
        ``bulk``'s settings."""
        with self.write(direct=rows >= BULK_ROWS) as conn, self.bulk(conn, rows):
            yield conn

    @contextmanager
    def bulk(self, conn: Connection, rows: int) -> Iterator[None]:
        """Settings for a large write inside ``conn``'s transaction: into an empty store, the
        secondary indexes built once the rows are in (``_indexes_after``); on SQLite a page cache
        big enough that index inserts stop re-reading pages (restored afterwards); on PostgreSQL
        fresh planner statistics (before autovacuum gets to it, a table that grew by a bulk COPY
        is planned as if it were small: seq scans where the audit log's index should be used)."""
        if rows < BULK_ROWS:
            yield
            return
        if not self.is_sqlite:
            with self._indexes_after(conn):
                yield
            for table in ("records", "audit_entries", "changes"):
                conn.exec_driver_sql(f"ANALYZE {table}")
            return
        before = conn.exec_driver_sql("PRAGMA cache_size").scalar()
        low, high = BULK_CACHE_KIB
        conn.exec_driver_sql(f"PRAGMA cache_size = {-min(high, max(low, 2 * rows))}")  # negative: KiB
        try:
            with self._indexes_after(conn):
                yield
        finally:
            conn.exec_driver_sql(f"PRAGMA cache_size = {int(before)}")

    @contextmanager
    def _indexes_after(self, conn: Connection) -> Iterator[None]:
        """For a bulk import into an empty store: the secondary indexes of records and audit
        entries (not the keys, which refuse duplicates) dropped for the length of the import and
        built again, each with one sort, before it commits. Kept current row by row they cost
        about as much as the inserts themselves: on PostgreSQL the server's CPU, on SQLite the
        writing process's (bench/README.md). All in the import's transaction: a failed import
        rolls the drop back with the rest. On PostgreSQL readers of the store wait for the import
        (dropping an index locks its table); an empty store has nothing to read. On SQLite in WAL
        mode they read the store as it was."""
        if not self.is_empty(conn):
            yield
            return
        indexes = sorted((*records.indexes, *audit_entries.indexes), key=lambda index: index.name)
        for index in indexes:
            index.drop(conn)
        if self.is_sqlite:
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {SQLITE_SCALAR_INDEX_NAME}")
        yield
        if not self.is_sqlite:
            conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '256MB'")  # sorts in memory
        for index in indexes:
            index.create(conn)
        if self.is_sqlite:
            conn.exec_driver_sql(SQLITE_SCALAR_INDEX)

    def after_bulk(self, rows: int) -> None:
        """After a large write committed: on SQLite, the write-ahead log copied into the
        database and truncated (the automatic checkpoint copies it but leaves the file at its
        largest, the size of the whole import)."""
        if rows >= BULK_ROWS and self.is_sqlite:
            with self.engine.connect() as conn:  # the driver's own: no BEGIN around the pragma
                conn.connection.driver_connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").close()

    # archive ------------------------------------------------------------------

    def archive_doc(self, conn: Connection, record_id: str, doc: dict[str, Any], audit_head: str | None, when: float) -> None:
        conn.execute(archive.delete().where(archive.c.id == record_id))
        conn.execute(archive.insert().values(id=record_id, doc=archive_text(doc),
                                             audit_head=audit_head, archived_at=when))

    def archive_rows(self, conn: Connection, items: list[tuple[str, dict[str, Any] | str, str | None]], when: float) -> None:
        """Move records to the archive in bulk (prune, delete): ``items`` of (id, full JSON doc or
        its text as ``archive_text`` makes it, audit head). Their rows leave ``records`` (logged
        in ``changes``)."""
        ids = [item[0] for item in items]
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            conn.execute(records.delete().where(records.c.id.in_(chunk)))
            conn.execute(archive.delete().where(archive.c.id.in_(chunk)))
        if items:
            conn.execute(changes.insert(), [{"record_id": rid} for rid in ids])
            conn.execute(archive.insert(), [
                {"id": rid, "doc": doc if isinstance(doc, str) else archive_text(doc), "audit_head": head,
                 "archived_at": when} for rid, doc, head in items])

    def archived(self, conn: Connection, record_id: str, lock: bool = False) -> tuple[dict[str, Any], str | None] | None:
        q = select(archive.c.doc, archive.c.audit_head).where(archive.c.id == record_id)
        if lock and not self.is_sqlite:
            q = q.with_for_update()
        row = conn.execute(q).first()
        return (json.loads(row.doc), row.audit_head) if row else None

    def unarchive(self, conn: Connection, record_id: str) -> None:
        conn.execute(archive.delete().where(archive.c.id == record_id))

    def archived_ids(self, conn: Connection) -> list[str]:
        return list(conn.execute(select(archive.c.id).order_by(archive.c.archived_at.desc())).scalars())

    # change log -------------------------------------------------------------------

    def change_counter(self, conn: Connection) -> int:
        return int(conn.execute(select(func.coalesce(func.max(changes.c.seq), 0))).scalar())

    def snapshot_identity(self, conn: Connection) -> tuple[str | None, bytes | None]:
        """(the store's id, the key that signs its persisted column snapshots), from ``meta``."""
        found = dict(conn.execute(select(meta.c.key, meta.c.value)
                                  .where(meta.c.key.in_(("store_id", SNAPSHOT_KEY)))).all())
        key = found.get(SNAPSHOT_KEY)
        return found.get("store_id"), bytes.fromhex(key) if key else None

    def change_at(self, conn: Connection, seq: int) -> str | None:
        """The record id of change ``seq`` (None for 0 or a number the log does not hold)."""
        if seq <= 0:
            return None
        return conn.execute(select(changes.c.record_id).where(changes.c.seq == int(seq))).scalar()

    def changed_since(self, conn: Connection, seq: int) -> set[str]:
        return set(conn.execute(select(changes.c.record_id).where(changes.c.seq > seq)).scalars())

    def changes_with_rows(self, conn: Connection, seq: int, limit: int) -> list[tuple[int, str, tuple | None]] | None:
        """Every change after ``seq``, in order, as (seq, record id, the record's SCALAR_COLUMNS
        now, None when it is no longer in the store), through the driver: what a column cache at
        ``seq`` reads before each query (usually nothing: one indexed lookup).
        None when there are more than ``limit`` changes (the cache reloads instead).

        The newest sequence number is read first, by a statement without parameters, and the
        changes with their rows only when there are any: PostgreSQL plans that second statement
        again at each run (its estimate for "after N" makes a generic plan look dear), which on
        every check would cost more than the extra round trip does after a change."""
        mark = placeholder(conn)
        with driver_cursor(conn) as cursor:
            cursor.execute("SELECT seq FROM changes ORDER BY seq DESC LIMIT 1")  # faster than max(seq)
            newest = cursor.fetchone()
            if newest is None or newest[0] <= seq:
                return []
            cursor.execute(f"SELECT c.seq, c.record_id, {_CHANGED_ROW_COLUMNS} FROM changes c "
                           f"LEFT JOIN records r ON r.id = c.record_id WHERE c.seq > {mark} ORDER BY c.seq "
                           f"LIMIT {mark}", (int(seq), int(limit) + 1))
            rows = cursor.fetchall()
        if len(rows) > limit:
            return None
        return [(int(row[0]), row[1], None if row[2] is None else tuple(row[2:])) for row in rows]

    def audit_actions_after(self, conn: Connection, seq: int) -> list[tuple[str, int, int]]:
        """(action, how many entries, the newest one's seq) of the audit entries after ``seq``,
        through the driver (see ``metrics.ActionCounts``)."""
        mark = placeholder(conn)
        with driver_cursor(conn) as cursor:
            if seq <= 0:
                # The first count reads the action index alone (an index-only scan on PostgreSQL,
                # a covering one on SQLite): asked for each group's newest seq, both read every
                # row instead. Any newest seq of the same statement will do: it counts everything
                # up to there.
                cursor.execute("SELECT action, count(*), (SELECT max(seq) FROM audit_entries) FROM audit_entries "
                               "GROUP BY action")
            else:
                # After it, SQLite must read the new entries by their key: left to itself it scans
                # the whole action index for the grouping; ``+action`` is not the indexed column
                # to it.
                group = "+action" if self.is_sqlite else "action"
                cursor.execute(f"SELECT action, count(*), max(seq) FROM audit_entries WHERE seq > {mark} "
                               f"GROUP BY {group}", (int(seq),))
            return [(row[0], int(row[1]), int(row[2])) for row in cursor.fetchall()]

    def scalar_rows(self, conn: Connection, ids: Sequence[str]) -> list[tuple]:
        """SCALAR_COLUMNS of the records of ``ids`` that exist."""
        return rows_in(conn, "records", SCALAR_SELECT, "id", ids)

    def scalar_chunks(self, conn: Connection, size: int = 65536) -> Iterator[list[tuple]]:
        """Every record's SCALAR_COLUMNS, in chunks of plain tuples, straight from the driver
        (no per-row SQLAlchemy processing; a server-side cursor on PostgreSQL, so a large store
        streams instead of arriving as one result). Booleans may come as 0/1."""
        # Binary rows: the driver reads a float8 as 8 bytes instead of parsing its text, half
        # the client's time for a million rows.
        yield from stream_rows(conn, f"SELECT {', '.join(SCALAR_SELECT)} FROM records", size, binary=True)

    def count(self, conn: Connection) -> int:
        return int(conn.execute(select(func.count()).select_from(records)).scalar())

    def dispose(self) -> None:
        if self.probe is not None:
            self.probe.close()
        self.engine.dispose()


def sql(statement: str):
    """Literal SQL for the few places (metrics, pages of the audit log) that read aggregates."""
    return text(statement)
