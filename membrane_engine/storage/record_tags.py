"""Records' tags as stored: the ``tags`` column holds each record's tags as a JSON array
(``store.tags_json``); the column cache does not carry them, so questions about tags are
answered here, in SQL."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from sqlalchemy import or_, select

from membrane_engine.storage.store import Store, like_contains, records, tag_json


def rows_with_tags(store: Store, tags: Iterable[str], row_of: Mapping[str, int]) -> dict[str, list[int]]:
    """For each of ``tags``, the rows (``row_of``: record id -> row, e.g. a column snapshot's)
    of the records carrying it, in one scan of the tags column for all of them; records
    ``row_of`` does not hold are left out."""
    needles = {t: tag_json(t) for t in tags}
    found: dict[str, list[int]] = {t: [] for t in needles}
    if not needles:
        return found
    q = select(records.c.id, records.c.tags).where(
        or_(*[records.c.tags.like(like_contains(n), escape="\\") for n in needles.values()]))
    with store.read() as conn:
        for rid, raw in conn.execute(q):
            i = row_of.get(rid)
            if i is None:
                continue
            # '"tag"' inside a JSON array of strings is a whole element unless an escaped
            # quote is involved: only then decode the array to be sure.
            exact = json.loads(raw) if "\\" in raw else None
            for t, needle in needles.items():
                if needle in raw and (exact is None or t in exact):
                    found[t].append(i)
    return found


def tags_of(store: Store, ids: list[str]) -> dict[str, tuple[str, ...]]:
    """The tags of the records of ``ids`` (those in the store)."""
    if not ids:
        return {}
    with store.read() as conn:
        rows = conn.execute(select(records.c.id, records.c.tags).where(records.c.id.in_(ids))).all()
    return {rid: tuple(json.loads(raw or "[]")) for rid, raw in rows}
