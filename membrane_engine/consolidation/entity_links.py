"""Entity links of consolidated records, as Membrane's ``pkg/consolidation/entity_links.go``.

Membrane has no entity-links pass of its own: its semantic, competence and plan graph
consolidators call ``canonicalizeSemanticRecordEntities`` and ``linkRecordToEntityTerms`` on
each record they create, in the same transaction. So do the consolidators here: a created fact
gets ``subject_entity`` / ``object_entity`` (and its subject or object replaced by the entity's
id), a created skill or plan ``uses``; each entity gets the inverse (``fact_subject_of``,
``fact_object_of``, ``used_by``).

Entities are found by a normalised term (lower case, trimmed, inner spaces collapsed, SPEC 12)
among their canonical names and aliases, in the record's scope first, then unscoped ones, in id
order (Membrane's ``FindEntitiesByTerm`` with limit 1); an unscoped record finds only unscoped
entities. Trust on write (SPEC 12) narrows both directions:

- a record links to an entity only when the entity is no more sensitive than the record
  (``may_link``): a less sensitive record never carries a more sensitive entity's id;
- the entity gets the inverse relation only when it is at least as sensitive as the record and
  in the same scope (``may_link_back``): a record is never changed on the strength of a more
  sensitive source, and an unscoped entity never names a scoped record. Where Membrane would
  write the inverse anyway, only the forward relation is written here **(deviation)**.

Membrane resolves against its entity term index. Consolidation here reads the entities' names
once per consolidator run (entities are few next to episodes) into ``EntityIndex``, with the
normalisation capture's index uses (``rules.entity_terms``): a run resolves thousands of terms,
in a read transaction for a dry run, and one scan answers them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from membrane_engine.rules.entity_terms import normalize_term
from membrane_engine.storage.store import Store, StoreConnection


@dataclass(frozen=True)
class Entity:
    """An entity record as the index knows it: id and labels."""

    id: str
    scope: str
    level: int


def may_link(record_level: int, entity: Entity) -> bool:
    """A record at ``record_level`` may name ``entity`` (relation, canonical subject or object)."""
    return entity.level <= record_level


def may_link_back(record_level: int, record_scope: str, entity: Entity) -> bool:
    """``entity`` may get the inverse relation to a record with these labels: everyone who sees
    the entity in full then sees the record in full."""
    return entity.level >= record_level and entity.scope == record_scope


def alias_values(aliases: Any) -> list[str]:
    """Alias strings of an entity's stored ``aliases`` (JSON text or a list: strings, or objects
    with a ``value``)."""
    if isinstance(aliases, (str, bytes)):
        try:
            aliases = orjson.loads(aliases)
        except orjson.JSONDecodeError:
            return []
    if not isinstance(aliases, list):
        return []
    out = []
    for a in aliases:
        value = a.get("value") if isinstance(a, dict) else a
        if isinstance(value, str):
            out.append(value)
    return out


class EntityIndex:
    """Normalised term -> the entities named by it, sorted by id."""

    def __init__(self, terms: dict[str, list[Entity]] | None = None):
        self.terms: dict[str, list[Entity]] = terms or {}

    @classmethod
    def load(cls, store: Store, conn: StoreConnection, label: Callable[[str], tuple[str, int] | None]) -> "EntityIndex":
        """Every live entity's terms; ``label(id)`` gives (scope, level) of an entity the run may
        use, None for one it may not (archived, or beyond an operator's clearance)."""
        terms: dict[str, dict[str, Entity]] = {}
        for chunk in store.entity_names(conn):
            for rid, name, aliases in chunk:
                labels = label(rid)
                if labels is None:
                    continue
                entity = Entity(rid, *labels)
                for term in [name, *alias_values(aliases)]:
                    if isinstance(term, str):
                        key = normalize_term(term)
                        if key:
                            terms.setdefault(key, {})[rid] = entity
        return cls({k: sorted(v.values(), key=lambda e: e.id) for k, v in terms.items()})

    def find(self, term: Any, scope: str, record_level: int) -> Entity | None:
        """The entity ``term`` names for a record in ``scope`` at ``record_level``: Membrane's
        order (the scope's own entities, then unscoped ones, each by id), skipping entities the
        record may not name (``may_link``)."""
        if not isinstance(term, str):
            return None
        found = self.terms.get(normalize_term(term))
        if not found:
            return None
        for wanted in ((scope, "") if scope else ("",)):
            for entity in found:
                if entity.scope == wanted and may_link(record_level, entity):
                    return entity
        return None


@dataclass
class Linked:
    """Relations a new record gets and the inverse relations its entities get."""

    forward: list[tuple[str, str]]  # (predicate, entity id) on the record
    back: list[tuple[str, str]]  # (entity id, inverse predicate) pointing at the record


def canonical_semantic(index: EntityIndex, payload: dict[str, Any], scope: str, level: int) -> Linked:
    """Membrane's ``canonicalizeSemanticRecordEntities`` on a new fact's payload (changed in
    place): a subject or (string) object naming an entity becomes the entity's id, with
    ``subject_entity`` / ``object_entity`` and their inverses."""
    linked = Linked([], [])
    for field, predicate, inverse in (("subject", "subject_entity", "fact_subject_of"),
                                      ("object", "object_entity", "fact_object_of")):
        entity = index.find(payload.get(field), scope, level)
        if entity is None:
            continue
        payload[field] = entity.id
        linked.forward.append((predicate, entity.id))
        if may_link_back(level, scope, entity):
            linked.back.append((entity.id, inverse))
    return linked


def link_terms(index: EntityIndex, terms: Iterable[Any], scope: str, level: int, predicate: str,
               inverse: str) -> Linked:
    """Membrane's ``linkRecordToEntityTerms``: one ``predicate`` relation per distinct entity
    the terms name, with its inverse."""
    linked = Linked([], [])
    seen: set[str] = set()
    for term in terms:
        entity = index.find(term, scope, level)
        if entity is None or entity.id in seen:
            continue
        seen.add(entity.id)
        linked.forward.append((predicate, entity.id))
        if may_link_back(level, scope, entity):
            linked.back.append((entity.id, inverse))
    return linked


_PLAN_PARAM_KEYS = ("tool", "command", "repo", "repository", "file", "service", "package")


def plan_entity_terms(nodes: Iterable[dict[str, Any]]) -> list[str]:
    """Membrane's ``planEntityTerms``: each node's op, then its string params named tool,
    command, repo, repository, file, service or package (non-empty), in that order."""
    terms: list[str] = []
    for node in nodes:
        op = node.get("op")
        if isinstance(op, str) and op:
            terms.append(op)
        params = node.get("params")
        if isinstance(params, dict):
            for key in _PLAN_PARAM_KEYS:
                value = params.get(key)
                if isinstance(value, str) and value:
                    terms.append(value)
    return terms


__all__ = ["Entity", "EntityIndex", "Linked", "alias_values", "canonical_semantic", "link_terms", "may_link",
           "may_link_back", "plan_entity_terms"]
