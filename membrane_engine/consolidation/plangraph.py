"""Plan graph extraction, as Membrane's ``pkg/consolidation/plangraph.go``: an episode whose tool
graph has at least three nodes, whatever its outcome, and that no plan graph is yet
``derived_from``, becomes a plan graph: a node per tool call (op = tool, params = args), a
control edge per dependency, the intent from the first event kind ("unknown" without one), one
execution, the episode's sensitivity and scope, confidence 0.7, tags consolidated /
auto-plangraph, the episode as provenance (tool_call) and ``derived_from``, ``uses`` links to the
entities its ops and params name (``entity_links.plan_entity_terms``).

Through an operator's view, a plan graph beyond the clearance is as if absent (every record is),
so an episode it was derived from gets another one within the clearance.
"""

from __future__ import annotations

from typing import Any

import orjson

from membrane_engine.consolidation.batch import Batch, Episode, Pass, new_record
from membrane_engine.consolidation.entity_links import link_terms, plan_entity_terms
from membrane_engine.model.records import format_time
from membrane_engine.storage import consolidation_reads as reads

MIN_NODES = 3  # minToolGraphNodes


def infer_intent(payload: dict[str, Any]) -> str:
    """Membrane's ``inferIntent``: the first non-empty event kind, else "unknown"."""
    for event in payload.get("timeline") or []:
        kind = event.get("event_kind") if isinstance(event, dict) else None
        if isinstance(kind, str) and kind:
            return kind
    return "unknown"


def plan_of(tool_graph: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Membrane's ``convertToolGraphToPlan``: nodes (id, op, params) and control edges."""
    nodes, edges = [], []
    for node in tool_graph:
        nodes.append({"id": node.get("id"), "op": node.get("tool") or "",
                      **({"params": node["args"]} if node.get("args") else {})})
        for dep in node.get("depends_on") or []:
            edges.append({"from": dep, "to": node.get("id"), "kind": "control"})
    return nodes, edges


def plan(p: Pass) -> Batch:
    batch = Batch(p)
    derived: set[str] = set()
    for rid, relations in reads.plan_relations(p.conn):
        if p.row(rid) is None or not relations:
            continue
        for r in orjson.loads(relations) or []:
            if isinstance(r, dict) and r.get("predicate") == "derived_from" and isinstance(r.get("target_id"), str):
                derived.add(r["target_id"])
    for ep in p.episodes():
        graph = ep.payload.get("tool_graph")
        if not isinstance(graph, list) or len(graph) < MIN_NODES or ep.id in derived:
            continue
        if not all(isinstance(n, dict) for n in graph):
            continue
        _create(p, batch, ep, graph)
        derived.add(ep.id)
    return batch.finish()


def _create(p: Pass, batch: Batch, ep: Episode, graph: list[dict[str, Any]]) -> str:
    nodes, edges = plan_of(graph)
    payload = {"kind": "plan_graph", "plan_id": batch.new_id(), "version": "1", "intent": infer_intent(ep.payload),
               "nodes": nodes, "edges": edges,
               "metrics": {"execution_count": 1, "last_executed_at": format_time(p.now)}}
    rid = batch.new_id()
    doc = new_record(p, rid, "plan_graph", ep.level, ep.scope, 0.7, ["consolidated", "auto-plangraph"], payload,
                     [("tool_call", ep.id)], [ep.id])
    linked = link_terms(p.entities, plan_entity_terms(nodes), ep.scope, ep.level, "uses", "used_by")
    return batch.create(doc, [ep.id], f"Extracted plan graph from episodic record {ep.id} ({len(graph)} nodes)",
                        linked)


__all__ = ["MIN_NODES", "infer_intent", "plan", "plan_of"]
