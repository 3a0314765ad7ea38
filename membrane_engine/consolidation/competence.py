"""Competence extraction, as Membrane's ``pkg/consolidation/competence.go``: successful episodes
with a tool graph are grouped by their tool signature (the tool names, trimmed, blanks left out,
sorted, joined by "+"); a signature seen at least twice is the skill ``skill:<signature>``. A
known skill is reinforced (+0.1, capped at 1, "Reinforced: N episodes match pattern ..."),
otherwise a competence record is created: recipe steps from the first episode's tools, success
count and rate, confidence 0.8, tags consolidated / auto-competence, each episode as provenance
(outcome) and ``derived_from``, ``uses`` links to the entities its tools name.

Its sensitivity is the highest of its episodes' (Membrane's ``deriveMaxSensitivity``). Episodes
are grouped by scope as well as signature **(deviation: Membrane groups across scopes and files a
mixed group under the scope "consolidated:mixed-scope"; here scopes never mix, SPEC 12)**, and a
known skill counts only in the group's scope and when at least as sensitive as the group's most
sensitive episode (the least sensitive such skill, then the smallest id); with none, a skill at
the group's sensitivity is created.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from membrane_engine.consolidation.batch import SENSITIVITY_AT, Batch, Pass, new_record
from membrane_engine.consolidation.entity_links import link_terms
from membrane_engine.model.records import format_time
from membrane_engine.storage import consolidation_reads as reads

MIN_OCCURRENCES = 2  # minPatternOccurrences
SKILL_PREFIX = "skill:"


@dataclass
class Group:
    tools: list[str]  # the first episode's, in its order
    sources: list[str] = field(default_factory=list)
    level: int = -1  # the highest of its episodes'


def tool_names(tool_graph: list) -> list[str]:
    """Membrane's ``extractToolNames``: each node's tool, trimmed, blank ones left out."""
    out = []
    for node in tool_graph:
        tool = node.get("tool") if isinstance(node, dict) else None
        if isinstance(tool, str) and tool.strip():
            out.append(tool.strip())
    return out


def signature(tools: list[str]) -> str:
    """Membrane's ``toolSignature``: sorted, joined by "+"."""
    return "+".join(sorted(tools))


def scope_policy(scope: str) -> str:
    """Membrane's ``deriveConservativeScope`` policy text for a group of one scope."""
    return f"preserved({scope})" if scope else "preserved(unscoped)"


def plan(p: Pass) -> Batch:
    batch = Batch(p)
    skills: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for rid, name in reads.skill_names(p.conn, SKILL_PREFIX):
        i = p.row(rid)
        if i is not None and isinstance(name, str):
            scope, level = p.labels(i)
            skills.setdefault((scope, name), []).append((level, rid))
    groups: dict[tuple[str, str], Group] = {}
    for ep in p.episodes():
        graph = ep.payload.get("tool_graph")
        if ep.payload.get("outcome") != "success" or not isinstance(graph, list) or not graph:
            continue
        tools = tool_names(graph)
        if not tools:
            continue
        group = groups.setdefault((ep.scope, signature(tools)), Group(tools))
        group.sources.append(ep.id)
        group.level = max(group.level, ep.level)
    for (scope, sig), group in sorted(groups.items()):
        if len(group.sources) < MIN_OCCURRENCES:
            continue
        name = SKILL_PREFIX + sig
        known = [s for s in skills.get((scope, name), ()) if s[0] >= group.level]
        if known:
            batch.reinforce(min(known)[1], "competence", group.sources,
                            f"Reinforced: {len(group.sources)} episodes match pattern {sig}")
            continue
        rid = _create(p, batch, scope, sig, group)
        skills.setdefault((scope, name), []).append((group.level, rid))
    return batch.finish()


def _create(p: Pass, batch: Batch, scope: str, sig: str, group: Group) -> str:
    stamp = format_time(p.now)
    payload = {"kind": "competence", "skill_name": SKILL_PREFIX + sig, "triggers": [{"signal": sig}],
               "recipe": [{"step": f"Step {k}: invoke {tool}", "tool": tool} for k, tool in enumerate(group.tools, 1)],
               "required_tools": list(group.tools),
               "performance": {"success_count": len(group.sources), "success_rate": 1.0, "last_used_at": stamp},
               "version": "1"}
    sensitivity = SENSITIVITY_AT[group.level].value
    rid = batch.new_id()
    doc = new_record(p, rid, "competence", group.level, scope, 0.8, ["consolidated", "auto-competence"], payload,
                     [("outcome", s) for s in group.sources], group.sources)
    linked = link_terms(p.entities, group.tools, scope, group.level, "uses", "used_by")
    rationale = (f"Extracted from {len(group.sources)} episodic records with pattern {sig}; "
                 f"policy: sensitivity=max({sensitivity}), scope={scope_policy(scope)}")
    return batch.create(doc, list(group.sources), rationale, linked)


__all__ = ["MIN_OCCURRENCES", "SKILL_PREFIX", "plan", "scope_policy", "signature", "tool_names"]
