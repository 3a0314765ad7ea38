"""Checking a policy file (SPEC 11) against the store.

``check`` evaluates every assertion as vectorized passes over the column cache: one gate pass
(``trust.verdicts``) per profile, one mask per selection, counts with ``bincount``. Only the few
offending records shown in a failure are explained one by one, with the function behind
``Membrane.explain``. Nothing is written: no audit entry, no cache change (SPEC 6: policy
checks never audit). The file format is membrane_engine.rules.policy_file (re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from membrane_engine.storage.columns import TYPE_CODES, TYPE_NAMES, Snapshot
from membrane_engine.rules.policy_file import (
    Assertion,
    Expect,
    Policy,
    PolicyError,
    Profile,
    Selection,
    load_policy,
    parse_policy,
)
from membrane_engine.retrieval.layered import explanation_of
from membrane_engine.model.records import as_utc, check_instant, check_whole
from membrane_engine.storage import record_tags
from membrane_engine.rules.trust import VERDICT_CODES, TrustContext, verdicts
from membrane_engine.rules.trust import SENSITIVITY_NAMES, VERDICT_NAMES
from membrane_engine.rules.trust import verdict_counts as _counts  # verdict -> records, the same tally what-if shows

SHOWN_PER_FAILURE = 20  # offending records listed (and explained) per failing assertion
MAX_SHOWN = 10_000  # the most one check may list per assertion (each is explained)


@dataclass(frozen=True)
class Offender:
    """A record that breaks an assertion: what ``explain`` may name (id, type, sensitivity,
    scope), its tags only when the profile sees the record at all (a redacted view keeps them),
    the verdict and the reasons."""

    id: str
    type: str
    sensitivity: str
    scope: str
    tags: tuple[str, ...] | None
    verdict: str
    reasons: tuple[str, ...]


@dataclass
class Outcome:
    index: int
    assertion: Assertion
    title: str
    passed: bool
    matched: int  # records the selection matches
    counts: dict[str, int]  # verdict -> matching records
    message: str
    offending: int = 0  # records at fault (0 for a count below min)
    shown: list[Offender] = field(default_factory=list)


@dataclass
class Report:
    policy: Policy
    outcomes: list[Outcome]
    total: int  # live records
    as_of: datetime | None = None
    covered: int = 0  # live records some assertion selects
    profiles_unused: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.passed]

    @property
    def passed(self) -> bool:
        return not self.failures


class Evaluator:
    """Vectorized evaluation over one column snapshot: gate passes per profile and selection
    masks are computed once and shared by every assertion that uses them."""

    def __init__(self, membrane: Any, snap: Snapshot | None = None, within: TrustContext | None = None):
        self.m = membrane
        self.snap = snap if snap is not None else membrane.columns.current()
        self.alive = self.snap.alive
        self.within = within
        if within is not None:  # an operator's clearance: the records it sees are the whole store here
            s = self.snap
            self.alive = self.alive & (verdicts(s.sens_level, s.scope_code, s.scope_names, within) > 0)
        self._verdicts: dict[TrustContext, np.ndarray] = {}
        self._masks: dict[tuple, np.ndarray] = {}
        self._tags: dict[str, np.ndarray] = {}
        self.wanted_tags: set[str] = set()  # every tag the policy selects on (one SQL scan for all)

    def verdicts(self, trust: TrustContext) -> np.ndarray:
        """VERDICT_CODES of every row (dead rows included; callers mask with ``alive``)."""
        if trust not in self._verdicts:
            s = self.snap
            self._verdicts[trust] = verdicts(s.sens_level, s.scope_code, s.scope_names, trust)
        return self._verdicts[trust]

    def _tag_rows(self, tag: str) -> np.ndarray:
        """Rows carrying ``tag``. Tags live in SQL, not in the column cache: the first tag asked
        for scans the tags column once for every tag of the policy (``wanted``), so a file costs
        one scan however many tags it names."""
        if tag not in self._tags:
            wanted = sorted(set(self.wanted_tags) | {tag})
            found = record_tags.rows_with_tags(self.m.store, wanted, self.snap.row_of)
            for t in wanted:
                self._tags[t] = np.array(found[t], dtype=np.int64)
        return self._tags[tag]

    def mask(self, sel: Selection) -> np.ndarray:
        key = sel.key()
        if key not in self._masks:
            s = self.snap
            mask = self.alive.copy()
            if sel.ids:
                rows = [s.row_of.get(i) for i in sel.ids]
                keep = np.zeros(len(mask), dtype=bool)
                keep[[r for r in rows if r is not None]] = True
                mask &= keep
            if sel.types:
                mask &= np.isin(s.type_code, [TYPE_CODES[t.value] for t in sel.types])
            if sel.sensitivity:
                mask &= np.isin(s.sens_level, [x.level for x in sel.sensitivity])
            if sel.scopes:
                index = {name: k for k, name in enumerate(s.scope_names)}
                mask &= np.isin(s.scope_code, [index[x] for x in sel.scopes if x in index])
            if sel.tags:
                keep = np.zeros(len(mask), dtype=bool)
                for tag in sel.tags:
                    keep[self._tag_rows(tag)] = True
                mask &= keep
            self._masks[key] = mask
        return self._masks[key]

    def missing_ids(self, sel: Selection) -> list[str]:
        return [i for i in sel.ids if i not in self.snap.row_of or not self.alive[self.snap.row_of[i]]]

    def labels(self, rows: np.ndarray) -> list[tuple[str, str, str, str]]:
        s = self.snap
        out = []
        for i in rows:
            level = int(s.sens_level[i])
            out.append((str(s.ids[i]), TYPE_NAMES[int(s.type_code[i])],
                        SENSITIVITY_NAMES[level] if 0 <= level < len(SENSITIVITY_NAMES) else "unknown",
                        s.scope_names[s.scope_code[i]]))
        return out

    def tags_of(self, ids: list[str]) -> dict[str, tuple[str, ...]]:
        return record_tags.tags_of(self.m.store, ids)


def _offenders(ev: Evaluator, trust: TrustContext, bad: np.ndarray, codes_all: np.ndarray,
               as_of: datetime | None, limit: int) -> list[Offender]:
    """The first ``limit`` offending rows in store order, sorted by id, each explained with the
    function behind ``Membrane.explain`` on the evaluator's own snapshot (the same rule and
    sentences, without a cache round trip per record)."""
    rows = np.nonzero(bad)[0][:limit]
    labelled = sorted(ev.labels(rows))
    by_id = {str(ev.snap.ids[i]): int(codes_all[i]) for i in rows}
    tags = ev.tags_of([rid for rid, *_ in labelled if by_id[rid] > 0])
    when = as_utc(as_of) if as_of is not None else None
    out = []
    for rid, rtype, sens, scope in labelled:
        why = explanation_of(ev.snap, rid, trust, when, 0.0)
        out.append(Offender(rid, rtype, sens, scope, tags.get(rid) if by_id[rid] > 0 else None,
                            VERDICT_NAMES[by_id[rid]], tuple(why.reasons)))
    return out


def evaluate(ev: Evaluator, policy: Policy, index: int, as_of: datetime | None = None,
             limit: int = SHOWN_PER_FAILURE) -> Outcome:
    a = policy.assertions[index]
    trust = policy.trust(a.profile)
    codes = ev.verdicts(trust)
    mask = ev.mask(a.records)
    counts = _counts(codes[mask])
    matched = int(np.count_nonzero(mask))
    title = a.title(index)
    missing = ev.missing_ids(a.records)
    if a.expect is not None:
        bad = mask & ~np.isin(codes, a.expect.codes)
        offending = int(np.count_nonzero(bad))
        passed = offending == 0 and not missing
        found = " or ".join(v for v, n in _counts(codes[bad]).items() if n)  # what the offenders get instead
        message = (f"{offending} of {matched} matching record(s) are {found} for {a.profile}, expected "
                   f"{a.expect.value}" if offending else f"{matched} record(s) matched, all {a.expect.value}")
    else:
        n = counts[a.verdict.value]
        low = a.min is not None and n < a.min
        high = a.max is not None and n > a.max
        passed = not (low or high) and not missing
        bad = mask & (codes == VERDICT_CODES[a.verdict]) if high else np.zeros_like(mask)
        offending = int(np.count_nonzero(bad))
        bound = f"at least {a.min}" if low else f"at most {a.max}"
        message = (f"{n} matching record(s) are {a.verdict.value} for {a.profile}" +
                   ("" if passed else f", expected {bound}"))
    if missing:
        where = "not in the store" if ev.within is None else "not in the store or beyond your clearance"
        message += f"; id(s) {where}: {', '.join(missing)}"
    shown = _offenders(ev, trust, bad, codes, as_of, limit) if offending else []
    return Outcome(index, a, title, passed, matched, counts, message, offending, shown)


def check(membrane: Any, policy: Policy, as_of: datetime | None = None, limit: int = SHOWN_PER_FAILURE,
          within: TrustContext | None = None) -> Report:
    """Every assertion of ``policy`` against the store, read at one column snapshot. Writes nothing.
    ``within``: an operator's clearance (SPEC 10): only the records it sees are evaluated,
    counted and named."""
    limit = check_whole(limit, "limit", 0, MAX_SHOWN)
    if as_of is not None:
        check_instant(as_of)  # refused naming the field; kept as given (naive is UTC downstream)
    ev = Evaluator(membrane, within=within)
    ev.wanted_tags = {t for a in policy.assertions for t in a.records.tags}
    outcomes = [evaluate(ev, policy, k, as_of, limit) for k in range(len(policy.assertions))]
    covered = np.zeros(len(ev.alive), dtype=bool)
    for a in policy.assertions:
        covered |= ev.mask(a.records)
    used = {a.profile for a in policy.assertions}
    return Report(policy, outcomes, int(np.count_nonzero(ev.alive)), as_of, int(np.count_nonzero(covered)),
                  sorted(set(policy.profiles) - used))


def coverage(membrane: Any, policy: Policy, within: TrustContext | None = None) -> dict[str, Any]:
    """Which live records the file's assertions select and which they do not, by type,
    sensitivity and scope, and which profiles no assertion uses (``within``: of the records an
    operator's clearance sees)."""
    ev = Evaluator(membrane, within=within)
    ev.wanted_tags = {t for a in policy.assertions for t in a.records.tags}
    covered = np.zeros(len(ev.alive), dtype=bool)
    per_profile = {name: np.zeros(len(ev.alive), dtype=bool) for name in policy.profiles}
    for a in policy.assertions:
        covered |= ev.mask(a.records)
        per_profile[a.profile] |= ev.mask(a.records)
    s = ev.snap
    uncovered = ev.alive & ~covered
    out: dict[str, Any] = {"records": int(np.count_nonzero(ev.alive)), "covered": int(np.count_nonzero(covered)),
                           "profiles_unused": sorted(set(policy.profiles) - {a.profile for a in policy.assertions})}
    by: dict[str, dict[str, tuple[int, int]]] = {}
    for name, codes, names in (("type", s.type_code, TYPE_NAMES), ("sensitivity", s.sens_level, SENSITIVITY_NAMES),
                               ("scope", s.scope_code, s.scope_names)):
        codes = codes.astype(np.int64)
        shift = 1 if name == "sensitivity" else 0  # unknown levels (-1) in their own bin
        size = len(names) + shift
        total = np.bincount(codes[ev.alive] + shift, minlength=size)
        missed = np.bincount(codes[uncovered] + shift, minlength=size)
        by[name] = {(names[k - shift] if k >= shift else "unknown") or "(unscoped)": (int(total[k]), int(missed[k]))
                    for k in range(size) if total[k]}
    out["by"] = by  # dimension -> value -> (records, not covered)
    out["per_profile"] = {name: int(np.count_nonzero(m)) for name, m in sorted(per_profile.items())}
    return out


__all__ = ["Policy", "Profile", "Assertion", "Selection", "Expect", "PolicyError", "parse_policy", "load_policy",
           "check", "coverage", "evaluate", "Evaluator", "Report", "Outcome", "Offender"]
