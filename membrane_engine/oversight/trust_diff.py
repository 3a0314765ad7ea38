"""What-if: how the trust decision changes between two trust contexts, over the whole store.

One vectorized pass of the gate (trust.verdicts) per context over the column cache; nothing is
read from the records table and nothing is written (SPEC 6: what-if never audits). Callers
explain only the changed rows they show, with ``Membrane.explain``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from membrane_engine.audit import reads as audit_reads
from membrane_engine.storage.columns import TYPE_CODES, TYPE_NAMES
from membrane_engine.errors import NilTrustError, ValidationError
from membrane_engine.model.records import MAX_OFFSET, MemoryRecord, MemoryType, check_whole
from membrane_engine.rules.trust import (
    SENSITIVITY_NAMES,
    VERDICT_NAMES,
    TrustContext,
    Verdict,
    as_trust,
    gate_as_read,
    verdict_counts,
    verdicts,
)

MAX_PAGE = 100_000  # changed records listed by one compare


@dataclass(frozen=True)
class Change:
    """One record whose verdict differs. Only what ``explain`` may name: never content."""

    id: str
    type: str
    sensitivity: str
    scope: str
    before: str  # verdict under context A
    after: str  # verdict under context B


@dataclass
class WhatIf:
    counts_a: dict[str, int]  # verdict -> records
    counts_b: dict[str, int]
    transitions: dict[tuple[str, str], int]  # (verdict A, verdict B) -> records, changed pairs only
    total: int  # records compared
    changed: int  # records whose verdict differs
    rows: list[Change] = field(default_factory=list)  # the requested page of changes
    offset: int = 0
    listed: int = 0  # changed records that may be listed (of the transition asked for, if any)
    beyond: int = 0  # live records (of the types asked for) beyond an operator's clearance: one total


def _type_codes(memory_types: Iterable[Any] | None) -> np.ndarray | None:
    if memory_types is not None and (isinstance(memory_types, (str, bytes, dict))
                                     or not hasattr(memory_types, "__iter__")):
        raise ValidationError(f"memory_types must be a list of memory types (got {memory_types!r:.80})",
                              [("memory_types", "not a list")])
    if not memory_types:
        return None
    codes = []
    for value in memory_types:
        try:
            name = MemoryType(value.value if isinstance(value, MemoryType) else value).value
        except ValueError:
            raise ValidationError(f"memory_types has an unknown memory type {value!r}",
                                  [("memory_types", f"unknown type {value!r}")]) from None
        codes.append(TYPE_CODES[name])
    return np.array(sorted(set(codes)), dtype=np.int8)


def compare(membrane: Any, trust_a: TrustContext | None, trust_b: TrustContext | None,
            memory_types: Iterable[Any] | None = None, transition: tuple[str, str] | None = None,
            offset: int = 0, limit: int = 50, clearance: TrustContext | None = None) -> WhatIf:
    """Verdicts of every live record under ``trust_a`` and ``trust_b``: counts under each, the
    number of records per (before, after) change, and one page of the changed records
    (optionally only one ``transition``), ordered by change kind then id. A record hidden under
    both contexts is never among the rows. With an operator's ``clearance`` (SPEC 10) the counts
    and the rows are over the records it sees (SPEC 10, "One door"); the others are the one
    total ``beyond``, never broken down."""
    if trust_a is None or trust_b is None:
        raise NilTrustError()
    offset = check_whole(offset, "offset", 0, MAX_OFFSET)
    limit = check_whole(limit, "limit", 0, MAX_PAGE)
    if transition is not None and (not isinstance(transition, (tuple, list)) or len(transition) != 2
                                   or not all(isinstance(v, (str, Verdict)) for v in transition)):
        raise ValidationError(f"transition must be a (verdict, verdict) pair (got {transition!r:.80})",
                              [("transition", "not a pair of verdicts")])
    snap = membrane.columns.current()
    mask = snap.alive.copy()
    codes = _type_codes(memory_types)
    if codes is not None:
        mask &= np.isin(snap.type_code, codes)
    beyond = 0
    if clearance is not None:
        seen = verdicts(snap.sens_level, snap.scope_code, snap.scope_names, as_trust(clearance, "clearance")) > 0
        beyond = int(np.count_nonzero(mask & ~seen))
        mask &= seen
    rows = np.nonzero(mask)[0]
    va = verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, trust_a)
    vb = verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, trust_b)
    diff = va != vb
    pair = va.astype(np.int64) * 3 + vb.astype(np.int64)
    tally = np.bincount(pair[diff], minlength=9)
    transitions = {(VERDICT_NAMES[k // 3], VERDICT_NAMES[k % 3]): int(n) for k, n in enumerate(tally) if n}

    sel = diff
    if transition is not None:
        names = {v: k for k, v in VERDICT_NAMES.items()}
        try:
            want = names[Verdict(transition[0]).value] * 3 + names[Verdict(transition[1]).value]
        except ValueError:
            raise ValidationError(f"transition has an unknown verdict (got {transition!r:.80})",
                                  [("transition", "unknown verdict")]) from None
        sel = diff & (pair == want)
    picked = np.nonzero(sel)[0]
    page = picked[:0]
    if limit and offset < len(picked):  # a count alone (limit 0) needs no order
        # Gains first (hidden->full, hidden->redacted, redacted->full), then losses; then id.
        gain = vb[picked].astype(np.int64) - va[picked].astype(np.int64)
        order = np.lexsort((snap.ids[rows[picked]].astype(str), -vb[picked], -gain))
        page = picked[order][offset:offset + limit]
    out = []
    for j in page:
        i = rows[j]
        level = int(snap.sens_level[i])
        out.append(Change(
            id=str(snap.ids[i]), type=TYPE_NAMES[int(snap.type_code[i])],
            sensitivity=SENSITIVITY_NAMES[level] if 0 <= level < len(SENSITIVITY_NAMES) else "unknown",
            scope=snap.scope_names[snap.scope_code[i]],
            before=VERDICT_NAMES[int(va[j])], after=VERDICT_NAMES[int(vb[j])],
        ))
    return WhatIf(
        counts_a=verdict_counts(va), counts_b=verdict_counts(vb), transitions=transitions, total=int(len(rows)),
        changed=int(np.count_nonzero(diff)), rows=out, offset=offset, listed=int(len(picked)), beyond=beyond,
    )


def record_view(membrane: Any, record_id: str, trust_a: TrustContext | None,
                trust_b: TrustContext | None) -> tuple[MemoryRecord, Verdict] | None:
    """One changed record as the more permissive of the two contexts may have it, with that
    verdict; None when both now hide it. ``compare`` decided on the column cache; the record
    shown is judged on the labels read with its content (SPEC 4), so a reclassify committed
    since never shows it in full under labels it no longer has. NotFoundError when it is gone."""
    trust_a, trust_b = as_trust(trust_a, "trust_a"), as_trust(trust_b, "trust_b")
    record = audit_reads.get(membrane, record_id)
    views = [view for view in (gate_as_read(record, trust_a), gate_as_read(record, trust_b)) if view is not None]
    if not views:
        return None
    best = min(views, key=lambda view: view.redacted)  # full before redacted
    return best, Verdict.REDACTED if best.redacted else Verdict.FULL


__all__ = ["Change", "WhatIf", "compare", "record_view"]
