"""Policy files, SPEC 11: named agent profiles and assertions about what each may see.

A file is TOML. ``load_policy`` parses and validates it; every problem names the line and the
key at fault (tomllib reports lines only for syntax errors, so ``_KeyLines`` finds the lines of
keys and tables by reading the text). ``check`` evaluates every assertion against the store as
vectorized passes over the column cache: one gate pass (``trust.verdicts``) per profile, one
mask per selection, counts with ``bincount``. Only the few offending records shown in a failure
are explained one by one (``Membrane.explain``). Nothing is written: no audit entry, no cache
change (SPEC 6: policy checks never audit).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError
from sqlalchemy import or_, select

from .columns import TYPE_CODES, TYPE_NAMES, Snapshot
from .errors import ValidationError
from .retrieval import _explanation
from .schema import as_utc
from .schema import MemoryType, Sensitivity
from .store import like_contains, records, tag_json
from .trust import VERDICT_CODES, TrustContext, Verdict, verdicts
from .whatif import SENSITIVITY_NAMES, VERDICT_NAMES
from .whatif import _counts  # verdict -> records, the same tally what-if shows

SHOWN_PER_FAILURE = 20  # offending records listed (and explained) per failing assertion


class Expect(str, Enum):
    """What every matching record must get: a verdict, or one of two unions of verdicts."""

    FULL = "full"
    REDACTED = "redacted"
    HIDDEN = "hidden"
    NOT_FULL = "not-full"  # redacted or hidden
    VISIBLE = "visible"  # full or redacted

    @property
    def codes(self) -> tuple[int, ...]:
        return {"full": (2,), "redacted": (1,), "hidden": (0,), "not-full": (0, 1), "visible": (1, 2)}[self.value]


class PolicyError(ValidationError):
    """A policy file that cannot be used. ``problems`` are (where, message) pairs, where =
    ``LINE: KEY`` (``FILE:LINE: KEY`` in ``str``)."""

    def __init__(self, source: str, problems: list[tuple[int | None, str, str]]):
        self.source = source
        self.located = problems  # (line or None, key, message)
        lines = [f"{source}:{line or '?'}: {key}: {message}" for line, key, message in problems]
        super().__init__("\n".join(lines), [(f"line {line or '?'}: {key}", message) for line, key, message in problems])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Profile(_Strict):
    """An agent's trust context (SPEC 3) under a name."""

    max_sensitivity: Sensitivity
    scopes: tuple[str, ...] = ()
    actor_id: str = ""
    authenticated: bool = True
    description: str = ""

    def trust(self, name: str) -> TrustContext:
        return TrustContext(max_sensitivity=self.max_sensitivity, authenticated=self.authenticated,
                            actor_id=self.actor_id or name, scopes=list(self.scopes))


class Selection(_Strict):
    """Which records an assertion is about. Fields combine with AND; the values of one field
    with OR (``sensitivity = ["high", "hyper"]`` is either). An empty selection is every record.
    ``scopes = [""]`` names unscoped records."""

    ids: tuple[str, ...] = ()
    types: tuple[MemoryType, ...] = ()
    scopes: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    sensitivity: tuple[Sensitivity, ...] = ()

    def key(self) -> tuple:
        return (self.ids, tuple(t.value for t in self.types), self.scopes, self.tags,
                tuple(s.value for s in self.sensitivity))

    def describe(self) -> str:
        parts = [f"{name} {', '.join(str(getattr(v, 'value', v)) or '(unscoped)' for v in values)}"
                 for name, values in (("ids", self.ids), ("types", self.types), ("scopes", self.scopes),
                                      ("tags", self.tags), ("sensitivity", self.sensitivity)) if values]
        return "; ".join(parts) if parts else "every record"


class Assertion(_Strict):
    """Either ``expect`` (every matching record has that verdict) or ``verdict`` with ``min``
    and/or ``max`` (how many matching records get it)."""

    profile: str
    records: Selection = Field(default_factory=Selection)
    expect: Expect | None = None
    verdict: Verdict | None = None
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)
    name: str = ""

    @model_validator(mode="after")
    def _one_form(self) -> "Assertion":
        if self.expect is not None and (self.verdict is not None or self.min is not None or self.max is not None):
            raise ValueError("give either expect, or verdict with min/max, not both")
        if self.expect is None:
            if self.verdict is None:
                raise ValueError("needs expect (full | redacted | hidden | not-full | visible) or verdict with min/max")
            if self.min is None and self.max is None:
                raise ValueError("verdict needs min and/or max")
            if self.min is not None and self.max is not None and self.min > self.max:
                raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def title(self, index: int) -> str:
        if self.name:
            return self.name
        if self.expect is not None:
            rule = f"expect {self.expect.value}"
        else:
            bounds = [f"min {self.min}"] * (self.min is not None) + [f"max {self.max}"] * (self.max is not None)
            rule = f"{self.verdict.value} {' '.join(bounds)}"
        return f"assert[{index}] {self.profile}: {self.records.describe()}: {rule}"


class Policy(_Strict):
    profiles: dict[str, Profile] = Field(default_factory=dict)
    assertions: tuple[Assertion, ...] = Field(default=(), alias="assert")
    source: str = Field(default="", exclude=True)  # the file's name, for messages
    lines: tuple[int | None, ...] = Field(default=(), exclude=True)  # each assertion's line in it

    @field_validator("profiles")
    @classmethod
    def _names(cls, value: dict[str, Profile]) -> dict[str, Profile]:
        for name in value:
            if not name.strip():
                raise ValueError("a profile needs a non-empty name")
        return value

    def trust(self, profile: str) -> TrustContext:
        return self.profiles[profile].trust(profile)


# ----------------------------------------------------------------------------- reading files

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=""")
_PART = re.compile(r"""\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*""")


def _parts(dotted: str) -> list[str]:
    return [p.strip("\"'") for p in _PART.findall(dotted)]


class _KeyLines:
    """Line numbers of a TOML text's tables and keys, by path (``("assert", 2, "expect")``).
    A reading of the common layout (headers, ``key = value`` lines, dotted keys), enough to point
    at the line of a key that validation refuses; a value spanning lines is found at its first."""

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        arrays: dict[tuple, int] = {}
        table: tuple = ()
        depth = 0  # open brackets/braces of a multi-line value: its lines hold no keys
        for number, line in enumerate(text.splitlines(), start=1):
            if depth == 0:
                header = _HEADER.match(line)
                if header:
                    path: tuple = ()
                    parts = _parts(header.group(2))
                    new_item = header.group(1) == "[["
                    for k, part in enumerate(parts):
                        path += (part,)
                        if new_item and k == len(parts) - 1:  # [[a]]: the next item of array a
                            arrays[path] = arrays.get(path, -1) + 1
                            path += (arrays[path],)
                        elif path in arrays:  # [a.b] under [[a]]: inside a's last item
                            path += (arrays[path],)
                    table = path
                    self.lines.setdefault(table, number)
                    continue
                key = _KEY.match(line)
                if key:
                    self.lines.setdefault(table + tuple(_parts(key.group(1))), number)
            depth = max(0, depth + _balance(line))

    def line(self, path: tuple) -> int | None:
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def _balance(line: str) -> int:
    """Net open brackets of a line outside strings and comments."""
    n, quote = 0, ""
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        elif ch in "[{":
            n += 1
        elif ch in "]}":
            n -= 1
    return n


def _key_name(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    """A Policy from TOML text; PolicyError naming line and key for anything wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        raise PolicyError(source, [(int(found.group(1)) if found else None, "(syntax)", str(exc))]) from None
    where = _KeyLines(text)
    problems: list[tuple[int | None, str, str]] = [
        (where.line((key,)), key, f"unknown key {key!r} (a policy file has [profiles.NAME] tables and [[assert]] entries)")
        for key in data if key not in ("profiles", "assert")]
    if problems:
        raise PolicyError(source, problems)
    try:
        policy = Policy.model_validate(data)
    except PydanticValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            message = err["msg"]
            if err["type"] == "extra_forbidden":
                message = f"unknown key {loc[-1]!r}"
            elif err["type"] == "enum":
                message = f"{err.get('input')!r} is not one of {err['ctx'].get('expected', '')}"
            elif "input" in err and not isinstance(err["input"], (dict, list)):
                message = f"{message} (got {err['input']!r})"
            problems.append((where.line(loc), _key_name(loc), message))
        raise PolicyError(source, problems) from None
    for k, a in enumerate(policy.assertions):
        if a.profile not in policy.profiles:
            known = ", ".join(sorted(policy.profiles)) or "none defined"
            problems.append((where.line(("assert", k, "profile")), f"assert[{k}].profile",
                             f"unknown profile {a.profile!r} (profiles: {known})"))
    if problems:
        raise PolicyError(source, problems)
    lines = tuple(where.line(("assert", k)) for k in range(len(policy.assertions)))
    return policy.model_copy(update={"source": source, "lines": lines})


def load_policy(path: str | Path) -> Policy:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(str(path), [(None, "(file)", f"cannot be read: {exc}")]) from None
    return parse_policy(text, str(path))


# ----------------------------------------------------------------------------- evaluation


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

    def __init__(self, membrane: Any, snap: Snapshot | None = None):
        self.m = membrane
        self.snap = snap if snap is not None else membrane.columns.current()
        self.alive = self.snap.alive
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
            needles = {t: tag_json(t) for t in wanted}
            q = select(records.c.id, records.c.tags).where(
                or_(*[records.c.tags.like(like_contains(n), escape="\\") for n in needles.values()]))
            row_of = self.snap.row_of
            found: dict[str, list[int]] = {t: [] for t in wanted}
            with self.m.store.read() as conn:
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
        if not ids:
            return {}
        with self.m.store.read() as conn:
            rows = conn.execute(select(records.c.id, records.c.tags).where(records.c.id.in_(ids))).all()
        return {rid: tuple(json.loads(raw or "[]")) for rid, raw in rows}


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
        why = _explanation(ev.snap, rid, trust, when, 0.0)
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
        message += f"; id(s) not in the store: {', '.join(missing)}"
    shown = _offenders(ev, trust, bad, codes, as_of, limit) if offending else []
    return Outcome(index, a, title, passed, matched, counts, message, offending, shown)


def check(membrane: Any, policy: Policy, as_of: datetime | None = None, limit: int = SHOWN_PER_FAILURE) -> Report:
    """Every assertion of ``policy`` against the store, read at one column snapshot. Writes nothing."""
    ev = Evaluator(membrane)
    ev.wanted_tags = {t for a in policy.assertions for t in a.records.tags}
    outcomes = [evaluate(ev, policy, k, as_of, limit) for k in range(len(policy.assertions))]
    covered = np.zeros(len(ev.alive), dtype=bool)
    for a in policy.assertions:
        covered |= ev.mask(a.records)
    used = {a.profile for a in policy.assertions}
    return Report(policy, outcomes, int(np.count_nonzero(ev.alive)), as_of, int(np.count_nonzero(covered)),
                  sorted(set(policy.profiles) - used))


def coverage(membrane: Any, policy: Policy) -> dict[str, Any]:
    """Which live records the file's assertions select and which they do not, by type,
    sensitivity and scope, and which profiles no assertion uses."""
    ev = Evaluator(membrane)
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
