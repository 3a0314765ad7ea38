"""Leak canaries: a store where every byte that trust gating must withhold carries a unique
marker, so a leak anywhere (an API result, an export, a page) is a plain substring search.

Shared by the engine suite (tests/security) and the browser suite (tests/e2e): import it with
``from tests.support import canaries``.

- ``build_canary_records()`` -> Membrane-JSON records (deterministic: the same every call):
  every type x every sensitivity x scopes {"", alpha, beta, vault}, plus relation targets.
  Each record's payload, provenance (refs, created_by, extra fields), relation predicates and
  target ids, audit actors and rationales, and unknown extra fields (top level, lifecycle,
  payload, nested) carry canaries ``CANARY-<32 hex>``. Ids, scopes and tags carry none: those
  are the metadata a redacted view keeps.
- ``canaries_for(record)`` -> the canary strings inside one record.
- ``verdict(record, max_sensitivity, scopes)`` -> "full" | "redacted" | "hidden": SPEC 3,
  written independently of the engine.
- ``forbidden_canaries(records, max_sensitivity, scopes)`` -> every canary that must not reach
  that context: the canaries of each record it may not see in full, minus the ids of records
  it may see (a relation target's id is a canary of the record pointing at it, but the target
  itself, when visible, shows its own id).
"""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any, Iterable

TYPES = ("episodic", "working", "semantic", "competence", "plan_graph", "entity")
SENSITIVITIES = ("public", "low", "medium", "high", "hyper")
LEVEL = {s: i for i, s in enumerate(SENSITIVITIES)}
SCOPES = ("", "alpha", "beta", "vault")
CANARY_RE = re.compile(r"CANARY-(?:TGT-)?[0-9a-f]{32}")
_NS = uuid.UUID("6f1c1d1e-5c2a-4e8f-9f7a-2b0a4c3d9e11")
CREATED = "2026-05-01T12:00:00Z"


def _canary(*parts: str) -> str:
    return "CANARY-" + uuid.uuid5(_NS, "/".join(parts)).hex


def _target_id(rid: str) -> str:
    return "CANARY-TGT-" + uuid.uuid5(_NS, rid + "/target").hex


def _payload(type_: str, c) -> dict[str, Any]:
    if type_ == "episodic":
        return {"kind": "episodic",
                "timeline": [{"t": CREATED, "event_kind": c("event_kind"), "ref": c("timeline.ref"),
                              "summary": c("timeline.summary")}],
                "tool_graph": [{"id": "n1", "tool": c("tool"), "args": {"q": c("tool.args")},
                                "result": {"out": c("tool.result")}, "depends_on": []}],
                "environment": {"os": "linux", "os_version": c("os_version"), "tool_versions": {"x": c("tv")},
                                "working_directory": c("cwd"), "context": {"k": c("env.context")}},
                "outcome": "success", "artifacts": [c("artifact")], "tool_graph_ref": c("tool_graph_ref"),
                "x_payload_extra": c("payload.extra")}
    if type_ == "working":
        return {"kind": "working", "thread_id": c("thread"), "state": "executing",
                "active_constraints": [{"type": "t", "key": c("constraint.key"), "value": c("constraint.value"),
                                        "required": True}],
                "next_actions": [c("next_action")], "open_questions": [c("question")],
                "context_summary": c("summary"), "x_payload_extra": c("payload.extra")}
    if type_ == "semantic":
        return {"kind": "semantic", "subject": c("subject"), "predicate": c("predicate"),
                "object": {"nested": [c("object"), {"deeper": c("object.deep")}]},
                "validity": {"mode": "conditional", "conditions": {"when": c("validity")}},
                "evidence": [{"source_type": "doc", "source_id": c("evidence")}],
                "revision_policy": c("revision_policy"), "x_payload_extra": c("payload.extra")}
    if type_ == "competence":
        return {"kind": "competence", "skill_name": c("skill"),
                "triggers": [{"signal": c("signal"), "conditions": {"c": c("trigger.cond")}}],
                "recipe": [{"step": c("step"), "tool": c("recipe.tool"), "args_schema": {"a": c("schema")},
                            "validation": c("validation")}],
                "required_tools": [c("required_tool")], "failure_modes": [c("failure_mode")],
                "fallbacks": [c("fallback")],
                "performance": {"success_count": 3, "failure_count": 1, "success_rate": 0.75,
                                "avg_latency_ms": 12.0},
                "version": c("version"), "x_payload_extra": c("payload.extra")}
    if type_ == "plan_graph":
        return {"kind": "plan_graph", "plan_id": c("plan_id"), "version": c("version"), "intent": c("intent"),
                "constraints": {"c": c("constraints")}, "inputs_schema": {"i": c("inputs")},
                "outputs_schema": {"o": c("outputs")},
                "nodes": [{"id": "n1", "op": c("op"), "params": {"p": c("params")}, "guards": [c("guard")]},
                          {"id": "n2", "op": "noop"}],
                "edges": [{"from": "n1", "to": "n2", "kind": "data"}],
                "metrics": {"avg_latency_ms": 5.0, "failure_rate": 0.1, "execution_count": 7},
                "x_payload_extra": c("payload.extra")}
    if type_ == "entity":
        return {"kind": "entity", "canonical_name": c("name"), "primary_type": c("primary_type"),
                "types": [c("types")], "aliases": [c("alias")],
                "identifiers": [{"namespace": "ns", "value": c("identifier")}], "summary": c("summary"),
                "x_payload_extra": c("payload.extra")}
    raise ValueError(type_)


def _record(rid: str, type_: str, sensitivity: str, scope: str, target: str | None) -> dict[str, Any]:
    def c(field: str) -> str:
        return _canary(rid, field)

    relations = []
    if target is not None:
        relations.append({"predicate": c("relation.predicate"), "target_id": target, "weight": 0.5,
                          "created_at": CREATED, "x_relation_extra": c("relation.extra")})
    return {
        "id": rid, "type": type_, "sensitivity": sensitivity, "confidence": 0.8, "salience": 0.9,
        "scope": scope, "tags": ["canary", type_, sensitivity],
        "created_at": CREATED, "updated_at": CREATED,
        "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 10 ** 9, "min_salience": 0.0,
                                "max_age_seconds": 0, "reinforcement_gain": 0.1, "x_decay_extra": c("decay.extra")},
                      "pinned": False, "deletion_policy": "auto_prune", "x_lifecycle_extra": c("lifecycle.extra")},
        "provenance": {"sources": [{"kind": "observation", "ref": c("provenance.ref"), "hash": c("provenance.hash"),
                                    "created_by": c("provenance.source.created_by"), "timestamp": CREATED,
                                    "x_source_extra": c("provenance.source.extra")}],
                       "created_by": c("provenance.created_by"), "x_provenance_extra": c("provenance.extra")},
        "relations": relations,
        "payload": _payload(type_, c),
        "audit_log": [
            {"action": "create", "actor": c("audit.actor.0"), "timestamp": CREATED, "rationale": c("audit.rationale.0")},
            {"action": "revise", "actor": c("audit.actor.1"), "timestamp": "2026-05-02T12:00:00Z",
             "rationale": c("audit.rationale.1"), "x_audit_extra": c("audit.extra")},
        ],
        "x_top_extra": c("top.extra"),
        "x_nested_extra": {"list": [c("nested.extra"), {"deep": c("nested.extra.deep")}]},
    }


def build_canary_records() -> list[dict[str, Any]]:
    """Every type x sensitivity x scope; each record points at a target record of its own
    (id ``CANARY-TGT-...``, hyper, scope vault), so a leaked relation shows as that id."""
    out: list[dict[str, Any]] = []
    targets: list[dict[str, Any]] = []
    for type_ in TYPES:
        for sensitivity in SENSITIVITIES:
            for scope in SCOPES:
                rid = f"rec-{type_}-{sensitivity}-{scope or 'unscoped'}"
                target = _target_id(rid)
                out.append(_record(rid, type_, sensitivity, scope, target))
                targets.append(_record(target, "semantic", "hyper", "vault", None))
    return out + targets


def canaries_for(record: dict[str, Any]) -> list[str]:
    """Every canary string inside ``record`` (its own id excluded: ids are metadata)."""
    found: list[str] = []

    def walk(value: Any, top: bool) -> None:
        if isinstance(value, str):
            found.extend(CANARY_RE.findall(value))
        elif isinstance(value, dict):
            for k, v in value.items():
                if top and k == "id":
                    continue
                found.extend(CANARY_RE.findall(k))
                walk(v, False)
        elif isinstance(value, list):
            for v in value:
                walk(v, False)

    walk(record, True)
    return sorted(set(found))


def verdict(record: dict[str, Any], max_sensitivity: str, scopes: Iterable[str]) -> str:
    """SPEC 3, independently of the engine."""
    scopes = list(scopes)
    scope_ok = not scopes or record.get("scope", "") == "" or record.get("scope") in scopes
    level = LEVEL.get(record.get("sensitivity"), -1)
    if not scope_ok or level < 0:
        return "hidden"
    if level <= LEVEL[max_sensitivity]:
        return "full"
    if level == LEVEL[max_sensitivity] + 1:
        return "redacted"
    return "hidden"


def forbidden_canaries(records: list[dict[str, Any]], max_sensitivity: str, scopes: Iterable[str]) -> set[str]:
    scopes = list(scopes)
    forbidden: set[str] = set()
    visible_ids: set[str] = set()
    for r in records:
        v = verdict(r, max_sensitivity, scopes)
        if v != "full":
            forbidden.update(canaries_for(r))
        if v != "hidden":
            visible_ids.add(r["id"])
    return forbidden - visible_ids


def all_canaries(records: list[dict[str, Any]]) -> set[str]:
    out: set[str] = set()
    for r in records:
        out.update(canaries_for(r))
    return out


def copy_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return copy.deepcopy(records)
