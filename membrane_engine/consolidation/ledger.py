"""What the store remembers of consolidation beside the records it wrote: entries on the store's
own audit chain (``STORE_SUBJECT``), hash-chained and in the store-wide sequence like every
other, each written in the transaction of the change it tells of and naming its actor.

- **Runs.** Each consolidator's transaction that writes something appends one entry (kind
  ``consolidation_run``): the run's id (shared by its consolidators), ``as_of``, whether the
  run applied chosen proposals only, counts per action and per label (sensitivity level and
  scope) and the first ``SHOWN_ITEMS`` items. ``history`` lists runs through a clearance.
- **Rejected proposals.** ``service.reject`` appends one entry (kind
  ``consolidation_rejected``) naming the keys rejected (``report.Proposal.key``) with each
  proposal's labels; every later run leaves those proposals out (``rejected_keys``) until its
  sources change, which gives the proposal another key.
- **Apply automatically.** An admin's setting (kind ``consolidation_setting``): the newest such
  entry is the setting. The engine only keeps it; the console's Review page acts on it
  (docs/console.md, "Consolidation").

**(deviation)** Membrane keeps none of these: it has no proposals to reject, and its scheduler
runs consolidation without a record of the run beyond the records' own entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from membrane_engine.consolidation.batch import SENSITIVITY_AT, Batch
from membrane_engine.consolidation.report import COMPRESSED, CREATED, KEY_PATTERN, REINFORCED, Proposal
from membrane_engine.context import EngineContext
from membrane_engine.errors import ValidationError
from membrane_engine.model.records import AuditAction, check_flag, check_whole, format_time, parse_time, sensitivity_level
from membrane_engine.rules.chain import STORE_SUBJECT
from membrane_engine.rules.trust import TrustContext, Verdict, verdict_as_read, verdicts
from membrane_engine.storage.audit_log import append_subject
from membrane_engine.storage.consolidation_log import store_entries
from membrane_engine.storage.store import StoreConnection

RUN, REJECTED, SETTING = "consolidation_run", "consolidation_rejected", "consolidation_setting"
ACTIONS = (CREATED, REINFORCED, COMPRESSED)
SHOWN_ITEMS = 200  # items a run's entry names one by one (all are counted)
MAX_KEYS = 100_000  # keys one call may name (a run over a large store proposes tens of thousands)
MAX_HISTORY = 500


def check_keys(keys: Any, name: str = "only") -> list[str]:
    """Proposal keys (``report.Proposal.key``): a list of strings of the key's form, no repeats."""
    if isinstance(keys, (str, bytes, dict)) or not hasattr(keys, "__iter__"):
        raise ValidationError(f"{name} must be a list of proposal keys (got {type(keys).__name__} {keys!r:.60})",
                              [(name, "not a list")])
    out = list(dict.fromkeys(keys))
    if len(out) > MAX_KEYS:
        raise ValidationError(f"{name}: at most {MAX_KEYS:,} proposal keys (got {len(out):,})", [(name, "too many")])
    for key in out:
        if not isinstance(key, str) or not KEY_PATTERN.match(key):
            raise ValidationError(f"{name}: {key!r:.80} is not a proposal key (consolidator:action:24 hex "
                                  "digits, as report.proposals give them)", [(name, "not a key")])
    return out


# --------------------------------------------------------------------------- labels


def item_labels(batch: Batch, record_id: str) -> tuple[int, str]:
    """(sensitivity level, scope) of a record a batch creates or changes."""
    created = batch.created.get(record_id)
    if created is not None:
        return sensitivity_level(created.sensitivity), created.scope
    scope, level = batch.p.labels(batch.p.snap.row_of[record_id])
    return level, scope


def proposal_labels(batch: Batch, proposal: Proposal) -> tuple[int, str]:
    if proposal.action == CREATED:
        record = proposal.record
        return sensitivity_level(record.sensitivity), record.scope
    return item_labels(batch, proposal.record_id)


# --------------------------------------------------------------------------- writing


def log_run(conn: StoreConnection, batch: Batch, run: str, as_of: datetime, selected: bool, now: datetime) -> None:
    """The run entry of one consolidator's transaction (after ``batch.write``, in it)."""
    p = batch.p
    counts = dict.fromkeys(ACTIONS, 0)
    labels: dict[tuple[int, str, str], int] = {}
    shown: list[list[Any]] = []
    for item in batch.items:
        level, scope = item_labels(batch, item.record_id)
        counts[item.action] += 1
        labels[(level, scope, item.action)] = labels.get((level, scope, item.action), 0) + 1
        if len(shown) < SHOWN_ITEMS:
            shown.append([item.action, item.record_id, item.record_type, level, scope])
    said = ", ".join(f"{n} {a}" for a, n in counts.items() if n) or "entity links only"
    details = {"kind": RUN, "run": run, "consolidator": p.kind, "as_of": format_time(as_of), "selected": selected,
               "counts": counts, "labels": [[lv, sc, a, n] for (lv, sc, a), n in sorted(labels.items())],
               "items": shown, "links": len(batch.links)}
    append_subject(conn, STORE_SUBJECT, AuditAction.REVISE, p.actor,
                   f"consolidation run {run}: {p.kind}: {said}", now, details)


def log_rejection(conn: StoreConnection, found: list[tuple[Proposal, tuple[int, str]]], actor: str, rationale: str,
                  now: datetime) -> None:
    details = {"kind": REJECTED, "keys": [p.key for p, _ in found],
               "proposals": [[p.key, p.consolidator, p.action, p.record_type, level, scope,
                              None if p.action == CREATED else p.record_id, len(p.sources)]
                             for p, (level, scope) in found]}
    append_subject(conn, STORE_SUBJECT, AuditAction.REVISE, actor, rationale, now, details)


def rejected_keys(conn: StoreConnection) -> frozenset[str]:
    """Every proposal key an operator rejected."""
    keys: set[str] = set()
    for row in store_entries(conn, (REJECTED,)):
        if isinstance(row.details, dict) and row.details.get("kind") == REJECTED:
            keys.update(k for k in row.details.get("keys") or () if isinstance(k, str))
    return frozenset(keys)


# --------------------------------------------------------------------------- the setting


@dataclass(frozen=True)
class AutoApply:
    """The auto-apply setting: on or off, who set it and when (never set: off, None, None)."""

    on: bool
    actor: str | None = None
    at: datetime | None = None


def _setting(conn: StoreConnection) -> AutoApply:
    for row in store_entries(conn, (SETTING,), limit=20):
        if isinstance(row.details, dict) and row.details.get("kind") == SETTING:
            return AutoApply(bool(row.details.get("auto_apply")), row.entry.actor, row.entry.timestamp)
    return AutoApply(False)


def auto_apply(ctx: EngineContext) -> AutoApply:
    with ctx.store.read() as conn:
        return _setting(conn)


def set_auto_apply(ctx: EngineContext, on: Any, actor: str) -> AutoApply:
    """Turn applying proposals automatically on or off, as ``actor``: one entry, in one
    transaction; nothing is written when the setting already holds."""
    on = check_flag(on, "on")
    with ctx.store.write() as conn:
        now = ctx.now()
        current = _setting(conn)
        if current.on == on and current.actor is not None:
            return current
        append_subject(conn, STORE_SUBJECT, AuditAction.REVISE, actor,
                       f"consolidation: apply proposals automatically {'on' if on else 'off'}", now,
                       {"kind": SETTING, "auto_apply": on})
    return AutoApply(on, actor, now)


# --------------------------------------------------------------------------- history


@dataclass(frozen=True)
class HistoryItem:
    consolidator: str
    action: str
    record_id: str
    record_type: str


@dataclass(frozen=True)
class HistoryEntry:
    """One event of consolidation's history: a run (its consolidators' entries together), a
    rejection or a change of the setting. Counts and items are those the reader's clearance sees
    in full (labels as they were written); an event with none of them is not listed."""

    kind: str  # "run", "rejected" or "setting"
    at: datetime
    actors: tuple[str, ...]
    rationale: str = ""
    run: str | None = None
    as_of: datetime | None = None
    selected: bool = False  # a run that applied chosen proposals only
    counts: dict[str, int] = field(default_factory=dict)  # by action (a rejection: "rejected")
    by_consolidator: dict[str, dict[str, int]] = field(default_factory=dict)
    items: tuple[HistoryItem, ...] = ()
    auto_apply: bool | None = None  # a setting's new value


def _sees(clearance: TrustContext | None, level: Any, scope: Any) -> bool:
    if clearance is None:
        return True
    if not isinstance(level, int) or level not in SENSITIVITY_AT or not isinstance(scope, str):
        return False
    return verdict_as_read(SENSITIVITY_AT[level], scope, clearance) is Verdict.FULL


def _live_seen(ctx: EngineContext, ids: list[str], clearance: TrustContext | None) -> set[str]:
    """Of ``ids``, the live records ``clearance`` sees (in full or redacted) now."""
    snap = ctx.columns.current()
    rows = np.array([i for i in (snap.row_of.get(rid) for rid in ids) if i is not None], dtype=np.int64)
    if not len(rows):
        return set()
    rows = rows[snap.alive[rows]]
    if clearance is not None and len(rows):
        rows = rows[verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, clearance) > 0]
    return {str(snap.ids[i]) for i in rows}


def history(ctx: EngineContext, clearance: TrustContext | None = None, limit: int = 50) -> list[HistoryEntry]:
    """The newest ``limit`` runs, rejections and settings, newest first, as ``clearance`` may see
    them (None: all of it)."""
    limit = check_whole(limit, "limit", 0, MAX_HISTORY)
    with ctx.store.read() as conn:
        rows = store_entries(conn, (RUN, REJECTED, SETTING), limit=limit * 5)
    out: list[HistoryEntry] = []
    runs: dict[str, list[Any]] = {}
    order: list[tuple[str, Any]] = []
    for row in rows:  # newest first
        d = row.details if isinstance(row.details, dict) else {}
        kind = d.get("kind")
        if kind == RUN and isinstance(d.get("run"), str):
            if d["run"] not in runs:
                runs[d["run"]] = []
                order.append((RUN, d["run"]))
            runs[d["run"]].append(row)
        elif kind in (REJECTED, SETTING):
            order.append((kind, row))
    listed_ids = [it[1] for rows_ in runs.values() for r in rows_ for it in (r.details.get("items") or [])
                  if isinstance(it, list) and len(it) == 5 and isinstance(it[1], str)]
    live = _live_seen(ctx, listed_ids, clearance) if listed_ids else set()
    for kind, ref in order:
        if kind == RUN:
            entry = _run_entry(ref, sorted(runs[ref], key=lambda r: r.position), clearance, live)
        elif kind == REJECTED:
            entry = _rejection_entry(ref, clearance)
        else:
            entry = HistoryEntry("setting", ref.entry.timestamp, (ref.entry.actor,), ref.entry.rationale,
                                 auto_apply=bool(ref.details.get("auto_apply")))
        if entry is not None:
            out.append(entry)
        if len(out) >= limit:
            break
    return out


def _run_entry(run: str, rows: list[Any], clearance: TrustContext | None, live: set[str]) -> HistoryEntry | None:
    counts = dict.fromkeys(ACTIONS, 0)
    by: dict[str, dict[str, int]] = {}
    items: list[HistoryItem] = []
    for row in rows:
        d = row.details
        kind = str(d.get("consolidator", ""))
        for entry in d.get("labels") or []:
            if not (isinstance(entry, list) and len(entry) == 4 and entry[2] in counts and isinstance(entry[3], int)):
                continue
            level, scope, action, n = entry
            if _sees(clearance, level, scope):
                counts[action] += n
                by.setdefault(kind, dict.fromkeys(ACTIONS, 0))[action] += n
        for it in d.get("items") or []:
            if isinstance(it, list) and len(it) == 5 and _sees(clearance, it[3], it[4]) and it[1] in live:
                items.append(HistoryItem(kind, str(it[0]), it[1], str(it[2])))
    if not any(counts.values()):
        return None
    first = rows[0]
    try:
        as_of = parse_time(first.details.get("as_of")) if first.details.get("as_of") else None
    except (ValueError, TypeError, ValidationError):
        as_of = None
    actors = tuple(dict.fromkeys(r.entry.actor for r in rows))
    return HistoryEntry("run", first.entry.timestamp, actors, "", run, as_of,
                        bool(first.details.get("selected")), counts, by, tuple(items))


def _rejection_entry(row: Any, clearance: TrustContext | None) -> HistoryEntry | None:
    seen = 0
    by: dict[str, dict[str, int]] = {}
    for p in row.details.get("proposals") or []:
        if isinstance(p, list) and len(p) == 8 and _sees(clearance, p[4], p[5]):
            seen += 1
            group = by.setdefault(str(p[1]), {})
            group[str(p[2])] = group.get(str(p[2]), 0) + 1
    if not seen:
        return None
    # The rationale was written by someone who saw every proposal: shown only to who sees them all.
    whole = seen == len(row.details.get("proposals") or [])
    return HistoryEntry("rejected", row.entry.timestamp, (row.entry.actor,), row.entry.rationale if whole else "",
                        counts={"rejected": seen}, by_consolidator=by)


__all__ = ["AutoApply", "HistoryEntry", "HistoryItem", "MAX_KEYS", "auto_apply", "check_keys", "history",
           "log_rejection", "log_run", "rejected_keys", "set_auto_apply"]
