"""Curation, SPEC 6: reinforce, penalize, retract, contest, supersede, fork, merge, pin, unpin,
reclassify, delete, restore and prune, each one write transaction that appends audit entries.

Every operation is written once, as a *planner*: a function that reads the store (through a
``PlanView``), checks its arguments and rules in SPEC order (arguments, record exists, episodic
immutability, the operation's own rules) and returns a ``CurationPlan`` -- the records as they
will be after the change plus the audit entries that will be written -- without writing
anything. ``preview_within(ctx, None, op, ...)`` runs the planner in a read transaction and
returns the plan; the operation (``curate_within``) runs the same planner inside one
``Store.write()`` transaction (on rows read after the write lock is held, so concurrent
operators never lose an update) and then executes the plan. Preview and apply therefore cannot diverge.
"""

from __future__ import annotations

import inspect
import json
import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from membrane_engine.storage import audit_log as audit
from membrane_engine.context import EngineContext
from membrane_engine.rules import chain as audit_chain
from membrane_engine.storage.audit_log import row_digest
from membrane_engine.rules import history
from membrane_engine.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    EpisodicImmutableError,
    NotFoundError,
    ValidationError,
)
from membrane_engine.rules.ranking import record_parts
from membrane_engine.rules.salience import PRUNE_THRESHOLD, anchor_of, columns_of, salience_at, salience_of
from membrane_engine.model.records import (
    MAX_ACTOR_LENGTH,
    MAX_RATIONALE_LENGTH,
    MAX_REF_LENGTH,
    MAX_SCOPE_LENGTH,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    UTC,
    AuditAction,
    AuditEntry,
    DeletionPolicy,
    MemoryRecord,
    MemoryType,
    ProvenanceKind,
    ProvenanceSource,
    Relation,
    RevisionState,
    RevisionStatus,
    SemanticPayload,
    Sensitivity,
    as_utc,
    check_flag,
    check_id,
    check_text,
    format_time,
    to_epoch,
    validate_record,
)
from membrane_engine.storage.store import Store, StoreConnection, StoredRow, archive_text, record_row
from membrane_engine.transfer.imports import vector_rows
from membrane_engine.rules.trust import TrustContext, Verdict, as_trust, verdict_as_read

AUTO_PRUNE_CODE = 0  # columns.POLICY_CODES["auto_prune"]


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class PlannedEntry:
    """An audit entry an operation writes: Membrane's entry plus the record it belongs to and
    the before/after values (``details``, hashed into the chain with the rest)."""

    record_id: str
    action: AuditAction
    actor: str
    timestamp: datetime
    rationale: str
    details: dict[str, Any] | None = None

    @property
    def entry(self) -> AuditEntry:
        return AuditEntry(action=self.action, actor=self.actor, timestamp=self.timestamp, rationale=self.rationale)


@dataclass(frozen=True)
class RecordChange:
    """What an operation does to one record.

    ``kind``: ``update`` (the row is rewritten), ``create`` (a new record), ``audit`` (only an
    audit entry is appended: a fork's source), ``archive`` (moved to the archive by delete or
    prune) or ``restore`` (brought back from it). ``before`` is the record as a read returns it
    now (None for create and restore); ``after`` as a read will return it after the change
    (``salience = S(operation time)``). Live records keep their audit log in the audit table, so
    ``after.audit_log`` is empty for them; for ``archive`` it is the full log that is archived
    with the record, ending with the ``delete`` entry. ``anchor`` is (S_a, a) as stored.
    """

    kind: str
    record_id: str
    before: MemoryRecord | None
    after: MemoryRecord
    anchor: tuple[float, float]
    stored_doc: dict[str, Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CurationPlan:
    """An operation's effect: returned by ``Membrane.preview`` (nothing written) and by the
    operation itself (what was written)."""

    op: str
    at: datetime
    changes: tuple[RecordChange, ...]
    audit: tuple[PlannedEntry, ...]
    result: Any = None  # prune: the ids pruned (or that would be)

    @property
    def records(self) -> list[MemoryRecord]:
        """Every touched record as it is after the change."""
        return [c.after for c in self.changes]

    @property
    def ids(self) -> list[str]:
        return [c.record_id for c in self.changes]

    def change(self, record_id: str) -> RecordChange:
        for c in self.changes:
            if c.record_id == record_id:
                return c
        raise KeyError(record_id)

    def record(self, record_id: str) -> MemoryRecord:
        return self.change(record_id).after

    def entries_for(self, record_id: str) -> list[PlannedEntry]:
        return [e for e in self.audit if e.record_id == record_id]

    @property
    def created(self) -> MemoryRecord | None:
        """The record supersede, fork or merge created, as stored (its id generated when it
        was given as ""): what Membrane's Supersede, Fork and Merge return."""
        return next((c.after for c in self.changes if c.kind == "create"), None)


class PlanView:
    """What a planner may read. When applying, the transaction already holds the store's write
    lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL advisory lock) and rows are also locked
    ``FOR UPDATE`` on PostgreSQL; a preview reads without locking. Rows read when applying are
    kept with every stored column and their audit chain end (``stored``), so an operation that
    only rewrites them is written without reading anything again (``execute``)."""

    def __init__(self, store: Store, conn: StoreConnection, locking: bool, snapshot: Any = None):
        self.store = store
        self.conn = conn
        self.locking = locking
        self.snapshot = snapshot
        self.stored: dict[str, tuple[dict[str, Any], tuple[int, str] | None]] = {}

    def rows(self, ids: Iterable[str]) -> dict[str, StoredRow]:
        unique = list(dict.fromkeys(ids))
        if not self.locking:
            return self.store.fetch(self.conn, unique)
        found = self.store.rows_for_update(self.conn, unique)
        self.stored.update(found)
        return {rid: StoredRow(rid, json.loads(cols["doc"]), cols["anchor_salience"], cols["anchor_at"],
                               cols["audit_head"]) for rid, (cols, _) in found.items()}

    def existing(self, ids: Iterable[str], include_archive: bool = True) -> set[str]:
        return self.store.existing_ids(self.conn, ids, include_archive=include_archive)

    def archived(self, record_id: str) -> tuple[dict[str, Any], str | None] | None:
        return self.store.archived(self.conn, record_id, lock=self.locking)

    def logs(self, ids: list[str]) -> dict[str, list[AuditEntry]]:
        return audit.logs_of(self.conn, ids)

    def changed_since(self, seq: int) -> set[str]:
        return self.store.changed_since(self.conn, seq)


class _Within(PlanView):
    """A ``PlanView`` through an operator's clearance (SPEC 10, "One door"): a record it does not
    see in full reads as absent to every rule of a planner (so no refusal, relation or count
    tells anything about it), except the record the operation names, which is refused before
    the planner runs (``gate_write``). ``quiet``: records it sees redacted read as absent too
    (prune, which names no record, acts only on what the clearance sees in full)."""

    def __init__(self, store: Store, conn: StoreConnection, locking: bool, snapshot: Any, clearance: TrustContext,
                 quiet: bool = False):
        super().__init__(store, conn, locking, snapshot)
        self.clearance = clearance
        self.quiet = quiet

    def _full(self, doc: dict[str, Any] | None) -> bool:
        return doc is not None and verdict_as_read(doc.get("sensitivity"), str(doc.get("scope") or ""),
                                                   self.clearance) is Verdict.FULL

    def rows(self, ids: Iterable[str]) -> dict[str, StoredRow]:
        found = super().rows(ids)
        out = {}
        for rid, row in found.items():
            if self._full(row.doc):
                out[rid] = row
            elif not self.quiet:
                gate_write(row.doc, rid, self.clearance)  # hidden: absent; redacted: refused
        return out

    def existing(self, ids: Iterable[str], include_archive: bool = True) -> set[str]:
        found = super().existing(ids, include_archive)
        if include_archive or not found:
            return found  # a new record's id is checked against every id, seen or not
        rows = self.store.fetch(self.conn, sorted(found))
        return {rid for rid, row in rows.items() if self._full(row.doc)}

    def archived(self, record_id: str) -> tuple[dict[str, Any], str | None] | None:
        found = super().archived(record_id)
        if found is None:
            return None
        if verdict_as_read(found[0].get("sensitivity"), str(found[0].get("scope") or ""),
                           self.clearance) is Verdict.HIDDEN:
            return None
        gate_write(found[0], record_id, self.clearance)
        return found


def gate_write(doc: dict[str, Any] | None, rid: str, clearance: TrustContext | None) -> None:
    """May an operator with ``clearance`` change the record stored as ``doc``? Decided on its
    labels as stored, before any rule of the operation, so a refusal says nothing about a record
    beyond the clearance: one it does not see (or an id not in the store) is "not found", the
    two alike; one it sees redacted is AccessDeniedError (a change shows and alters what a
    redacted view withholds)."""
    if doc is None:
        raise NotFoundError(rid)
    if clearance is None:
        return
    verdict = verdict_as_read(doc.get("sensitivity"), str(doc.get("scope") or ""), clearance)
    if verdict is Verdict.HIDDEN:
        raise NotFoundError(rid)
    if verdict is Verdict.REDACTED:
        raise AccessDeniedError(f"record {rid!r} is beyond your clearance (you see it redacted); it cannot be "
                                "changed from here")


def _created_within(plan: "CurationPlan", clearance: TrustContext) -> None:
    """A record an operator creates (supersede, fork, merge) must be one their clearance sees in
    full: nobody writes into a scope or level they cannot read."""
    for change in plan.changes:
        if change.kind == "create" and verdict_as_read(change.after.sensitivity, change.after.scope,
                                                       clearance) is not Verdict.FULL:
            raise AccessDeniedError(f"the new record {change.after.id!r} ({change.after.sensitivity.value}"
                                    f"{', scope ' + repr(change.after.scope) if change.after.scope else ''}) "
                                    "would be beyond your clearance; nothing was written")


class _Builder:
    def __init__(self, op: str, now: datetime):
        self.op = op
        self.now = now
        self.changes: list[RecordChange] = []
        self.entries: list[PlannedEntry] = []

    def entry(self, record_id: str, action: AuditAction, actor: str, rationale: str,
              details: dict[str, Any] | None = None) -> PlannedEntry:
        e = PlannedEntry(record_id, action, actor, self.now, rationale, details or None)
        self.entries.append(e)
        return e

    def brought(self, record: MemoryRecord) -> None:
        """The audit entries a new record came with, kept as given (Membrane appends its create
        entry to the record's own AuditLog), so they are chained before the operation's entry.
        The live record keeps its log in the audit table only."""
        for e in record.audit_log:
            self.entries.append(PlannedEntry(record.id, e.action, e.actor, e.timestamp, e.rationale))
        record.audit_log = []

    def change(self, kind: str, record_id: str, before: MemoryRecord | None, after: MemoryRecord,
               anchor: tuple[float, float], stored_doc: dict[str, Any] | None = None) -> None:
        self.changes.append(RecordChange(kind, record_id, before, after, anchor, stored_doc))

    def build(self, result: Any = None) -> CurationPlan:
        return CurationPlan(self.op, self.now, tuple(self.changes), tuple(self.entries), result)


# --------------------------------------------------------------------------- checks and helpers


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _non_empty(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        problem = "empty" if isinstance(value, str) else "not a string"
        raise ValidationError(f"{name} must be a non-empty string (got {_shown(value)})", [(name, problem)])
    return value


def _text(value: Any, name: str, limit: int | None = None) -> str:
    """A non-empty string argument that the store keeps (or looks up by): no NUL character and
    at most ``limit`` characters (schema.check_text, the rule imports follow too)."""
    return check_text(_non_empty(value, name), name, limit)


def _id(value: Any, name: str = "id") -> str:
    """A record id argument: a non-empty string without NUL (schema.check_id)."""
    return check_id(_non_empty(value, name), name)


def checked_who(actor: Any, rationale: Any) -> tuple[str, str]:
    """The actor (a column of MAX_ACTOR_LENGTH) and rationale (text) every entry names."""
    return _text(actor, "actor", MAX_ACTOR_LENGTH), _text(rationale, "rationale", MAX_RATIONALE_LENGTH)


def _number(value: Any, name: str, non_negative: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(f"{name} must be a number (got {value!r})", [(name, "not a number")])
    number = float(value)
    if not math.isfinite(number):
        raise ValidationError(f"{name} must be finite (got {value!r})", [(name, "not finite")])
    if non_negative and number < 0:
        raise ValidationError(f"{name} must be >= 0 (got {value!r})", [(name, "negative")])
    return number


def _when(value: Any, name: str) -> datetime:
    if not isinstance(value, datetime):
        raise ValidationError(f"{name} must be a datetime (got {value!r})", [(name, "not a datetime")])
    return as_utc(value)


def _parse(row: StoredRow) -> MemoryRecord:
    doc = dict(row.doc)
    doc["audit_log"] = []
    return MemoryRecord.model_validate(doc)


def _load(v: PlanView, ids: list[str]) -> tuple[dict[str, StoredRow], dict[str, MemoryRecord]]:
    """Rows and records of ``ids``; NotFoundError for the first missing one."""
    rows = v.rows(ids)
    for rid in ids:
        if rid not in rows:
            raise NotFoundError(rid)
    return rows, {rid: _parse(rows[rid]) for rid in ids}


def _stored_anchor(row: StoredRow) -> tuple[float, float]:
    return float(row.anchor_salience), float(row.anchor_at)


def _now_view(record: MemoryRecord, anchor: tuple[float, float], now: datetime) -> MemoryRecord:
    """The record as a read at ``now`` returns it: salience = S(now)."""
    record.salience = salience_of(record, now, anchor)
    return record


def _clone(record: MemoryRecord) -> MemoryRecord:
    """A deep copy (a dump and re-validation in pydantic-core: much faster than model_copy)."""
    return MemoryRecord.model_validate(record.model_dump(by_alias=True))


def _before(record: MemoryRecord, row: StoredRow, now: datetime) -> MemoryRecord:
    return _now_view(_clone(record), _stored_anchor(row), now)


def _set_anchor(record: MemoryRecord, s_a: float, a: float) -> tuple[float, float]:
    record.lifecycle.anchor_salience = s_a
    record.lifecycle.anchor_at = datetime.fromtimestamp(a, UTC)
    return s_a, a


def _no_episodic(records: Iterable[MemoryRecord], op: str) -> None:
    for r in records:
        if r.type == MemoryType.EPISODIC:
            raise EpisodicImmutableError(f"record {r.id!r} is episodic; episodic records cannot be {op}")


def _status(record: MemoryRecord) -> str | None:
    if isinstance(record.payload, SemanticPayload):
        revision = record.payload.revision
        return (revision.status or RevisionStatus.ACTIVE).value if revision else RevisionStatus.ACTIVE.value
    return None


def _revision(record: MemoryRecord) -> RevisionState | None:
    """The semantic revision state (created when absent); None for other types."""
    if not isinstance(record.payload, SemanticPayload):
        return None
    if record.payload.revision is None:
        record.payload.revision = RevisionState()
    return record.payload.revision


def _changed(before: Any, after: Any) -> dict[str, Any]:
    return {"before": before, "after": after}


def _update(b: _Builder, row: StoredRow, record: MemoryRecord, after: MemoryRecord,
            new_salience: float | None = None) -> RecordChange:
    """An ``update`` change: ``after`` gets updated_at = now and, with ``new_salience``, a new
    anchor (new_salience, now); else it keeps the stored anchor. ``record`` (the record as
    stored, which the planner no longer uses) becomes the change's ``before``."""
    after.updated_at = b.now
    if new_salience is None:
        anchor = _set_anchor(after, *_stored_anchor(row))
    else:
        anchor = _set_anchor(after, float(new_salience), to_epoch(b.now))
    _now_view(after, anchor, b.now)
    b.change("update", row.id, _now_view(record, _stored_anchor(row), b.now), after, anchor)  # record: as read
    return b.changes[-1]


def _retracted(b: _Builder, row: StoredRow, record: MemoryRecord, superseded_by: str | None = None
               ) -> tuple[MemoryRecord, dict[str, Any]]:
    """The record retracted: salience 0 (anchored now by the caller), semantic status retracted
    and, with ``superseded_by``, the semantic ``revision.superseded_by``."""
    s_now = salience_of(record, b.now, _stored_anchor(row))
    after = _clone(record)
    details: dict[str, Any] = {"salience": _changed(s_now, 0.0)}
    revision = _revision(after)
    if revision is not None:
        details["status"] = _changed(_status(record), RevisionStatus.RETRACTED.value)
        revision.status = RevisionStatus.RETRACTED
        if superseded_by is not None:
            revision.superseded_by = superseded_by
    return after, details


def _new_record(data: Any, name: str, now: datetime) -> MemoryRecord:
    """A record given to supersede / fork / merge, validated; created_at defaults to the
    operation time, updated_at is it; the anchor is set by the caller. An id that is "" (or
    absent: Go's unset string) is generated, a UUID v4, as Membrane does; the audit entries it
    brings are kept (``_Builder.brought``)."""
    if isinstance(data, MemoryRecord):
        given_created = "created_at" in data.model_fields_set
        data = data.model_dump(mode="json", by_alias=True)
    elif isinstance(data, dict):
        given_created = data.get("created_at") is not None
    else:
        raise ValidationError(f"{name} must be a record (a dict in Membrane's JSON shape or a MemoryRecord), "
                              f"got {type(data).__name__}", [(name, "not a record")])
    if data.get("id", "") == "":
        data = {**data, "id": str(uuid.uuid4())}
    record = validate_record(data, where=f"{name}: ")
    if record.redacted:
        raise ValidationError(f"{name}: a redacted view cannot be stored (it has no payload)", [(f"{name}.redacted", "true")])
    if not given_created:
        record.created_at = now
    record.updated_at = now
    return record


def _check_new(v: PlanView, record: MemoryRecord, name: str, automatic_targets: set[str]) -> None:
    """Own rules for a new record: its id is free (store and archive) and its relations point
    at records in the store."""
    if v.existing([record.id]):
        raise AlreadyExistsError(record.id)
    targets = {rel.target_id for rel in record.relations} - automatic_targets
    found = v.existing(targets, include_archive=False) if targets else set()
    for k, rel in enumerate(record.relations):
        if rel.target_id not in automatic_targets and rel.target_id not in found:
            loc = f"{name}.relations.{k}.target_id"
            raise ValidationError(f"{loc}: target {rel.target_id!r} is not in the store", [(loc, "unknown target")])


def _ensure_evidence(record: MemoryRecord, name: str, op: str) -> None:
    """Membrane's ensureEvidence (supersede, fork and merge alike): a semantic new record needs
    evidence or a provenance source of its own, checked on the record as given."""
    if record.type == MemoryType.SEMANTIC and not record.payload.evidence and not record.provenance.sources:
        raise ValidationError(f"{name}: a semantic record that {op} needs evidence or a provenance source of its own",
                              [(f"{name}.payload.evidence", "empty, and no provenance sources")])


def _create(b: _Builder, record: MemoryRecord) -> None:
    anchor = _set_anchor(record, float(record.salience), to_epoch(b.now))
    _now_view(record, anchor, b.now)
    b.change("create", record.id, None, record, anchor)


def _archive(b: _Builder, row: StoredRow, record: MemoryRecord, log: list[AuditEntry], entry: PlannedEntry) -> None:
    after = _before(record, row, b.now)
    after.audit_log = list(log) + [entry.entry]
    b.change("archive", row.id, _before(record, row, b.now), after, _stored_anchor(row), stored_doc=row.doc)


# --------------------------------------------------------------------------- planners


def plan_reinforce(v: PlanView, now: datetime, id: str, actor: str, rationale: str, gain: float | None = None) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    if gain is not None:
        gain = _number(gain, "gain", non_negative=True)
    rows, recs = _load(v, [rid])
    row, record = rows[rid], recs[rid]
    g = record.lifecycle.decay.reinforcement_gain if gain is None else gain
    s_now = salience_of(record, now, _stored_anchor(row))
    s_new = max(s_now, min(s_now + g, 1.0))
    b = _Builder("reinforce", now)
    after = _clone(record)
    after.lifecycle.last_reinforced_at = now
    _update(b, row, record, after, s_new)
    b.entry(rid, AuditAction.REINFORCE, actor, rationale, {"salience": _changed(s_now, s_new), "gain": g})
    return b.build()


def plan_penalize(v: PlanView, now: datetime, id: str, amount: float, actor: str, rationale: str) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    amount = _number(amount, "amount", non_negative=True)
    rows, recs = _load(v, [rid])
    row, record = rows[rid], recs[rid]
    s_now = salience_of(record, now, _stored_anchor(row))
    s_new = max(s_now - amount, min(s_now, record.lifecycle.decay.min_salience))
    b = _Builder("penalize", now)
    _update(b, row, record, _clone(record), s_new)
    b.entry(rid, AuditAction.DECAY, actor, f"penalty: {rationale}",
            {"salience": _changed(s_now, s_new), "amount": amount})
    return b.build()


def plan_retract(v: PlanView, now: datetime, id: str, actor: str, rationale: str) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    rows, recs = _load(v, [rid])
    _no_episodic(recs.values(), "retracted")
    b = _Builder("retract", now)
    after, details = _retracted(b, rows[rid], recs[rid])
    _update(b, rows[rid], recs[rid], after, 0.0)
    b.entry(rid, AuditAction.DELETE, actor, f"{audit_chain.RETRACT_MARK} {rationale}", details)
    return b.build()


def plan_contest(v: PlanView, now: datetime, id: str, contesting_ref: str, actor: str, rationale: str) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    # "" contests without naming a contender (Membrane allows it); any other ref is a string
    # without NUL, as it is looked up as a record id.
    ref = "" if contesting_ref == "" else _text(contesting_ref, "contesting_ref", MAX_REF_LENGTH)
    rows, recs = _load(v, [rid])
    _no_episodic(recs.values(), "contested")
    row, record = rows[rid], recs[rid]
    if ref == rid:
        raise ValidationError("a record cannot contest itself", [("contesting_ref", "same as id")])
    if _status(record) == RevisionStatus.RETRACTED.value:
        raise ValidationError(f"record {rid!r} is retracted; contesting it would revive it",
                              [("id", "retracted")])
    # An empty ref contests without naming a contender: no relation (as Membrane).
    is_record = bool(ref) and bool(v.existing([ref], include_archive=False))
    after = _clone(record)
    details: dict[str, Any] = {"contesting_ref": ref, "ref_is_record": is_record}
    revision = _revision(after)
    if revision is not None:
        details["status"] = _changed(_status(record), RevisionStatus.CONTESTED.value)
        revision.status = RevisionStatus.CONTESTED
    if is_record and not any(r.predicate == "contested_by" and r.target_id == ref for r in after.relations):
        after.relations.append(Relation(predicate="contested_by", target_id=ref, weight=1.0, created_at=now))
        details["relation"] = {"predicate": "contested_by", "target_id": ref}
    b = _Builder("contest", now)
    _update(b, row, record, after)
    b.entry(rid, AuditAction.REVISE, actor, f"contested by {ref}: {rationale}" if ref else f"contested: {rationale}",
            details)
    return b.build()


def plan_supersede(v: PlanView, now: datetime, old_id: str, new_record: Any, actor: str, rationale: str) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    old = _id(old_id, "old_id")
    new = _new_record(new_record, "new_record", now)
    rows, recs = _load(v, [old])
    _no_episodic(recs.values(), "superseded")
    _check_new(v, new, "new_record", {old})
    _ensure_evidence(new, "new_record", "supersedes another")
    b = _Builder("supersede", now)
    after, details = _retracted(b, rows[old], recs[old], superseded_by=new.id)
    details["superseded_by"] = new.id
    _update(b, rows[old], recs[old], after, 0.0)
    new.provenance.sources.append(ProvenanceSource(kind=ProvenanceKind.EVENT, ref=old, created_by=actor, timestamp=now))
    new.relations.append(Relation(predicate="supersedes", target_id=old, weight=1.0, created_at=now))
    if isinstance(new.payload, SemanticPayload):
        new.payload.revision = RevisionState(supersedes=old, superseded_by=None, status=RevisionStatus.ACTIVE)
    _create(b, new)
    b.entry(old, AuditAction.REVISE, actor, f"superseded by {new.id}: {rationale}", details)
    b.brought(new)
    b.entry(new.id, AuditAction.CREATE, actor, f"supersedes {old}: {rationale}",
            {"supersedes": old, "salience": new.lifecycle.anchor_salience})
    return b.build()


def plan_fork(v: PlanView, now: datetime, source_id: str, forked_record: Any, actor: str, rationale: str) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    src = _id(source_id, "source_id")
    new = _new_record(forked_record, "forked_record", now)
    rows, recs = _load(v, [src])
    _no_episodic(recs.values(), "forked")
    _check_new(v, new, "forked_record", {src})
    _ensure_evidence(new, "forked_record", "forks another")
    b = _Builder("fork", now)
    unchanged = _before(recs[src], rows[src], now)
    b.change("audit", src, _before(recs[src], rows[src], now), unchanged, _stored_anchor(rows[src]))
    new.relations.append(Relation(predicate="derived_from", target_id=src, weight=1.0, created_at=now))
    _create(b, new)
    b.entry(src, AuditAction.FORK, actor, f"forked into {new.id}: {rationale}", {"forked": new.id})
    b.brought(new)
    b.entry(new.id, AuditAction.CREATE, actor, f"forked from {src}: {rationale}",
            {"derived_from": src, "salience": new.lifecycle.anchor_salience})
    return b.build()


def plan_merge(v: PlanView, now: datetime, ids: Any, merged_record: Any, actor: str, rationale: str) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise ValidationError("ids must be a list of record ids", [("ids", "not a list")])
    sources = list(dict.fromkeys(_id(x, "ids") for x in ids))
    if not sources:
        raise ValidationError("ids must not be empty", [("ids", "empty")])
    new = _new_record(merged_record, "merged_record", now)
    rows, recs = _load(v, sources)
    _no_episodic((recs[s] for s in sources), "merged")
    _check_new(v, new, "merged_record", set(sources))
    _ensure_evidence(new, "merged_record", "merges others")
    b = _Builder("merge", now)
    for s in sources:
        after, details = _retracted(b, rows[s], recs[s])
        details["merged_into"] = new.id
        _update(b, rows[s], recs[s], after, 0.0)
        b.entry(s, AuditAction.MERGE, actor, f"merged into {new.id}: {rationale}", details)
    for s in sources:
        new.relations.append(Relation(predicate="derived_from", target_id=s, weight=1.0, created_at=now))
    _create(b, new)
    b.brought(new)
    b.entry(new.id, AuditAction.CREATE, actor, f"merged from {', '.join(sources)}: {rationale}",
            {"derived_from": sources, "salience": new.lifecycle.anchor_salience})
    return b.build()


def _plan_pin(op: str, pinned: bool, v: PlanView, now: datetime, id: str, actor: str, rationale: str) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    rows, recs = _load(v, [rid])
    row, record = rows[rid], recs[rid]
    s_now = salience_of(record, now, _stored_anchor(row))
    after = _clone(record)
    after.lifecycle.pinned = pinned
    b = _Builder(op, now)
    _update(b, row, record, after, s_now)
    b.entry(rid, AuditAction.REVISE, actor, f"{op}ned at salience {s_now:.6g}: {rationale}",
            {"pinned": _changed(record.lifecycle.pinned, pinned), "salience": _changed(s_now, s_now)})
    return b.build()


def plan_pin(v: PlanView, now: datetime, id: str, actor: str, rationale: str) -> CurationPlan:
    return _plan_pin("pin", True, v, now, id, actor, rationale)


def plan_unpin(v: PlanView, now: datetime, id: str, actor: str, rationale: str) -> CurationPlan:
    return _plan_pin("unpin", False, v, now, id, actor, rationale)


def plan_reclassify(v: PlanView, now: datetime, id: str, actor: str, rationale: str, sensitivity: Any = None,
                    scope: str | None = None, tags: list[str] | None = None) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    if sensitivity is None and scope is None and tags is None:
        raise ValidationError("reclassify needs at least one of sensitivity, scope, tags",
                              [("sensitivity", "nothing to change")])
    if sensitivity is not None:
        try:
            sensitivity = Sensitivity(sensitivity)
        except ValueError:
            raise ValidationError(f"sensitivity: unknown value {sensitivity!r} (one of "
                                  f"{', '.join(s.value for s in Sensitivity)})", [("sensitivity", "unknown value")]) from None
    if scope is not None:
        if not isinstance(scope, str):
            raise ValidationError(f"scope must be a string (got {_shown(scope)})", [("scope", "not a string")])
        check_text(scope, "scope", MAX_SCOPE_LENGTH)
    if tags is not None:
        if isinstance(tags, (str, bytes, dict)) or not isinstance(tags, Iterable):
            raise ValidationError(f"tags must be a list of strings (got {_shown(tags)})", [("tags", "not a list")])
        tags = list(tags)
        odd = next((t for t in tags if not isinstance(t, str)), None)
        if odd is not None or len(tags) != sum(isinstance(t, str) for t in tags):
            raise ValidationError(f"tags must be a list of strings (got {_shown(odd)})", [("tags", "not a string")])
        if len(tags) > MAX_TAGS:
            raise ValidationError(f"tags has {len(tags)} tags; the limit is {MAX_TAGS}", [("tags", "too many")])
        for t in tags:
            check_text(t, "tags", MAX_TAG_LENGTH)
    rows, recs = _load(v, [rid])
    row, record = rows[rid], recs[rid]
    after = _clone(record)
    parts: list[str] = []
    details: dict[str, Any] = {}
    if sensitivity is not None:
        parts.append(f"sensitivity {record.sensitivity.value} -> {sensitivity.value}")
        details["sensitivity"] = _changed(record.sensitivity.value, sensitivity.value)
        after.sensitivity = sensitivity
    if scope is not None:
        parts.append(f"scope {json.dumps(record.scope)} -> {json.dumps(scope)}")
        details["scope"] = _changed(record.scope, scope)
        after.scope = scope
    if tags is not None:
        parts.append(f"tags {json.dumps(record.tags)} -> {json.dumps(tags)}")
        details["tags"] = _changed(list(record.tags), tags)
        after.tags = tags
    b = _Builder("reclassify", now)
    _update(b, row, record, after)
    b.entry(rid, AuditAction.REVISE, actor, f"reclassified {'; '.join(parts)}: {rationale}", details)
    return b.build()


def plan_delete(v: PlanView, now: datetime, id: str, actor: str, rationale: str) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    rows, recs = _load(v, [rid])
    row, record = rows[rid], recs[rid]
    if record.lifecycle.deletion_policy == DeletionPolicy.NEVER:
        raise ValidationError(f"record {rid!r} has deletion policy 'never'; it cannot be deleted",
                              [("lifecycle.deletion_policy", "never")])
    b = _Builder("delete", now)
    s_now = salience_of(record, now, _stored_anchor(row))
    entry = b.entry(rid, AuditAction.DELETE, actor, f"deleted: {rationale}",
                    {"archived": True, "salience": s_now,
                     "deletion_policy": record.lifecycle.deletion_policy.value if record.lifecycle.deletion_policy else ""})
    _archive(b, row, record, v.logs([rid])[rid], entry)
    return b.build()


def plan_restore(v: PlanView, now: datetime, id: str, actor: str, rationale: str) -> CurationPlan:
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    archived = v.archived(rid)
    if archived is None:
        if v.existing([rid], include_archive=False):
            raise AlreadyExistsError(rid)
        raise NotFoundError(rid)
    doc = dict(archived[0])
    doc["audit_log"] = []  # as in the records table (the log lives in the audit table); key order kept
    record = MemoryRecord.model_validate(doc)
    anchor = anchor_of(record)
    anchor = (float(anchor[0]), float(anchor[1]))
    after = _now_view(record, anchor, now)
    b = _Builder("restore", now)
    b.change("restore", rid, None, after, anchor, stored_doc=doc)
    b.entry(rid, AuditAction.REVISE, actor, f"restored from archive: {rationale}",
            {"restored": True, "salience": after.salience})
    return b.build()


def _prunable(v: PlanView, now: datetime, as_of: datetime | None
              ) -> tuple[datetime, dict[str, StoredRow], dict[str, MemoryRecord], list[tuple[str, float]]]:
    """Prune eligibility: not pinned, policy auto_prune, S(as_of) < PRUNE_THRESHOLD. Candidates
    come from the column cache snapshot (plus rows changed since it was taken); only they are
    loaded, and eligibility is confirmed on their stored rows. Returns (as_of, rows, records,
    [(id, S(as_of))] of the eligible ones, sorted by id)."""
    when = now if as_of is None else _when(as_of, "as_of")
    t = to_epoch(when)
    snap = v.snapshot
    s_all = salience_at(snap.decay, t) if len(snap.ids) else np.empty(0)
    mask = snap.alive & ~snap.decay.pinned & (snap.policy == AUTO_PRUNE_CODE) & (s_all < PRUNE_THRESHOLD)
    candidates = {str(x) for x in snap.ids[mask]} | v.changed_since(snap.seq)
    rows = v.rows(sorted(candidates))
    ids = sorted(rows)
    recs = {rid: _parse(rows[rid]) for rid in ids}
    if ids:
        cols = columns_of([recs[rid] for rid in ids], [_stored_anchor(rows[rid]) for rid in ids])
        s_ids = salience_at(cols, t)
    else:
        s_ids = np.empty(0)
    eligible = [(rid, float(s)) for rid, s in zip(ids, s_ids)
                if not recs[rid].lifecycle.pinned
                and recs[rid].lifecycle.deletion_policy == DeletionPolicy.AUTO_PRUNE
                and s < PRUNE_THRESHOLD]
    return when, rows, recs, eligible


def plan_prune(v: PlanView, now: datetime, actor: str, rationale: str, as_of: datetime | None = None,
               dry_run: bool = True) -> CurationPlan:
    """Archive every eligible record (see ``_prunable``); ``result`` is the list of their ids.
    ``dry_run`` does not change the plan (the operation decides whether to apply it)."""
    actor, rationale = checked_who(actor, rationale)
    when, rows, recs, eligible = _prunable(v, now, as_of)
    logs = v.logs([rid for rid, _ in eligible]) if eligible else {}
    b = _Builder("prune", now)
    stamp = format_time(when)
    for rid, s in eligible:
        entry = b.entry(rid, AuditAction.DELETE, actor, f"pruned: salience {s:.3g} < {PRUNE_THRESHOLD} at {stamp}: {rationale}",
                        {"archived": True, "as_of": stamp, "salience": s, "threshold": PRUNE_THRESHOLD})
        _archive(b, rows[rid], recs[rid], logs[rid], entry)
    return b.build(result=[rid for rid, _ in eligible])


# Operations whose first argument is the one record they rewrite.
_REWRITES = frozenset({"reinforce", "penalize", "retract", "contest", "pin", "unpin", "reclassify"})


def named_record(op: str, args: tuple) -> list[str]:
    """The record a rewrite names, for its transaction to read (and lock) with its first round
    trip (``Store.write(prefetch=...)``); nothing when the argument is not a valid id (the
    planner then says why, naming the argument)."""
    if op not in _REWRITES or not args:
        return []
    try:
        return [check_id(args[0])]
    except ValidationError:
        return []

PLANNERS: dict[str, Callable[..., CurationPlan]] = {
    "reinforce": plan_reinforce,
    "penalize": plan_penalize,
    "retract": plan_retract,
    "contest": plan_contest,
    "supersede": plan_supersede,
    "fork": plan_fork,
    "merge": plan_merge,
    "pin": plan_pin,
    "unpin": plan_unpin,
    "reclassify": plan_reclassify,
    "delete": plan_delete,
    "restore": plan_restore,
    "prune": plan_prune,
}


# --------------------------------------------------------------------------- restore a version


def plan_restore_version(v: PlanView, now: datetime, id: str, when: datetime, actor: str, rationale: str) -> CurationPlan:
    """The record brought back to what it was at ``when`` (its version then, as its audit trail
    reconstructs it: ``history.record_at``).

    What a restore brings back is what curation changes in place: sensitivity, scope, tags,
    pinned, the semantic revision status and successor, and relations (a contest's
    ``contested_by``). Payload and confidence are never changed in place (a new text is a
    supersede, a new record), so every version has the current ones. Salience: the version's
    value S(when), re-anchored now (decay restarts from it, as after a reinforce or pin).

    Refused: an episodic record (restoring its content is a revision, SPEC 6:
    EpisodicImmutableError), an instant in the future, and an instant when the record did not
    exist or sat in the archive. One ``revise`` entry names the version restored (its time in
    ``details["version"]``, the last entry then in ``details["version_position"]``) and the
    before/after of every field it changed."""
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    when = _when(when, "when")
    if when > now:
        raise ValidationError(f"when must not be in the future (got {format_time(when)}, now {format_time(now)})",
                              [("when", "in the future")])
    rows, recs = _load(v, [rid])
    _no_episodic(recs.values(), "restored to an earlier version")
    row, record = rows[rid], recs[rid]
    trail = audit.log_of(v.conn, rid)
    past = history.record_at(_clone(record), _stored_anchor(row), trail, when)
    if past is None:
        raise ValidationError(f"record {rid!r} has no version at {format_time(when)}: it did not exist yet or "
                              f"sat in the archive then", [("when", "no version then")])
    after = _clone(record)
    details: dict[str, Any] = {}
    if past.sensitivity != record.sensitivity:
        details["sensitivity"] = _changed(record.sensitivity.value, past.sensitivity.value)
        after.sensitivity = past.sensitivity
    if past.scope != record.scope:
        details["scope"] = _changed(record.scope, past.scope)
        after.scope = past.scope
    if list(past.tags) != list(record.tags):
        details["tags"] = _changed(list(record.tags), list(past.tags))
        after.tags = list(past.tags)
    if past.lifecycle.pinned != record.lifecycle.pinned:
        details["pinned"] = _changed(record.lifecycle.pinned, past.lifecycle.pinned)
        after.lifecycle.pinned = past.lifecycle.pinned
    if _status(past) != _status(record):
        details["status"] = _changed(_status(record), _status(past))
        _revision(after).status = RevisionStatus(_status(past))
    was = past.payload.revision.superseded_by if isinstance(past.payload, SemanticPayload) and past.payload.revision else None
    now_by = record.payload.revision.superseded_by if isinstance(record.payload, SemanticPayload) and record.payload.revision else None
    if was != now_by:
        details["superseded_by"] = _changed(now_by, was)
        _revision(after).superseded_by = was
    if [r.model_dump(mode="json") for r in past.relations] != [r.model_dump(mode="json") for r in record.relations]:
        details["relations"] = _changed([r.model_dump(mode="json") for r in record.relations],
                                        [r.model_dump(mode="json") for r in past.relations])
        after.relations = [r.model_copy() for r in past.relations]
    s_now = salience_of(record, now, _stored_anchor(row))
    details["salience"] = _changed(s_now, float(past.salience))
    t = to_epoch(when)
    before_then = [r.position for r in trail if to_epoch(r.entry.timestamp) <= t]
    details["version"] = format_time(when)
    details["version_position"] = before_then[-1] if before_then else None
    b = _Builder("restore_version", now)
    _update(b, row, record, after, float(past.salience))
    b.entry(rid, AuditAction.REVISE, actor, f"{history.RESTORED_VERSION}{format_time(when)}: {rationale}", details)
    return b.build()


PLANNERS["restore_version"] = plan_restore_version

# --------------------------------------------------------------------------- reinstate


def plan_reinstate(v: PlanView, now: datetime, id: str, actor: str, rationale: str) -> CurationPlan:
    """A contested semantic record back to ``active`` (the contest is resolved in its favour):
    relations and salience unchanged; audit ``revise`` "reinstated: ...". Refused for a record
    that is not contested (naming its status); episodic records are immutable (SPEC 6 order)."""
    actor, rationale = checked_who(actor, rationale)
    rid = _id(id)
    rows, recs = _load(v, [rid])
    _no_episodic(recs.values(), "reinstated")
    row, record = rows[rid], recs[rid]
    status = _status(record)
    if status != RevisionStatus.CONTESTED.value:
        what = f"is {status}" if status else f"is a {record.type.value} record, which has no revision status"
        raise ValidationError(f"record {rid!r} {what}; only a contested record can be reinstated",
                              [("id", status or "no revision status")])
    after = _clone(record)
    _revision(after).status = RevisionStatus.ACTIVE  # type: ignore[union-attr]
    b = _Builder("reinstate", now)
    _update(b, row, record, after)
    b.entry(rid, AuditAction.REVISE, actor, f"reinstated: {rationale}",
            {"status": _changed(status, RevisionStatus.ACTIVE.value)})
    return b.build()


PLANNERS["reinstate"] = plan_reinstate
_REWRITES = _REWRITES | {"reinstate"}


# --------------------------------------------------------------------------- applying a plan


def _rewrites_only(plan: CurationPlan, v: PlanView | None) -> bool:
    """The plan only rewrites records the view read under the write lock (and appends to their
    audit chains): reinforce, penalize, retract, contest, pin, unpin, reclassify."""
    return (v is not None and bool(plan.changes) and all(c.kind == "update" and c.record_id in v.stored
                                                         for c in plan.changes)
            and all(e.record_id in v.stored for e in plan.audit))


def _execute_rewrites(store: Store, conn: StoreConnection, plan: CurationPlan, v: PlanView,
                      last: bool = False) -> list[tuple[int, str, tuple]]:
    """``execute`` for plans that only rewrite records read under the lock: their chain ends came
    with the rows, so the entries are chained from them (``chain.chain``, as ``append_batch``
    does after looking the ends up), bound to each row's content digest, placed in the
    store-wide sequence (whose tail came with the rows on PostgreSQL) and written with the rows
    in one batch; a row gets only the columns whose value changes (an index over unchanged
    columns is not rewritten)."""
    rows = {c.record_id: record_row(c.after, *c.anchor, None) for c in plan.changes}
    digests = {rid: row_digest(row) for rid, row in rows.items()}
    entries, heads = audit_chain.chain(_entries(plan), {rid: end for rid, (_, end) in v.stored.items() if end is not None},
                                 digests)
    audit.place(conn, entries)
    updates = []
    for c in plan.changes:
        stored = v.stored[c.record_id][0]
        row = dict(rows[c.record_id], audit_head=heads[c.record_id])
        updates.append((c.record_id, {k: value for k, value in row.items()
                                      if k != "id" and not _same(stored.get(k), value)}))
    return store.write_updates(conn, entries, updates, last=last)


def _entries(plan: CurationPlan) -> list[dict[str, Any]]:
    """The plan's audit entries as ``audit.append_batch`` and ``chain.chain`` take them."""
    return [{"record_id": e.record_id, "action": e.action, "actor": e.actor, "timestamp": e.timestamp,
             "rationale": e.rationale, "details": e.details} for e in plan.audit]


def _same(stored: Any, value: Any) -> bool:
    """A stored column value equals the one to write (SQLite gives booleans back as 0/1)."""
    return stored == value and (stored is None) == (value is None)


def execute(store: Store, conn: StoreConnection, plan: CurationPlan, v: PlanView | None = None, last: bool = False
            ) -> list[tuple[int, str, tuple]]:
    """Write a plan inside the caller's write transaction: audit entries first (they give each
    record its new chain head), then the rows. ``v``: the view the plan was made with, when its
    rows were read under the write lock (plans that only rewrite those rows take a shorter path).
    Returns the change log entries written with their rows (see ``Store.write_updates``) when the
    shorter path knows them, else nothing. ``last``: the caller writes nothing more in this
    transaction (the shorter path may then send its commit along, ``Store.write_updates``)."""
    if _rewrites_only(plan, v):
        return _execute_rewrites(store, conn, plan, v, last)  # type: ignore[arg-type]
    # Each record's row (or archived text) as it will be stored, so its entry binds its digest.
    rows: dict[str, dict[str, Any]] = {}
    texts: dict[str, str] = {}
    digests: dict[str, str | None] = {}
    for c in plan.changes:
        rid = c.record_id
        if c.kind in ("update", "create"):
            rows[rid] = record_row(c.after, *c.anchor, None)
        elif c.kind == "restore":
            rows[rid] = record_row(MemoryRecord.model_validate(c.stored_doc), *c.anchor, None)
            # the document exactly as it was archived (not re-serialized through the model)
            rows[rid]["doc"] = json.dumps(c.stored_doc, separators=(",", ":"), ensure_ascii=False)
        elif c.kind == "archive":
            doc = dict(c.stored_doc)
            doc["audit_log"] = [e.model_dump(mode="json") for e in c.after.audit_log]
            texts[rid] = archive_text(doc)
            digests[rid] = audit_chain.archived_digest(rid, texts[rid])
        elif c.kind == "audit":  # unchanged: its content as stored
            stored = v.stored.get(rid) if v is not None else None
            if stored is None:
                stored = store.rows_for_update(conn, [rid]).get(rid)
            digests[rid] = row_digest(stored[0]) if stored is not None else None
        else:  # pragma: no cover
            raise AssertionError(c.kind)
        if rid in rows:
            digests[rid] = row_digest(rows[rid])
    heads = audit.append_batch(conn, _entries(plan), digests)
    when = to_epoch(plan.at)
    inserts: list[dict[str, Any]] = []
    archived: list[tuple[str, str, str | None]] = []
    for c in plan.changes:
        head = heads[c.record_id]
        if c.kind == "update":
            store.update_row(conn, dict(rows[c.record_id], audit_head=head))
        elif c.kind == "create":
            inserts.append(dict(rows[c.record_id], audit_head=head))
        elif c.kind == "audit":
            store.set_audit_head(conn, c.record_id, head)
        elif c.kind == "archive":
            archived.append((c.record_id, texts[c.record_id], head))
        elif c.kind == "restore":
            store.unarchive(conn, c.record_id)
            inserts.append(dict(rows[c.record_id], audit_head=head))
    if archived:
        store.archive_rows(conn, archived, when)
    if inserts:
        store.insert_rows(conn, inserts)
    return []


# the engine's entry points (the facade and the operator's view call these) --------------


def preview_within(ctx: EngineContext, clearance: TrustContext | None, op: str, *args: Any,
                   **kwargs: Any) -> CurationPlan:
    """What ``op`` (a curation operation's name) would do with these arguments, called as the
    operation itself is (``preview_within(ctx, None, "reinforce", id, actor, rationale,
    gain=0.2)``): the records as they would be after the change and the audit entries that
    would be written. Raises what the operation would raise; writes nothing. With
    ``clearance``, an operator's, which must see every record involved in full (``_Within``;
    the operator's view, SPEC 10)."""
    planner = planner_for(op)
    _check_call(op, planner, args, kwargs)
    snapshot = ctx.columns.current() if op == "prune" else None
    with ctx.store.read() as conn:
        view = _planner_view(ctx, conn, False, snapshot, clearance, op)
        plan = planner(view, ctx.now(), *args, **kwargs)
    if clearance is not None:
        _created_within(plan, clearance)
    return plan


def _planner_view(ctx: EngineContext, conn: StoreConnection, locking: bool, snapshot: Any, clearance: TrustContext | None,
                  op: str) -> PlanView:
    if clearance is None:
        return PlanView(ctx.store, conn, locking, snapshot)
    return _Within(ctx.store, conn, locking, snapshot, as_trust(clearance, "clearance"), quiet=op == "prune")


def curate_within(ctx: EngineContext, clearance: TrustContext | None, op: str, *args: Any,
                  **kwargs: Any) -> CurationPlan:
    """Apply ``op`` (its arguments as the facade's operation takes them) and return the plan
    applied. With ``clearance``, as an operator whose clearance must see in full every record
    it reads or creates, decided on the rows read under the write lock (so a relabel by another
    process between a page's read and this write cannot widen it); refused before anything is
    written otherwise."""
    planner = planner_for(op)
    _check_call(op, planner, args, kwargs)
    snapshot = ctx.columns.current() if op == "prune" else None
    with ctx.store.write(prefetch=named_record(op, args)) as conn:
        now = ctx.now()  # read after the write lock is held: operation times follow commit order
        view = _planner_view(ctx, conn, True, snapshot, clearance, op)
        plan = planner(view, now, *args, **kwargs)
        if clearance is not None:
            _created_within(plan, clearance)
        _plan_vectors(ctx, conn, plan)  # SPEC 9: new records' ranking vectors, in this transaction
        written = execute(ctx.store, conn, plan, view, last=True)
    ctx.columns.written(written)  # committed: the cache may take them
    return plan


def prune(ctx: EngineContext, actor: str, rationale: str, as_of: datetime | None = None,
          dry_run: bool = True) -> list[str]:
    """Archive every record that is not pinned, has policy auto_prune and S(as_of) < 0.001.
    Returns the ids pruned, or with ``dry_run`` (the default) the ids that would be."""
    if check_flag(dry_run, "dry_run"):  # the eligibility the plan uses, without building the archive plan
        checked_who(actor, rationale)
        snapshot = ctx.columns.current()
        with ctx.store.read() as conn:
            return [rid for rid, _ in _prunable(PlanView(ctx.store, conn, False, snapshot), ctx.now(), as_of)[3]]
    return list(curate_within(ctx, None, "prune", actor, rationale, as_of=as_of).result)


def archived_ids(ctx: EngineContext) -> list[str]:
    """Ids in the archive (pruned or deleted), newest first."""
    with ctx.store.read() as conn:
        return ctx.store.archived_ids(conn)


# ranking vectors of what an operation writes (SPEC 9) ------------------------------


def _plan_vectors(ctx: EngineContext, conn: StoreConnection, plan: CurationPlan) -> None:
    """The ranking vectors of the records ``plan`` creates (supersede, fork, merge), of a
    record whose text it changes, and of a restored record whose vector is not kept under
    the current provider, written in the operation's transaction. Operations that keep
    every record's text (reinforce, penalize, ...) cost a set look-up here. A failing
    provider writes none (the records get theirs when a task first asks)."""
    embedder = ctx.embedder
    if embedder is None or plan.op in _KEEPS_TEXT:
        return
    fresh = [c.after for c in plan.changes if c.kind == "create"]
    fresh += [c.after for c in plan.changes if c.kind == "update" and c.before is not None
              and record_parts(c.before) != record_parts(c.after)]
    restored = [c.after for c in plan.changes if c.kind == "restore"]
    if restored:
        kept = ctx.store.vectors_of(conn, [r.id for r in restored], embedder.name)
        fresh += [r for r in restored if r.id not in kept]
    if not fresh:
        return
    rows = vector_rows(embedder, fresh)
    if rows:
        ctx.store.insert_vectors(conn, rows, replace=True)
    if ctx.vectors is not None:  # this process's matrix reads them again (or computes them) when asked
        ctx.vectors.forget([r.id for r in fresh])


_KEEPS_TEXT = frozenset({"reinforce", "penalize", "retract", "contest", "reinstate", "pin", "unpin", "reclassify", "delete",
                         "prune"})  # operations that never change what a record says


def _check_call(op: str, planner: Callable[..., CurationPlan], args: tuple, kwargs: dict[str, Any]) -> None:
    """``preview(op, *args, **kwargs)`` takes the operation's arguments as a tuple: a missing or
    unknown one is the caller's mistake, refused naming it (not a TypeError from inside)."""
    try:
        inspect.signature(planner).bind(None, None, *args, **kwargs)  # the planner's view and time first
    except TypeError as exc:
        raise ValidationError(f"preview({op!r}): {exc}", [("args", str(exc))]) from None


def planner_for(op: str) -> Callable[..., CurationPlan]:
    try:
        return PLANNERS[op]
    except (KeyError, TypeError):
        raise ValidationError(f"unknown curation operation {op!r} (one of {', '.join(PLANNERS)})",
                              [("op", "unknown")]) from None


__all__ = ["CurationPlan", "RecordChange", "PlannedEntry", "PLANNERS", "archived_ids", "curate_within", "execute",
           "preview_within", "prune"]
