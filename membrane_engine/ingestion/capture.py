"""Capture (SPEC 12), step for step with Membrane 8408c8c ``pkg/ingestion/capture.go``: the
fallback interpretation (and an interpreter's, when one is given), candidate records, the
primary record (an event, tool output or working state, as Membrane's Ingest* build them),
each mention resolved to an entity through storage's entity term index (or a new entity),
edges in both directions, reference and relation candidates resolved, the derived semantic
record for an explicit fact, and the interpretation's final status.

A capture is *planned* first, reading the store but writing nothing (``_Planner``), then
*written* (``_write``): the preview runs the same planner in a read transaction, so what it
shows is what the capture writes. The write is one transaction: the records created, the
relations added to existing records, their audit entries and the created records' ranking
vectors commit together or not at all (a batch of captures too).

Trust on write: every record a capture creates has the capture's sensitivity and scope.
Candidates and entity matches come from the capture's scope and unscoped records only (an
unscoped capture: unscoped records only), and an existing record is changed (given a relation)
only when it is at least as sensitive as the capture: an entity less sensitive than the
capture is not matched (a new entity at the capture's level is made instead), and a less
sensitive record a capture refers to gets no inverse edge. With an operator's clearance
(``within``) a record it does not see in full reads as absent.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import orjson

from membrane_engine.context import EngineContext
from membrane_engine.errors import ValidationError
from membrane_engine.ingestion import interpret as ip
from membrane_engine.ingestion.models import (
    CaptureMemoryRequest,
    CaptureMemoryResponse,
    Interpretation,
    Mention,
    MentionResolution,
    ReferenceCandidate,
    RelationCandidate,
)
from membrane_engine.model.records import (
    MAX_ACTOR_LENGTH,
    UTC,
    AuditAction,
    AuditEntry,
    DecayProfile,
    DeletionPolicy,
    EntityAlias,
    EntityIdentifier,
    EntityPayload,
    EnvironmentSnapshot,
    EpisodicPayload,
    EvidenceRef,
    Lifecycle,
    MemoryRecord,
    MemoryType,
    Provenance,
    ProvenanceKind,
    ProvenanceSource,
    Relation,
    SemanticPayload,
    TaskState,
    TimelineEvent,
    ToolNode,
    Validity,
    WorkingPayload,
    check_text,
    sensitivity_level,
    to_epoch,
    validate_record,
)
from membrane_engine.retrieval.graph import GraphEdge
from membrane_engine.rules import chain as audit_chain
from membrane_engine.rules.entity_terms import term_key
from membrane_engine.rules.salience import anchor_of, salience_of, salience_rows
from membrane_engine.rules.trust import TrustContext, Verdict, as_trust, verdict_as_read, verdicts
from membrane_engine.storage import entity_index
from membrane_engine.storage.audit_log import place, row_digest
from membrane_engine.storage.store import Store, StoreConnection, record_row, rows_in
from membrane_engine.transfer.imports import vector_rows

CANDIDATE_LIMIT = 20  # candidates kept for resolution (Membrane's captureCandidateLimit)
CANDIDATE_POOL = 80  # records read per scope to pick them from (captureCandidateSearchPool)
# A capture's timestamp may run this far ahead of the engine's clock (an agent's clock drifts);
# further ahead it is refused (see ``_timestamp``).
MAX_CLOCK_SKEW = 300.0
INGESTION_ACTOR = "ingestion-service"  # who creates the primary record in Membrane

# Membrane's ingestion policy defaults (pkg/ingestion/policy.go): half-lives by type, initial
# confidence by what was captured, and the record NewMemoryRecord makes (entities, facts).
HALF_LIFE = {MemoryType.EPISODIC: 3600, MemoryType.WORKING: 86400, MemoryType.SEMANTIC: 2592000}
CONFIDENCE = {"event": 0.8, "tool_output": 0.9, "observation": 0.7, "working_state": 1.0}
NEW_RECORD_HALF_LIFE = 86400
SELF_NAMESPACE = "membrane"  # an entity's own identifier (EntityIdentifierNamespaceSelf)


class Interpreter(Protocol):
    """An ingest-side interpreter (Membrane's Interpreter, e.g. an LLM): ``interpret(request,
    timestamp)`` returns an ``Interpretation`` merged over the fallback one. It may also have
    ``resolve(request, timestamp, interpretation, candidates)`` (Membrane's CandidateResolver),
    asked with the candidate records' documents. An interpreter that fails or returns None is
    ignored, as in Membrane."""

    def interpret(self, request: CaptureMemoryRequest, timestamp: datetime) -> Interpretation | None: ...


# ----------------------------------------------------------------------------- reading the store


class _Reader:
    """What a capture reads, in the transaction it is planned in: documents by id, the
    candidate pool of a scope, and the entity term index. ``within``: an operator's clearance;
    a record it does not see in full reads as absent. ``extra``: documents of records an
    earlier capture of the same batch created (written in this transaction, not yet in the
    column cache's snapshot)."""

    def __init__(self, store: Store, conn: StoreConnection, snapshot: Any, within: TrustContext | None,
                 indexed: bool, extra: Sequence[dict[str, Any]] = ()):
        self.store, self.conn, self.snapshot, self.within = store, conn, snapshot, within
        self.indexed = indexed  # the entity index has taken in every change (catch_up ran)
        self.extra = list(extra)
        self._docs: dict[str, dict[str, Any] | None] = {}

    def _seen(self, doc: dict[str, Any]) -> bool:
        return self.within is None or verdict_as_read(doc.get("sensitivity"), str(doc.get("scope") or ""),
                                                      self.within) is Verdict.FULL

    def docs(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        wanted = [i for i in dict.fromkeys(ids) if isinstance(i, str) and i and i not in self._docs]
        if wanted:
            texts = dict(rows_in(self.conn, "records", ("id", "doc"), "id", wanted))
            for rid in wanted:
                doc = orjson.loads(texts[rid]) if rid in texts else None
                self._docs[rid] = doc if doc is not None and self._seen(doc) else None
        return {rid: self._docs[rid] for rid in dict.fromkeys(ids) if self._docs.get(rid) is not None}

    def doc(self, record_id: str) -> dict[str, Any] | None:
        return self.docs([record_id]).get(record_id)

    def pool(self, scope: str, now: float) -> list[dict[str, Any]]:
        """Membrane's List(scope, 80): the most salient records of ``scope`` (S(now), newest
        first among equals), this batch's own first."""
        out = [d for d in self.extra if str(d.get("scope") or "") == scope and self._seen(d)]
        snap = self.snapshot
        try:
            code = snap.scope_names.index(scope)
        except ValueError:
            return out[:CANDIDATE_POOL]
        n = len(snap.ids)
        rows = np.flatnonzero(snap.alive[:n] & (snap.scope_code[:n] == code))
        if self.within is not None and len(rows):
            seen = verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, self.within) == 2
            rows = rows[seen]
        room = CANDIDATE_POOL - len(out)
        if room <= 0 or not len(rows):
            return out[:CANDIDATE_POOL]
        s = salience_rows(snap.decay, rows, now)
        if len(rows) > room:
            floor = -np.partition(-s, room - 1)[room - 1]  # the room-th highest salience
            keep = s >= floor
            rows, s = rows[keep], s[keep]
        order = np.lexsort((-snap.created_at[rows], -s))[:room]
        ids = [str(snap.ids[r]) for r in rows[order]]
        found = self.docs(ids)
        return out + [found[rid] for rid in ids if rid in found]

    def entities(self, keys: Iterable[str], scopes: Sequence[str]) -> list[tuple[str, str, str, int]]:
        return entity_index.find(self.conn, keys, scopes, current=self.indexed)


# ----------------------------------------------------------------------------- the plan


@dataclass
class _Linked:
    """An existing record a capture gives relations to: its document as read, the record as it
    will be, and the relations added (predicate, target) in order."""

    doc: dict[str, Any]
    record: MemoryRecord
    added: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _Plan:
    request: CaptureMemoryRequest
    now: datetime
    primary: MemoryRecord
    created: list[MemoryRecord]  # entities and the derived fact, in creation order
    linked: dict[str, _Linked]
    edges: list[GraphEdge]
    mentions: list[MentionResolution]
    audit: list[dict[str, Any]]  # audit entries (chain.chain's input), in order

    @property
    def new_records(self) -> list[MemoryRecord]:
        return [self.primary, *self.created]

    def response(self, dry_run: bool) -> CaptureMemoryResponse:
        logs: dict[str, list[AuditEntry]] = {}
        for e in self.audit:
            logs.setdefault(e["record_id"], []).append(
                AuditEntry(action=e["action"], actor=e["actor"], timestamp=e["timestamp"], rationale=e["rationale"]))

        def shown(record: MemoryRecord, with_log: bool) -> MemoryRecord:
            # the plan's own records (nothing else holds them): as stored, with the entries written
            record.audit_log = logs.get(record.id, []) if with_log else []
            return record

        return CaptureMemoryResponse(
            primary_record=shown(self.primary, True), created_records=[shown(r, True) for r in self.created],
            edges=list(self.edges), updated_records=[shown(x.record, False) for x in self.linked.values()],
            mentions=list(self.mentions), dry_run=dry_run)


def _timestamp(req: CaptureMemoryRequest, now: datetime) -> datetime:
    """The capture's instant: the request's, else the write time. **(deviation)** A timestamp
    more than MAX_CLOCK_SKEW ahead of the engine's clock is refused: the records would be
    created in the future (Membrane takes any instant)."""
    if req.timestamp is None:
        return now
    if to_epoch(req.timestamp) > to_epoch(now) + MAX_CLOCK_SKEW:
        raise ValidationError(f"timestamp: {req.timestamp.isoformat()} is in the future (the engine's time is "
                              f"{now.isoformat()})", [("timestamp", "in the future")])
    return req.timestamp


def _ask(call: Callable[..., Any] | None, *args: Any) -> Interpretation | None:
    """An interpreter's answer, or None when it has none or fails (Membrane ignores its errors)."""
    if call is None:
        return None
    try:
        answer = call(*args)
    except Exception:
        return None
    if answer is None:
        return None
    if isinstance(answer, dict):
        try:
            return Interpretation.model_validate(answer)
        except Exception:
            return None
    return answer if isinstance(answer, Interpretation) else None


def _lifecycle(half_life: int, now: datetime) -> Lifecycle:
    return Lifecycle(decay=DecayProfile(half_life_seconds=half_life), last_reinforced_at=now,
                     deletion_policy=DeletionPolicy.AUTO_PRUNE)


def _attach_context(payload: EpisodicPayload, req: CaptureMemoryRequest) -> None:
    """Membrane's attachCaptureContext: the capture's content, context and reason kept in the
    episode's environment."""
    env = payload.environment or EnvironmentSnapshot()
    env.context = {**env.context, "capture_content": req.content, "capture_context": req.context,
                   "reason_to_remember": req.reason_to_remember}
    payload.environment = env


def build_primary(req: CaptureMemoryRequest, ts: datetime, now: datetime) -> tuple[MemoryRecord, str]:
    """The record a capture is stored as (Membrane's createPrimaryRecord and Ingest*): working
    memory for working state, an episode with its tool node for tool output, an episode for
    anything else (an observation too, of event kind "observation"). Returns it with the kind
    of candidate it was made as (Membrane's CandidateKind, named in its audit entry). Refuses
    with a ValidationError what Membrane's policy refuses (no thread, no tool name)."""
    content = ip.as_object(req.content)
    kind = req.source_kind
    if kind == "working_state":
        thread = ip.string_value(content, "thread_id", "thread")
        if not thread:
            raise ValidationError("content.thread_id: thread ID is required for working state candidates",
                                  [("content.thread_id", "required for working_state")])
        state_text = ip.string_value(content, "state")
        state = TaskState(state_text) if state_text in TaskState._value2member_map_ else TaskState.EXECUTING
        payload: Any = WorkingPayload(
            kind="working", thread_id=thread, state=state, active_constraints=ip.constraint_list(content.get("active_constraints")),
            next_actions=ip.string_list(content.get("next_actions")),
            open_questions=ip.string_list(content.get("open_questions")),
            context_summary=ip.first_non_empty(req.summary, req.reason_to_remember,
                                               ip.string_value(content, "context_summary", "summary")))
        candidate, mtype, source = "working_state", MemoryType.WORKING, (ProvenanceKind.EVENT, thread)
    elif kind == "tool_output":
        tool = ip.string_value(content, "tool_name", "tool")
        if not tool:
            raise ValidationError("content.tool_name: tool name is required for tool output candidates",
                                  [("content.tool_name", "required for tool_output")])
        node = str(uuid.uuid4())
        payload = EpisodicPayload(
            kind="episodic", timeline=[TimelineEvent(t=ts, event_kind="tool_call", ref=node, summary=f"tool_call: {tool}")],
            tool_graph=[ToolNode(id=node, tool=tool, args=ip.as_object(content.get("args")), result=content.get("result"),
                                 timestamp=ts, depends_on=ip.string_list(content.get("depends_on")))])
        _attach_context(payload, req)
        candidate, mtype, source = "tool_output", MemoryType.EPISODIC, (ProvenanceKind.TOOL_CALL, node)
    else:
        ref = ip.first_non_empty(ip.string_value(content, "ref", "id"), str(uuid.uuid4()))
        summary = ip.first_non_empty(req.summary, req.reason_to_remember, ip.summarize_content(req.content))
        payload = EpisodicPayload(kind="episodic", timeline=[TimelineEvent(
            t=ts, event_kind=ip.first_non_empty(kind, "event"), ref=ref, summary=summary)])
        _attach_context(payload, req)
        candidate, mtype, source = "event", MemoryType.EPISODIC, (ProvenanceKind.EVENT, ref)
    record = MemoryRecord(
        id=str(uuid.uuid4()), type=mtype, sensitivity=req.level, confidence=CONFIDENCE[candidate], salience=1.0,
        scope=req.scope, tags=list(req.tags), created_at=now, updated_at=now,
        lifecycle=_lifecycle(HALF_LIFE[mtype], now),
        provenance=Provenance(sources=[ProvenanceSource(kind=source[0], ref=source[1], created_by=req.source,
                                                        timestamp=ts)], created_by=INGESTION_ACTOR),
        payload=payload)
    return record, candidate


def build_entity(mention: Mention, req: CaptureMemoryRequest, ts: datetime, now: datetime) -> MemoryRecord:
    """A new canonical entity for a mention nothing matched (Membrane's buildEntityRecord), at
    the capture's sensitivity and in its scope."""
    name = ip.first_non_empty(mention.surface, "entity")
    primary_type = ip.entity_type(mention.entity_kind)
    aliases = [EntityAlias(value=v.strip()) for v in ip.unique_strings([name, *mention.aliases]) if v.strip()]
    return MemoryRecord(
        id=str(uuid.uuid4()), type=MemoryType.ENTITY, sensitivity=req.level, confidence=1.0, salience=1.0,
        scope=req.scope, created_at=ts, updated_at=ts, lifecycle=_lifecycle(NEW_RECORD_HALF_LIFE, now),
        provenance=Provenance(sources=[], created_by=req.source),
        payload=EntityPayload(kind="entity", canonical_name=name, primary_type=primary_type, types=[primary_type],
                              aliases=aliases, identifiers=[EntityIdentifier(namespace=SELF_NAMESPACE,
                                                                             value=str(uuid.uuid4()))],
                              summary=name))


def _doc(record: MemoryRecord) -> dict[str, Any]:
    return record.to_json_dict()


class _Planner:
    """One capture planned against a reader: Membrane's captureMemory, writing nothing."""

    def __init__(self, reader: _Reader, req: CaptureMemoryRequest, actor: str | None, now: datetime,
                 interpreter: Any = None):
        self.reader, self.req, self.actor, self.now = reader, req, actor, now
        self.interpreter = interpreter
        self.level = sensitivity_level(req.level)
        self.scopes = [req.scope, ""] if req.scope else [""]
        self.records: dict[str, MemoryRecord] = {}  # created this capture, by id (the primary included)
        self.linked: dict[str, _Linked] = {}
        self.edges: list[GraphEdge] = []
        self.audit: list[dict[str, Any]] = []

    # who writes ----------------------------------------------------------------------

    def _actor(self, default: str) -> str:
        return self.actor if self.actor is not None else default

    def _entry(self, record_id: str, action: AuditAction, actor: str, rationale: str,
               details: dict[str, Any] | None = None) -> None:
        """An audit entry dated at the write time. **(deviation)** Membrane dates an entity's
        and a fact's entry at the capture's timestamp: here the log says when it was written."""
        self.audit.append({"record_id": record_id, "action": action, "actor": actor, "timestamp": self.now,
                           "rationale": rationale, "details": details})

    # what may be linked --------------------------------------------------------------

    def _in_scope(self, doc: dict[str, Any]) -> bool:
        """A record the capture may resolve to: its scope or unscoped (an unscoped capture:
        unscoped only). **(deviation)** Membrane's unscoped listing reaches every scope."""
        return str(doc.get("scope") or "") in self.scopes

    def _may_change(self, doc: dict[str, Any]) -> bool:
        """Trust on write: an existing record is changed only by a capture no more sensitive
        than it."""
        return doc.get("id") in self.records or sensitivity_level(doc.get("sensitivity")) >= self.level

    def _target(self, record_id: str, pool: list[dict[str, Any]]) -> dict[str, Any] | None:
        """A record named by id (a candidate's, one created here, or one in the store) that the
        capture may resolve to."""
        if not record_id:
            return None
        if record_id in self.records:
            return _doc(self.records[record_id])
        doc = next((d for d in pool if d.get("id") == record_id), None) or self.reader.doc(record_id)
        return doc if doc is not None and self._in_scope(doc) else None

    # edges ----------------------------------------------------------------------------

    def _relate(self, source_id: str, predicate: str, target_id: str, weight: float, at: datetime,
                source_doc: dict[str, Any] | None = None) -> None:
        """A relation source -> target, kept as Membrane's storage keeps it: one per (predicate,
        target), the latest weight and time winning."""
        relation = Relation(predicate=predicate, target_id=target_id, weight=weight, created_at=at)
        record = self.records.get(source_id)
        if record is None:
            linked = self.linked.get(source_id)
            if linked is None:
                assert source_doc is not None
                after = dict(source_doc)
                after["audit_log"] = []
                linked = self.linked[source_id] = _Linked(source_doc, MemoryRecord.model_validate(after))
            record = linked.record
            if (predicate, target_id) not in linked.added:
                linked.added.append((predicate, target_id))
        for k, existing in enumerate(record.relations):
            if existing.predicate == predicate and existing.target_id == target_id:
                record.relations[k] = relation
                return
        record.relations.append(relation)

    def _edge(self, source_id: str, predicate: str, target_id: str, weight: float, at: datetime,
              source_doc: dict[str, Any] | None = None) -> GraphEdge:
        self._relate(source_id, predicate, target_id, weight, at, source_doc)
        edge = GraphEdge(source_id=source_id, predicate=predicate, target_id=target_id, weight=weight)
        self.edges.append(edge)
        return edge

    def _pair(self, source_id: str, predicate: str, target: dict[str, Any], weight: float, at: datetime,
              inverse: str | None = None) -> None:
        """source -> target and its inverse target -> source; the inverse only when the target
        may be changed on the strength of this capture **(deviation: Membrane always writes it)**."""
        target_id = str(target["id"])
        self._edge(source_id, predicate, target_id, weight, at)
        if self._may_change(target):
            self._edge(target_id, inverse or ip.inverse_predicate(predicate), source_id, weight, at, target)

    # the steps -----------------------------------------------------------------------

    def candidates(self, interpretation: Interpretation) -> list[dict[str, Any]]:
        """Membrane's fetchCaptureCandidates: the 80 most salient records of the capture's scope
        and of no scope, the 20 best by ``interpret.candidate_score``."""
        t = to_epoch(self.now)
        docs = self.reader.pool(self.req.scope, t)
        if self.req.scope:
            docs += self.reader.pool("", t)
        return ip.rank_candidates(docs, self.req, interpretation, t, CANDIDATE_LIMIT)

    def _entity_by_terms(self, mention: Mention) -> dict[str, Any] | None:
        terms = ip.unique_strings([mention.surface, *mention.aliases])
        keys = [term_key(t) for t in terms]
        rows = self.reader.entities(keys, self.scopes)
        for key in keys:
            hits = sorted((r for r in rows if r[1] == key and r[3] >= self.level),
                          key=lambda r: (r[2] != self.req.scope, r[3], r[0]))
            if not hits:
                continue
            found = self.reader.docs([r[0] for r in hits])
            for rid, *_ in hits:
                doc = found.get(rid)
                if doc is not None and doc.get("type") == "entity":
                    return doc
        return None

    def resolve_mention(self, mention: Mention, pool: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, bool]:
        """Membrane's resolveMentionEntity: the entity the interpreter named, else one whose
        normalised name or alias is the mention's (the capture's scope first, then unscoped;
        **(deviation)** among those at least as sensitive as the capture, the least sensitive
        first: Membrane takes the first by id at any sensitivity), else a matching entity among
        the candidates. (The entity, whether it was created here.)"""

        def usable(doc: dict[str, Any] | None) -> bool:
            return doc is not None and doc.get("type") == "entity" and self._in_scope(doc) and self._may_change(doc)

        if mention.canonical_entity_id:
            doc = self._target(mention.canonical_entity_id, pool)
            if usable(doc):
                return doc, mention.canonical_entity_id in self.records
        doc = self._entity_by_terms(mention)
        if usable(doc):
            return doc, False
        doc = ip.find_matching_entity(mention, (d for d in pool if usable(d)))
        if doc is not None:
            return doc, str(doc["id"]) in self.records
        return None, False

    def plan(self) -> _Plan:
        req, now = self.req, self.now
        ts = _timestamp(req, now)
        interpretation = ip.fallback_interpretation(req)
        if self.interpreter is not None:
            interpretation = ip.merge_interpretations(
                interpretation, _ask(getattr(self.interpreter, "interpret", None), req, ts))
        candidates = self.candidates(interpretation)
        if self.interpreter is not None:
            interpretation = ip.merge_interpretations(
                interpretation, _ask(getattr(self.interpreter, "resolve", None), req, ts, interpretation, candidates))
        primary, candidate_kind = build_primary(req, ts, now)
        self.records[primary.id] = primary
        self._entry(primary.id, AuditAction.CREATE, self._actor(INGESTION_ACTOR),
                    f"Ingested {candidate_kind} from {req.source}")
        interpretation = interpretation.model_copy(deep=True)
        pool = [*candidates, _doc(primary)]
        created: list[MemoryRecord] = []
        resolutions: list[MentionResolution] = []

        for mention in interpretation.mentions:
            doc, made_here = self.resolve_mention(mention, pool)
            if doc is None:
                entity = build_entity(mention, req, ts, now)
                self.records[entity.id] = entity
                created.append(entity)
                self._entry(entity.id, AuditAction.CREATE, self._actor(req.source),
                            f"Created canonical entity during capture resolution (mentioned in {primary.id})",
                            {"sources": [primary.id]})
                doc, made_here = _doc(entity), True
                pool.append(doc)
            entity_id = str(doc["id"])
            mention.canonical_entity_id = entity_id
            if mention.confidence == 0:
                mention.confidence = 1.0
            self._edge(primary.id, "mentions_entity", entity_id, 1.0, ts)
            self._edge(entity_id, "mentioned_in", primary.id, 1.0, ts, doc)
            names = ip.entity_names(doc)
            resolutions.append(MentionResolution(surface=mention.surface, entity_id=entity_id,
                                                 canonical_name=names[0] if names else "", created=made_here))

        for ref in interpretation.reference_candidates:
            self._reference(ref, primary, pool, ts)
        for rel in interpretation.relation_candidates:
            self._relation(rel, primary, pool, ts)
        fact = self._fact(primary, interpretation, ts)
        if fact is not None:
            created.append(fact)

        interpretation.status = ip.final_status(interpretation)
        primary.interpretation = interpretation.model_dump(mode="json")
        return _Plan(req, now, primary, created, self.linked, self.edges, resolutions, self.audit)

    def _resolve_target(self, cand: ReferenceCandidate | RelationCandidate, pool: list[dict[str, Any]]
                        ) -> dict[str, Any] | None:
        for rid in (cand.target_record_id, cand.target_entity_id):
            doc = self._target(rid, pool)
            if doc is not None:
                return doc
        return None

    def _reference(self, ref: ReferenceCandidate, primary: MemoryRecord, pool: list[dict[str, Any]],
                   ts: datetime) -> None:
        """Membrane's reference resolution: a target named by id, else a candidate whose id is
        the reference or whose timeline holds it; a reference to the capture itself is
        resolved without an edge."""
        target = self._resolve_target(ref, pool)
        if target is None and ref.ref:
            target = next((d for d in pool if d.get("id") == ref.ref or ip.record_contains_reference(d, ref.ref)), None)
        if target is not None and target.get("id") == primary.id:
            ref.target_record_id, ref.resolved = primary.id, True
            return
        if target is None:
            ref.resolved, ref.target_record_id, ref.target_entity_id = False, "", ""
            return
        if target.get("type") == "entity":
            ref.target_entity_id, ref.target_record_id = str(target["id"]), ""
        else:
            ref.target_record_id = str(target["id"])
        ref.resolved = True
        if ref.confidence == 0:
            ref.confidence = 1.0
        self._pair(primary.id, "references_record", target, 1.0, ts, "referenced_by")

    def _relation(self, rel: RelationCandidate, primary: MemoryRecord, pool: list[dict[str, Any]],
                  ts: datetime) -> None:
        """Membrane's materializeRelationCandidate: an interpreter's relation to a record named
        by id, with its inverse; cleared when the target is not found (or is the capture)."""
        target = self._resolve_target(rel, pool)
        if target is None or target.get("id") == primary.id:
            rel.resolved, rel.target_record_id, rel.target_entity_id = False, "", ""
            return
        predicate = ip.normalize_predicate(rel.predicate)
        if not predicate:
            return
        if target.get("type") == "entity":
            rel.target_entity_id, rel.target_record_id = str(target["id"]), ""
        else:
            rel.target_record_id = str(target["id"])
        rel.resolved = True
        if rel.confidence == 0:
            rel.confidence = 1.0
        rel.confidence = ip.clamp01(rel.confidence)
        self._pair(primary.id, predicate, target, rel.confidence, ts)

    def _fact(self, primary: MemoryRecord, interpretation: Interpretation, ts: datetime) -> MemoryRecord | None:
        """Membrane's maybeCreateSemanticRecord: the fact an observation (or a capture proposed
        as semantic, or interpreted with confidence 0.5 or more) states, as a semantic record
        derived from the capture, its subject and object linked to their entities."""
        req = self.req
        fact = ip.extract_fact(req.content)
        if fact is None:
            return None
        if (req.source_kind != "observation" and interpretation.proposed_type != MemoryType.SEMANTIC.value
                and interpretation.extraction_confidence < 0.5):
            return None
        subject, predicate, obj = fact
        payload = SemanticPayload(kind="semantic", subject=ip.canonical_side(subject, interpretation), predicate=predicate,
                                  object=ip.canonical_object(obj, interpretation), validity=Validity(),
                                  evidence=[EvidenceRef(source_type=primary.type.value, source_id=primary.id,
                                                        timestamp=ts)])
        payload_doc = payload.model_dump(mode="json")
        derived = ip.derive_semantic_interpretation(interpretation, payload_doc)
        record = MemoryRecord(
            id=str(uuid.uuid4()), type=MemoryType.SEMANTIC, sensitivity=req.level,
            confidence=max(primary.confidence, ip.interpretation_confidence(interpretation, ip.SEMANTIC_CONFIDENCE)),
            salience=max(primary.salience, ip.DERIVED_FACT_SALIENCE), scope=req.scope,
            tags=ip.unique_strings([*ip.unique_strings(req.tags), *interpretation.topical_labels]),
            created_at=ts, updated_at=ts, lifecycle=_lifecycle(NEW_RECORD_HALF_LIFE, self.now),
            provenance=Provenance(sources=[], created_by=req.source), payload=payload,
            interpretation=derived.model_dump(mode="json") if derived is not None else None)
        self.records[record.id] = record
        self._entry(record.id, AuditAction.CREATE, self._actor(req.source),
                    f"Derived semantic record during capture interpretation (from {primary.id})",
                    {"sources": [primary.id]})
        self._edge(primary.id, "derived_semantic", record.id, 1.0, ts)
        self._edge(record.id, "derived_from", primary.id, 1.0, ts)
        linked = False
        for entity_id, forward, inverse in ip.semantic_entity_links(payload_doc):
            doc = self._target(entity_id, [])
            if doc is None or doc.get("type") != "entity" or not self._may_change(doc):
                continue
            self._edge(record.id, forward, entity_id, 1.0, ts)
            self._edge(entity_id, inverse, record.id, 1.0, ts, doc)
            linked = True
        if linked:
            record.updated_at = ts
        return record


# ----------------------------------------------------------------------------- writing it


def stored_relations(relations: list[Relation], now: datetime) -> None:
    """Membrane's storage rules for a relation it writes: a weight of 0 is stored as 1, and a
    missing (or zero) created_at as the write time."""
    for rel in relations:
        if rel.weight == 0:
            rel.weight = 1.0
        if rel.created_at is None or rel.created_at.year <= 1:
            rel.created_at = now


def _validated(record: MemoryRecord, name: str) -> MemoryRecord:
    """The record as validation makes it (storage limits checked: a capture too large to store
    is refused, naming the record)."""
    return validate_record(record.to_json_dict(), where=f"{name}: ")


def _finish(plan: _Plan) -> None:
    """The plan's records as they will be stored: relations under Membrane's storage rules,
    each record validated (a record too large or a string too long for a column is refused),
    created records anchored at the write time with their salience."""
    now, at = plan.now, to_epoch(plan.now)
    names = {plan.primary.id: "primary_record"}
    fresh = []
    for k, record in enumerate(plan.new_records):
        stored_relations(record.relations, now)
        record.lifecycle.anchor_salience = float(record.salience)
        record.lifecycle.anchor_at = datetime.fromtimestamp(at, UTC)
        fresh.append(_validated(record, names.get(record.id, f"created_records.{k - 1}")))
    plan.primary, plan.created = fresh[0], fresh[1:]
    for linked in plan.linked.values():
        # Read from the store (valid) and given relations that were validated as they were made:
        # not validated again (a much-mentioned entity's document is long).
        stored_relations(linked.record.relations, now)
        linked.record.salience = salience_of(linked.record, now, anchor_of(linked.record))


def _write(ctx: EngineContext, conn: StoreConnection, plan: _Plan) -> None:
    """Write a finished plan inside the caller's transaction: audit entries chained (the
    existing records' after their chain ends, read under the write lock) and placed in the
    store-wide sequence, the created rows, the linked records' new documents, the created
    records' ranking vectors **(deviation: Membrane embeds captured records later, in a
    backfill; here they rank from the moment they are written)**."""
    store = ctx.store
    at = to_epoch(plan.now)
    rows = {r.id: record_row(r, float(r.salience), at, None, validated=True) for r in plan.new_records}
    stored = store.rows_for_update(conn, list(plan.linked)) if plan.linked else {}
    for rid, linked in plan.linked.items():
        if rid not in stored:  # read in this transaction, gone now: only another write could have
            raise ValidationError(f"record {rid!r} changed while the capture was written; nothing was written",
                                  [("record", rid)])
        cols = stored[rid][0]
        rows[rid] = record_row(linked.record, float(cols["anchor_salience"]), float(cols["anchor_at"]), None,
                               validated=True)
    digests = {rid: row_digest(row) for rid, row in rows.items()}
    ends = {rid: end for rid, (_, end) in stored.items() if end is not None}
    entries, heads = audit_chain.chain(plan.audit, ends, digests)
    place(conn, entries)
    store.insert_rows(conn, [dict(rows[r.id], audit_head=heads[r.id]) for r in plan.new_records])
    updates = []
    for rid in plan.linked:
        cols = stored[rid][0]
        row = dict(rows[rid], audit_head=heads[rid])
        updates.append((rid, {k: v for k, v in row.items() if k != "id" and not _same(cols.get(k), v)}))
    store.write_updates(conn, entries, updates)
    if ctx.embedder is not None:
        vectors = vector_rows(ctx.embedder, plan.new_records)
        if vectors:
            store.insert_vectors(conn, vectors)  # new ids: nothing to replace


def _same(stored: Any, value: Any) -> bool:
    return stored == value and (stored is None) == (value is None)


def _link_entries(plan: _Plan, actor: str) -> None:
    """One ``revise`` entry per relation a capture adds to an existing record, naming the
    capture, with the relation in its details (``history`` undoes it from there).
    **(deviation)** Membrane adds the relation without an audit entry."""
    for rid, linked in plan.linked.items():
        for predicate, target in linked.added:
            plan.audit.append({"record_id": rid, "action": AuditAction.REVISE, "actor": actor,
                               "timestamp": plan.now,
                               "rationale": f"linked by capture {plan.primary.id}: {predicate} -> {target}",
                               "details": {"relation": {"predicate": predicate, "target_id": target},
                                           "sources": [plan.primary.id]}})


# ----------------------------------------------------------------------------- entry points


def as_request(value: Any, where: str = "request") -> CaptureMemoryRequest:
    """A capture request from a request or a dict of its fields (ValidationError naming the field)."""
    if isinstance(value, CaptureMemoryRequest):
        return value
    if isinstance(value, dict):
        return CaptureMemoryRequest(**value)
    raise ValidationError(f"{where} must be a CaptureMemoryRequest or a dict of its fields (got "
                          f"{type(value).__name__})", [(where, "not a capture request")])


def _checked_actor(actor: Any) -> str | None:
    """None (Membrane's actors) or the actor every audit entry of the capture names."""
    if actor is None:
        return None
    if not isinstance(actor, str) or not actor.strip():
        raise ValidationError(f"actor must be a non-empty string or None (got {actor!r:.80})", [("actor", "empty")])
    return check_text(actor, "actor", MAX_ACTOR_LENGTH)


def _plan_one(reader: _Reader, req: CaptureMemoryRequest, actor: str | None, now: datetime,
              interpreter: Any) -> _Plan:
    plan = _Planner(reader, req, actor, now, interpreter).plan()
    _link_entries(plan, actor if actor is not None else req.source)
    _finish(plan)
    return plan


def capture_many(ctx: EngineContext, requests: Iterable[Any], actor: str | None = None, *,
                 within: TrustContext | None = None, interpreter: Any = None) -> list[CaptureMemoryResponse]:
    """Capture every request in order, in one transaction: all are written or none is (a bad
    request anywhere refuses the batch, naming it). A later capture resolves against what an
    earlier one wrote."""
    actor = _checked_actor(actor)
    if isinstance(requests, (CaptureMemoryRequest, dict)):
        items = [requests]
    elif isinstance(requests, Iterable) and not isinstance(requests, (str, bytes)):
        items = list(requests)
    else:
        raise ValidationError(f"requests must be a list of capture requests (got {requests!r:.80})",
                              [("requests", "not a list")])
    reqs = []
    for k, item in enumerate(items):
        try:
            reqs.append(as_request(item, f"requests.{k}"))
        except ValidationError as exc:
            raise ValidationError(f"request {k}: {exc}", [(f"{k}.{loc}", msg) for loc, msg in exc.problems]) from None
    if within is not None:
        within = as_trust(within, "clearance")
    snapshot = ctx.columns.current()  # before the write lock: the cache reads on a connection of its own
    responses: list[CaptureMemoryResponse] = []
    written: list[str] = []
    with ctx.store.write() as conn:
        now = ctx.now()  # after the lock: capture times follow commit order
        extra: list[dict[str, Any]] = []
        for k, req in enumerate(reqs):
            entity_index.catch_up(conn)  # takes in the entities earlier captures of the batch made
            reader = _Reader(ctx.store, conn, snapshot, within, indexed=True, extra=extra)
            try:
                plan = _plan_one(reader, req, actor, now, interpreter)
            except ValidationError as exc:
                if len(reqs) == 1:
                    raise
                raise ValidationError(f"request {k}: {exc}; nothing was written",
                                      [(f"{k}.{loc}", msg) for loc, msg in exc.problems]) from None
            _write(ctx, conn, plan)
            entity_index.took_in(conn, [(r.id, r.scope, sensitivity_level(r.sensitivity), r.payload.canonical_name,
                                         r.payload.alias_values) for r in plan.created if r.type == MemoryType.ENTITY])
            extra += [_doc(r) for r in plan.new_records]
            written += [r.id for r in plan.new_records]
            responses.append(plan.response(dry_run=False))
    if ctx.vectors is not None and written:
        ctx.vectors.forget(written)  # this process's matrix reads them again when asked
    return responses


def capture(ctx: EngineContext, request: Any, actor: str | None = None, *, within: TrustContext | None = None,
            interpreter: Any = None) -> CaptureMemoryResponse:
    """Membrane's CaptureMemory (SPEC 12): one transaction; the response names what was written."""
    return capture_many(ctx, [as_request(request)], actor, within=within, interpreter=interpreter)[0]


def preview(ctx: EngineContext, request: Any, actor: str | None = None, *, within: TrustContext | None = None,
            interpreter: Any = None) -> CaptureMemoryResponse:
    """What ``capture`` would write, planned by the same code in a read transaction: the
    entities it would match and create, the edges, the derived fact, the existing records it
    would link. Writes nothing (``dry_run`` is True on the answer; the ids of records it would
    create are made anew when it is applied)."""
    req = as_request(request)
    actor = _checked_actor(actor)
    if within is not None:
        within = as_trust(within, "clearance")
    snapshot = ctx.columns.current()
    with ctx.store.read() as conn:
        reader = _Reader(ctx.store, conn, snapshot, within, indexed=False)
        plan = _plan_one(reader, req, actor, ctx.now(), interpreter)
    return plan.response(dry_run=True)


__all__ = ["CANDIDATE_LIMIT", "CANDIDATE_POOL", "Interpreter", "as_request", "build_entity", "build_primary", "capture",
           "capture_many", "preview", "stored_relations"]
