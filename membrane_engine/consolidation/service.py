"""``consolidate``: Membrane's consolidation run (``Service.RunAll``, SPEC 12) over the store.

The consolidators run in Membrane's order: episodic compression, semantic extraction,
competence extraction, plan graph extraction, each creating its records' entity links as it
creates them (``entity_links``; Membrane has no separate pass for them). Membrane's LLM-backed
semantic extractor (``NewServiceWithExtractor``) has no counterpart here: without an LLM client
Membrane does not run it either.

**Transactions: one per consolidator** **(deviation: Membrane writes one per record)**. Membrane writes each record's change in a transaction of
its own, and ``RunAll`` stops at the first consolidator that fails, keeping what the earlier ones
wrote (it returns their partial result with the error). One transaction per consolidator keeps
that: a failure leaves the earlier consolidators' work committed and none of the failing one's
(stricter than Membrane, where a consolidator's records before the failing one stay). A single
transaction for the whole run would also hold the store's write lock through all four
consolidators (on a large store, as long as the run), where readers of other processes wait for
none of it but other writers wait for all of it. The exception raised carries the report of
what was committed (``exc.consolidation_report``) and a note naming the consolidator, Membrane's
wrapper text ("semantic consolidation: ...").

Each consolidator reads the store under its transaction's write lock (the column cache brought
up to date after the lock is held), so what it decides on is what it writes on.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from membrane_engine.consolidation import competence, episodic, plangraph, semantic
from membrane_engine.consolidation.batch import Batch, Pass, write
from membrane_engine.consolidation.report import ConsolidationReport, Item, Link
from membrane_engine.context import EngineContext
from membrane_engine.errors import AccessDeniedError, ValidationError
from membrane_engine.model.records import MAX_ACTOR_LENGTH, check_flag, check_instant, check_string
from membrane_engine.rules.trust import TrustContext, Verdict, as_trust, verdict_as_read

Planner = Callable[[Pass], Batch]

CONSOLIDATORS: tuple[tuple[str, Planner], ...] = (
    ("episodic", episodic.plan),
    ("semantic", semantic.plan),
    ("competence", competence.plan),
    ("plangraph", plangraph.plan),
)
_WRAPPER = {"episodic": "episodic consolidation", "semantic": "semantic consolidation",
            "competence": "competence consolidation", "plangraph": "plan graph consolidation"}


def _checked_actor(actor: object) -> str | None:
    if actor is None:
        return None
    actor = check_string(actor, "actor", MAX_ACTOR_LENGTH)
    if not actor.strip():
        raise ValidationError("actor must be a non-empty string, or None for Membrane's consolidation actors",
                              [("actor", "empty")])
    return actor


def _within(batch: Batch, clearance: TrustContext) -> None:
    """Nothing an operator's run creates lies beyond their clearance (its sources are ones the
    clearance sees in full, so it cannot; checked before anything is written all the same)."""
    for rid, created in batch.created.items():
        if verdict_as_read(created.sensitivity, created.scope, clearance) is not Verdict.FULL:
            raise AccessDeniedError(f"the consolidated record {rid!r} would be beyond your clearance; "
                                    "nothing of this consolidator was written")


def run_one(ctx: EngineContext, kind: str, planner: Planner, actor: str | None, as_of: datetime, dry_run: bool,
            within: TrustContext | None) -> tuple[Batch, datetime]:
    """One consolidator: planned over the store and, unless ``dry_run``, written in one
    transaction. Returns its batch and the instant it wrote (or previewed) at."""
    if dry_run:
        snap = ctx.columns.current()
        with ctx.store.read() as conn:
            now = ctx.now()
            batch = planner(Pass(ctx, conn, snap, kind, actor, as_of, now, within, writes=False))
            if within is not None:
                _within(batch, within)
        return batch, now
    with ctx.store.write() as conn:
        now = ctx.now()  # read after the write lock is held: entry times follow commit order
        snap = ctx.columns.current()  # and the cache, brought up to date under the lock
        batch = planner(Pass(ctx, conn, snap, kind, actor, as_of, now, within))
        if within is not None:
            _within(batch, within)
        if batch:
            write(ctx, conn, batch)
    if batch.created and ctx.vectors is not None:  # this process's matrix reads them when asked
        ctx.vectors.forget(list(batch.created))
    return batch, now


def consolidate(ctx: EngineContext, actor: str | None = "consolidator", as_of: datetime | None = None,
                dry_run: bool = False, within: TrustContext | None = None) -> ConsolidationReport:
    """Run Membrane's consolidators over the store as of ``as_of`` (default now): the episodes
    created by then are the sources, their age and S(as_of) decide compression; records are
    written at the engine's time. ``actor`` names every audit entry and provenance
    (None: Membrane's ``consolidation/<kind>``). ``dry_run``: what would be written, nothing
    written. ``within``: an operator's clearance; the run then uses only records it sees in full
    (the operator's view)."""
    actor = _checked_actor(actor)
    dry_run = check_flag(dry_run, "dry_run")
    as_of = ctx.now() if as_of is None else check_instant(as_of)
    if within is not None:
        within = as_trust(within, "clearance")
    items: list[Item] = []
    links: list[Link] = []
    at: datetime | None = None
    for kind, planner in CONSOLIDATORS:
        try:
            batch, now = run_one(ctx, kind, planner, actor, as_of, dry_run, within)
        except Exception as exc:
            exc.add_note(f"{_WRAPPER[kind]} failed: nothing of it was written; the consolidators before it were")
            exc.consolidation_report = ConsolidationReport(  # type: ignore[attr-defined]
                as_of, at or as_of, actor, dry_run, tuple(items), tuple(links))
            raise
        at = at or now
        items += batch.items
        links += batch.links
    return ConsolidationReport(as_of, at or as_of, actor, dry_run, tuple(items), tuple(links))


__all__ = ["CONSOLIDATORS", "consolidate", "run_one"]
