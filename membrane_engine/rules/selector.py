"""The multi-solution selector, SPEC 5: three equally weighted signals per candidate.

The signals are computed over arrays (retrieval feeds columns straight from the column cache);
``select`` over in-memory records uses the very same functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_serializer

from membrane_engine.model.records import CompetencePayload, MemoryRecord, PlanGraphPayload, to_epoch
from membrane_engine.rules.ranking import embed_records, query_vector

DEFAULT_THRESHOLD = 0.7
RECENCY_HALF_LIFE_SECONDS = 30 * 86400.0


@dataclass(frozen=True)
class Signals:
    """One candidate's three signals and composite score (a page charts these)."""

    record_id: str
    applicability: float
    success: float
    recency: float
    score: float
    redacted: bool = False


class CandidateScores(Mapping):
    """``selection.scores`` of a large candidate set: every candidate's score (SPEC 5), kept in
    the arrays the selector computed them in. A store can have tens of thousands of candidates
    and most callers read only the ranked few, so the id -> score dict is built on first use
    (a lookup, ``len`` excepted). Iterates ranked candidates first, then the others in
    candidate order, like the dict ``select`` builds."""

    __slots__ = ("_ids", "_rows", "_scores", "_ranked", "_dict")

    def __init__(self, ids: np.ndarray, rows: np.ndarray | None, scores: np.ndarray, ranked: np.ndarray):
        """Candidate k is ``ids[rows[k]]`` (``ids[k]`` without ``rows``) with ``scores[k]``;
        ``ranked`` lists candidate numbers best first."""
        self._ids = ids
        self._rows = rows
        self._scores = scores
        self._ranked = ranked
        self._dict: dict[str, float] | None = None

    def _as_dict(self) -> dict[str, float]:
        if self._dict is None:
            ids = self._ids if self._rows is None else self._ids[self._rows]
            ranked = self._ranked.tolist()
            out = dict(zip(ids[ranked].tolist(), self._scores[ranked].tolist()))
            out.update(zip(ids.tolist(), self._scores.tolist()))
            self._dict = out
        return self._dict

    def __getitem__(self, key: str) -> float:
        return self._as_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._as_dict())

    def __len__(self) -> int:
        return len(self._scores)

    def __repr__(self) -> str:
        return f"CandidateScores({len(self)} candidates)"


class SelectionResult(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    selected: list[MemoryRecord] = Field(default_factory=list)
    confidence: float = 0.0
    needs_more: bool = True
    scores: dict[str, float] = Field(default_factory=dict)
    threshold: float = Field(default=DEFAULT_THRESHOLD, exclude=True)
    # Per-candidate signals in ranked order; not part of Membrane's wire shape.
    signals: list[Signals] = Field(default_factory=list, exclude=True)

    @field_serializer("scores")
    def _scores_as_dict(self, scores: Mapping[str, float]) -> dict[str, float]:
        return scores if isinstance(scores, dict) else dict(scores)


# --------------------------------------------------------------------------- the signals


def success_signal(record: MemoryRecord) -> float:
    """Observed success of a competence or plan record; 0.5 without data. The stored
    ``performance.success_rate`` is deliberately not used (SPEC 5)."""
    payload = record.payload
    if isinstance(payload, CompetencePayload) and payload.performance is not None:
        total = payload.performance.success_count + payload.performance.failure_count
        if total > 0:
            return payload.performance.success_count / total
    if isinstance(payload, PlanGraphPayload) and payload.metrics is not None:
        if payload.metrics.execution_count > 0:
            return 1.0 - payload.metrics.failure_rate
    return 0.5


def recency_signal(last_reinforced_at: np.ndarray, as_of: float) -> np.ndarray:
    """0.5 ^ (age / 30 days); 1.0 for a future instant; 0.5 when unset (NaN)."""
    age = as_of - last_reinforced_at
    with np.errstate(invalid="ignore", over="ignore"):
        value = np.exp2(-age / RECENCY_HALF_LIFE_SECONDS)  # 0.5 ** x, at a third of np.power's cost
    value = np.where(age < 0, 1.0, value)
    return np.where(np.isnan(last_reinforced_at), 0.5, value)


def composite(applicability: np.ndarray, success: np.ndarray, recency: np.ndarray,
              redacted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The mean of the three signals; a redacted candidate (no payload) scores 0.5 flat."""
    applicability = np.where(redacted, 0.5, applicability)
    success = np.where(redacted, 0.5, success)
    recency = np.where(redacted, 0.5, recency)
    score = (applicability + success + recency) / 3.0
    return applicability, success, recency, score


def rank(ids: np.ndarray, scores: np.ndarray, threshold: float) -> tuple[np.ndarray, float, bool]:
    """Order (score descending, ties by id), confidence and needs_more."""
    order = np.lexsort((ids.astype(str), -scores)) if len(ids) else np.empty(0, dtype=np.int64)
    if len(order) == 0:
        return order, 0.0, True
    if len(order) == 1:
        confidence = float(min(scores[order[0]], 1.0))
    else:
        best, second = float(scores[order[0]]), float(scores[order[1]])
        confidence = (best - second) / best if best > 0 else 0.0
    return order, confidence, confidence < threshold


# --------------------------------------------------------------------------- over records


def _last_reinforced(record: MemoryRecord) -> float:
    when = record.lifecycle.last_reinforced_at
    return math.nan if when is None or when.year <= 1 else to_epoch(when)


def select(candidates: list[MemoryRecord], as_of: datetime, threshold: float = DEFAULT_THRESHOLD,
           task_descriptor: str = "", embedder: Any = None,
           precomputed: dict[str, Any] | None = None) -> SelectionResult:
    """Rank candidates and say how sure the choice is. ``precomputed`` may carry arrays
    (applicability, success, last_reinforced, redacted) aligned with ``candidates`` so retrieval
    need not re-derive them from payloads."""
    n = len(candidates)
    ids = np.array([r.id for r in candidates], dtype=object)
    if precomputed is not None:
        applicability = np.asarray(precomputed["applicability"], dtype=float)
        success = np.asarray(precomputed["success"], dtype=float)
        last = np.asarray(precomputed["last_reinforced"], dtype=float)
        redacted = np.asarray(precomputed["redacted"], dtype=bool)
    else:
        redacted = np.array([r.redacted or r.payload is None for r in candidates], dtype=bool)
        applicability = np.array([r.confidence for r in candidates], dtype=float)
        success = np.array([0.5 if red else success_signal(r) for r, red in zip(candidates, redacted)], dtype=float)
        last = np.array([_last_reinforced(r) for r in candidates], dtype=float)
    if embedder is not None and task_descriptor and n:
        query = query_vector(embedder, task_descriptor)
        if query is not None:
            vectors = embed_records(embedder, candidates)
            has = np.any(vectors != 0, axis=1) & ~redacted
            applicability = np.where(has, (vectors @ query + 1.0) / 2.0, applicability)
    recency = recency_signal(last.reshape(n), to_epoch(as_of)) if n else np.empty(0)
    applicability, success, recency, score = composite(applicability, success, recency, redacted)
    order, confidence, needs_more = rank(ids, score, threshold)
    signals = [Signals(str(ids[i]), float(applicability[i]), float(success[i]), float(recency[i]),
                       float(score[i]), bool(redacted[i])) for i in order]
    # The candidates are already-validated records (or redacted views): no re-validation.
    return SelectionResult.model_construct(
        selected=[candidates[i] for i in order], confidence=confidence, needs_more=needs_more,
        scores={s.record_id: s.score for s in signals}, threshold=threshold, signals=signals,
    )
