"""Helpers of the ported Membrane tests: records shaped as Membrane's Go code writes them,
Go's JSON encoding (to compare bytes), trust contexts and a fixed clock."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from membrane_engine import TrustContext

UTC = timezone.utc
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # the fixtures' creation time, and every store's "now"
DAY = 86400
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Written by Membrane's own pkg/schema (fixtures/membrane_records.go): one record per line.
MEMBRANE_LINES = (FIXTURES / "membrane_records.jsonl").read_text(encoding="utf-8").splitlines()


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_json(value: Any) -> str:
    """``value`` encoded as Go's encoding/json writes it (compact; a float64 with an integral
    value without a fraction; <, > and & escaped), for the values the fixtures hold."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        assert math.isfinite(value) and abs(value) < 1e21
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + go_json(v) for k, v in value.items()) + "}"
    raise TypeError(type(value))


def trust(max_sensitivity: str = "hyper", scopes: list[str] | None = None) -> TrustContext:
    return TrustContext(max_sensitivity=max_sensitivity, authenticated=True, actor_id="tester",
                        scopes=list(scopes or []))


def later(seconds: float, base: datetime = T0) -> datetime:
    return base + timedelta(seconds=seconds)


def go_record(record_id: str, type_: str = "semantic", payload: dict | None = None, **fields: Any) -> dict[str, Any]:
    """A record as Membrane's NewMemoryRecord makes it and json.Marshal writes it: confidence
    and salience 1, exponential decay with a one-day half-life and nothing else (min_salience,
    max_age_seconds and reinforcement_gain are zero, so left out), auto_prune, an empty
    provenance source list and one "Initial creation" entry. ``fields`` override top-level keys."""
    doc: dict[str, Any] = {
        "id": record_id, "type": type_, "sensitivity": "low", "confidence": 1, "salience": 1,
        "created_at": iso(T0), "updated_at": iso(T0),
        "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": DAY},
                      "last_reinforced_at": iso(T0), "deletion_policy": "auto_prune"},
        "provenance": {"sources": []},
        "payload": payload if payload is not None else semantic_payload(),
        "audit_log": [{"action": "create", "actor": "system", "timestamp": iso(T0), "rationale": "Initial creation"}],
    }
    doc.update(fields)
    return doc


def semantic_payload(subject: str = "python", obj: Any = "3.12", **fields: Any) -> dict[str, Any]:
    payload = {"kind": "semantic", "subject": subject, "predicate": "version", "object": obj,
               "validity": {"mode": "global"}}
    payload.update(fields)
    return payload
