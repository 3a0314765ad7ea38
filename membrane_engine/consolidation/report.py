"""What a consolidation run did, or with ``dry_run`` would do (SPEC 12): one item per record
created, reinforced or compressed, each naming its consolidator and its sources, and the entity
links written. ``created``, ``reinforced`` and ``compressed`` are the ids SPEC 12 names; the
counts Membrane's ``ConsolidationResult`` reports are derived from the items.

A **proposal** is what an operator applies or rejects on its own (``report.proposals``): one
item, except that a record created in the run comes with the run's reinforcements of it (it
cannot be reinforced without being created). Its ``key`` names it stably across runs: the
consolidator, the action, the target (the record reinforced or compressed; for a record to be
created, a digest of its content without the times and ids a run makes anew) and the sorted
sources with their sensitivities (a compressed episode: its salience anchor). Planned again over
an unchanged store, a proposal has the same key; once its sources, their labels or the record it
would make change, it has another (``service.consolidate(only=...)`` reports the old one stale)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime
from typing import Any

import orjson

from membrane_engine.model.records import MemoryRecord

CREATED, REINFORCED, COMPRESSED = "created", "reinforced", "compressed"
# Membrane's consolidators in the order RunAll runs them (pkg/consolidation/consolidation.go);
# each one's actor is "consolidation/<kind>" when the caller names none.
KINDS = ("episodic", "semantic", "competence", "plangraph")


@dataclass(frozen=True)
class Link:
    """An entity link a consolidator writes (Membrane's ``schema.GraphEdge``): ``source_id``
    gets the relation ``predicate -> target_id``."""

    source_id: str
    predicate: str
    target_id: str
    weight: float = 1.0


@dataclass(frozen=True)
class Item:
    """One record a run created, reinforced or compressed (or would have)."""

    consolidator: str  # one of KINDS
    action: str  # CREATED, REINFORCED or COMPRESSED
    record_id: str
    record_type: str
    sources: tuple[str, ...]  # the episodic records it was derived or reinforced from
    rationale: str  # the audit entry's rationale
    salience_before: float | None = None  # reinforced / compressed: S at the run's write time
    salience_after: float | None = None
    doc: str | None = field(default=None, compare=False, repr=False)  # created: its stored JSON
    # What the proposal was planned on, for its key: created and reinforced, each source's
    # sensitivity level (aligned with ``sources``); compressed, the episode's salience anchor.
    basis: tuple = field(default=(), compare=False, repr=False)

    @cached_property
    def record(self) -> MemoryRecord | None:
        """A created record as it is (or would be) stored; None for the other items. Parsed when
        asked: a run over a large store creates thousands of records."""
        return None if self.doc is None else MemoryRecord.model_validate_json(self.doc)


KEY_PATTERN = re.compile(r"^(episodic|semantic|competence|plangraph):(created|reinforced|compressed):[0-9a-f]{24}$")


def _stable_content(doc_text: str) -> list[Any]:
    """A created record's content without what a run makes anew (its id, times, a plan's id):
    what the same proposal planned twice has in common."""
    doc = orjson.loads(doc_text)
    payload = dict(doc.get("payload") or {})
    payload.pop("plan_id", None)
    for name, stamp in (("metrics", "last_executed_at"), ("performance", "last_used_at")):
        if isinstance(payload.get(name), dict):
            payload[name] = {k: v for k, v in payload[name].items() if k != stamp}
    if isinstance(payload.get("evidence"), list):
        payload["evidence"] = [{k: v for k, v in e.items() if k != "timestamp"} if isinstance(e, dict) else e
                               for e in payload["evidence"]]
    relations = sorted((r.get("predicate"), r.get("target_id")) for r in doc.get("relations") or [])
    return [doc.get("type"), doc.get("sensitivity"), doc.get("scope") or "", doc.get("confidence"), doc.get("tags"),
            payload, relations]


def proposal_key(consolidator: str, action: str, target: Any, sources: list[tuple[str, Any]]) -> str:
    """``consolidator:action:`` and 24 hex digits of a digest of the target and the sorted
    (source, basis) pairs."""
    text = orjson.dumps([consolidator, action, target, sorted(sources)], option=orjson.OPT_SORT_KEYS)
    return f"{consolidator}:{action}:{hashlib.sha256(text).hexdigest()[:24]}"


@dataclass(frozen=True)
class Proposal:
    """What an operator applies or rejects as one: ``items`` (a created record with the run's
    reinforcements of it, or one reinforced or compressed record)."""

    consolidator: str
    action: str  # CREATED, REINFORCED or COMPRESSED (a created record reinforced in the run: CREATED)
    record_id: str  # a created record's id is made anew by each run
    record_type: str
    items: tuple[Item, ...]

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(sorted({s for i in self.items for s in i.sources}))

    @property
    def rationale(self) -> str:
        return self.items[0].rationale

    @property
    def record(self) -> MemoryRecord | None:
        """The record to be created (None for a reinforcement or a compression)."""
        return self.items[0].record

    @property
    def salience_before(self) -> float | None:
        return self.items[0].salience_before

    @property
    def salience_after(self) -> float | None:
        return self.items[-1].salience_after

    @cached_property
    def key(self) -> str:
        first = self.items[0]
        if self.action == CREATED:
            target: Any = _stable_content(first.doc) if first.doc is not None else self.record_id
        else:
            target = self.record_id
        if self.action == COMPRESSED:
            sources = [(self.record_id, list(first.basis))]
        else:
            sources = sorted({(s, b) for i in self.items for s, b in zip(i.sources, i.basis or (None,) * len(i.sources))})
        return proposal_key(self.consolidator, self.action, target, sources)


def proposals_of(items: tuple[Item, ...] | list[Item]) -> list[Proposal]:
    """The items grouped into proposals, in the items' order."""
    created = {(i.consolidator, i.record_id) for i in items if i.action == CREATED}
    groups: dict[tuple[str, str, str], list[Item]] = {}
    for i in items:
        action = CREATED if (i.consolidator, i.record_id) in created else i.action
        groups.setdefault((i.consolidator, action, i.record_id), []).append(i)
    return [Proposal(kind, action, rid, group[0].record_type, tuple(group))
            for (kind, action, rid), group in groups.items()]


@dataclass(frozen=True)
class ConsolidationReport:
    """A run of ``Membrane.consolidate``: what it wrote, or with ``dry_run`` would write."""

    as_of: datetime  # the instant the store was read at (ages, salience)
    at: datetime  # when it was written (the first consolidator's transaction), or previewed
    actor: str | None  # as given; None: Membrane's "consolidation/<kind>" actors
    dry_run: bool
    items: tuple[Item, ...] = ()
    links: tuple[Link, ...] = ()
    run: str | None = None  # the run's id in the history (``ledger``); None for a dry run
    stale: tuple[str, ...] = ()  # keys asked for (``only``) that the store no longer proposes: not applied
    rejected: int = 0  # proposals left out because an operator rejected them

    @cached_property
    def proposals(self) -> list[Proposal]:
        """The items as proposals an operator applies or rejects one by one (``Proposal.key``)."""
        return proposals_of(self.items)

    def _ids(self, action: str) -> list[str]:
        return list(dict.fromkeys(i.record_id for i in self.items if i.action == action))

    @property
    def created(self) -> list[str]:
        return self._ids(CREATED)

    @property
    def reinforced(self) -> list[str]:
        return self._ids(REINFORCED)

    @property
    def compressed(self) -> list[str]:
        return self._ids(COMPRESSED)

    def of(self, consolidator: str, action: str | None = None) -> list[Item]:
        return [i for i in self.items if i.consolidator == consolidator and (action is None or i.action == action)]

    @property
    def counts(self) -> dict[str, int]:
        """Membrane's ``ConsolidationResult`` fields. ``duplicates_resolved`` counts reinforced
        records **(deviation: Membrane counts one per matching episode event; here a record
        reinforced by many episodes in one run is reinforced once and counted once)**."""
        return {
            "episodic_compressed": len(self.of("episodic", COMPRESSED)),
            "semantic_extracted": len(self.of("semantic", CREATED)),
            "competence_extracted": len(self.of("competence", CREATED)),
            "plan_graphs_extracted": len(self.of("plangraph", CREATED)),
            "duplicates_resolved": len(self.of("semantic", REINFORCED)) + len(self.of("competence", REINFORCED)),
        }

    def summary(self) -> dict[str, Any]:
        """The report as plain JSON-ready values (ids, counts), for the command line and logs."""
        return {"as_of": self.as_of.isoformat(), "at": self.at.isoformat(), "actor": self.actor,
                "dry_run": self.dry_run, "created": self.created, "reinforced": self.reinforced,
                "compressed": self.compressed, "counts": self.counts,
                "links": [[x.source_id, x.predicate, x.target_id] for x in self.links],
                "run": self.run, "stale": list(self.stale), "rejected": self.rejected}


__all__ = ["COMPRESSED", "CREATED", "KEY_PATTERN", "KINDS", "REINFORCED", "ConsolidationReport", "Item", "Link",
           "Proposal", "proposal_key", "proposals_of"]
