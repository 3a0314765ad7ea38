"""A record's payload drawn for its type, and DOT graphs with every label escaped.

Everything that comes from a record goes through st.dataframe, st.text, st.code, st.json or
`md()`; graph labels through `dot_label()`. ``render_payload(record)`` is the one entry point.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import pandas as pd
import streamlit as st

from membrane_engine import MemoryRecord, format_time

from .colours import BRAND, BRAND_TINT, EDGE
from .safe import clean, md

MAX_ROWS = 500  # rows of one payload table drawn at once (the rest is counted)
MAX_GRAPH_NODES = 150
_DOT_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# --------------------------------------------------------------------------- helpers


def dot_label(value: object, limit: int = 60) -> str:
    """Text for a quoted DOT string: quotes escaped, control characters and newlines replaced,
    backslashes shown as a look-alike (Graphviz reads them as escapes such as \\N or \\l, and a
    trailing one would swallow the closing quote), cut to ``limit``. Always used inside "...",
    never as an HTML label."""
    text = _DOT_CONTROL.sub(" ", str(value)).replace("\\", "\u29f5")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return '"' + text.replace('"', '\\"') + '"'


def dot_lines(*parts: object, limit: int = 40) -> str:
    """A quoted DOT label of several lines, each part escaped like ``dot_label``."""
    return '"' + "\\n".join(dot_label(part, limit)[1:-1] for part in parts if str(part)) + '"'


def _scalar(value: Any) -> str | None:
    """A value that reads as one word or phrase, as text; None for objects and lists."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return format_time(value)
    if hasattr(value, "model_dump"):
        return None
    if hasattr(value, "value") and not isinstance(value, (dict, list)):  # enums
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, (dict, list, tuple, set)):
        return None
    return str(value)


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def readable(value: Any) -> str:
    """Any payload value as one line of text: an object as ``key: value`` pairs separated by
    "; " (nested objects in parentheses), a list as its items separated by ", ". Never JSON or
    Python's dict text."""
    value = _plain(value)
    word = _scalar(value)
    if word is not None:
        return word
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            inner = readable(v)
            nested = isinstance(_plain(v), dict) and len(_plain(v)) > 1
            parts.append(f"{k}: ({inner})" if nested else f"{k}: {inner}")
        return "; ".join(parts)
    return ", ".join(f"({readable(v)})" if isinstance(_plain(v), (list, tuple)) or
                     (isinstance(_plain(v), dict) and len(_plain(v)) > 1) else readable(v) for v in value)


def as_lines(value: Any, indent: int = 0) -> list[str]:
    """A payload value as indented ``key: value`` lines (lists as "- item" lines)."""
    pad = "  " * indent
    value = _plain(value)
    word = _scalar(value)
    if word is not None:
        return [pad + word]
    lines: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            inner = _scalar(_plain(v))
            if inner is not None:
                lines.append(f"{pad}{k}: {inner}")
            elif not _plain(v):
                lines.append(f"{pad}{k}: (none)")
            else:
                lines.append(f"{pad}{k}:")
                lines.extend(as_lines(v, indent + 1))
        return lines
    for item in value:
        inner = _scalar(_plain(item))
        if inner is not None:
            lines.append(f"{pad}- {inner}")
        else:
            sub = as_lines(item, indent + 1)
            lines.append(f"{pad}- {sub[0].strip()}" if sub else f"{pad}-")
            lines.extend(sub[1:])
    return lines


def as_text(value: Any, limit: int = 300) -> str:
    """A payload value as one line of plain text for a table cell (``readable``), cut to
    ``limit``."""
    return clean(readable(value), limit)


def human_ms(ms: float) -> str:
    """Milliseconds as '850 ms', '12.3 s', '41 min' or '2.5 h'."""
    if ms < 1000:
        return f"{ms:,.0f} ms"
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:,.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.0f} min"
    return f"{seconds / 3600:,.1f} h"


def table(rows: list[dict[str, Any]], empty: str = "none", key: str | None = None) -> None:
    """Rows as an inert dataframe of text cells (mixed JSON values never upset Arrow)."""
    if not rows:
        st.text(f"({empty})")
        return
    shown = rows[:MAX_ROWS]
    frame = pd.DataFrame([{k: as_text(v) for k, v in r.items()} for r in shown])
    st.dataframe(frame, hide_index=True, width="stretch", key=key)
    if len(rows) > MAX_ROWS:
        st.caption(f"Showing the first {MAX_ROWS:,} of {len(rows):,} rows.")


def field_line(label: str, value: Any) -> None:
    """``label: value`` with the value inert."""
    st.markdown(f"**{label}:** {md(as_text(value), 500) if value not in (None, '') else '—'}")


def bullet_list(label: str, items: list[Any]) -> None:
    st.markdown(f"**{label}** ({len(items)})")
    if items:
        st.text("\n".join(f"• {as_text(i, 300)}" for i in items[:MAX_ROWS]))


def json_block(label: str, value: Any, expanded: bool = False) -> None:
    """An object (schema, context, extra fields) as indented ``key: value`` lines of text."""
    if value in (None, {}, []):
        return
    st.markdown(f"**{label}**")
    lines = as_lines(_jsonable(value))
    shown = lines[:MAX_ROWS]
    st.text(clean("\n".join(shown), 20000))
    if len(lines) > MAX_ROWS:
        st.caption(f"Showing the first {MAX_ROWS:,} of {len(lines):,} lines.")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    return json.loads(json.dumps(value, default=str))


def _extras(payload: Any) -> None:
    extra = getattr(payload, "model_extra", None) or {}
    if extra:
        json_block("Other payload fields", extra)


def dag_dot(nodes: list[tuple[str, str]], edges: list[tuple[str, str, str]], rankdir: str = "LR") -> str:
    """DOT source for a small directed graph: ``nodes`` are (id, label), ``edges`` (from, to,
    kind). Ids and labels are escaped (a label drawn on two lines: id, then the rest); edges to
    unknown nodes get a dashed placeholder; "control" edges are dashed."""
    names = {nid: f"n{i}" for i, (nid, _) in enumerate(nodes)}
    lines = [f"digraph G {{ rankdir={rankdir}; bgcolor=\"transparent\";",
             f'node [shape=box, style="rounded,filled", fillcolor="{BRAND_TINT}", color="{BRAND}", fontname="Helvetica", '
             'fontsize=11];',
             f'edge [fontname="Helvetica", fontsize=9, color="{EDGE}"];']
    for nid, label in nodes:
        lines.append(f"{names[nid]} [label={dot_lines(nid, label) if label != nid else dot_label(nid)}];")
    for src, dst, kind in edges:
        for end in (src, dst):
            if end not in names:
                names[end] = f"n{len(names)}"
                lines.append(f'{names[end]} [label={dot_label(end)}, style="dashed"];')
        style = ', style="dashed"' if kind == "control" else ""
        label = f"label={dot_label(kind, 20)}" if kind else 'label=""'
        lines.append(f"{names[src]} -> {names[dst]} [{label}{style}];")
    lines.append("}")
    return "\n".join(lines)


def graph(nodes: list[tuple[str, str]], edges: list[tuple[str, str, str]], rankdir: str = "LR") -> None:
    if not nodes:
        st.text("(no nodes)")
        return
    if len(nodes) > MAX_GRAPH_NODES:
        st.caption(f"{len(nodes):,} nodes: too many to draw; see the table below.")
        return
    st.graphviz_chart(dag_dot(nodes, edges, rankdir), width="content")


# --------------------------------------------------------------------------- per type


def _episodic(p: Any) -> None:
    cols = st.columns(3)
    cols[0].metric("Outcome", p.outcome.value if p.outcome else "—")
    cols[1].metric("Timeline events", len(p.timeline))
    cols[2].metric("Tool calls", len(p.tool_graph))
    st.markdown("**Timeline**")
    events = sorted(p.timeline, key=lambda e: (e.t is None, e.t or datetime.min))
    table([{"t": e.t, "event_kind": e.event_kind, "ref": e.ref, "summary": e.summary} for e in events], "no events")
    st.markdown("**Tool graph**")
    graph([(n.id, n.tool) for n in p.tool_graph], [(dep, n.id, "") for n in p.tool_graph for dep in n.depends_on])
    table([{"id": n.id, "tool": n.tool, "args": n.args, "result": n.result, "timestamp": n.timestamp,
            "depends_on": ", ".join(n.depends_on)} for n in p.tool_graph], "no tool calls")
    if p.tool_graph_ref:
        field_line("Tool graph ref", p.tool_graph_ref)
    if p.artifacts:
        bullet_list("Artifacts", p.artifacts)
    if p.environment is not None:
        env = p.environment
        st.markdown("**Environment**")
        table([{"os": env.os, "os_version": env.os_version, "working_directory": env.working_directory}])
        if env.tool_versions:
            table([{"tool": k, "version": v} for k, v in env.tool_versions.items()])
        json_block("Environment context", env.context)


def _working(p: Any) -> None:
    st.metric("State", p.state.value)
    field_line("Thread", p.thread_id)
    st.markdown("**Context summary**")
    st.text(clean(p.context_summary or "(none)", 4000))
    st.markdown("**Active constraints**")
    table([{"type": c.type, "key": c.key, "value": c.value, "required": "yes" if c.required else "no"}
           for c in p.active_constraints], "no constraints")
    left, right = st.columns(2)
    with left:
        bullet_list("Next actions", p.next_actions)
    with right:
        bullet_list("Open questions", p.open_questions)


def _semantic(p: Any) -> None:
    st.markdown("**Triple**")
    table([{"subject": p.subject, "predicate": p.predicate, "object": p.object}])
    v = p.validity
    st.markdown("**Validity**")
    table([{"mode": v.mode.value, "start": v.start, "end": v.end, "conditions": v.conditions}])
    st.markdown("**Evidence**")
    table([{"source_type": e.source_type, "source_id": e.source_id, "timestamp": e.timestamp} for e in p.evidence],
          "no evidence")
    st.markdown("**Revision**")
    r = p.revision
    table([{"status": r.status.value if r and r.status else "active", "supersedes": r.supersedes if r else None,
            "superseded_by": r.superseded_by if r else None, "revision_policy": p.revision_policy}])


def _competence(p: Any) -> None:
    perf = p.performance
    field_line("Skill", p.skill_name)
    field_line("Version", p.version)
    cols = st.columns(4)
    if perf is not None:
        runs = perf.success_count + perf.failure_count
        cols[0].metric("Successes", f"{perf.success_count:,}")
        cols[1].metric("Failures", f"{perf.failure_count:,}")
        cols[2].metric("Observed success", f"{perf.success_count / runs:.0%}" if runs else "—",
                       help=f"{perf.success_count} successes, {perf.failure_count} failures "
                            f"(stored success_rate {perf.success_rate:.2f} is not used by the selector)")
        cols[3].metric("Avg latency", human_ms(perf.avg_latency_ms))
        if perf.last_used_at:
            field_line("Last used", perf.last_used_at)
    else:
        st.text("(no performance data)")
    st.markdown("**Recipe**")
    table([{"#": i + 1, "step": s.step, "tool": s.tool, "args_schema": s.args_schema, "validation": s.validation}
           for i, s in enumerate(p.recipe)], "no steps")
    st.markdown("**Triggers**")
    table([{"signal": t.signal, "conditions": t.conditions} for t in p.triggers], "no triggers")
    cols = st.columns(3)
    with cols[0]:
        bullet_list("Required tools", p.required_tools)
    with cols[1]:
        bullet_list("Failure modes", p.failure_modes)
    with cols[2]:
        bullet_list("Fallbacks", p.fallbacks)


def _plan_graph(p: Any) -> None:
    field_line("Plan", p.plan_id)
    field_line("Version", p.version)
    field_line("Intent", p.intent)
    if p.metrics is not None:
        m = p.metrics
        cols = st.columns(4)
        cols[0].metric("Executions", f"{m.execution_count:,}")
        cols[1].metric("Failure rate", f"{m.failure_rate:.0%}")
        cols[2].metric("Avg latency", human_ms(m.avg_latency_ms))
        cols[3].metric("Last executed", format_time(m.last_executed_at)[:10] if m.last_executed_at else "—",
                       help=format_time(m.last_executed_at) if m.last_executed_at else None)
    st.markdown(f"**Graph** ({len(p.nodes)} nodes, {len(p.edges)} edges; solid: data, dashed: control)")
    graph([(n.id, n.op) for n in p.nodes], [(e.from_, e.to, e.kind.value) for e in p.edges])
    fan_in = {n.id: 0 for n in p.nodes}
    fan_out = {n.id: 0 for n in p.nodes}
    for e in p.edges:
        fan_out[e.from_] = fan_out.get(e.from_, 0) + 1
        fan_in[e.to] = fan_in.get(e.to, 0) + 1
    st.markdown("**Nodes**")
    table([{"id": n.id, "op": n.op, "in": fan_in.get(n.id, 0), "out": fan_out.get(n.id, 0), "params": n.params,
            "guards": n.guards} for n in p.nodes], "no nodes")
    st.markdown("**Edges**")
    table([{"from": e.from_, "to": e.to, "kind": e.kind.value} for e in p.edges], "no edges")
    json_block("Constraints", p.constraints)
    json_block("Inputs schema", p.inputs_schema)
    json_block("Outputs schema", p.outputs_schema)


def _entity(p: Any) -> None:
    field_line("Canonical name", p.canonical_name)
    field_line("Primary type", p.primary_type)
    if p.summary:
        st.text(clean(p.summary, 4000))
    left, right = st.columns(2)
    with left:
        bullet_list("Types", p.types)
        bullet_list("Aliases", [a.value + (f" ({a.kind})" if a.kind else "") for a in p.aliases])
    with right:
        st.markdown("**Identifiers**")
        table([{"namespace": i.namespace, "value": i.value} for i in p.identifiers], "no identifiers")


RENDERERS = {
    "episodic": _episodic, "working": _working, "semantic": _semantic,
    "competence": _competence, "plan_graph": _plan_graph, "entity": _entity,
}


def render_payload(record: MemoryRecord) -> None:
    """The record's payload, drawn for its type. A redacted view says so and draws nothing."""
    payload = record.payload
    if record.redacted or payload is None:
        st.info("Redacted: the payload is withheld (metadata only).", icon=":material/lock:")
        return
    renderer = RENDERERS.get(payload.kind)
    if renderer is None:
        json_block("Payload", payload)
        return
    renderer(payload)
    _extras(payload)


__all__ = ["render_payload", "dag_dot", "dot_label", "dot_lines", "human_ms", "table", "as_text", "as_lines", "readable",
           "RENDERERS"]
