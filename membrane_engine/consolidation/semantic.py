"""Semantic extraction, as Membrane's ``pkg/consolidation/semantic.go``: every event with a
summary of a successful episode is the fact (event kind, ``observed_in``, summary). A fact
already known is reinforced (+0.1, capped at 1); otherwise a semantic record is created with the
episode's sensitivity, scope and confidence, its tags after "consolidated", the episode as
provenance (observation), evidence and ``derived_from``, its subject and object resolved to
entities (``entity_links``). Facts created in the run are known to the episodes after them, so
an event kind seen twice creates one fact and reinforces it (reported in both lists, SPEC 12).

Which known fact an event reinforces, **(deviation)** where Membrane takes any semantic record
with that subject and predicate:
- only one in the episode's scope (scopes never mix, SPEC 12) and at least as sensitive as the
  episode (a record is never changed on the strength of a more sensitive source): the least
  sensitive such fact, then the smallest id. With none, a new fact at the episode's sensitivity
  is created;
- its subject is the event kind or the entity the event kind resolves to, so a fact whose subject
  was replaced by an entity's id is found again by the next run (Membrane keys its index by the
  stored subject and would create it anew);
- a retracted fact is neither reinforced nor created again: the event is left alone, so a
  curator's retraction is not undone by the next run.
"""

from __future__ import annotations

from dataclasses import dataclass

from membrane_engine.consolidation.batch import Batch, Episode, Pass, new_record
from membrane_engine.consolidation.entity_links import canonical_semantic
from membrane_engine.model.records import format_time
from membrane_engine.storage import consolidation_reads as reads

PREDICATE = "observed_in"
CONSOLIDATED = "consolidated"


@dataclass(frozen=True)
class Fact:
    level: int
    id: str
    retracted: bool


def derive_tags(tags: list[str]) -> list[str]:
    """Membrane's ``deriveTags``: "consolidated" first, then the source's tags but any spelling
    of "consolidated"."""
    return [CONSOLIDATED, *(t for t in tags if t.casefold() != CONSOLIDATED)]


def plan(p: Pass) -> Batch:
    batch = Batch(p)
    facts: dict[tuple[str, str], list[Fact]] = {}
    for rid, subject, status in reads.semantic_subjects(p.conn, PREDICATE):
        i = p.row(rid)
        if i is None or not isinstance(subject, str):
            continue
        scope, level = p.labels(i)
        facts.setdefault((scope, subject), []).append(Fact(level, rid, status == "retracted"))
    for ep in p.episodes():
        if ep.payload.get("outcome") != "success":
            continue
        for event in ep.payload.get("timeline") or []:
            if not isinstance(event, dict):
                continue
            summary = event.get("summary")
            if not isinstance(summary, str) or summary == "":
                continue
            kind = event.get("event_kind") if isinstance(event.get("event_kind"), str) else ""
            entity = p.entities.find(kind, ep.scope, ep.level)
            keys = [entity.id, kind] if entity is not None else [kind]
            known = [f for key in keys for f in facts.get((ep.scope, key), ()) if f.level >= ep.level]
            active = [f for f in known if not f.retracted]
            if active:
                batch.reinforce(min(active, key=lambda f: (f.level, f.id)).id, "semantic", ep.id)
            elif not known:
                rid = _create(p, batch, ep, kind, summary)
                facts.setdefault((ep.scope, keys[0]), []).append(Fact(ep.level, rid, False))
    return batch.finish()


def _create(p: Pass, batch: Batch, ep: Episode, kind: str, summary: str) -> str:
    stamp = format_time(p.now)
    payload = {"kind": "semantic", "subject": kind, "predicate": PREDICATE, "object": summary,
               "validity": {"mode": "global"},
               "evidence": [{"source_type": "episodic", "source_id": ep.id, "timestamp": stamp}],
               "revision_policy": "replace"}
    linked = canonical_semantic(p.entities, payload, ep.scope, ep.level)
    rid = batch.new_id()
    doc = new_record(p, rid, "semantic", ep.level, ep.scope, ep.confidence, derive_tags(ep.tags), payload,
                     [("observation", ep.id)], [ep.id])
    return batch.create(doc, [ep.id], f"Extracted from episodic record {ep.id}", linked)


__all__ = ["PREDICATE", "derive_tags", "plan"]
