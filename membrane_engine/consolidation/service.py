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

**Proposals applied one by one** (``only``) and **rejected** (``reject``): a dry run's report
lists proposals (``report.proposals``), each with a key stable across runs. ``only=[keys]``
plans the run again over the store as it is then, under the same write locks, and keeps only
the proposals with those keys; a key the store no longer yields (its sources, their labels or
the record it would make changed, or it was applied or rejected since) is reported in
``report.stale`` and nothing is written for it: a stale preview is never applied. ``reject``
records keys (``ledger``) that every later run leaves out. Each consolidator's transaction that
writes also appends the run's entry to the store's own chain (``ledger.log_run``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from membrane_engine.consolidation import competence, episodic, ledger, plangraph, semantic
from membrane_engine.consolidation.batch import Batch, Pass, write
from membrane_engine.consolidation.report import ConsolidationReport, Item, Link, proposals_of
from membrane_engine.context import EngineContext
from membrane_engine.errors import AccessDeniedError, ValidationError
from membrane_engine.model.records import (
    MAX_ACTOR_LENGTH,
    MAX_RATIONALE_LENGTH,
    check_flag,
    check_instant,
    check_string,
)
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
            within: TrustContext | None, only: frozenset[str] | None = None, run: str | None = None
            ) -> tuple[Batch, datetime]:
    """One consolidator: planned over the store and, unless ``dry_run``, written in one
    transaction with its run entry (``run``: the run's id). ``only``: keep only these proposals.
    Proposals rejected (``ledger.rejected_keys``, read in the same transaction) are left out.
    Returns its batch and the instant it wrote (or previewed) at."""
    if dry_run:
        snap = ctx.columns.current()
        with ctx.store.read() as conn:
            now = ctx.now()
            batch = planner(Pass(ctx, conn, snap, kind, actor, as_of, now, within, writes=False, only=only,
                                 rejected=ledger.rejected_keys(conn)))
            if within is not None:
                _within(batch, within)
        return batch, now
    with ctx.store.write() as conn:
        now = ctx.now()  # read after the write lock is held: entry times follow commit order
        snap = ctx.columns.current()  # and the cache, brought up to date under the lock
        batch = planner(Pass(ctx, conn, snap, kind, actor, as_of, now, within, only=only,
                             rejected=ledger.rejected_keys(conn)))
        if within is not None:
            _within(batch, within)
        if batch:
            write(ctx, conn, batch)
            ledger.log_run(conn, batch, run or str(uuid.uuid4()), as_of, only is not None, now)
    if batch.created and ctx.vectors is not None:  # this process's matrix reads them when asked
        ctx.vectors.forget(list(batch.created))
    return batch, now


def _named(keys: frozenset[str] | None, kind: str) -> frozenset[str] | None:
    """The keys of ``kind``'s proposals among ``keys``."""
    return None if keys is None else frozenset(k for k in keys if k.startswith(kind + ":"))


def consolidate(ctx: EngineContext, actor: str | None = "consolidator", as_of: datetime | None = None,
                dry_run: bool = False, within: TrustContext | None = None, only: Any = None) -> ConsolidationReport:
    """Run Membrane's consolidators over the store as of ``as_of`` (default now): the episodes
    created by then are the sources, their age and S(as_of) decide compression; records are
    written at the engine's time. ``actor`` names every audit entry and provenance
    (None: Membrane's ``consolidation/<kind>``). ``dry_run``: what would be written, nothing
    written. ``within``: an operator's clearance; the run then uses only records it sees in full
    (the operator's view). ``only``: keys of proposals (``report.proposals``) to apply, planned
    anew; the others are left, and keys no longer proposed are ``report.stale``. Proposals an
    operator rejected are left out of every run (``report.rejected`` counts them)."""
    actor = _checked_actor(actor)
    dry_run = check_flag(dry_run, "dry_run")
    as_of = ctx.now() if as_of is None else check_instant(as_of)
    if within is not None:
        within = as_trust(within, "clearance")
    asked = None if only is None else ledger.check_keys(only)
    wanted = None if asked is None else frozenset(asked)
    run = None if dry_run else str(uuid.uuid4())
    items: list[Item] = []
    links: list[Link] = []
    kept: set[str] = set()
    rejected = 0
    wrote = False
    at: datetime | None = None
    for kind, planner in CONSOLIDATORS:
        mine = _named(wanted, kind)
        if mine is not None and not mine:
            continue  # nothing of this consolidator was asked for
        try:
            batch, now = run_one(ctx, kind, planner, actor, as_of, dry_run, within, mine, run)
        except Exception as exc:
            exc.add_note(f"{_WRAPPER[kind]} failed: nothing of it was written; the consolidators before it were")
            exc.consolidation_report = ConsolidationReport(  # type: ignore[attr-defined]
                as_of, at or as_of, actor, dry_run, tuple(items), tuple(links), run if wrote else None)
            raise
        at = at or now
        items += batch.items
        links += batch.links
        kept |= batch.kept
        rejected += batch.rejected
        wrote = wrote or (not dry_run and bool(batch.items or batch.links))
    stale = () if asked is None else tuple(k for k in asked if k not in kept)
    return ConsolidationReport(as_of, at or as_of, actor, dry_run, tuple(items), tuple(links),
                               run if wrote else None, stale, rejected)


# --------------------------------------------------------------------------- rejecting


@dataclass(frozen=True)
class Rejection:
    """What ``reject`` recorded: the keys rejected, and those the store no longer proposes
    (not recorded: there is nothing left to reject)."""

    rejected: tuple[str, ...]
    stale: tuple[str, ...]
    at: datetime


def reject(ctx: EngineContext, keys: Any, actor: str, rationale: str, as_of: datetime | None = None,
           within: TrustContext | None = None) -> Rejection:
    """Reject proposals by key, as ``actor`` with ``rationale``: each is planned again over the
    store as it is (as ``consolidate`` would, within ``within``), under the write lock, and the
    ones still proposed are recorded in one entry on the store's chain, in one transaction. Every
    later run leaves them out until their sources change (which gives them another key)."""
    if actor is None or (isinstance(actor, str) and not actor.strip()):
        raise ValidationError(f"actor must name who rejects (got {actor!r:.40})", [("actor", "empty")])
    actor = _checked_actor(actor)
    rationale = check_string(rationale, "rationale", MAX_RATIONALE_LENGTH)
    if not rationale.strip():
        raise ValidationError(f"rationale must say why the proposals are rejected (got {rationale!r:.40})",
                              [("rationale", "empty")])
    asked = ledger.check_keys(keys, "keys")
    wanted = frozenset(asked)
    as_of = ctx.now() if as_of is None else check_instant(as_of)
    if within is not None:
        within = as_trust(within, "clearance")
    found: dict[str, tuple[Any, tuple[int, str]]] = {}
    with ctx.store.write() as conn:
        now = ctx.now()
        snap = ctx.columns.current()
        already = ledger.rejected_keys(conn)
        for kind, planner in CONSOLIDATORS:
            mine = _named(wanted, kind)
            if not mine:
                continue
            batch = planner(Pass(ctx, conn, snap, kind, actor, as_of, now, within, writes=False, only=mine,
                                 rejected=already))
            for proposal in proposals_of(batch.items):
                if proposal.key in mine:
                    found[proposal.key] = (proposal, ledger.proposal_labels(batch, proposal))
        done = [found[k] for k in asked if k in found]
        if done:
            ledger.log_rejection(conn, done, actor, rationale.strip(), now)
    return Rejection(tuple(k for k in asked if k in found), tuple(k for k in asked if k not in found), now)


__all__ = ["CONSOLIDATORS", "Rejection", "consolidate", "reject", "run_one"]
