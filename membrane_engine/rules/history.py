"""A record's past, read from its audit trail: its versions, what it was at any instant, and
its true salience curve.

Every curation entry carries the before/after values of what it changed (``details``), so the
record at an instant is the current record with every later change undone, and its salience at
an instant comes from the anchor in force then: each reinforce, penalize, retract, pin or unpin
re-anchors at the entry's time with the entry's "after" salience (SPEC 6), and S(t) decays from
that anchor (SPEC 2). A record's current anchor alone would draw a record retracted today as
already at zero a week ago.

Before the first re-anchoring entry the anchor is the one the record came with, which the trail
does not hold: it is solved from that entry's "before" value, anchored at the record's creation
(exact for exponential decay, which forgets when it started; for linear and custom profiles
exact when the record was anchored at its creation, as every record this engine creates is), and
never above ``max(1, before)``.

Where the trail cannot tell, the past salience is unknown (``unknown_at``), never drawn flat: an
imported history (Membrane's own entries carry no before/after values) may reinforce, penalize,
retract or pin without saying from what to what, and a record imported with an anchor after its
creation says nothing of its salience before that anchor. From such an entry (or from the
creation) the value is unknown until the next entry with values, the record's stored anchor, or
the entry by which this engine took the record in (its last ``create``), whichever comes first.

Entries before that last ``create`` came with the record (from an import's file, or a new
record's own entries): this engine did not write them, and ``Version.claimed`` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from membrane_engine.rules.chain import RETRACT_MARK, AuditRow
from membrane_engine.rules.salience import columns_of, salience_at
from membrane_engine.model.records import (
    UTC,
    AuditAction,
    MemoryRecord,
    Relation,
    RevisionStatus,
    SemanticPayload,
    Sensitivity,
    to_epoch,
)


@dataclass(frozen=True)
class Version:
    """One change of a record, as its audit entry tells it."""

    position: int
    timestamp: datetime
    action: AuditAction
    actor: str
    rationale: str
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # field -> (before, after)
    kind: str = ""  # what the change was, in words (``kind_of``)
    withheld: bool = False  # through a clearance: its labels then were beyond it (content withheld)
    claimed: bool = False  # came with the record (an import's file): claimed by it, not written by this engine

    @property
    def is_retract(self) -> bool:
        # A retract is written as Membrane's "delete" action on a record that stays in the store.
        return self.action == AuditAction.DELETE and self.rationale.startswith("retracted:")


RESTORED_VERSION = "restored the version of "  # how a restored version's entry starts (curation.restore_version)
SUPERSEDED_MARK = "superseded by "  # how the superseded record's entry starts (curation.supersede)


def kind_of(action: AuditAction | str, rationale: str, details: dict[str, Any] | None) -> str:
    """An audit entry's change in words, one of the console's action names: Membrane's actions
    (create, reinforce, revise, fork, merge, delete) with the operations written under them told
    apart: a ``delete`` whose record stays is a "retract", a ``decay`` entry a "penalize", a
    ``revise`` that pins, unpins, restores from the archive or restores a version says so."""
    action = AuditAction(action).value if not isinstance(action, AuditAction) else action.value
    details = details or {}
    changed = _changes(details)
    if action == "delete":
        return "retract" if rationale.startswith(RETRACT_MARK) else "delete"
    if action == "decay":
        return "penalize"
    if action == "revise":
        if rationale.startswith(RESTORED_VERSION):
            return "restore version"
        if "pinned" in changed:
            return "pin" if changed["pinned"][1] else "unpin"
        if details.get("restored"):
            return "restore"
        for start, kind in (("pinned at salience", "pin"), ("unpinned at salience", "unpin"),
                            ("restored from archive:", "restore")):  # an entry read without its details
            if rationale.startswith(start):
                return kind
    return action


@dataclass(frozen=True)
class Segment:
    """From ``start`` (epoch seconds) until the next segment, the record decayed from ``anchor``
    (S_a, a), pinned or not; ``live`` False while it sat in the archive."""

    start: float
    anchor: tuple[float, float]
    pinned: bool
    live: bool = True
    cap: float = np.inf


def _changes(details: dict[str, Any] | None) -> dict[str, tuple[Any, Any]]:
    return {k: (v["before"], v["after"]) for k, v in (details or {}).items()
            if isinstance(v, dict) and set(v) == {"before", "after"}}


def taken_in(rows: list[AuditRow]) -> AuditRow | None:
    """The entry by which this engine took the record in: its last ``create`` (an import's own
    entry after the history the file brought, or a new record's after its own entries). None
    for a trail without one."""
    creates = [r for r in rows if AuditAction(r.entry.action) == AuditAction.CREATE]
    return max(creates, key=lambda r: r.position) if creates else None


def versions(rows: list[AuditRow]) -> list[Version]:
    """The record's changes, oldest first; those before the engine's ``create`` are ``claimed``."""
    taken = taken_in(rows)
    since = taken.position if taken is not None else -1
    return [Version(r.position, r.entry.timestamp, r.entry.action, r.entry.actor, r.entry.rationale,
                    _changes(r.details), kind_of(r.entry.action, r.entry.rationale, r.details),
                    claimed=r.position < since)
            for r in sorted(rows, key=lambda r: r.position)]


IMPORTED_MARK = "imported"  # how an import's own create entry's rationale starts (imports.prepare)


def claimed_by(rows: list[AuditRow], last_creates: Mapping[str, tuple[int, str]]) -> dict[int, str]:
    """For each of ``rows`` (audit rows of any records, e.g. a page of the audit log) that came
    with its record rather than being written by this engine (``Version.claimed``), its ``seq``
    and who claims it: "the import" (the record was imported) or "its creator" (a new record's
    own entries). ``last_creates``: each record's last ``create`` entry as (position,
    rationale), ``storage.audit_log.last_creates``."""
    out = {}
    for r in rows:
        position, rationale = last_creates.get(r.record_id, (-1, ""))
        if r.position < position:
            out[r.seq] = "the import" if rationale.startswith(IMPORTED_MARK) else "its creator"
    return out


# The changes that re-anchor salience: an entry of one of these kinds without before/after
# values (an imported one) leaves the salience after it unknown.
RE_ANCHOR_KINDS = frozenset({"reinforce", "penalize", "retract", "pin", "unpin", "restore version"})
ANCHOR_SLACK = 1.0  # seconds: an anchor this close to the creation is the creation's


def unknown_spans(record: MemoryRecord, anchor: tuple[float, float], rows: list[AuditRow]) -> list[tuple[float, float]]:
    """The intervals [start, end) (epoch seconds) over which the trail cannot tell the record's
    salience (see the module's text), oldest first; ``end`` may be infinite."""
    ordered = sorted(rows, key=lambda r: r.position)
    created = to_epoch(record.created_at)
    taken = taken_in(ordered)
    taken_at = to_epoch(taken.entry.timestamp) if taken is not None else created
    a = float(anchor[1])
    events: list[tuple[float, bool]] = []  # (time, whether the salience after it is known)
    for r in ordered:
        if "salience" in _changes(r.details):
            events.append((to_epoch(r.entry.timestamp), True))
        elif kind_of(r.entry.action, r.entry.rationale, r.details) in RE_ANCHOR_KINDS:
            events.append((to_epoch(r.entry.timestamp), False))
    spans: list[tuple[float, float]] = []
    if not events:
        # Only the stored anchor: what came before it, if it is after the creation, is untold.
        if a > created + ANCHOR_SLACK:
            spans.append((created, min(a, taken_at) if taken_at > created else a))
    else:
        since = created if not events[0][1] else None  # a first entry with values solves the start
        for at, known in events:
            if known:
                if since is not None:  # told again here, or from the import on (the engine's own anchor)
                    spans.append((since, min(at, taken_at) if taken_at > since else at))
                    since = None
            elif since is None:
                since = at
        if since is not None:  # the last re-anchoring entry told no values
            ends = [t for t in (taken_at, a) if t >= since and t > created]
            spans.append((since, min(ends) if ends else np.inf))
    out = []
    for lo, hi in spans:
        lo = max(lo, created)
        if hi > lo:
            out.append((lo, hi))
    return out


def unknown_at(record: MemoryRecord, anchor: tuple[float, float], rows: list[AuditRow],
               times: list[datetime]) -> list[bool]:
    """Whether the record's salience at each of ``times`` is unknown (``unknown_spans``)."""
    spans = unknown_spans(record, anchor, rows)
    if not spans:
        return [False] * len(times)
    t = np.array([to_epoch(x) for x in times], dtype=float)
    flags = np.zeros(len(t), dtype=bool)
    for lo, hi in spans:
        flags |= (t >= lo) & (t < hi)
    return flags.tolist()


def segments(record: MemoryRecord, anchor: tuple[float, float], rows: list[AuditRow]) -> list[Segment]:
    """The anchors the record decayed from over its life, oldest first (see the module's text)."""
    ordered = sorted(rows, key=lambda r: r.position)
    re_anchors = [r for r in ordered if "salience" in _changes(r.details)]
    pin_changes = [r for r in ordered if "pinned" in _changes(r.details)]
    pinned = bool(_changes(pin_changes[0].details)["pinned"][0]) if pin_changes else record.lifecycle.pinned
    created = to_epoch(record.created_at)
    if re_anchors:
        first = re_anchors[0]
        before = float(_changes(first.details)["salience"][0])
        first_at = to_epoch(first.entry.timestamp)
        start_anchor = _solved_anchor(record, before, first_at, created, pinned)
        cap = max(1.0, before)
    else:
        start_anchor, cap = anchor, np.inf
    out = [Segment(created, start_anchor, pinned, cap=cap)]
    for r in ordered:
        changed = _changes(r.details)
        at = to_epoch(r.entry.timestamp)
        if "pinned" in changed:
            pinned = bool(changed["pinned"][1])
        details = r.details or {}
        if details.get("archived"):
            out.append(Segment(at, out[-1].anchor, pinned, live=False))
        elif details.get("restored"):
            live_before = next((s for s in reversed(out) if s.live), out[0])
            out.append(Segment(at, live_before.anchor, pinned, cap=live_before.cap))
        elif "salience" in changed:
            out.append(Segment(at, (float(changed["salience"][1]), at), pinned))
    return out


def _solved_anchor(record: MemoryRecord, value: float, at: float, created: float, pinned: bool) -> tuple[float, float]:
    """The anchor at ``created`` that decays to ``value`` at ``at`` under the record's profile
    (flat when pinned, floored or decayed to nothing: then ``value`` is all that is known)."""
    if pinned or value <= record.lifecycle.decay.min_salience or at <= created:
        return value, at
    unit = float(salience_at(columns_of([_unpinned(record)], [(1.0, created)]), at)[0])
    if unit <= 0.0 or unit <= record.lifecycle.decay.min_salience:
        return value, at
    return value / unit, created


def _unpinned(record: MemoryRecord) -> MemoryRecord:
    if not record.lifecycle.pinned:
        return record
    copy = record.model_copy(deep=True)
    copy.lifecycle.pinned = False
    return copy


def salience_history(record: MemoryRecord, anchor: tuple[float, float], rows: list[AuditRow],
                     times: list[datetime]) -> list[float | None]:
    """S(t) at each of ``times`` as the record really was then; None before it existed, while it
    sat in the archive and where its trail cannot tell (``unknown_at`` says which)."""
    values = _salience_values(record, anchor, rows, times)
    unknown = unknown_at(record, anchor, rows, times)
    return [None if u else v for v, u in zip(values, unknown)]


def _salience_values(record: MemoryRecord, anchor: tuple[float, float], rows: list[AuditRow],
                     times: list[datetime]) -> list[float | None]:
    """S(t) from the segments' anchors alone (None before the creation and while archived)."""
    segs = segments(record, anchor, rows)
    starts = np.array([s.start for s in segs])
    t = np.array([to_epoch(x) for x in times], dtype=float)
    which = np.searchsorted(starts, t, side="right") - 1
    out: list[float | None] = [None] * len(t)
    for k, seg in enumerate(segs):
        at = np.flatnonzero(which == k)
        if not len(at) or not seg.live:
            continue
        shaped = record if record.lifecycle.pinned == seg.pinned else record.model_copy(
            update={"lifecycle": record.lifecycle.model_copy(update={"pinned": seg.pinned})})
        values = np.minimum(salience_at(columns_of([shaped], [seg.anchor]), t[at][:, None])[:, 0], seg.cap)
        for i, v in zip(at.tolist(), values.tolist()):
            out[i] = float(v)
    return out


def record_at(record: MemoryRecord, anchor: tuple[float, float], rows: list[AuditRow], when: datetime
              ) -> MemoryRecord | None:
    """The record as it was at ``when``: every change after it undone, salience S(when). None
    when it did not exist yet or sat in the archive then. Where the trail cannot tell its
    salience then (``unknown_at``) the salience is the one its anchors give, which a caller
    must not present as known."""
    value = _salience_values(record, anchor, rows, [when])[0]
    if value is None:
        return None
    past = record.model_copy(deep=True)
    t = to_epoch(when)
    for r in sorted(rows, key=lambda r: r.position, reverse=True):
        if to_epoch(r.entry.timestamp) <= t:
            break
        _undo(past, _changes(r.details), r.details or {})
    past.salience = value
    past.audit_log = [e for e in past.audit_log if to_epoch(e.timestamp) <= t]
    return past


def _undo(record: MemoryRecord, changed: dict[str, tuple[Any, Any]], details: dict[str, Any]) -> None:
    if "sensitivity" in changed:
        record.sensitivity = Sensitivity(changed["sensitivity"][0])
    if "scope" in changed:
        record.scope = changed["scope"][0]
    if "tags" in changed:
        record.tags = list(changed["tags"][0])
    if "pinned" in changed:
        record.lifecycle.pinned = bool(changed["pinned"][0])
    payload = record.payload
    if isinstance(payload, SemanticPayload) and payload.revision is not None:
        if "status" in changed and changed["status"][0] is not None:
            payload.revision.status = RevisionStatus(changed["status"][0])
        if "superseded_by" in changed:  # a restored version: what it was before
            payload.revision.superseded_by = changed["superseded_by"][0]
        elif "superseded_by" in details:  # a supersede: the record had no successor before
            payload.revision.superseded_by = None
    if "relations" in changed:  # a restored version: the relations it replaced
        record.relations = [Relation.model_validate(x) for x in changed["relations"][0]]
        return
    relation = details.get("relation")
    if isinstance(relation, dict):
        record.relations = [x for x in record.relations
                            if not (x.predicate == relation.get("predicate") and x.target_id == relation.get("target_id"))]


def first_below(values_at: Callable[[list[datetime]], list[float | None]], threshold: float, start: datetime,
                end: datetime, steps: int = 2048) -> datetime | None:
    """The first instant in [start, end] at which ``values_at`` (a past salience curve, e.g.
    ``salience_history`` for one record) is below ``threshold``: found on a grid, refined by
    bisection (a drop at a retract or penalize is found at its instant). None when it stays at
    or above it; instants without a value (before creation, archived, withheld) are not below."""
    t0, t1 = to_epoch(start), to_epoch(end)
    grid = np.linspace(t0, t1, steps)

    def below(ts: np.ndarray) -> np.ndarray:
        got = values_at([datetime.fromtimestamp(float(t), UTC) for t in ts])
        return np.array([v is not None and v < threshold for v in got], dtype=bool)

    hits = np.flatnonzero(below(grid))
    if not len(hits):
        return None
    i = int(hits[0])
    if i == 0:
        return start
    lo, hi = float(grid[i - 1]), float(grid[i])
    for _ in range(40):
        mid = (lo + hi) / 2
        if below(np.array([mid]))[0]:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)
