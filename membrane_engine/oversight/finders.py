"""Read-only lookups the console needs beyond the facade: finding records by id or tag,
choosing ids by type / scope / sensitivity, and audit-log facets and activity aggregates.

Nothing here decides a rule (trust, salience, scores); these are plain queries over the store
and the column cache.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from membrane_engine.audit.activity import activity_of
from membrane_engine.context import EngineContext
from membrane_engine.storage.columns import TYPE_CODES
from membrane_engine.errors import ValidationError
from membrane_engine.model.records import (
    MAX_OFFSET,
    MAX_SEARCH_TEXT_LENGTH,
    check_flag,
    check_ids,
    check_string,
    check_strings,
    check_whole,
    sensitivity_level,
)
from membrane_engine.storage import audit_seen, audit_stats
from membrane_engine.storage.record_queries import found_records
from membrane_engine.oversight.clearance import sees_everything
from membrane_engine.storage.columns import POLICY_CODES, TYPE_NAMES
from membrane_engine.model.records import Sensitivity
from membrane_engine.rules.trust import VERDICT_CODES, Verdict, as_trust, verdicts


MAX_PICK = 100_000  # ids, actors or briefs one lookup returns


def _types(values: list[str] | None, name: str) -> list[str]:
    """A list of memory type names (None or empty: every type)."""
    values = [getattr(t, "value", t) for t in check_strings(values, name)] if values is not None else []
    unknown = [t for t in values if t not in TYPE_CODES]
    if unknown:
        raise ValidationError(f"{name} has an unknown memory type {unknown[0]!r:.80} (one of {', '.join(TYPE_CODES)})",
                              [(name, "unknown memory type")])
    return values


@dataclass(frozen=True)
class Found:
    """One search hit: enough to label it in a picker."""
    id: str
    type: str
    scope: str
    tags: tuple[str, ...]


def search_records(membrane: EngineContext, text: str, limit: int = 200, clearance=None, full_only: bool = False
                   ) -> list[Found]:
    """Live records whose id or one of whose tags contains ``text`` (case-insensitive for
    ASCII), or whose label does (``labels.label``, what a picker names it by: only records seen
    in full, a label being content), ordered by id. An empty ``text`` lists the first ``limit``
    ids. With an operator's ``clearance``, only records it sees (with ``full_only``, in full)."""
    text = (check_string(text, "text", MAX_SEARCH_TEXT_LENGTH, optional=True) or "").strip()
    limit = check_whole(limit, "limit", 0, MAX_PICK)
    full_only = check_flag(full_only, "full_only")
    if clearance is not None:
        clearance = as_trust(clearance, "clearance")
    out: list[Found] = []
    for rid, kind, scope, raw_tags in found_records(membrane.store, text, limit, clearance, full_only):
        try:
            tags = tuple(str(t) for t in json.loads(raw_tags or "[]"))
        except ValueError:
            tags = ()
        out.append(Found(rid, kind, scope, tags))
    return out


def filter_ids(membrane: EngineContext, types: list[str] | None = None, scopes: list[str] | None = None,
               sensitivities: list[str] | None = None) -> list[str]:
    """Ids of live records matching every given filter (an empty filter matches everything).
    ``scopes`` compares exact strings; "" selects unscoped records."""
    types = _types(types, "types")
    scopes = check_strings(scopes, "scopes") if scopes is not None else None
    sensitivities = check_strings(sensitivities, "sensitivities") if sensitivities is not None else None
    snap = membrane.columns.current()
    mask = snap.alive.copy()
    if types:
        mask &= np.isin(snap.type_code, np.array([TYPE_CODES[t] for t in types], dtype=np.int8))
    if scopes is not None and len(scopes):
        wanted = [i for i, name in enumerate(snap.scope_names) if name in set(scopes)]
        mask &= np.isin(snap.scope_code, np.array(wanted, dtype=np.int32))
    if sensitivities:
        levels = np.array([sensitivity_level(s) for s in sensitivities], dtype=np.int8)
        mask &= np.isin(snap.sens_level, levels)
    return sorted(str(x) for x in snap.ids[mask])


# --------------------------------------------------------------------------- audit


def audit_actors(membrane: EngineContext, limit: int = 500) -> list[str]:
    """Distinct actors in the audit log, most frequent first (at most ``limit``)."""
    return audit_seen.actors_seen(membrane.store, check_whole(limit, "limit", 0, MAX_PICK))


def audit_span(membrane: EngineContext) -> tuple[float, float] | None:
    """(oldest, newest) entry time in epoch seconds, or None for an empty log."""
    return audit_stats.span(membrane.store)


def audit_newest(membrane: EngineContext) -> int:
    """The newest audit entry's sequence number (0 for an empty log). Entries are append-only,
    so a count or chart of the log is current while this is unchanged."""
    return audit_stats.newest_seq(membrane.store)


def audit_activity(membrane: EngineContext, bucket_seconds: float = 86400.0, actor: str | None = None,
                   action: str | None = None, record_id: str | None = None, since: datetime | None = None,
                   until: datetime | None = None, clearance=None) -> list[tuple[float, str, int]]:
    """Entry counts per time bucket and action, filtered like ``audit_query`` (``action`` is a
    stored action): ``[(bucket start, epoch seconds), action, count]`` ordered by time, then
    action, a retract named "retract" (``audit_log.action_counts``). With an operator's
    ``clearance``, of the entries of records it sees only."""
    if clearance is not None and sees_everything(clearance):
        clearance = None
    if isinstance(bucket_seconds, bool) or not isinstance(bucket_seconds, numbers.Real) \
            or not math.isfinite(bucket_seconds) or not bucket_seconds > 0:
        raise ValidationError(f"bucket_seconds must be a positive number of seconds (got {bucket_seconds!r:.80})",
                              [("bucket_seconds", "not a positive number")])
    bucket_seconds = float(bucket_seconds)
    if (not (actor or action or record_id) and since is None and until is None and bucket_seconds % 3600 == 0
            and clearance is None):
        # the whole log: counted once per process, then the new entries
        return activity_of(membrane).buckets(bucket_seconds)
    if clearance is not None:
        clearance = as_trust(clearance, "clearance")
    counts = audit_seen.activity_counts(membrane.store, bucket_seconds, actor, action, record_id, since, until,
                                        clearance)
    return [(float(b) * bucket_seconds, a, n) for (b, a), n in sorted(counts.items())]


@dataclass(frozen=True)
class Brief:
    """A live record's scalar facts, read from the column cache (no document parsing)."""
    id: str
    type: str
    sensitivity: str
    scope: str
    pinned: bool
    deletion_policy: str


def briefs(membrane: EngineContext, record_ids: list[str]) -> dict[str, Brief]:
    """Scalar facts of the live records among ``record_ids`` (absent ids are left out)."""
    record_ids = check_ids(record_ids, "record_ids")
    snap = membrane.columns.current()
    levels = {sensitivity_level(s): s.value for s in Sensitivity}
    policies = {code: name for name, code in POLICY_CODES.items()}
    out: dict[str, Brief] = {}
    for rid in record_ids:
        i = snap.row_of.get(rid)
        if i is None or not snap.alive[i]:
            continue
        out[rid] = Brief(rid, TYPE_NAMES[int(snap.type_code[i])], levels.get(int(snap.sens_level[i]), "?"),
                         snap.scope_names[int(snap.scope_code[i])], bool(snap.decay.pinned[i]),
                         policies.get(int(snap.policy[i]), "?"))
    return out


SAMPLE_ACTOR = "membrane-console:sample"  # the actor of the bundled sample's import (membrane.py)


def sample_loaded_at(membrane: EngineContext) -> float | None:
    """When the bundled sample store was loaded into this store (epoch seconds), or None when
    it was not: its import is the only one written by ``SAMPLE_ACTOR`` (one look into the actor
    index)."""
    return audit_stats.first_written_by(membrane.store, SAMPLE_ACTOR)


@dataclass(frozen=True)
class HiddenPage:
    """Records a trust context does not see: how many (``total``), how many of them an
    operator's clearance sees (``seen``, the ones that may be listed), and one page of those."""
    total: int
    seen: int
    records: list[Brief]


def hidden_records(membrane: EngineContext, trust, clearance, memory_types: list[str] | None = None,
                   offset: int = 0, limit: int = 25) -> HiddenPage:
    """Live records of ``memory_types`` (all when empty) that ``trust`` does not see at all,
    decided by the trust rule over the column cache (``trust.verdicts``, vectorized). Only those
    the operator's ``clearance`` sees are listed (ordered by id); the others are counted."""
    trust, clearance = as_trust(trust), as_trust(clearance, "clearance")
    memory_types = _types(memory_types, "memory_types")
    offset = check_whole(offset, "offset", 0, MAX_OFFSET)
    limit = check_whole(limit, "limit", 0, MAX_PICK)
    snap = membrane.columns.current()
    mask = snap.alive.copy()
    if memory_types:
        mask &= np.isin(snap.type_code, np.array([TYPE_CODES[str(t)] for t in memory_types], dtype=np.int8))
    hidden = VERDICT_CODES[Verdict.HIDDEN]
    mask &= verdicts(snap.sens_level, snap.scope_code, snap.scope_names, trust) == hidden
    total = int(np.count_nonzero(mask))
    mask &= verdicts(snap.sens_level, snap.scope_code, snap.scope_names, clearance) != hidden
    rows = np.nonzero(mask)[0]
    ids = snap.ids[rows].astype(str)
    order = np.argsort(ids, kind="stable")
    chosen = [str(ids[i]) for i in order[offset:offset + limit]]
    found = briefs(membrane, chosen)
    return HiddenPage(total, int(len(rows)), [found[r] for r in chosen if r in found])
