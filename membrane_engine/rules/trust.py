"""Trust gating, SPEC 3: full, redacted or hidden, with the reasons, and the redacted view.

The scalar ``decide`` (for explanations) and the vectorized ``verdicts`` (for retrieval over
columns) are the same rule; tests check them against each other on random stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from membrane_engine.errors import NilTrustError, ValidationError

from membrane_engine.model.records import (
    MAX_ACTOR_LENGTH,
    MAX_SCOPE_LENGTH,
    SENSITIVITY_LEVELS,
    ZERO_TIME,
    DecayCurve,
    DecayProfile,
    DeletionPolicy,
    Lifecycle,
    MemoryRecord,
    Provenance,
    Sensitivity,
    refused,
    sensitivity_level,
)


class Verdict(str, Enum):
    FULL = "full"
    REDACTED = "redacted"
    HIDDEN = "hidden"

    def __str__(self) -> str:
        return self.value


VERDICT_CODES = {Verdict.HIDDEN: 0, Verdict.REDACTED: 1, Verdict.FULL: 2}
VERDICT_NAMES = {code: verdict.value for verdict, code in VERDICT_CODES.items()}
SENSITIVITY_NAMES = [s.value for s in Sensitivity]  # by level: SENSITIVITY_NAMES[level]


def verdict_counts(codes: np.ndarray) -> dict[str, int]:
    """Records per verdict of VERDICT_CODES ``codes``, full first (the tally what-if and policy
    checks both show)."""
    tally = np.bincount(codes.astype(np.int64), minlength=3)
    return {VERDICT_NAMES[c]: int(tally[c]) for c in (2, 1, 0)}


def scopes_tuple(value: Any) -> tuple[str, ...]:
    """A scopes field as given (a list, or None for none) as the tuple a frozen model keeps."""
    if value is None:
        return ()
    if isinstance(value, str):
        raise ValueError("scopes must be a list of strings, not one string")
    scopes = tuple(value)
    for scope in scopes:
        # No stored record has a longer scope, so such a name could only be a mistake (or a
        # 60 KB string carried into every explanation and URL).
        if isinstance(scope, str) and len(scope) > MAX_SCOPE_LENGTH:
            raise ValueError(f"scope name is {len(scope)} characters; the limit is {MAX_SCOPE_LENGTH}")
    return scopes


class TrustContext(BaseModel):
    """Who is asking: the most sensitive level they may see in full, and the scopes allowed.
    An empty ``scopes`` list allows every scope."""

    model_config = ConfigDict(frozen=True)

    max_sensitivity: Sensitivity
    authenticated: bool = False
    actor_id: str = ""
    scopes: tuple[str, ...] = Field(default_factory=tuple)

    @field_validator("scopes", mode="before")
    @classmethod
    def _scopes_as_tuple(cls, value: Any):
        return scopes_tuple(value)

    @field_validator("actor_id")
    @classmethod
    def _actor_id_length(cls, value: str) -> str:
        if len(value) > MAX_ACTOR_LENGTH:
            raise ValueError(f"actor_id is {len(value)} characters; the limit is {MAX_ACTOR_LENGTH}")
        return value

    @property
    def max_level(self) -> int:
        return self.max_sensitivity.level

    def __init__(self, /, **data: Any) -> None:
        # Refuse with the engine's ValidationError (a MembraneError naming field and value).
        try:
            super().__init__(**data)
        except PydanticValidationError as exc:
            raise refused("TrustContext", exc) from None


def as_trust(value: Any, name: str = "trust") -> TrustContext:
    """The trust argument of a public call: a TrustContext (or a dict of its fields).
    None is a NilTrustError; anything else a ValidationError naming the value."""
    if isinstance(value, TrustContext):
        return value
    if value is None:
        raise NilTrustError()
    if isinstance(value, dict):
        try:
            return TrustContext.model_validate(value)
        except PydanticValidationError as exc:
            raise refused(name, exc) from None
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise ValidationError(f"{name} must be a TrustContext (got {shown})", [(name, "not a TrustContext")])


@dataclass(frozen=True)
class Reason:
    rule: str  # machine-readable: sensitivity_within, sensitivity_one_above, ...
    sentence: str

    def __str__(self) -> str:
        return self.sentence


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reasons: list[Reason] = field(default_factory=list)


def _fmt_scopes(scopes: tuple[str, ...]) -> str:
    return "[" + ", ".join(scopes) + "]"


def scope_decision(scope: str, trust: TrustContext) -> tuple[bool, Reason]:
    if not trust.scopes:
        return True, Reason("no_scopes", "no scopes given: all scopes allowed")
    if scope == "":
        return True, Reason("unscoped", "unscoped: visible in every scope")
    if scope in trust.scopes:
        return True, Reason("scope_allowed", f"scope {scope} is in {_fmt_scopes(trust.scopes)}")
    return False, Reason("scope_denied", f"scope {scope} not in {_fmt_scopes(trust.scopes)}: hidden")


def decide(sensitivity: Any, scope: str, trust: TrustContext) -> Decision:
    """The trust decision for a record's sensitivity and scope, with its reasons."""
    level = sensitivity_level(sensitivity)
    name = sensitivity.value if isinstance(sensitivity, Enum) else str(sensitivity)
    max_name = trust.max_sensitivity.value
    scope_ok, scope_reason = scope_decision(scope, trust)
    if level < 0:
        sens_verdict = Verdict.HIDDEN
        sens_reason = Reason("sensitivity_unknown", f"sensitivity {name!r} is not a known level: hidden")
    elif level <= trust.max_level:
        sens_verdict = Verdict.FULL
        sens_reason = Reason("sensitivity_within", f"sensitivity {name} is within max {max_name}")
    elif level == trust.max_level + 1:
        sens_verdict = Verdict.REDACTED
        sens_reason = Reason("sensitivity_one_above", f"sensitivity {name} is one level above max {max_name}: redacted")
    else:
        sens_verdict = Verdict.HIDDEN
        sens_reason = Reason(
            "sensitivity_too_high",
            f"sensitivity {name} is {level - trust.max_level} levels above max {max_name}: hidden",
        )
    verdict = sens_verdict if scope_ok else Verdict.HIDDEN
    return Decision(verdict, [sens_reason, scope_reason])


def level_verdicts(trust: TrustContext) -> np.ndarray:
    """VERDICT_CODES by sensitivity level, at index level + 1: unknown (-1) at 0, the five
    levels at 1..5, and a hidden end at 6 for anything beyond (callers clip into 0..6)."""
    by_level = np.zeros(7, dtype=np.int8)
    for level in range(5):
        if level <= trust.max_level:
            by_level[level + 1] = VERDICT_CODES[Verdict.FULL]
        elif level == trust.max_level + 1:
            by_level[level + 1] = VERDICT_CODES[Verdict.REDACTED]
    return by_level


def scopes_admitted(scope_names: list[str], trust: TrustContext) -> np.ndarray:
    """Whether the scope rule admits each of ``scope_names`` (unscoped always; every scope when
    the context names none)."""
    if not trust.scopes:
        return np.ones(len(scope_names), dtype=bool)
    allowed = set(trust.scopes) | {""}
    return np.fromiter((name in allowed for name in scope_names), dtype=bool, count=len(scope_names))


def verdicts(levels: np.ndarray, scope_codes: np.ndarray, scope_names: list[str], trust: TrustContext) -> np.ndarray:
    """Vectorized ``decide``: VERDICT_CODES per record from sensitivity levels (-1 unknown) and
    scope codes indexing ``scope_names``."""
    # Table lookups (one pass per column, whatever the store's size).
    out = np.take(level_verdicts(trust), np.asarray(levels, dtype=np.int64) + 1, mode="clip")
    if trust.scopes:
        out *= scopes_admitted(scope_names, trust)[scope_codes]
    return out


def verdict_as_read(sensitivity: Any, scope: Any, trust: TrustContext) -> Verdict:
    """``decide``'s verdict without the reasons, for labels read in the same statement as the
    content they guard (``gate_as_read``; an export's stored documents)."""
    level = sensitivity_level(sensitivity)
    if level < 0 or level > trust.max_level + 1:
        return Verdict.HIDDEN
    if trust.scopes and scope and scope not in trust.scopes:
        return Verdict.HIDDEN
    return Verdict.FULL if level <= trust.max_level else Verdict.REDACTED


def gate_as_read(record: MemoryRecord | None, trust: TrustContext) -> MemoryRecord | None:
    """What ``trust`` may have of a record as it was read: the record itself, its redacted view,
    or None (hidden, or no longer there). SPEC 4, "the gate decides on what it returns": a fast
    path may choose records from the column cache, but that choice can be older than the
    content it then reads (another process's reclassify commits in between), so every path
    that hands out content under a trust context passes each record through here, judged on
    the sensitivity and scope stored with the content it came with."""
    if record is None:
        return None
    verdict = verdict_as_read(record.sensitivity, record.scope, trust)
    if verdict is Verdict.FULL:
        return record
    return redact(record) if verdict is Verdict.REDACTED else None


def narrowest(trust: TrustContext, clearance: TrustContext) -> TrustContext:
    """The one trust context whose verdict on every record is the stricter (the least) of
    ``trust``'s and ``clearance``'s: what an operator with ``clearance`` may be shown of what
    ``trust`` gets (SPEC 10). Max sensitivity is the lower of the two; the scopes allowed are
    those both allow. Two scope lists with nothing in common leave only unscoped records, which
    the scope list ``[""]`` says (no record's scope is "", and unscoped records pass any list)."""
    trust, clearance = as_trust(trust), as_trust(clearance, "clearance")
    low = trust if trust.max_level <= clearance.max_level else clearance
    if not trust.scopes or not clearance.scopes:
        scopes = trust.scopes or clearance.scopes
    else:
        scopes = tuple(s for s in trust.scopes if s in set(clearance.scopes)) or ("",)
    return TrustContext(max_sensitivity=low.max_sensitivity, authenticated=trust.authenticated,
                        actor_id=trust.actor_id, scopes=list(scopes))


def covers(clearance: TrustContext, trust: TrustContext) -> bool:
    """Whether ``clearance`` sees in full everything ``trust`` sees in full, and redacted what it
    sees redacted: then narrowing ``trust`` by it changes no verdict."""
    if clearance.max_level < trust.max_level:
        return False
    return not clearance.scopes or (bool(trust.scopes) and set(trust.scopes) <= set(clearance.scopes))


def stricter(a: Verdict, b: Verdict) -> Verdict:
    """The least permissive of two verdicts (hidden < redacted < full)."""
    return a if VERDICT_CODES[a] <= VERDICT_CODES[b] else b


REDACTED_KEEP = ("id", "type", "sensitivity", "confidence", "salience", "scope", "tags", "created_at", "updated_at")


def redact(record: MemoryRecord) -> MemoryRecord:
    """The metadata-only view (SPEC 3). Built from the kept fields alone, so no other byte of
    the original (extra JSON fields included) can reach the caller."""
    return MemoryRecord.model_construct(
        id=record.id,
        type=record.type,
        sensitivity=record.sensitivity,
        confidence=record.confidence,
        salience=record.salience,
        scope=record.scope,
        tags=list(record.tags),
        created_at=record.created_at,
        updated_at=record.updated_at,
        lifecycle=Lifecycle.model_construct(
            decay=DecayProfile.model_construct(
                curve=DecayCurve.EXPONENTIAL, half_life_seconds=0, min_salience=0.0,
                max_age_seconds=0, reinforcement_gain=0.0, points=None,
            ),
            last_reinforced_at=ZERO_TIME,
            pinned=False,
            deletion_policy=DeletionPolicy.AUTO_PRUNE,
            anchor_salience=None,
            anchor_at=None,
        ),
        provenance=Provenance.model_construct(sources=[], created_by=None),
        relations=[],
        payload=None,
        audit_log=[],
        redacted=True,
    )


__all__ = [
    "SENSITIVITY_LEVELS", "TrustContext", "Verdict", "Reason", "Decision", "decide", "verdicts",
    "redact", "scope_decision", "VERDICT_CODES", "VERDICT_NAMES", "SENSITIVITY_NAMES", "verdict_counts", "as_trust", "verdict_as_read", "gate_as_read", "narrowest",
    "covers", "stricter",
]
