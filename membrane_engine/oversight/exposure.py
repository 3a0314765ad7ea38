""""Who gains access?": how a change would move records between full, redacted and hidden for
each named profile, before it is applied.

A curation plan (``Membrane.preview``) carries every touched record before and after; an import
carries new records (hidden to everyone before). Each is gated with the engine's own rule
(``trust.verdicts``), vectorized per profile, so a million-record import costs one pass per
profile. Only what ``explain`` may name is reported: id, type, sensitivity, scope, verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from membrane_engine.curation.operations import CurationPlan
from membrane_engine.policy.snapshots import RANK
from membrane_engine.model.records import SENSITIVITY_LEVELS, MemoryRecord, check_whole
from membrane_engine.rules.trust import VERDICT_NAMES, TrustContext, verdicts

SHOWN_PER_PROFILE = 200
MAX_SHOWN = 100_000  # records listed per profile


@dataclass(frozen=True)
class Exposure:
    profile: str
    id: str
    type: str
    sensitivity: str
    scope: str
    before: str
    after: str

    @property
    def gain(self) -> bool:
        return RANK[self.after] > RANK[self.before]


@dataclass
class Exposures:
    """Per profile, how many records change verdict (``counts[profile][(before, after)]``) and
    the first changes of each profile (gains first)."""

    changes: list[Exposure] = field(default_factory=list)
    counts: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)

    @property
    def widens(self) -> bool:
        """Does any profile gain access (a record newly full or redacted, or redacted -> full)?"""
        return any(RANK[a] > RANK[b] for per in self.counts.values() for (b, a) in per)

    def gained(self, profile: str) -> int:
        return sum(n for (b, a), n in self.counts.get(profile, {}).items() if RANK[a] > RANK[b])

    def lost(self, profile: str) -> int:
        return sum(n for (b, a), n in self.counts.get(profile, {}).items() if RANK[a] < RANK[b])


def _field(item: Any, name: str, default: Any = "") -> Any:
    value = item.get(name, default) if isinstance(item, Mapping) else getattr(item, name, default)
    return getattr(value, "value", value)


def _columns(items: list[Any]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Sensitivity levels (-1 unknown) and scope codes of records or record dicts."""
    levels = np.fromiter((SENSITIVITY_LEVELS.get(str(_field(r, "sensitivity")), -1) for r in items),
                         dtype=np.int64, count=len(items))
    names: dict[str, int] = {}
    codes = np.fromiter((names.setdefault(str(_field(r, "scope") or ""), len(names)) for r in items),
                        dtype=np.int64, count=len(items))
    return levels, codes, list(names)


def _gate(columns: tuple[np.ndarray, np.ndarray, list[str]], trust: TrustContext) -> np.ndarray:
    levels, codes, names = columns
    return verdicts(levels, codes, names, trust) if len(levels) else np.zeros(0, dtype=np.int8)


def _exposures(before: list[Any | None], after: list[Any | None], profiles: Mapping[str, TrustContext],
               limit: int) -> Exposures:
    """``before[k]`` / ``after[k]``: the same record before and after the change (None: absent,
    hidden to everyone)."""
    out = Exposures()
    has_b = np.array([b is not None for b in before], dtype=bool)
    has_a = np.array([a is not None for a in after], dtype=bool)
    present_b = _columns([b for b in before if b is not None])  # read once, gated once per profile
    present_a = _columns([a for a in after if a is not None])
    for name, trust in profiles.items():
        vb = np.zeros(len(before), dtype=np.int64)
        va = np.zeros(len(after), dtype=np.int64)
        vb[has_b] = _gate(present_b, trust)
        va[has_a] = _gate(present_a, trust)
        moved = np.nonzero(vb != va)[0]
        pair = vb[moved] * 3 + va[moved]
        tally = np.bincount(pair, minlength=9)
        out.counts[name] = {(VERDICT_NAMES[k // 3], VERDICT_NAMES[k % 3]): int(n) for k, n in enumerate(tally) if n}
        gain = va[moved] - vb[moved]
        for k in moved[np.argsort(-gain, kind="stable")][:limit].tolist():
            rec = after[k] if after[k] is not None else before[k]
            out.changes.append(Exposure(name, str(_field(rec, "id")), str(_field(rec, "type")),
                                        str(_field(rec, "sensitivity")), str(_field(rec, "scope") or ""),
                                        VERDICT_NAMES[int(vb[k])], VERDICT_NAMES[int(va[k])]))
    out.changes.sort(key=lambda e: (not e.gain, e.profile, e.id))
    return out


def plan_exposures(plans: CurationPlan | Iterable[CurationPlan], profiles: Mapping[str, TrustContext],
                   limit: int = SHOWN_PER_PROFILE) -> Exposures:
    """Who gains or loses access if these previewed plans are applied. A created or restored
    record was hidden to everyone; an archived (deleted, pruned) one will be."""
    limit = check_whole(limit, "limit", 0, MAX_SHOWN)
    if isinstance(plans, CurationPlan):
        plans = [plans]
    before: list[MemoryRecord | None] = []
    after: list[MemoryRecord | None] = []
    for plan in plans:
        for c in plan.changes:
            before.append(c.before if c.kind not in ("create", "restore") else None)
            after.append(None if c.kind == "archive" else c.after)
    return _exposures(before, after, profiles, limit)


def import_exposures(items: Iterable[Any], profiles: Mapping[str, TrustContext],
                     limit: int = SHOWN_PER_PROFILE) -> Exposures:
    """Who would see the records of an import (record dicts in Membrane's shape, or records):
    each is new, so every verdict other than hidden is a gain."""
    limit = check_whole(limit, "limit", 0, MAX_SHOWN)
    items = list(items)
    return _exposures([None] * len(items), items, profiles, limit)


__all__ = ["Exposure", "Exposures", "plan_exposures", "import_exposures"]
