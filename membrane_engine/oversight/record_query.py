"""The record explorer's query: filter and search the whole store, one page at a time.

Type, sensitivity, scope and tags are matched on the column cache (numpy; tags through the
cache's tag-set codes); revision status and free text in SQL (the JSON document with LIKE,
``storage.record_queries``); the
salience range on S(as_of) computed over the column cache. Only the requested page of documents
is read and parsed. Tag counts are numpy over the same codes.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from membrane_engine.storage.columns import TYPE_CODES, with_tags
from membrane_engine.storage.columns import tag_counts as column_tag_counts
from membrane_engine.errors import ValidationError
from membrane_engine.rules.labels import spans_values
from membrane_engine.rules.salience import salience_at, take
from membrane_engine.model.records import (
    MAX_OFFSET,
    MAX_SEARCH_TEXT_LENGTH,
    MemoryRecord,
    RevisionStatus,
    Sensitivity,
    check_id,
    check_instant,
    check_string,
    check_strings,
    check_whole,
    to_epoch,
)
from membrane_engine.storage.record_queries import explorer_ids, referencing_ids
from membrane_engine.rules.trust import TrustContext, as_trust, verdicts
from membrane_engine.oversight.clearance import shown

SORTS = ("salience", "newest", "oldest", "id")
NO_STATUS = "none"  # revision status filter value for records without one (non-semantic)
MAX_PAGE = 1000


@dataclass
class Filters:
    """Empty fields match everything. ``tags`` must all be present on a record; ``text`` is a
    case-insensitive substring of the id, a tag, anything in the record's JSON or its label
    (``labels.label``: what the pages name it by, e.g. "subject predicate object")."""
    types: list[str] = field(default_factory=list)
    sensitivities: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)  # "" selects unscoped records
    tags: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)  # active | contested | retracted | none
    salience_min: float | None = None
    salience_max: float | None = None
    text: str = ""
    ids: list[str] = field(default_factory=list)

    def needs_sql(self) -> bool:
        return bool(self.statuses or self.text.strip())


def _check_filters(filters: Any) -> Filters:
    """The filters' fields, each of its type (a dataclass does not check them), named
    ``filters.<field>`` in the refusal."""
    if not isinstance(filters, Filters):
        raise ValidationError(f"filters must be an explorer.Filters (got {filters!r:.80})", [("filters", "not Filters")])
    lists = {name: check_strings(getattr(filters, name), f"filters.{name}")
             for name in ("types", "sensitivities", "scopes", "tags", "statuses")}
    ids = check_strings(filters.ids, "filters.ids")
    text = check_string(filters.text, "filters.text", MAX_SEARCH_TEXT_LENGTH)
    bounds = {}
    for name in ("salience_min", "salience_max"):
        value = getattr(filters, name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ValidationError(f"filters.{name} must be a finite number or None (got {value!r:.80})",
                                      [(f"filters.{name}", "not a finite number")])
            value = float(value)
        bounds[name] = value
    return Filters(**lists, ids=ids, text=text, **bounds)


def _check(filters: Filters, sort: str, offset: int, limit: int) -> None:
    check_whole(offset, "offset", 0, MAX_OFFSET)
    check_whole(limit, "limit", 0, MAX_PAGE)
    problems = []
    for t in filters.types:
        if t not in TYPE_CODES:
            problems.append(("types", f"unknown type {t!r}"))
    known = {s.value for s in Sensitivity}
    for s in filters.sensitivities:
        if s not in known:
            problems.append(("sensitivities", f"unknown sensitivity {s!r}"))
    statuses = {s.value for s in RevisionStatus} | {NO_STATUS}
    for s in filters.statuses:
        if s not in statuses:
            problems.append(("statuses", f"unknown revision status {s!r}"))
    if not isinstance(sort, str) or sort not in SORTS:
        problems.append(("sort", f"unknown sort {sort!r:.80} (one of {', '.join(SORTS)})"))
    if problems:
        raise ValidationError("; ".join(f"{f}: {m}" for f, m in problems), problems)


def _sql_ids(membrane: Any, filters: Filters, clearance: TrustContext | None = None) -> set[str]:
    text = filters.text.strip()
    return explorer_ids(membrane.store, statuses=[s for s in filters.statuses if s != NO_STATUS],
                        without_status=NO_STATUS in filters.statuses, text=text,
                        by_label=bool(text) and spans_values(text), types=filters.types,
                        sensitivities=filters.sensitivities, scopes=filters.scopes, clearance=clearance)


def search(membrane: Any, filters: Filters | None = None, offset: int = 0, limit: int = 50,
           sort: str = "salience", as_of: datetime | None = None,
           clearance: TrustContext | None = None) -> tuple[int, list[MemoryRecord]]:
    """``(how many records match, the page of them)``. Records carry ``salience = S(as_of)``
    (as_of defaults to now); their audit logs are left empty (``Membrane.get`` reads one).
    Sorts: salience (S desc), newest / oldest (created_at), id; ties by id. With an operator's
    ``clearance`` (SPEC 10), records it does not see are left out before anything is matched,
    counted or paged, the text search reads only the content it sees, and records it sees
    redacted come as their redacted view."""
    filters = _check_filters(Filters() if filters is None else filters)
    _check(filters, sort, offset, limit)
    offset, limit = int(offset), int(limit)
    clearance = as_trust(clearance, "clearance") if clearance is not None else None
    when = check_instant(as_of) if as_of is not None else membrane.now()
    snap = membrane.columns.current()
    mask = snap.alive.copy()
    if clearance is not None:
        mask &= verdicts(snap.sens_level, snap.scope_code, snap.scope_names, clearance) > 0
    if filters.types:
        mask &= np.isin(snap.type_code, np.array([TYPE_CODES[t] for t in filters.types], dtype=np.int8))
    if filters.sensitivities:
        levels = [Sensitivity(s).level for s in filters.sensitivities]
        mask &= np.isin(snap.sens_level, np.array(levels, dtype=np.int8))
    if filters.scopes:
        codes = [i for i, name in enumerate(snap.scope_names) if name in set(filters.scopes)]
        mask &= np.isin(snap.scope_code, np.array(codes, dtype=np.int32))
    if filters.tags:
        mask &= with_tags(snap, filters.tags)
    if filters.ids:
        wanted = np.zeros(len(mask), dtype=bool)
        wanted[[snap.row_of[i] for i in filters.ids if i in snap.row_of]] = True
        mask &= wanted
    if filters.needs_sql() and mask.any():
        matched = _sql_ids(membrane, filters, clearance)
        sql_mask = np.zeros(len(mask), dtype=bool)
        sql_mask[[snap.row_of[i] for i in matched if i in snap.row_of]] = True
        mask &= sql_mask
    rows = np.nonzero(mask)[0]
    s = salience_at(take(snap.decay, rows), to_epoch(when)) if len(rows) else np.empty(0)
    if clearance is not None and as_of is not None and len(rows):
        # A redacted record's salience at another instant would tell its decay profile, which its
        # redacted view withholds: it is matched, sorted and returned by its salience now.
        redacted = verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, clearance) == 1
        if redacted.any():
            s = np.array(s, dtype=float)
            s[redacted] = salience_at(take(snap.decay, rows[redacted]), to_epoch(membrane.now()))
    keep = np.ones(len(rows), dtype=bool)
    if filters.salience_min is not None:
        keep &= s >= filters.salience_min
    if filters.salience_max is not None:
        keep &= s <= filters.salience_max
    rows, s = rows[keep], s[keep]
    total = int(len(rows))
    if not total or not limit:
        return total, []
    if sort == "salience":
        page = page_positions(-s, snap.ids[rows], offset, limit)
    elif sort == "newest":
        page = page_positions(-snap.created_at[rows], snap.ids[rows], offset, limit)
    elif sort == "oldest":
        page = page_positions(snap.created_at[rows], snap.ids[rows], offset, limit)
    else:
        ids = snap.ids[rows].astype(str)
        page = np.argsort(ids, kind="stable")[offset:offset + limit]
    page_ids = [str(snap.ids[rows[k]]) for k in page]
    with membrane.store.read() as conn:
        stored = membrane.store.fetch(conn, page_ids)
    out = []
    for k, rid in zip(page, page_ids):
        row = stored.get(rid)
        if row is None:  # removed since the snapshot
            continue
        doc = row.doc
        doc["salience"] = float(s[k])
        doc["audit_log"] = []
        record = MemoryRecord.model_validate(doc)
        if clearance is not None:

            record = shown(record, clearance)  # the row as read, on its own labels
            if record is None:
                continue
        out.append(record)
    return total, out


def page_positions(keys: np.ndarray, ids: np.ndarray, offset: int, limit: int) -> np.ndarray:
    """Positions of the page ``[offset, offset + limit)`` in the order of ``keys`` (ascending,
    NaN last), ties by id. Only the rows that can be on or before the page are sorted: those at
    or below the page's last key (``np.partition``), all of its ties included, which at a
    million rows and a page near the start is a few thousand rows instead of every one."""
    n = len(keys)
    k = min(offset + limit, n)
    candidates = None
    if k < n // 4:
        kth = np.partition(keys, k - 1)[k - 1]
        if not np.isnan(kth):
            candidates = np.flatnonzero(keys <= kth)
    if candidates is None:
        candidates = np.arange(n)
    order = np.lexsort((ids[candidates].astype(str), keys[candidates]))
    return candidates[order[offset:offset + limit]]


def existing(membrane: Any, ids: list[str]) -> set[str]:
    """Which of ``ids`` are live records (from the column cache)."""
    snap = membrane.columns.current()
    return {i for i in ids if i in snap.row_of and snap.alive[snap.row_of[i]]}


MAX_REFERENCING = 100_000  # incoming links one call lists


def referencing(membrane: Any, record_id: str, limit: int = 200,
                clearance: TrustContext | None = None) -> list[str]:
    """Ids of records with a relation pointing at ``record_id`` (incoming links), by id. Found
    with LIKE on the stored JSON, then confirmed on the matching documents' relations. With
    ``clearance``, only records it sees in full (a relation is content a redacted view withholds)."""
    record_id = check_id(record_id)
    limit = check_whole(limit, "limit", 1, MAX_REFERENCING)
    if clearance is not None:
        clearance = as_trust(clearance, "clearance")
    return referencing_ids(membrane.store, record_id, limit, clearance)


def tag_counts(membrane: Any, clearance: TrustContext | None = None) -> dict[str, int]:
    """Every tag of the live records with how many records carry it (a tag twice in one record
    counts once), most used first, then by name; with ``clearance``, over the records it sees
    (in full or redacted: a redacted view shows its tags). Counted on the column cache's tag-set
    codes (``columns.tag_counts``), so it costs a pass over one int32 column whatever the store's
    size, and it is as current as every other cache answer."""
    snap = membrane.columns.current()
    mask = snap.alive
    if clearance is not None:
        clearance = as_trust(clearance, "clearance")
        mask = mask & (verdicts(snap.sens_level, snap.scope_code, snap.scope_names, clearance) > 0)
    counted = column_tag_counts(snap, mask)
    return dict(sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])))


__all__ = ["Filters", "search", "tag_counts", "referencing", "existing", "SORTS", "NO_STATUS"]
