"""What a consolidation run did, or with ``dry_run`` would do (SPEC 12): one item per record
created, reinforced or compressed, each naming its consolidator and its sources, and the entity
links written. ``created``, ``reinforced`` and ``compressed`` are the ids SPEC 12 names; the
counts Membrane's ``ConsolidationResult`` reports are derived from the items."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime
from typing import Any

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

    @cached_property
    def record(self) -> MemoryRecord | None:
        """A created record as it is (or would be) stored; None for the other items. Parsed when
        asked: a run over a large store creates thousands of records."""
        return None if self.doc is None else MemoryRecord.model_validate_json(self.doc)


@dataclass(frozen=True)
class ConsolidationReport:
    """A run of ``Membrane.consolidate``: what it wrote, or with ``dry_run`` would write."""

    as_of: datetime  # the instant the store was read at (ages, salience)
    at: datetime  # when it was written (the first consolidator's transaction), or previewed
    actor: str | None  # as given; None: Membrane's "consolidation/<kind>" actors
    dry_run: bool
    items: tuple[Item, ...] = ()
    links: tuple[Link, ...] = ()

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
                "links": [[x.source_id, x.predicate, x.target_id] for x in self.links]}


__all__ = ["COMPRESSED", "CREATED", "KINDS", "REINFORCED", "ConsolidationReport", "Item", "Link"]
