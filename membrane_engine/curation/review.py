"""The review queue an operator works through: contested records, each beside what contests it,
and records about to be pruned.

Everything is read for an operator's clearance (SPEC 10), on the same rule as every other read
(``trust.verdict_as_read`` and ``trust.verdicts``, never a copy): a contested record, a contester
or a record about to be pruned that the clearance does not see is counted, never shown; one it
sees redacted is shown as metadata only (no label, no contesters: a redacted view's relations
and audit log are withheld).

"About to be pruned": prune's own eligibility (not pinned, policy auto_prune, S < the prune
threshold) now, or within ``horizon`` of now. S(t) is computed over the column cache with the
engine's vectorized ``salience_at``; S never rises with time, so the instant a record crosses
the threshold is found by bisection on the records that are below it at the horizon's end.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from membrane_engine.context import EngineContext
from membrane_engine.curation.operations import AUTO_PRUNE_CODE
from membrane_engine.errors import ValidationError
from membrane_engine.retrieval.labels import labels
from membrane_engine.rules.labels import label_of_doc, redacted_label
from membrane_engine.rules.salience import PRUNE_THRESHOLD, salience_at, salience_rows, take
from membrane_engine.model.records import UTC, MemoryRecord, MemoryType, check_instant, to_epoch
from membrane_engine.storage.record_queries import archived_labels
from membrane_engine.storage.contests import contested_docs, contested_labels, newest_contests, revise_entries
from membrane_engine.rules.trust import TrustContext, Verdict, as_trust, redact, verdict_as_read, verdicts
from membrane_engine.storage.columns import TYPE_NAMES

DEFAULT_HORIZON = timedelta(days=7)
MAX_HORIZON = timedelta(days=3650)
MAX_ITEMS = 1000
_BISECTIONS = 40  # a 7-day horizon to well under a millisecond


@dataclass(frozen=True)
class Contester:
    """What contests a record: a record of the store (``record_id`` set, with its label as the
    clearance may read it) or an external reference (``ref``, from the contest's audit entry).
    ``via``: "relation" (a contested_by relation), "audit" (named by a contest entry) or both."""
    ref: str
    record_id: str | None
    label: str
    redacted: bool
    via: tuple[str, ...]


@dataclass(frozen=True)
class ContestedItem:
    record: MemoryRecord  # as the clearance sees it: whole, or redacted (metadata only)
    label: str
    contesters: tuple[Contester, ...]
    contesters_withheld: int  # record contesters beyond the clearance: counted, never shown
    contested_at: datetime | None  # the newest contest entry's time (None for a redacted record)
    rationale: str | None  # that entry's reason (its rationale without "contested by REF: ")


@dataclass(frozen=True)
class PruneItem:
    record_id: str
    type: str
    label: str
    redacted: bool
    salience: float  # S(as_of)
    prune_at: datetime  # as_of when eligible now, else the instant S falls below the threshold

    @property
    def eligible_now(self) -> bool:
        return self.salience < PRUNE_THRESHOLD


@dataclass(frozen=True)
class ReviewQueue:
    as_of: datetime
    horizon: timedelta
    contested: tuple[ContestedItem, ...]
    contested_total: int  # contested records the clearance sees (full or redacted)
    contested_withheld: int  # contested records beyond it
    pruning: tuple[PruneItem, ...]
    pruning_total: int  # about to be pruned and seen
    pruning_withheld: int  # about to be pruned, beyond the clearance
    threshold: float = PRUNE_THRESHOLD


def _check(horizon: Any, limit: Any) -> tuple[timedelta, int]:
    if not isinstance(horizon, timedelta) or horizon < timedelta(0) or horizon > MAX_HORIZON:
        raise ValidationError(f"horizon must be a duration between 0 and {MAX_HORIZON.days} days (got {horizon!r:.80})",
                              [("horizon", "out of range")])
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_ITEMS:
        raise ValidationError(f"limit must be a whole number 0..{MAX_ITEMS} (got {limit!r:.80})", [("limit", "out of range")])
    return horizon, limit


def _record(doc: dict[str, Any]) -> MemoryRecord:
    doc = dict(doc)
    doc["audit_log"] = []
    return MemoryRecord.model_validate(doc)


def _contest_refs(conn, ids: list[str]) -> dict[str, list[tuple[str, datetime, str]]]:
    """Per record, its contest entries, oldest first: (ref, time, rationale)."""
    out: dict[str, list[tuple[str, datetime, str]]] = {}
    for rid, details, when, rationale in revise_entries(conn, ids):
        ref = _contest_ref(details, rationale)
        if ref is not None:
            out.setdefault(rid, []).append((ref, when, rationale))
    return out


_CONTESTED_BY = re.compile(r"contested by (\S+): ")


def _contest_ref(details: str | None, rationale: str) -> str | None:
    """What a revise entry says contests its record ("" for no reference), or None when it is
    not a contest entry. Its details say so where this engine wrote it; an entry that came
    through Membrane's format has only its rationale ("contested by REF: ..." or "contested: ...",
    as this engine words it: ``store.CONTEST_ENTRY``)."""
    if details and "contesting_ref" in details:
        try:
            parsed = json.loads(details)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and "contesting_ref" in parsed:
            return str(parsed["contesting_ref"] or "")
    found = _CONTESTED_BY.match(rationale or "")
    if found:
        return found.group(1)
    return "" if (rationale or "").startswith("contested: ") else None


def _contested(m: EngineContext, clearance: TrustContext, limit: int
               ) -> tuple[list[ContestedItem], int, int]:
    """The contested records are found, counted and gated on the partial index's labels, then
    ordered (newest contest first) by their newest contest entry's time; only the ``limit``
    listed are read whole, with their contest entries, and each is gated again on the labels
    read with its content."""
    with m.store.read() as conn:
        marked = contested_labels(conn)
        decided: dict[tuple[str, str], Verdict] = {}
        seen: dict[str, Verdict] = {}
        withheld = 0
        for rid, sensitivity, scope in marked:
            key = (sensitivity, scope or "")
            verdict = decided.get(key)
            if verdict is None:
                verdict = decided[key] = verdict_as_read(sensitivity, scope or "", clearance)
            if verdict is Verdict.HIDDEN:
                withheld += 1
            else:
                seen[rid] = verdict
        # What the queue is ordered by; the entries themselves are read for the listed records
        # only (``_contest_refs``).
        newest = newest_contests(conn)

        # Newest contest first; redacted records after them, by id (their audit is withheld, so
        # is when they were contested).
        def order(rid: str) -> tuple:
            full = seen[rid] is Verdict.FULL
            return (not full, -newest.get(rid, 0.0) if full else 0.0, rid)

        page = sorted(seen, key=order)[:limit]
        entries = _contest_refs(conn, sorted(rid for rid in page if seen[rid] is Verdict.FULL))
        docs = {rid: json.loads(raw) for rid, raw in contested_docs(conn, page).items()}
    listed: list[tuple[str, dict[str, Any], Verdict]] = []
    for rid in page:
        doc = docs.get(rid)
        if doc is None:  # no longer contested, or gone, since it was counted
            continue
        verdict = verdict_as_read(doc.get("sensitivity"), str(doc.get("scope") or ""), clearance)
        if verdict is not Verdict.HIDDEN:  # relabelled in between: decided on what was read
            listed.append((rid, doc, verdict if seen[rid] is Verdict.FULL else Verdict.REDACTED))
    # What contests each: its contested_by relations' targets and its contest entries' refs.
    refs: dict[str, dict[str, set[str]]] = {}
    for rid, doc, verdict in listed:
        if verdict is not Verdict.FULL:
            continue
        named: dict[str, set[str]] = {}
        for rel in doc.get("relations") or []:
            if isinstance(rel, dict) and rel.get("predicate") == "contested_by" and rel.get("target_id"):
                named.setdefault(str(rel["target_id"]), set()).add("relation")
        for ref, _, _ in entries.get(rid, []):
            if ref:
                named.setdefault(ref, set()).add("audit")
        refs[rid] = named
    all_refs = sorted({r for named in refs.values() for r in named})
    live = labels(m, all_refs, clearance) if all_refs else {}  # only what the clearance sees
    with m.store.read() as conn:
        in_store = m.store.existing_ids(conn, all_refs) if all_refs else set()
        archived = archived_labels(conn, [r for r in all_refs if r not in live and r in in_store]) if all_refs else {}
    items: list[ContestedItem] = []
    for rid, doc, verdict in listed:
        record = _record(doc)
        if verdict is Verdict.REDACTED:
            items.append(ContestedItem(redact(record), redacted_label(record.type.value), (), 0, None, None))
            continue
        contesters: list[Contester] = []
        hidden = 0
        for ref, via in sorted(refs[rid].items()):
            how = tuple(sorted(via))
            if ref in live:
                contesters.append(Contester(ref, ref, live[ref], _is_redacted_label(live[ref]), how))
            elif ref in archived:
                sens, scope = archived[ref]
                v = verdict_as_read(sens, scope, clearance)
                if v is Verdict.HIDDEN:
                    hidden += 1
                else:
                    contesters.append(Contester(ref, ref, "(archived record)", v is Verdict.REDACTED, how))
            elif ref in in_store:
                hidden += 1  # a live record the clearance does not see
            else:
                contesters.append(Contester(ref, None, ref, False, how))  # an external reference
        last = entries.get(rid, [])
        items.append(ContestedItem(record, label_of_doc(doc), tuple(contesters), hidden,
                                   last[-1][1] if last else None, _reason(last[-1]) if last else None))
    return items, len(seen), withheld


def _pruning(m: EngineContext, clearance: TrustContext, when: datetime, horizon: timedelta, limit: int
             ) -> tuple[list[PruneItem], int, int]:
    snap = m.columns.current()
    t0 = to_epoch(when)
    t1 = t0 + horizon.total_seconds()
    base = np.flatnonzero(snap.alive & ~snap.decay.pinned & (snap.policy == AUTO_PRUNE_CODE))
    if not len(base):
        return [], 0, 0
    s_end = salience_rows(snap.decay, base, t1)
    rows = base[s_end < PRUNE_THRESHOLD]
    if not len(rows):
        return [], 0, 0
    gate = verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, clearance)
    withheld = int(np.count_nonzero(gate == 0))
    shown = rows[gate > 0]
    redacted_rows = gate[gate > 0] == 1
    if not len(shown):
        return [], 0, withheld
    cols = take(snap.decay, shown)
    s_now = salience_at(cols, t0)
    # The first instant S < threshold: now for those already below; else bisection in (t0, t1].
    lo = np.full(len(shown), t0)
    hi = np.full(len(shown), t1)
    pending = s_now >= PRUNE_THRESHOLD
    hi[~pending] = t0
    if pending.any():
        sub = take(cols, np.flatnonzero(pending))
        a, b = lo[pending], hi[pending]
        for _ in range(_BISECTIONS):
            mid = (a + b) / 2
            below = salience_at(sub, mid) < PRUNE_THRESHOLD
            b = np.where(below, mid, b)
            a = np.where(below, a, mid)
        hi[pending] = b
    ids = snap.ids[shown].astype(str)
    order = np.lexsort((ids, hi))[:limit]
    page = [str(ids[k]) for k in order]
    named = labels(m, page, clearance)  # decided on the labels read with the content
    items = []
    for k in order:
        rid = str(ids[k])
        if rid not in named:  # relabelled or removed since the snapshot
            continue
        items.append(PruneItem(rid, str(_type_name(snap, shown[k])), named[rid],
                               bool(redacted_rows[k]) or named[rid].startswith("redacted "),
                               float(s_now[k]), datetime.fromtimestamp(float(hi[k]), UTC)))
    return items, int(len(shown)), withheld


def _reason(entry: tuple[str, datetime, str]) -> str:
    """The operator's reason of a contest entry, without the "contested by REF: " its rationale
    starts with (the contester is named, or counted, in ``contesters``)."""
    ref, _, rationale = entry
    for prefix in (f"contested by {ref}: ", "contested: "):
        if rationale.startswith(prefix):
            return rationale[len(prefix):]
    return rationale


def _is_redacted_label(text: str) -> bool:
    return any(text == redacted_label(t.value) for t in MemoryType)


def _type_name(snap: Any, row: int) -> str:

    return TYPE_NAMES[int(snap.type_code[row])]


def review_queue(m: EngineContext, clearance: TrustContext, as_of: datetime | None = None,
                 horizon: timedelta | None = DEFAULT_HORIZON, limit: int = 200) -> ReviewQueue:
    """The contested records and the records about to be pruned (within ``horizon`` of
    ``as_of``, default now; None: DEFAULT_HORIZON) as ``clearance`` may see them; at most
    ``limit`` of each listed, all counted."""
    clearance = as_trust(clearance, "clearance")
    horizon, limit = _check(DEFAULT_HORIZON if horizon is None else horizon, limit)
    when = check_instant(as_of) if as_of is not None else m.now()
    contested, c_total, c_withheld = _contested(m, clearance, limit)
    pruning, p_total, p_withheld = _pruning(m, clearance, when, horizon, limit)
    return ReviewQueue(when, horizon, tuple(contested), c_total, c_withheld, tuple(pruning), p_total, p_withheld)


__all__ = ["Contester", "ContestedItem", "PruneItem", "ReviewQueue", "DEFAULT_HORIZON", "review_queue"]
