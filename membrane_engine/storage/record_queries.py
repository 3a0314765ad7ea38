"""The record reads the console's lookups make in SQL: the explorer's status and text search,
the pickers' search by id, tag or label, incoming links, and the labels archived records had.

Services pass plain values (filter lists, text, a clearance) and get ids or rows back; the SQL
stays here. A clearance narrows a query with ``visible_condition``, the trust rule
(``rules.trust.decide``) written over the ``records`` table's label columns; text is matched
with LIKE on the stored JSON, so a search costs one scan of the candidate rows, and the rows
found only by the words of a label are confirmed with ``rules.labels.label_contains``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, case, null, or_, select
from sqlalchemy.engine import Connection

from membrane_engine.rules.labels import label_contains, label_words, word_forms
from membrane_engine.rules.trust import TrustContext
from membrane_engine.storage.store import Store, archive, like_contains, records, tag_json


def visible_condition(clearance: TrustContext, full_only: bool = False) -> Any:
    """The trust rule over the ``records`` table's label columns, as SQL: rows ``clearance``
    sees at all (or, with ``full_only``, in full). The same rule as ``trust.decide``: levels up
    to max (one more for redacted), unscoped or in the scopes when any are given; an unknown
    sensitivity (level -1) never."""
    top = clearance.max_level + (0 if full_only else 1)
    conditions = [records.c.sens_level >= 0, records.c.sens_level <= top]
    if clearance.scopes:
        conditions.append(or_(records.c.scope == "", records.c.scope.in_(list(clearance.scopes))))
    return and_(*conditions)


def contains_any_case(column: Any, text: str, sqlite: bool) -> Any:
    """SQL: ``column`` contains ``text``, case-insensitive for ASCII. SQLite's LIKE already is
    (ILIKE there wraps both sides in lower(), copying every document: 2.4 times the scan's cost)."""
    pattern = like_contains(text)
    return column.like(pattern, escape="\\") if sqlite else column.ilike(pattern, escape="\\")


def label_candidates(doc_column: Any, text: str, sqlite: bool = False) -> Any:
    """An SQL condition true for every record whose label may contain ``text`` (case-insensitive):
    each word of it (``labels.label_words``) appears in the stored document in one of its
    ``labels.word_forms``; None when the text has no word. ``sqlite``: the store is SQLite
    (``contains_any_case``)."""
    words = label_words(text)
    if not words:
        return None
    return and_(*(or_(*(contains_any_case(doc_column, f, sqlite) for f in word_forms(word)))
                  for word in dict.fromkeys(words)))


# --------------------------------------------------------------------------- the explorer


def explorer_ids(store: Store, statuses: Sequence[str] = (), without_status: bool = False, text: str = "",
                 by_label: bool = False, types: Sequence[str] = (), sensitivities: Sequence[str] = (),
                 scopes: Sequence[str] = (), clearance: TrustContext | None = None) -> set[str]:
    """Ids of live records with one of the revision ``statuses`` (or, ``without_status``, none),
    whose id, tags or JSON contain ``text`` (case-insensitive; with ``by_label``, also those
    whose label does), of the given types, sensitivities and scopes (empty: any). With
    ``clearance``, content is searched only where it sees the record in full: a redacted record
    is found by its id and tags (what its redacted view shows), never by what it withholds."""
    conditions = []
    if statuses or without_status:
        either = [records.c.status.in_(list(statuses))] if statuses else []
        if without_status:
            either.append(records.c.status.is_(None))
        conditions.append(or_(*either))
    text = text.strip()
    labelled = None
    if text:
        pattern = like_contains(text)
        in_doc = contains_any_case(records.c.doc, text, store.is_sqlite)
        # The label a page shows ("subject predicate object") may join values no substring of
        # the JSON holds: its candidates are read and labelled (label_candidates).
        labelled = label_candidates(records.c.doc, text, store.is_sqlite) if by_label else None
        if clearance is not None:
            in_doc = and_(in_doc, visible_condition(clearance, full_only=True))
            if labelled is not None:
                labelled = and_(labelled, visible_condition(clearance, full_only=True))
        direct = or_(records.c.id.ilike(pattern, escape="\\"), records.c.tags.ilike(pattern, escape="\\"), in_doc)
        conditions.append(direct if labelled is None else or_(direct, labelled))
    # Narrow by the indexed columns too, so the LIKE scans only candidate rows.
    if types:
        conditions.append(records.c.type.in_(list(types)))
    if sensitivities:
        conditions.append(records.c.sensitivity.in_(list(sensitivities)))
    if scopes:
        conditions.append(records.c.scope.in_(list(scopes)))
    with store.read() as conn:
        if labelled is None:
            return set(conn.execute(select(records.c.id).where(*conditions)).scalars())
        # The document only of the rows found by their words alone, to label them.
        rows = conn.execute(select(records.c.id, case((direct, null()), else_=records.c.doc)).where(*conditions))
        return {rid for rid, doc in rows if doc is None or label_contains(doc, text)}


# --------------------------------------------------------------------------- pickers and links


def found_records(store: Store, text: str, limit: int, clearance: TrustContext | None = None,
                  full_only: bool = False) -> list[tuple[str, str, str, str]]:
    """(id, type, scope, tags as stored) of at most ``limit`` live records whose id or one of
    whose tags contains ``text`` (case-insensitive for ASCII), or whose label does (only records
    seen in full, a label being content), ordered by id; an empty ``text``: the first ``limit``.
    With ``clearance``, only records it sees (with ``full_only``, in full)."""
    columns = [records.c.id, records.c.type, records.c.scope, records.c.tags]
    where = []
    labelled = None
    if clearance is not None:
        where.append(visible_condition(clearance, full_only))
    if text:
        # Tags are stored as a JSON array written with ASCII escapes; encode the needle the same
        # way so non-ASCII and quote characters match what is stored.
        needle = tag_json(text)[1:-1]
        named = or_(records.c.id.ilike(like_contains(text), escape="\\"),
                    records.c.tags.ilike(like_contains(needle), escape="\\"))
        # A label's words are each in the document; the rows found by them alone are labelled
        # here, reading their documents (in id order, stopping at ``limit``: not every one).
        labelled = label_candidates(records.c.doc, text, store.is_sqlite)
        if labelled is not None and clearance is not None:
            labelled = and_(labelled, visible_condition(clearance, full_only=True))
        if labelled is None:
            where.append(named)
        else:
            where.append(or_(named, labelled))
            columns.append(case((named, null()), else_=records.c.doc).label("doc"))
    q = select(*columns).where(*where).order_by(records.c.id)
    out: list[tuple[str, str, str, str]] = []
    if not limit:
        return out
    with store.read() as conn:
        rows = conn.execute(q.limit(limit)) if labelled is None else conn.execute(q.execution_options(yield_per=500))
        for r in rows:
            if labelled is not None and r.doc is not None and not label_contains(r.doc, text):
                continue
            out.append((r.id, r.type, r.scope, r.tags))
            if len(out) >= limit:
                break
    return out


def referencing_ids(store: Store, record_id: str, limit: int, clearance: TrustContext | None = None) -> list[str]:
    """Ids of at most ``limit`` live records with a relation pointing at ``record_id``, by id:
    found with LIKE on the stored JSON, then confirmed on the matching documents' relations.
    With ``clearance``, only records it sees in full (a relation is content)."""
    needle = '"target_id":' + json.dumps(record_id, ensure_ascii=False)
    q = (select(records.c.id, records.c.doc)
         .where(records.c.doc.like(like_contains(needle), escape="\\"))
         .order_by(records.c.id))
    if clearance is not None:
        q = q.where(visible_condition(clearance, full_only=True))
    out = []
    with store.read() as conn:
        for rid, raw in conn.execute(q):
            doc = json.loads(raw)
            if any(isinstance(r, dict) and r.get("target_id") == record_id for r in doc.get("relations") or []):
                out.append(rid)
                if len(out) >= limit:
                    break
    return out


# --------------------------------------------------------------------------- archived records


def archived_labels(conn: Connection, ids: list[str] | None = None) -> dict[str, tuple[str, str]]:
    """Sensitivity and scope of archived records (of ``ids``; None: every one): their labels
    live in the archived document. An unreadable document has an unknown sensitivity."""
    q = select(archive.c.id, archive.c.doc)
    if ids is not None:
        q = q.where(archive.c.id.in_(ids))
    out = {}
    for rid, doc in conn.execute(q):
        try:
            parsed = json.loads(doc)
            out[rid] = (str(parsed.get("sensitivity", "")), str(parsed.get("scope") or ""))
        except (ValueError, AttributeError):
            out[rid] = ("", "")  # unreadable: an unknown sensitivity, hidden
    return out


__all__ = ["archived_labels", "contains_any_case", "explorer_ids", "found_records", "label_candidates",
           "referencing_ids", "visible_condition"]
