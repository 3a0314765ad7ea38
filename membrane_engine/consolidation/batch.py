"""One consolidator's look at the store (``Pass``) and what it decides to write (``Batch``), and
writing a batch inside the consolidator's transaction (``write``).

A pass reads the column cache snapshot taken after its transaction began (inside a write
transaction, after the store's write lock is held: nothing can change under it), so gating,
ages and salience are numpy over the cached columns; payloads are streamed from the store in
chunks (``storage.consolidation_reads``). Only the records a batch rewrites are read whole, under
the lock (``Store.rows_for_update``), and only the records it creates are built as models.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import orjson

from membrane_engine.consolidation.entity_links import EntityIndex, Linked
from membrane_engine.consolidation.report import CREATED, REINFORCED, Item, Link, Proposal, proposals_of
from membrane_engine.context import EngineContext
from membrane_engine.errors import MembraneError
from membrane_engine.model.records import (
    AuditAction,
    MemoryRecord,
    Relation,
    Sensitivity,
    format_time,
    sensitivity_level,
    to_epoch,
)
from membrane_engine.rules.chain import chain
from membrane_engine.rules.salience import salience_rows
from membrane_engine.rules.trust import TrustContext, verdicts
from membrane_engine.storage import consolidation_reads as reads
from membrane_engine.storage.audit_log import live_digest, place, row_digest
from membrane_engine.storage.columns import TYPE_CODES, Snapshot
from membrane_engine.storage.store import ROW_COLUMNS, StoreConnection, record_row, record_values
from membrane_engine.transfer.imports import vector_rows

SENSITIVITY_AT = {sensitivity_level(s): s for s in Sensitivity}  # level -> sensitivity
EPISODIC = TYPE_CODES["episodic"]
REINFORCE_GAIN = 0.1  # Membrane's semantic and competence consolidators add 0.1, capped at 1.0
SHOWN_SOURCES = 20  # source ids a rationale names; details name them all
_UPDATE_CHUNK = 500  # records rewritten per statement batch (Store.write_updates)
_AUDIT_CHUNK = 5000
_DOC = ROW_COLUMNS.index("doc")


# --------------------------------------------------------------------------- a pass


@dataclass(slots=True)
class Episode:
    """An episodic record a consolidator may use as a source: labels from the column cache,
    payload parsed from the stored document."""

    id: str
    row: int
    scope: str
    level: int
    confidence: float
    tags_text: str
    payload: dict[str, Any]

    @property
    def sensitivity(self) -> Sensitivity:
        return SENSITIVITY_AT[self.level]

    @property
    def tags(self) -> list[str]:
        try:
            tags = orjson.loads(self.tags_text or "[]")
        except orjson.JSONDecodeError:
            return []
        return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


class Pass:
    """What one consolidator reads: the store through ``conn`` and the snapshot ``snap``, at
    ``as_of`` (which episodes exist, their age and salience), writing at ``now``. ``within``:
    an operator's clearance; every record it does not see in full is as if absent. ``only``: the
    keys of the proposals to keep (None: all); ``rejected``: keys of proposals an operator
    rejected, left out whatever ``only`` says (``Batch.finish``)."""

    def __init__(self, ctx: EngineContext, conn: StoreConnection, snap: Snapshot, kind: str, actor: str | None,
                 as_of: datetime, now: datetime, within: TrustContext | None, writes: bool = True,
                 only: frozenset[str] | None = None, rejected: frozenset[str] = frozenset()):
        self.ctx, self.conn, self.snap, self.kind = ctx, conn, snap, kind
        self.writes = writes  # False: a dry run (no ranking vectors are computed)
        self.only, self.rejected = only, rejected
        self.actor = actor if actor is not None else f"consolidation/{kind}"
        self.as_of, self.now = as_of, now
        self.as_of_t, self.now_t = to_epoch(as_of), to_epoch(now)
        seen = snap.alive.copy()
        if within is not None:
            seen &= verdicts(snap.sens_level, snap.scope_code, snap.scope_names, within) == 2
        self.seen = seen
        self._entities: EntityIndex | None = None

    def row(self, record_id: str) -> int | None:
        """The record's row when the pass may use it (alive, and seen in full by ``within``)."""
        i = self.snap.row_of.get(record_id)
        return i if i is not None and self.seen[i] else None

    def labels(self, row: int) -> tuple[str, int]:
        return self.snap.scope_names[int(self.snap.scope_code[row])], int(self.snap.sens_level[row])

    def levels(self, record_ids: list[str]) -> tuple[int, ...]:
        """Each record's sensitivity level (a proposal's basis: its sources' labels)."""
        row_of, level = self.snap.row_of, self.snap.sens_level
        return tuple(int(level[row_of[rid]]) for rid in record_ids)

    def salience(self, rows: np.ndarray, t: float) -> np.ndarray:
        return salience_rows(self.snap.decay, np.asarray(rows, dtype=np.int64), t)

    def source_rows(self) -> np.ndarray:
        """Rows of the episodic records that may be consolidated: seen, created by ``as_of``."""
        snap = self.snap
        return np.flatnonzero(self.seen & (snap.type_code == EPISODIC) & (snap.created_at <= self.as_of_t))

    def episodes(self) -> Iterator[Episode]:
        """The source episodes with their payloads, oldest first (streamed)."""
        eligible = np.zeros(len(self.snap.ids), dtype=bool)
        eligible[self.source_rows()] = True
        row_of, snap = self.snap.row_of, self.snap
        for chunk in reads.episode_payloads(self.conn):
            for rid, tags_text, payload_text in chunk:
                i = row_of.get(rid)
                if i is None or not eligible[i]:
                    continue
                payload = orjson.loads(payload_text) if payload_text else None
                if not isinstance(payload, dict):
                    continue
                scope, level = self.labels(i)
                yield Episode(rid, i, scope, level, float(snap.confidence[i]), tags_text, payload)

    @property
    def entities(self) -> EntityIndex:
        if self._entities is None:
            def label(rid: str) -> tuple[str, int] | None:
                i = self.row(rid)
                return None if i is None else self.labels(i)

            self._entities = EntityIndex.load(self.ctx.store, self.conn, label)
        return self._entities


# --------------------------------------------------------------------------- a batch


@dataclass
class Change:
    """What a batch does to one existing record: a new salience anchored at the write time
    (``reinforced`` also sets ``last_reinforced_at``), relations appended, audit entries."""

    salience: float | None = None
    reinforced: bool = False
    relations: list[Relation] = field(default_factory=list)
    entries: list[tuple[AuditAction, str, dict[str, Any] | None]] = field(default_factory=list)


@dataclass
class Reinforcement:
    """A record reinforced by a batch, and the episodes that reinforced it."""

    record_type: str
    sources: dict[str, None] = field(default_factory=dict)  # ordered set
    rationale: str | None = None  # Membrane's, when it names the reason itself


@dataclass
class Created:
    """A record a batch creates, kept as its row (``store.record_values``, the chain head left
    for ``write``): the models of a run's thousands of new plans are not held until it ends."""

    values: tuple
    sensitivity: str
    scope: str
    salience: float
    entries: list[tuple[AuditAction, str, dict[str, Any] | None]]


_VECTOR_CHUNK = 1000  # new records embedded at a time, their models dropped after


class Batch:
    """What one consolidator writes: created records with their audit entries, changes to
    existing records, the report's items and entity links."""

    def __init__(self, p: Pass):
        self.p = p
        self.created: dict[str, Created] = {}
        self.changes: dict[str, Change] = {}
        self.items: list[Item] = []
        self.links: list[Link] = []
        self.reinforcements: dict[str, Reinforcement] = {}
        self.vectors: list[tuple[str, str, bytes]] = []  # SPEC 9: the new records' ranking vectors
        self._to_embed: list[MemoryRecord] = []
        self.rejected = 0  # proposals left out because an operator rejected them
        self.kept: set[str] = set()  # keys of the proposals kept, when the pass selects (only / rejected)

    def __bool__(self) -> bool:
        return bool(self.created or self.changes or self.reinforcements)

    def change(self, record_id: str) -> Change:
        found = self.changes.get(record_id)
        if found is None:
            found = self.changes[record_id] = Change()
        return found

    def new_id(self) -> str:
        return str(uuid.uuid4())

    def create(self, doc: dict[str, Any], sources: list[str], rationale: str, linked: Linked | None = None) -> str:
        """Validate and keep a new record (``doc`` in Membrane's JSON shape, id included): its
        relations get the entity links, its entities their inverses; one ``create`` entry
        naming the actor and the sources."""
        p, now = self.p, self.p.now
        rid = doc["id"]
        if linked is not None:
            for predicate, target in linked.forward:
                doc["relations"].append({"predicate": predicate, "target_id": target, "weight": 1.0,
                                         "created_at": format_time(now)})
                self.links.append(Link(rid, predicate, target))
            for entity_id, inverse in linked.back:
                self.change(entity_id).relations.append(
                    Relation(predicate=inverse, target_id=rid, weight=1.0, created_at=now))
                self.links.append(Link(entity_id, inverse, rid))
        record = MemoryRecord.model_validate(doc)
        details = {"consolidator": p.kind, "sources": sources, "salience": record.salience}
        values = record_values(record, float(record.salience), p.now_t, None, validated=True)
        self.created[rid] = Created(values, record.sensitivity.value, record.scope, float(record.salience),
                                    [(AuditAction.CREATE, rationale, details)])
        self.items.append(Item(p.kind, "created", rid, record.type.value, tuple(sources), rationale,
                               doc=values[_DOC], basis=p.levels(sources)))
        if p.writes and p.ctx.embedder is not None:
            self._to_embed.append(record)
            # Chunked as it goes, unless the pass keeps only a few: then after ``_select``.
            if len(self._to_embed) >= _VECTOR_CHUNK and p.only is None:
                self._embed()
        return rid

    def _embed(self) -> None:
        """Ranking vectors of the records created since the last call (a failing provider
        gives none: the records get theirs when a task first asks, as after an import)."""
        if self._to_embed:
            self.vectors += vector_rows(self.p.ctx.embedder, self._to_embed) or []
            self._to_embed = []

    def reinforce(self, record_id: str, record_type: str, source: str | list[str], rationale: str | None = None) -> None:
        """Count ``source`` toward reinforcing ``record_id`` (applied once per batch: ``finish``)."""
        r = self.reinforcements.get(record_id)
        if r is None:
            r = self.reinforcements[record_id] = Reinforcement(record_type)
        for s in [source] if isinstance(source, str) else source:
            r.sources[s] = None
        if rationale is not None:
            r.rationale = rationale

    def finish(self) -> "Batch":
        """Turn the reinforcements into changes and report items: one ``reinforce`` entry per
        record, gain 0.1 capped at 1.0, naming every source **(deviation: Membrane writes one
        entry per matching episode event, each setting the salience it read before the run plus
        0.1; the salience reached is the same, S + 0.1 once per run)**. A record created in
        this batch is reinforced from its salience as created."""
        p = self.p
        pending = [rid for rid in self.reinforcements if rid not in self.created]
        rows = np.array([p.snap.row_of[rid] for rid in pending], dtype=np.int64)
        before = dict(zip(pending, p.salience(rows, p.now_t).tolist())) if len(rows) else {}
        for rid, r in self.reinforcements.items():
            sources = list(r.sources)
            s = self.created[rid].salience if rid in self.created else before[rid]
            after = max(s, min(s + REINFORCE_GAIN, 1.0))
            rationale = r.rationale or reinforced_from(sources)
            details = {"consolidator": p.kind, "salience": {"before": s, "after": after}, "gain": REINFORCE_GAIN,
                       "sources": sources}
            if rid in self.created:
                self.created[rid].entries.append((AuditAction.REINFORCE, rationale, details))
            else:
                change = self.change(rid)
                change.salience, change.reinforced = after, True
                change.entries.append((AuditAction.REINFORCE, rationale, details))
            self.items.append(Item(p.kind, REINFORCED, rid, r.record_type, tuple(sources), rationale, s, after,
                                   basis=p.levels(sources)))
        self.reinforcements = {}
        self._select()
        self._embed()
        # the entities' inverse relations, one entry per entity
        for rid, change in self.changes.items():
            if change.relations:
                added = [(r.predicate, r.target_id) for r in change.relations]
                shown = ", ".join(f"{pred} -> {target}" for pred, target in added[:SHOWN_SOURCES])
                more = f" (and {len(added) - SHOWN_SOURCES} more)" if len(added) > SHOWN_SOURCES else ""
                change.entries.append((AuditAction.REVISE, f"entity links from consolidation: {shown}{more}",
                                       {"consolidator": p.kind, "relations_added": [list(a) for a in added]}))
        return self


    # ------------------------------------------------------------------ keeping some proposals

    def _select(self) -> None:
        """Leave out the proposals an operator rejected and, when the pass keeps only some
        (``only``), the others; before the entities' link entries are written, so those name
        only the links kept."""
        p = self.p
        if p.only is None and not p.rejected:
            return
        dropped: list[Proposal] = []
        for proposal in proposals_of(self.items):
            key = proposal.key
            if key in p.rejected:
                self.rejected += 1
                dropped.append(proposal)
            elif p.only is not None and key not in p.only:
                dropped.append(proposal)
            else:
                self.kept.add(key)
        if dropped:
            self._drop(dropped)

    def _drop(self, proposals: list[Proposal]) -> None:
        """Take ``proposals`` out of the batch: a created record with its entity links (both
        directions) and vector; a reinforcement's or compression's new salience and entry."""
        gone = {p.record_id for p in proposals if p.action == CREATED}
        undone = {p.record_id: p.action for p in proposals if p.action != CREATED}
        for rid in gone:
            del self.created[rid]
        for rid, action in undone.items():
            change = self.changes.get(rid)
            if change is None:
                continue
            entry = AuditAction.REINFORCE if action == REINFORCED else AuditAction.DECAY
            change.entries = [e for e in change.entries if e[0] is not entry]
            change.salience, change.reinforced = None, False
        if gone:
            self.links = [x for x in self.links if x.source_id not in gone and x.target_id not in gone]
            for change in self.changes.values():
                if change.relations:
                    change.relations = [r for r in change.relations if r.target_id not in gone]
            self.vectors = [v for v in self.vectors if v[0] not in gone]
            self._to_embed = [r for r in self._to_embed if r.id not in gone]
        self.changes = {rid: c for rid, c in self.changes.items()
                        if c.salience is not None or c.relations or c.entries}
        self.items = [i for i in self.items if i.record_id not in gone and undone.get(i.record_id) != i.action]


def reinforced_from(sources: list[str]) -> str:
    if len(sources) == 1:
        return f"Reinforced from episodic record {sources[0]}"  # Membrane's rationale
    shown = ", ".join(sources[:SHOWN_SOURCES])
    more = f" (and {len(sources) - SHOWN_SOURCES} more)" if len(sources) > SHOWN_SOURCES else ""
    return f"Reinforced from {len(sources)} episodic records: {shown}{more}"


def new_record(p: Pass, rid: str, memory_type: str, level: int, scope: str, confidence: float, tags: list[str],
               payload: dict[str, Any], sources: list[tuple[str, str]], derived_from: list[str]) -> dict[str, Any]:
    """A consolidated record in Membrane's JSON shape, as ``schema.NewMemoryRecord`` makes it
    (salience 1, exponential decay with a one-day half-life, auto_prune) with the consolidator's
    provenance (``sources``: (kind, ref)) and ``derived_from`` relations."""
    stamp = format_time(p.now)
    return {
        "id": rid, "type": memory_type, "sensitivity": SENSITIVITY_AT[level].value, "confidence": confidence,
        "salience": 1.0, "scope": scope, "tags": tags, "created_at": stamp, "updated_at": stamp,
        "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 86400}, "last_reinforced_at": stamp,
                      "deletion_policy": "auto_prune"},
        "provenance": {"sources": [{"kind": kind, "ref": ref, "created_by": p.actor, "timestamp": stamp}
                                   for kind, ref in sources], "created_by": p.actor},
        "relations": [{"predicate": "derived_from", "target_id": t, "weight": 1.0, "created_at": stamp}
                      for t in derived_from],
        "payload": payload,
    }


# --------------------------------------------------------------------------- writing


def _same(stored: Any, value: Any) -> bool:
    """A stored column value equals the one to write (SQLite gives booleans back as 0/1)."""
    return stored == value and (stored is None) == (value is None)


def write(ctx: EngineContext, conn: StoreConnection, batch: Batch) -> None:
    """Write ``batch`` in the caller's write transaction: the rewritten records read under the
    lock, every audit entry chained after its record's chain end and bound to the record's
    content as written, placed in the store-wide sequence; new records inserted with their
    ranking vectors.

    **(deviation)** Every created record gets its ranking vector now (SPEC 12; Membrane embeds
    new skills and plans, facts only in a later backfill). An entity given an inverse link gets a
    ``revise`` entry naming it (every write appends audit, SPEC 6; Membrane's ``AddRelation``
    writes none). A reinforcement also sets ``last_reinforced_at``, as ``reinforce`` does (SPEC 6;
    Membrane's ``UpdateSalience`` leaves it)."""
    p, store = batch.p, ctx.store
    now, now_t = p.now, p.now_t
    stamp = format_time(now)
    entries: list[dict[str, Any]] = []
    digests: dict[str, str | None] = {}
    ends: dict[str, tuple[int, str]] = {}
    updates: list[tuple[str, dict[str, Any]]] = []
    ids = sorted(batch.changes)
    found = store.rows_for_update(conn, ids) if ids else {}
    for rid in ids:
        if rid not in found:  # the snapshot was taken under the write lock: it cannot be gone
            raise MembraneError(f"record {rid!r} left the store during consolidation; nothing was written")
        cols, end = found[rid]
        change = batch.changes[rid]
        # The change is made on the stored document, which is then validated: the record is
        # one "just built by validation", whose row takes the faster dump (record_row).
        doc = orjson.loads(cols["doc"])
        doc["audit_log"] = []
        doc["updated_at"] = stamp
        if change.salience is not None:
            anchor = (float(change.salience), now_t)
            doc["salience"] = anchor[0]
        else:
            anchor = (float(cols["anchor_salience"]), float(cols["anchor_at"]))
            doc["salience"] = float(p.salience(np.array([p.snap.row_of[rid]]), now_t)[0])
        if change.reinforced:
            doc["lifecycle"]["last_reinforced_at"] = stamp
        if change.relations:
            doc["relations"] = [*(doc.get("relations") or []),
                                *(r.model_dump(mode="json", exclude_none=True) for r in change.relations)]
        record = MemoryRecord.model_validate(doc)
        row = record_row(record, *anchor, None, validated=True)
        digests[rid] = row_digest(row)
        if end is not None:
            ends[rid] = end
        updates.append((rid, {k: v for k, v in row.items() if k != "id" and not _same(cols.get(k), v)}))
        entries += [{"record_id": rid, "action": action, "actor": p.actor, "timestamp": now, "rationale": rationale,
                     "details": details} for action, rationale, details in change.entries]
    inserts: list[tuple] = []
    for rid, created in batch.created.items():
        digests[rid] = live_digest(created.values[:-1])
        inserts.append(created.values)
        entries += [{"record_id": rid, "action": action, "actor": p.actor, "timestamp": now, "rationale": rationale,
                     "details": details} for action, rationale, details in created.entries]
    rows, heads = chain(entries, ends, digests)
    place(conn, rows)
    for start in range(0, len(rows), _AUDIT_CHUNK):
        store.write_updates(conn, rows[start:start + _AUDIT_CHUNK], [])
    if inserts:
        store.insert_values(conn, [(*v[:-1], heads[v[0]]) for v in inserts])
    for start in range(0, len(updates), _UPDATE_CHUNK):
        store.write_updates(conn, [], [(rid, {**cols, "audit_head": heads[rid]})
                                       for rid, cols in updates[start:start + _UPDATE_CHUNK]])
    if batch.vectors:  # SPEC 9: ranking vectors at write time
        store.insert_vectors(conn, batch.vectors, replace=True)


__all__ = ["Batch", "Change", "Created", "Episode", "Pass", "SENSITIVITY_AT", "new_record", "reinforced_from", "write"]
