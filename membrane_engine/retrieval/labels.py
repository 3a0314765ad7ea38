"""Records named by what they say, read for a clearance: the documents of many ids in one
statement, each named by ``rules.labels`` on the labels read with its content.

It sits below curation and oversight because both name records this way (the review queue's
contesters, the operator's view).
"""

from __future__ import annotations

from typing import Any

from membrane_engine.model.records import check_ids, check_whole
from membrane_engine.rules.labels import LIMIT, MAX_LABEL, labels_of_docs
from membrane_engine.rules.trust import TrustContext


def labels(membrane: Any, ids: list[str], clearance: TrustContext, limit: int = LIMIT) -> dict[str, str]:
    """Labels of the live records of ``ids`` that ``clearance`` sees: what a fully visible one
    says, "redacted <type> record" for a redacted one. Records it does not see, and ids not in
    the store, are absent, so the caller cannot tell the two apart. ``membrane``: anything with
    the engine's ``store``."""
    ids = check_ids(ids)
    limit = check_whole(limit, "limit", 1, MAX_LABEL)
    if not ids:
        return {}
    with membrane.store.read() as conn:
        rows = membrane.store.fetch(conn, ids)
    return labels_of_docs({rid: row.doc for rid, row in rows.items()}, clearance, limit)


__all__ = ["labels"]
