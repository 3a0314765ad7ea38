"""An operator's clearance applied to the console's reads (SPEC 10), and "who looked".

The console shows records to an operator exactly as the engine gates an agent: through the
operator's clearance, a trust context. Everything here answers a read *for* a clearance with
the trust rule of ``trust.py`` (never a copy of it): a record the clearance sees in full comes
whole, one it sees redacted comes as ``trust.redact`` makes it, one it does not see is absent.
Simulating a context wider than the clearance keeps that context's counts and shows its records
through ``trust.narrowest(context, clearance)``.

"Who looked": opening a record in full at or above ``access_log_level()`` appends an access entry
(operator, record, time, and the page or command it came through) to ``access_log``, in a
transaction of its own; ``log_accesses`` appends many in one. The log is a hash chain under the
audit key (row_seal.py), so an entry changed or deleted in the database shows in verify_audit.
Access entries are not audit actions (SPEC 6) and nothing in the engine updates or deletes one.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from datetime import datetime
from collections.abc import Callable
from typing import Any

from membrane_engine.audit import row_seal
from membrane_engine.audit import reads as audit_reads
from membrane_engine.rules.chain import MAX_QUERY_LIMIT, AuditRow
from membrane_engine.context import EngineContext
from membrane_engine.errors import NotFoundError, ValidationError
from membrane_engine.retrieval import reads as retrieval_reads
from membrane_engine.retrieval.layered import MAX_LIMIT, Explanation, RetrieveRequest, Simulation
from membrane_engine.model.records import (
    MAX_ACTOR_LENGTH,
    MAX_ID_LENGTH,
    MAX_OFFSET,
    UTC,
    MemoryRecord,
    Sensitivity,
    check_floor,
    check_id,
    check_instant,
    check_string,
    check_text,
    check_whole,
    sensitivity_level,
    to_epoch,
)
from membrane_engine.storage import audit_seen
from membrane_engine.storage.record_queries import archived_labels
from membrane_engine.storage.access_log import access_entries
from membrane_engine.rules.trust import (
    TrustContext,
    Verdict,
    as_trust,
    covers,
    decide,
    gate_as_read,
    narrowest,
    stricter,
)
from membrane_engine.rules.trust import verdicts
from membrane_engine.rules import history as past

ACCESS_LOG_LEVEL_ENV = "MEMBRANE_ACCESS_LOG_LEVEL"
DEFAULT_ACCESS_LOG_LEVEL = Sensitivity.HIGH
WITHHELD = "(withheld: beyond your clearance)"


def access_log_level() -> Sensitivity:
    """The least sensitivity whose opening in full is logged (MEMBRANE_ACCESS_LOG_LEVEL, default
    high)."""
    value = os.environ.get(ACCESS_LOG_LEVEL_ENV, "").strip().lower()
    if not value:
        return DEFAULT_ACCESS_LOG_LEVEL
    try:
        return Sensitivity(value)
    except ValueError:
        raise ValidationError(f"{ACCESS_LOG_LEVEL_ENV} must be one of {', '.join(s.value for s in Sensitivity)} "
                              f"(got {value!r})", [(ACCESS_LOG_LEVEL_ENV, value)]) from None


def sees_everything(clearance: TrustContext) -> bool:
    """A clearance that sees every record with a known sensitivity in full (hyper, every scope):
    gating by it changes nothing, so queries skip it."""
    return clearance.max_sensitivity is Sensitivity.HYPER and not clearance.scopes


def verdict_of(sensitivity: Any, scope: str, clearance: TrustContext) -> Verdict:
    return decide(sensitivity, scope, clearance).verdict


def shown(record: MemoryRecord, clearance: TrustContext) -> MemoryRecord | None:
    """``record`` as ``clearance`` may see it, decided on the labels read with its content:
    whole, redacted, or None (``trust.gate_as_read``)."""
    return gate_as_read(record, clearance)


# --------------------------------------------------------------------------- one record


def view(membrane: EngineContext, record_id: str, clearance: TrustContext, as_of: datetime | None = None,
         actor: str | None = None) -> MemoryRecord:
    """The record (with its audit log) as ``clearance`` sees it: whole, or redacted; a record it
    does not see is NotFoundError, as if absent. With ``actor``, opening one in full at or above
    ``access_log_level()`` is logged as that actor's access."""
    clearance = as_trust(clearance, "clearance")
    actor = _check_actor(actor) if actor is not None else None  # refused even when nothing is logged
    record = audit_reads.get(membrane, record_id, as_of=as_of)
    out = shown(record, clearance)
    if out is None:
        raise NotFoundError(record_id)
    if actor is not None and not out.redacted and sensitivity_level(record.sensitivity) >= access_log_level().level:
        log_access(membrane, record.id, actor, record.sensitivity.value, record.scope)
    return out


def scopes_seen(membrane: EngineContext, clearance: TrustContext) -> list[str]:
    """``Membrane.scopes`` for an operator: the scopes of the live records ``clearance`` sees (a
    scope only records beyond it carry is not named)."""
    import numpy as np

    clearance = as_trust(clearance, "clearance")
    snap = membrane.columns.current()
    seen = snap.alive & (verdicts(snap.sens_level, snap.scope_code, snap.scope_names, clearance) > 0)
    return sorted(snap.scope_names[i] for i in np.unique(snap.scope_code[seen]) if snap.scope_names[i])


def archived_ids(membrane: EngineContext, clearance: TrustContext) -> list[str]:
    """``Membrane.archived_ids`` for an operator: archived records ``clearance`` would see in full
    (on the labels each had when it was archived), newest first."""
    clearance = as_trust(clearance, "clearance")
    with membrane.store.read() as conn:
        ids = membrane.store.archived_ids(conn)
        labels = archived_labels(conn, ids) if ids else {}
    return [rid for rid in ids if rid in labels and verdict_of(*labels[rid], clearance) is Verdict.FULL]


# --------------------------------------------------------------------------- simulations


def simulate(membrane: EngineContext, request: RetrieveRequest, clearance: TrustContext,
             counts: bool = True) -> Simulation:
    """The simulation of ``request`` as an operator with ``clearance`` may see it: the counts,
    the number of records matching and the selector's decision are the requested context's;
    the records (and the selector's candidates) are shown through ``narrowest(context,
    clearance)``: the stricter verdict of the two, so nothing beyond the clearance. ``withheld``
    says how many matching records the clearance keeps out of the list."""
    clearance = as_trust(clearance, "clearance")
    if isinstance(request, dict):
        request = RetrieveRequest(**request)
    if isinstance(request, RetrieveRequest) and request.as_of is None:  # both runs at one instant
        request = request.model_copy(update={"as_of": membrane.now()})
    # Counts are over the records the clearance sees (SPEC 10, "One door"): what lies beyond it
    # is the one total ``withheld``, never broken down by type or verdict.
    asked = retrieval_reads.run(membrane, request, counts, MAX_LIMIT,
                                within=None if sees_everything(clearance) else clearance)
    trust = as_trust(request.trust)
    if covers(clearance, trust):
        return asked
    narrowed = retrieval_reads.simulate(membrane, request.model_copy(update={"trust": narrowest(trust, clearance)}),
                                        counts=False)
    selection = asked.response.selection
    if selection is not None:
        # The decision (confidence, needs_more) is the requested context's: a number, not content.
        # The candidates listed are the ones the clearance sees, each as the narrowed run shows it.
        # A candidate the clearance sees redacted keeps its applicability (its confidence, which
        # a redacted view shows); its success and recency come from what that view withholds
        # (payload, lifecycle), so they and the score made from them are not shown (NaN).
        seen = {r.id: r for r in (narrowed.response.selection.selected if narrowed.response.selection else [])}

        def shown_signals(s):
            if not seen[s.record_id].redacted or s.redacted:
                return s
            return replace(s, success=math.nan, recency=math.nan, score=math.nan, redacted=True)

        selection = selection.model_copy(update={
            "selected": [seen[r.id] for r in selection.selected if r.id in seen],
            "signals": [shown_signals(s) for s in selection.signals if s.record_id in seen],
        })
    response = narrowed.response.model_copy(update={"selection": selection})
    return Simulation(response, asked.counts, asked.total_matching,
                      withheld=asked.total_matching - narrowed.total_matching, revised=asked.revised)


def explain(membrane: EngineContext, record_id: str, trust: TrustContext, clearance: TrustContext,
            as_of: datetime | None = None, min_salience: float = 0.0) -> Explanation:
    """``Membrane.explain`` for an operator: a record their clearance does not see is
    NotFoundError (absent); otherwise the context's reasons, the verdict shown is the stricter of
    the context's and the clearance's, and a reason says when the clearance made it so."""
    clearance = as_trust(clearance, "clearance")
    mine = retrieval_reads.explain(membrane, record_id, clearance)
    if mine.verdict is Verdict.HIDDEN:
        raise NotFoundError(record_id)
    theirs = retrieval_reads.explain(membrane, record_id, trust, as_of=as_of, min_salience=min_salience)
    verdict = stricter(theirs.verdict, mine.verdict)
    if verdict is theirs.verdict:
        return theirs
    # A retracted / superseded reason tells what the content says: not past a clearance that
    # sees the record only redacted.
    kept = [k for k, rule in enumerate(theirs.rules) if rule not in ("retracted", "superseded")]
    return theirs.model_copy(update={
        "verdict": verdict,
        "reasons": [theirs.reasons[k] for k in kept] + [f"your clearance shows it {verdict.value} (the context sees "
                                                        f"it {theirs.verdict.value}): " + "; ".join(mine.reasons)],
        "rules": [theirs.rules[k] for k in kept] + ["clearance"],
    })


# --------------------------------------------------------------------------- audit log


def masked(row: AuditRow) -> AuditRow:
    """An entry of a record seen redacted: its action, time, record and position stay; who wrote
    it, why and the values it changed (a redacted view's audit log is empty) are withheld."""
    entry = row.entry.model_copy(update={"actor": WITHHELD, "rationale": WITHHELD})
    object.__setattr__(entry, "__pydantic_extra__", {})
    return AuditRow(row.seq, row.record_id, row.position, entry, None)


def audit_query(membrane: EngineContext, clearance: TrustContext, actor: str | None = None, action: str | None = None,
                record_id: str | None = None, since: datetime | None = None, until: datetime | None = None,
                limit: int = 1000, offset: int = 0) -> tuple[int, list[AuditRow]]:
    """``Membrane.audit_query`` through a clearance: entries of records it does not see are
    absent (not counted, not listed); entries of records it sees redacted are ``masked``."""
    clearance = as_trust(clearance, "clearance")
    limit, offset = check_whole(limit, "limit", 0, MAX_QUERY_LIMIT), check_whole(offset, "offset", 0, MAX_OFFSET)
    if sees_everything(clearance):
        return audit_reads.query(membrane, actor=actor, action=action, record_id=record_id, since=since, until=until,
                                 limit=limit, offset=offset)
    total, rows, full = audit_seen.entries_seen(membrane.store, clearance, actor, action, record_id, since, until,
                                                limit, offset)
    return total, [r if r.record_id in full else masked(r) for r in rows]


def audit_action_counts(membrane: EngineContext, clearance: TrustContext, until: datetime) -> dict[str, int]:
    """Audit entries by action written at or before ``until`` on the records ``clearance`` sees
    (what an operator's metrics count, SPEC 10)."""
    clearance = as_trust(clearance, "clearance")
    return audit_seen.action_totals(membrane.store, to_epoch(until), clearance)


def audit_rows(membrane: EngineContext, record_id: str, clearance: TrustContext) -> list[AuditRow]:
    """One record's chain through a clearance (empty for a record it does not see)."""
    clearance = as_trust(clearance, "clearance")
    if sees_everything(clearance):
        return audit_reads.audit_rows(membrane, record_id)
    total, rows = audit_query(membrane, clearance, record_id=check_id(record_id), limit=100_000)
    return sorted(rows, key=lambda r: r.position)


def audit_actors(membrane: EngineContext, clearance: TrustContext, limit: int = 500) -> list[str]:
    """Actors of the entries of records ``clearance`` sees in full, most frequent first (an
    actor is part of the audit log a redacted view withholds)."""
    clearance = as_trust(clearance, "clearance")
    limit = check_whole(limit, "limit", 0, MAX_QUERY_LIMIT)
    return audit_seen.actors_seen(membrane.store, limit, None if sees_everything(clearance) else clearance)


# --------------------------------------------------------------------------- a record's past


def _seen_in_full(membrane: EngineContext, record_id: str, clearance: TrustContext) -> bool:
    """Does ``clearance`` see the live record in full now? NotFoundError when it does not see
    it at all (as if absent)."""
    record = audit_reads.get(membrane, record_id)
    verdict = verdict_of(record.sensitivity, record.scope, clearance)
    if verdict is Verdict.HIDDEN:
        raise NotFoundError(record_id)
    return verdict is Verdict.FULL


def _label_times(membrane: EngineContext, record_id: str) -> tuple[list[Any], list[tuple[float, tuple[str, str]]]]:
    """The record's versions and the labels (sensitivity, scope) it had from each instant on,
    oldest first: the first item is its labels from its creation."""
    record = audit_reads.get(membrane, record_id)
    versions = audit_reads.versions(membrane, record_id)
    labels = (record.sensitivity.value, record.scope)
    after: list[tuple[str, str]] = []
    for v in reversed(versions):  # undo from today's labels
        after.append(labels)
        labels = (str(v.changes["sensitivity"][0]) if "sensitivity" in v.changes else labels[0],
                  str(v.changes["scope"][0] or "") if "scope" in v.changes else labels[1])
    after.reverse()
    times = [(to_epoch(record.created_at), labels)] + [(to_epoch(v.timestamp), a) for v, a in zip(versions, after)]
    return versions, times


def history(membrane: EngineContext, record_id: str, clearance: TrustContext) -> list[Any]:
    """``Membrane.history`` through a clearance: nothing for a record it does not see in full
    (NotFoundError when it does not see it at all); a version whose labels before or after
    were beyond the clearance is ``withheld``: its time and action stay, who, why and the
    values it changed do not."""
    clearance = as_trust(clearance, "clearance")
    if not _seen_in_full(membrane, record_id, clearance):
        return []
    versions, times = _label_times(membrane, record_id)
    out = []
    for k, v in enumerate(versions):
        ok = all(verdict_of(*times[j][1], clearance) is Verdict.FULL for j in (k, k + 1))
        out.append(v if ok else replace(v, actor=WITHHELD, rationale=WITHHELD, changes={}, withheld=True))
    return out


def record_at(membrane: EngineContext, record_id: str, when: datetime, clearance: TrustContext) -> MemoryRecord | None:
    """``Membrane.record_at`` through a clearance: the record as it was, shown as its labels
    *then* let the clearance see it (whole, redacted, or None), its audit log up to then with
    withheld versions masked. None for a record the clearance does not see in full now."""
    clearance = as_trust(clearance, "clearance")
    if not _seen_in_full(membrane, record_id, clearance):
        return None
    past = audit_reads.record_at(membrane, record_id, when)
    if past is None:
        return None
    out = shown(past, clearance)
    if out is None or out.redacted:
        return out
    versions = history(membrane, record_id, clearance)
    out.audit_log = [e if k >= len(versions) or not versions[k].withheld
                     else e.model_copy(update={"actor": WITHHELD, "rationale": WITHHELD})
                     for k, e in enumerate(out.audit_log)]
    return out


def past_curve(membrane: EngineContext, record_id: str, clearance: TrustContext
               ) -> Callable[[list[datetime]], list[float | None]]:
    """The record's true past salience as ``clearance`` may see it, as a function of instants
    (the record and its trail read once): None at every instant for a record it does not see in
    full now, and at the instants when the record's labels then were beyond it (a redacted view
    withholds the lifecycle)."""
    import bisect

    clearance = as_trust(clearance, "clearance")
    if not _seen_in_full(membrane, record_id, clearance):
        return lambda times: [None] * len(times)
    record, anchor, rows = audit_reads.with_trail(membrane, record_id)
    _, spans = _label_times(membrane, record_id)
    starts = [t for t, _ in spans]
    seen = [verdict_of(*labels, clearance) is Verdict.FULL for _, labels in spans]

    def curve(times: list[datetime]) -> list[float | None]:
        values = past.salience_history(record, anchor, rows, times)
        return [v if seen[max(0, bisect.bisect_right(starts, to_epoch(t)) - 1)] else None
                for t, v in zip(times, values)]

    # A None is "withheld" or "unknown" (the trail tells no value: history.unknown_at); pages
    # draw them apart, and only where the clearance sees the record then.
    curve.unknown = lambda times: [u and seen[max(0, bisect.bisect_right(starts, to_epoch(t)) - 1)]
                                   for t, u in zip(times, past.unknown_at(record, anchor, rows, times))]
    return curve


def salience_history(membrane: EngineContext, record_id: str, times: list[datetime], clearance: TrustContext
                     ) -> list[float | None]:
    """``Membrane.salience_history`` through a clearance (``past_curve``)."""
    audit_reads.salience_history(membrane, record_id, [])  # the engine's checks of the id
    times = [check_instant(t, "times") for t in times]
    return past_curve(membrane, record_id, clearance)(times)


def time_below(membrane: EngineContext, record_id: str, threshold: float, start: datetime, end: datetime,
               clearance: TrustContext) -> datetime | None:
    """When the record's true past (and future) salience first drops below ``threshold`` in
    [start, end], as ``clearance`` may see it (``history.first_below`` over ``past_curve``)."""
    threshold = check_floor(threshold, "threshold")
    start, end = check_instant(start, "start"), check_instant(end, "end")
    return past.first_below(past_curve(membrane, record_id, clearance), threshold, start, end)


# --------------------------------------------------------------------------- who looked


@dataclass(frozen=True)
class Access:
    """One access entry: ``actor`` opened ``record_id`` (of ``sensitivity`` and ``scope`` then) in
    full at ``at``, through ``via`` (the console page or command that read it; "" when unsaid)."""
    seq: int
    record_id: str
    actor: str
    sensitivity: str
    scope: str
    at: datetime
    via: str = ""


VIA_LIMIT = 64


def _check_via(via: Any) -> str:
    """``via`` names a page or command ("page:records", "command:export"): a short single-line
    string, so a caller cannot smuggle a paragraph (or a forged second entry) into the log."""
    if not isinstance(via, str):
        raise ValidationError(f"via must be a string (got {via!r})", [("via", "not a string")])
    via = via.strip()
    if any(ch < " " or ch == "\x7f" for ch in via):
        raise ValidationError(f"via must not contain control characters (got {via[:60]!r})",
                              [("via", "control character")])
    return check_text(via, "via", VIA_LIMIT)


def _check_actor(actor: Any) -> str:
    if not isinstance(actor, str) or not actor.strip():
        raise ValidationError(f"actor must be a non-empty string (got {actor!r})", [("actor", repr(actor))])
    return check_text(actor.strip(), "actor", 256)


def log_accesses(membrane: EngineContext, actor: str, entries: list[tuple[str, str, str]], via: str) -> None:
    """Append one access entry per (record_id, sensitivity, scope) of ``entries``, all in one
    transaction (a page that shows many sensitive records logs them at once or not at all);
    ``via`` names the page or command that read them. Every entry is checked before any is
    written."""
    actor = _check_actor(actor)
    via = _check_via(via)
    if isinstance(entries, (str, bytes, dict)) or not hasattr(entries, "__iter__"):
        raise ValidationError(f"entries must be a list of (record_id, sensitivity, scope) (got {entries!r})",
                              [("entries", "not a list")])
    rows = []
    for k, entry in enumerate(entries):
        if not isinstance(entry, (tuple, list)) or len(entry) != 3:
            raise ValidationError(f"entries[{k}] must be (record_id, sensitivity, scope) (got {entry!r})",
                                  [(f"entries[{k}]", "not a triple")])
        record_id, sensitivity, scope = entry
        sensitivity = sensitivity.value if isinstance(sensitivity, Sensitivity) else sensitivity
        if not isinstance(sensitivity, str) or not isinstance(scope or "", str):
            raise ValidationError(f"entries[{k}]: sensitivity and scope must be strings (got {entry!r})",
                                  [(f"entries[{k}]", "not strings")])
        rows.append({"record_id": check_id(record_id, f"entries[{k}].record_id"),
                     "sensitivity": check_text(sensitivity, f"entries[{k}].sensitivity", 16),
                     "scope": check_text(scope or "", f"entries[{k}].scope", 256)})
    if not rows:
        return
    ts = to_epoch(membrane.now())
    with membrane.store.write() as conn:
        # Chained and sealed like the audit log (row_seal.py): a deleted or edited entry shows in
        # verify_audit, and a process without the store's audit key cannot write one.
        row_seal.append_access(conn, [{**row, "actor": actor, "ts": ts, "via": via} for row in rows])


def log_access(membrane: EngineContext, record_id: str, actor: str, sensitivity: str, scope: str = "",
               via: str = "") -> None:
    """Append one access entry, in a transaction of its own (``log_accesses`` of one)."""
    log_accesses(membrane, actor, [(record_id, sensitivity, scope)], via)


def log_record_access(membrane: EngineContext, record_id: str, actor: str) -> None:
    """Record that ``actor`` opened the live record ``record_id`` in full, with the labels it has
    now (``log_access``); NotFoundError for a record not in the store."""
    record = audit_reads.get(membrane, record_id)
    log_access(membrane, record.id, actor, record.sensitivity.value, record.scope)


def accesses(membrane: EngineContext, clearance: TrustContext | None = None, record_id: str | None = None,
             actor: str | None = None, limit: int = 100, offset: int = 0) -> tuple[int, list[Access]]:
    """Access entries, newest first: (how many match, the page). With ``clearance``, only the
    entries of records it sees (by the labels the record had when it was opened)."""
    record_id = check_string(record_id, "record_id", MAX_ID_LENGTH, optional=True)
    actor = check_string(actor, "actor", MAX_ACTOR_LENGTH, optional=True)
    limit, offset = check_whole(limit, "limit", 0, MAX_QUERY_LIMIT), check_whole(offset, "offset", 0, MAX_OFFSET)
    levels = scopes = None
    if clearance is not None:
        clearance = as_trust(clearance, "clearance")
        levels = [s.value for s in Sensitivity if s.level <= clearance.max_level + 1]
        scopes = list(clearance.scopes) if clearance.scopes else None
    total, rows = access_entries(membrane.store, record_id, actor, levels, scopes, limit, offset)
    return total, [Access(seq, rid, who, sens, scope, datetime.fromtimestamp(ts, UTC), via)
                   for seq, rid, who, sens, scope, ts, via in rows]


__all__ = ["ACCESS_LOG_LEVEL_ENV", "Access", "WITHHELD", "access_log_level", "accesses", "archived_ids", "audit_actors",
           "audit_query", "audit_rows", "explain", "history", "past_curve", "record_at", "salience_history", "time_below", "log_access", "log_accesses", "log_record_access", "masked", "scopes_seen", "sees_everything", "shown", "simulate",
           "view"]
