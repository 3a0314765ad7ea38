"""Graph retrieval, SPEC 9 (Membrane's pkg/retrieval/graph.go and the facade's defaults):
ranked roots, then a breadth-first walk over ``relations``, every node gated by trust.

Roots are what ``retrieve`` returns for the request (3 x root_limit of them) plus entity
records whose canonical name or alias the task descriptor mentions, re-ranked as Membrane
does (entity name matches and links to such entities lift a root) and cut to root_limit. The
walk then follows each node's relations level by level up to max_hops, stopping at node_limit
nodes and edge_limit edges, in Membrane's order of checks.
"""

from __future__ import annotations

import re
import threading
from datetime import datetime
from typing import Any

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from membrane_engine.storage.columns import TYPE_CODES, ColumnCache, Snapshot
from membrane_engine.errors import NilTrustError, ValidationError
from membrane_engine.rules.ranking import Embedder
from membrane_engine.retrieval.layered import MAX_LIMIT, RetrieveRequest, materialize, run
from membrane_engine.rules.salience import salience_rows
from membrane_engine.model.records import EntityPayload, MemoryRecord, MemoryType, refused, to_epoch
from membrane_engine.rules.selector import DEFAULT_THRESHOLD, SelectionResult
from membrane_engine.storage.store import Store
from membrane_engine.storage.vectors import VectorIndex, cache_load
from membrane_engine.rules.trust import TrustContext, as_trust, gate_as_read

# Membrane's facade defaults (pkg/membrane/config.go): a request's 0 means these.
DEFAULT_ROOT_LIMIT = 10
DEFAULT_NODE_LIMIT = 25
DEFAULT_EDGE_LIMIT = 100
DEFAULT_MAX_HOPS = 1
MAX_HOPS = 10_000


class RetrieveGraphRequest(BaseModel):
    """A graph retrieval request (SPEC 8). As RetrieveRequest, constructing one never fails
    for missing trust or numbers out of range: the call checks. ``max_hops``: 0 means the
    default (1), -1 means no expansion (roots only), as Membrane's facade."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    trust: TrustContext | None = None
    task_descriptor: str = ""
    memory_types: list[Any] = Field(default_factory=list)
    min_salience: Any = 0.0
    root_limit: Any = DEFAULT_ROOT_LIMIT
    node_limit: Any = DEFAULT_NODE_LIMIT
    edge_limit: Any = DEFAULT_EDGE_LIMIT
    max_hops: Any = DEFAULT_MAX_HOPS
    as_of: datetime | None = None

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except PydanticValidationError as exc:
            raise refused("RetrieveGraphRequest", exc) from None


class GraphNode(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    record: MemoryRecord
    root: bool = False
    hop: int = 0


class GraphEdge(BaseModel):
    source_id: str
    predicate: str
    target_id: str
    weight: float


class RetrieveGraphResponse(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list)
    root_ids: list[str] = Field(default_factory=list)
    selection: SelectionResult | None = None


def _whole_number(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValidationError(f"{name} must be an integer (got {value!r})", [(name, "not an integer")])
    if not low <= value <= high:
        raise ValidationError(f"{name} must be between {low} and {high} (got {value})", [(name, "out of range")])
    return int(value)


def _limits(req: RetrieveGraphRequest) -> tuple[int, int, int, int]:
    """(root, node, edge limit, hops) after the facade's defaults: a limit of 0 is the
    default; max_hops 0 is the default and -1 is none."""
    root = _whole_number("root_limit", req.root_limit, 0, MAX_LIMIT) or DEFAULT_ROOT_LIMIT
    node = _whole_number("node_limit", req.node_limit, 0, MAX_LIMIT) or DEFAULT_NODE_LIMIT
    edge = _whole_number("edge_limit", req.edge_limit, 0, MAX_LIMIT) or DEFAULT_EDGE_LIMIT
    hops = _whole_number("max_hops", req.max_hops, -1, MAX_HOPS)
    hops = DEFAULT_MAX_HOPS if hops == 0 else max(hops, 0)
    return root, node, edge, hops


# --------------------------------------------------------------------------- entity roots

_SPACES = re.compile(r"\s+")


def normalize_term(text: str) -> str:
    """Membrane's NormalizeEntityTerm: lower case, trimmed, inner spaces collapsed."""
    return _SPACES.sub(" ", str(text).strip().lower())


class EntityTerms:
    """Normalized canonical names and aliases of the store's entity records, by row of the
    column cache; rows are read once (entities are few next to other records) and the index
    starts anew when the cache loads anew."""

    def __init__(self, store: Store):
        self.store = store
        self._lock = threading.Lock()
        self._row_of: Any = None
        self._known = np.zeros(0, dtype=bool)
        self._terms: dict[str, set[int]] = {}
        self._longest = 1  # words in the longest term

    def matching(self, snap: Snapshot, task: str) -> list[int]:
        """Rows of entities one of whose terms occurs in ``task`` as whole words.
        **(deviation)** Membrane matches an entity only when the whole descriptor equals one of
        its terms ("Orchid" finds Orchid, "deploy Orchid" does not); here any term the
        descriptor contains counts, so a task names its entities in a sentence."""
        words = _TERM_WORDS.findall(normalize_term(task))
        if not words:
            return []
        with self._lock:
            self._catch_up(snap)
            # a term occurs as whole words exactly when it is a run of the task's words: each run
            # is looked up (a task has a few dozen), not each of the store's terms
            longest = min(len(words), self._longest)
            rows: set[int] = set()
            for size in range(1, longest + 1):
                for start in range(len(words) - size + 1):
                    where = self._terms.get(" ".join(words[start:start + size]))
                    if where:
                        rows |= where
        return sorted(r for r in rows if r < len(snap.alive) and snap.alive[r])

    def load(self, snap: Snapshot) -> None:
        """Every entity's terms read now (``Membrane.warm``), not at the first graph request."""
        with self._lock:
            self._catch_up(snap)

    BULK = 2000  # more entity rows to read than this: one scan of the store's entities

    def _catch_up(self, snap: Snapshot) -> None:
        if self._row_of is not cache_load(snap):
            self._row_of, self._known, self._terms = cache_load(snap), np.zeros(0, dtype=bool), {}
            self._longest = 1
        n = len(snap.ids)
        if len(self._known) < n:
            self._known = np.concatenate([self._known, np.zeros(n - len(self._known), dtype=bool)])
        todo = np.flatnonzero(~self._known[:n] & (snap.type_code[:n] == TYPE_CODES["entity"]) & snap.alive[:n])
        if not len(todo):
            return
        ids = None if len(todo) > self.BULK else [str(x) for x in snap.ids[todo]]
        wanted = np.zeros(n, dtype=bool)
        wanted[todo] = True
        row_of = snap.row_of

        def read(conn) -> list[tuple[int, str | None, str | None]]:
            out = []
            for chunk in self.store.entity_names(conn, ids):
                for rid, name, aliases in chunk:
                    row = row_of.get(rid)
                    if row is not None and wanted[row]:
                        out.append((row, name, aliases))
            return out

        if ids is None:
            with self.store.read() as conn:
                found = read(conn)
        else:
            found = self.store.peeking(read)
        terms = self._terms
        keys: dict[str, str] = {}  # term -> its key, for names many entities share
        for row, name, aliases in found:
            for term in [name, *_alias_values(aliases)]:
                if not isinstance(term, str):
                    continue
                key = keys.get(term)
                if key is None:
                    # what " ".join(findall(normalize_term(term))) gives: the words, lower case
                    key = keys[term] = " ".join(_TERM_WORDS.findall(term.lower()))
                if key:
                    terms.setdefault(key, set()).add(row)
                    if " " in key:
                        self._longest = max(self._longest, key.count(" ") + 1)
        self._known[todo] = True


_TERM_WORDS = re.compile(r"[a-z0-9]+")


def _alias_values(aliases: str | None) -> list[str]:
    """An entity's alias strings from its stored ``aliases`` (JSON text: strings, or objects
    with a ``value``), as ``EntityPayload.alias_values`` reads them; the document was validated
    when it was written."""
    if not aliases:
        return []
    try:
        items = orjson.loads(aliases)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        value = item.get("value") if isinstance(item, dict) else item
        if isinstance(value, str) and value.strip():
            out.append(value.strip())
    return out


# --------------------------------------------------------------------------- re-ranking (graph.go)


def lexical_match(value: str, query: str) -> bool:
    v, q = normalize_term(value), normalize_term(query)
    return bool(v and q) and (v == q or q in v or v in q)


def relation_boost(predicate: str, fallback: float) -> float:
    p = normalize_term(predicate)
    if p in ("mentions_entity", "mentioned_in"):
        return fallback + 20
    if p in ("subject_entity", "fact_subject_of", "object_entity", "fact_object_of"):
        return fallback + 25
    if p in ("supports", "supported_by", "depends_on", "dependency_of"):
        return fallback + 10
    return fallback


def _entity_types(payload: EntityPayload) -> list[str]:
    return list(dict.fromkeys([t for t in [payload.primary_type, *payload.types] if t]))


def root_boost(record: MemoryRecord, query: str, entities: dict[str, EntityPayload | None]) -> float:
    """Membrane's rootBoost: an entity named in the query (by its canonical name or an alias),
    a record whose capture interpretation mentions it (SPEC 12), and links to such entities."""
    score = 0.0
    payload = record.payload
    if isinstance(payload, EntityPayload):
        if lexical_match(payload.canonical_name, query):
            score += 100
        if any(lexical_match(a, query) for a in payload.alias_values):
            score += 75
        if any(lexical_match(t, query) for t in _entity_types(payload)):
            score += 15
    score += _mention_boost(record.interpretation, query)
    for rel in record.relations or []:
        target = entities.get(rel.target_id)
        if target is None:
            continue
        if lexical_match(target.canonical_name, query):
            score += relation_boost(rel.predicate, 60)
        if any(lexical_match(a, query) for a in target.alias_values):
            score += relation_boost(rel.predicate, 45)
    return score


def _mention_boost(interpretation: Any, query: str) -> float:
    """The interpretation's part of rootBoost, as Membrane counts it: 30 for the first mention
    whose surface the query names (and no more mentions after it), else 20 for each mention
    one of whose aliases it names."""
    if not isinstance(interpretation, dict):
        return 0.0
    score = 0.0
    for mention in interpretation.get("mentions") or []:
        if not isinstance(mention, dict):
            continue
        if isinstance(mention.get("surface"), str) and lexical_match(mention["surface"], query):
            return score + 30
        if any(isinstance(a, str) and lexical_match(a, query) for a in mention.get("aliases") or []):
            score += 20
    return score


def rerank_roots(records: list[MemoryRecord], query: str, entities: dict[str, EntityPayload | None]) -> list[MemoryRecord]:
    """Membrane's rerankGraphRoots: position (earlier higher) plus root_boost; stable."""
    if not records or not query:
        return records
    n = len(records)
    scored = [(n - i + root_boost(r, query, entities), -i) for i, r in enumerate(records)]
    order = sorted(range(n), key=lambda i: scored[i], reverse=True)
    return [records[i] for i in order]


# --------------------------------------------------------------------------- the walk


def _read(store: Store, snap: Snapshot, ids: list[str], t: float) -> dict[str, MemoryRecord]:
    """Live records of ``ids`` as stored, with salience S(t), ungated: every caller passes each
    through ``trust.gate_as_read``, the one gate on the labels read with the content (SPEC 4),
    for roots and neighbours alike."""
    rows = [snap.row_of.get(rid) for rid in ids]
    live = [(rid, row) for rid, row in zip(ids, rows) if row is not None and snap.alive[row]]
    if not live:
        return {}
    order = np.array(sorted(row for _, row in live), dtype=np.int64)
    s = dict(zip((str(x) for x in snap.ids[order]), salience_rows(snap.decay, order, t).tolist()))
    return materialize(store, [rid for rid, _ in live], s)


def retrieve_graph(store: Store, cache: ColumnCache, req: RetrieveGraphRequest, terms: EntityTerms,
                   threshold: float = DEFAULT_THRESHOLD, embedder: Embedder | None = None,
                   vectors: VectorIndex | None = None) -> RetrieveGraphResponse:
    if req is None or getattr(req, "trust", None) is None:
        raise NilTrustError()
    root_limit, node_limit, edge_limit, max_hops = _limits(req)
    base = run(store, cache, RetrieveRequest(trust=req.trust, task_descriptor=req.task_descriptor,
                                             memory_types=req.memory_types, min_salience=req.min_salience,
                                             limit=min(3 * root_limit, MAX_LIMIT), as_of=req.as_of),
               threshold, embedder, counts=False, vectors=vectors)
    trust = as_trust(req.trust)
    as_of = req.as_of
    snap = cache.current()
    t = to_epoch(as_of)
    task = req.task_descriptor or ""

    candidates = list(base.response.records)
    wants_entities = not req.memory_types or any(
        (m.value if isinstance(m, MemoryType) else m) == "entity" for m in req.memory_types)
    if task.strip() and wants_entities:
        rows = terms.matching(snap, task)[:root_limit]
        found = _read(store, snap, [str(x) for x in snap.ids[rows]], t) if rows else {}
        candidates += [g for g in (gate_as_read(found.get(str(snap.ids[r])), trust) for r in rows) if g is not None]
    candidates = list({r.id: r for r in reversed(candidates)}.values())[::-1]  # first occurrence wins

    entities: dict[str, EntityPayload | None] = {}
    if task:
        linked = list({rel.target_id for r in candidates for rel in r.relations or []})
        for rid, rec in _read(store, snap, linked, t).items():
            seen = gate_as_read(rec, trust)
            # Membrane's relatedEntity: only an entity the context sees in full lends its names
            entities[rid] = seen.payload if seen is not None and not seen.redacted and \
                isinstance(seen.payload, EntityPayload) else None
    roots = rerank_roots(candidates, task, entities)[:root_limit]

    nodes: dict[str, GraphNode] = {}
    root_ids: list[str] = []
    for rec in roots:
        nodes[rec.id] = GraphNode(record=rec, root=True, hop=0)
        root_ids.append(rec.id)
        if len(nodes) >= node_limit:
            break

    edges = _walk(store, snap, nodes, list(nodes.values()), trust, t, max_hops, node_limit, edge_limit)
    return RetrieveGraphResponse(nodes=_ordered(nodes), edges=edges, root_ids=root_ids, selection=base.response.selection)


def _ordered(nodes: dict[str, GraphNode]) -> list[GraphNode]:
    """Roots first, then by hop, then salience descending (ties by id; Membrane's sort is not stable)."""
    return sorted(nodes.values(), key=lambda n: (not n.root, n.hop, -n.record.salience, n.record.id))


def _walk(store: Store, snap: Snapshot, nodes: dict[str, GraphNode], level: list[GraphNode], trust: TrustContext,
          t: float, max_hops: int, node_limit: int, edge_limit: int) -> list[GraphEdge]:
    """Breadth-first over relations from ``level``, adding to ``nodes``; Membrane's checks in
    its order: edge limit, duplicate edge, target missing or hidden (no node, no edge), node
    limit (no node, no edge), then the edge. Targets of a level are read in one statement."""
    edges: list[GraphEdge] = []
    seen_edges: set[tuple[str, str, str]] = set()
    while level:
        # Relations of a redacted node are not read: its relations are part of what redaction
        # withholds. **(deviation)** Membrane expands from a redacted node's stored relations.
        expanding = [n for n in level if n.hop < max_hops and not n.record.redacted]
        wanted = list({rel.target_id for n in expanding for rel in n.record.relations or []} - set(nodes))
        fetched = _read(store, snap, wanted, t) if wanted else {}
        next_level: list[GraphNode] = []
        for current in expanding:
            for rel in current.record.relations or []:
                if len(edges) >= edge_limit:
                    break
                key = (current.record.id, rel.predicate, rel.target_id)
                if key in seen_edges:
                    continue
                if rel.target_id not in nodes:
                    target = gate_as_read(fetched.get(rel.target_id), trust)
                    if target is None:  # missing, or hidden from this context: no node, no edge
                        continue
                    if len(nodes) >= node_limit:
                        continue
                    node = GraphNode(record=target, root=False, hop=current.hop + 1)
                    nodes[target.id] = node
                    next_level.append(node)
                edges.append(GraphEdge(source_id=current.record.id, predicate=rel.predicate,
                                       target_id=rel.target_id, weight=rel.weight))
                seen_edges.add(key)
        level = next_level
    return edges


def neighbourhood(store: Store, cache: ColumnCache, record_id: str, trust: TrustContext, incoming: list[str],
                  as_of: datetime, max_hops: int = 2, node_limit: int = 40, edge_limit: int = 200) -> RetrieveGraphResponse:
    """The records around one record as ``trust`` may see them: the record (the root), the
    records whose relations point at it (``incoming``, hop 1), and the relations out of
    both, walked up to ``max_hops`` (supersedes chains, derived_from, contested_by, entity
    mentions). The record itself is gated like every other node: hidden, the answer is empty."""
    trust = as_trust(trust)
    max_hops = _whole_number("max_hops", max_hops, 0, MAX_HOPS)
    node_limit = _whole_number("node_limit", node_limit, 1, MAX_LIMIT)
    edge_limit = _whole_number("edge_limit", edge_limit, 0, MAX_LIMIT)
    snap = cache.current()
    t = to_epoch(as_of)
    found = _read(store, snap, [record_id, *incoming], t)
    nodes: dict[str, GraphNode] = {}
    centre = gate_as_read(found.get(record_id), trust)
    if centre is None:
        return RetrieveGraphResponse()
    nodes[record_id] = GraphNode(record=centre, root=True, hop=0)
    for rid in incoming:
        seen = gate_as_read(found.get(rid), trust)
        if seen is not None and rid not in nodes and len(nodes) < node_limit:
            nodes[rid] = GraphNode(record=seen, root=False, hop=1)
    edges = _walk(store, snap, nodes, _ordered(nodes), trust, t, max_hops, node_limit, edge_limit)
    return RetrieveGraphResponse(nodes=_ordered(nodes), edges=edges, root_ids=[record_id])


def within(response: RetrieveGraphResponse, clearance: TrustContext) -> tuple[RetrieveGraphResponse, int]:
    """A graph cut to what ``clearance`` (an operator's, SPEC 10) allows: every node gated
    again, the stricter verdict winning (full under the agent's context but redacted under the
    clearance is redacted); nodes the clearance hides are dropped with their edges. An edge is a
    relation of its source, which a redacted view withholds: only edges out of nodes the
    clearance sees in full stay, and a node that no kept edge connects to a root is dropped too
    (it was reached through what the clearance withholds). Returns the graph and how many nodes
    were withheld."""
    clearance = as_trust(clearance)
    kept: dict[str, GraphNode] = {}
    for node in response.nodes:
        seen = gate_as_read(node.record, clearance)
        if seen is not None:
            kept[seen.id] = node if seen is node.record else GraphNode(record=seen, root=node.root, hop=node.hop)
    edges = [e for e in response.edges
             if e.source_id in kept and e.target_id in kept and not kept[e.source_id].record.redacted]
    roots = [rid for rid in response.root_ids if rid in kept]
    linked: dict[str, set[str]] = {}
    for e in edges:
        linked.setdefault(e.source_id, set()).add(e.target_id)
        linked.setdefault(e.target_id, set()).add(e.source_id)
    reached, frontier = set(roots), list(roots)
    while frontier:
        for other in linked.get(frontier.pop(), ()):
            if other not in reached:
                reached.add(other)
                frontier.append(other)
    nodes = [n for rid, n in kept.items() if rid in reached]
    edges = [e for e in edges if e.source_id in reached and e.target_id in reached]
    # The selection is left out: its records were gated for the agent only.
    return (RetrieveGraphResponse(nodes=nodes, edges=edges, root_ids=roots),
            len(response.nodes) - len(nodes))
