"""A record as a card: verdict at a glance, metadata, a one-line summary, and "why?"."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from console.keys import Param
from membrane_engine import Explanation, MemoryRecord, label, revision_flag, revision_reason

from .colours import REVISION_BADGES, verdict_badge as badge_color
from .payload import as_text
from .safe import clean, md

def verdict_badge(verdict: str) -> None:
    st.badge(verdict.upper(), color=badge_color(verdict))


def summary(record: MemoryRecord) -> str:
    """One line that says what the record is about (empty for a redacted view)."""
    p = record.payload
    if p is None:
        return ""
    kind = p.kind
    if kind == "semantic":
        return f"{p.subject} {p.predicate} {as_text(p.object)}"
    if kind == "working":
        return f"[{p.state.value}] {p.context_summary}"
    if kind == "episodic":
        first = p.timeline[0].summary if p.timeline else ""
        outcome = p.outcome.value if p.outcome else "no outcome"
        return f"{len(p.timeline)} events, {len(p.tool_graph)} tool calls, {outcome}: {first}"
    if kind == "competence":
        return f"skill {p.skill_name} ({len(p.recipe)} steps)"
    if kind == "plan_graph":
        return f"plan {p.plan_id}: {p.intent} ({len(p.nodes)} nodes)"
    if kind == "entity":
        return f"{p.canonical_name} ({p.primary_type})"
    return kind


def metadata_line(record: MemoryRecord) -> str:
    scope = md(record.scope) if record.scope else "_unscoped_"
    tags = ", ".join(md(t, 60) for t in record.tags[:8]) or "no tags"
    return (f"**{record.type.value}** · {record.sensitivity.value} · scope {scope} · "
            f"salience **{record.salience:.3f}** · confidence {record.confidence:.2f} · {tags}")


EXPLORER = "app_pages/records.py"  # relative to console/app.py, the console's entry point


def explorer_href(record_id: str) -> str:
    """The record explorer's address for one record, relative to any page of the console."""
    return f"records?{Param.ID}=" + quote(record_id, safe="")


def explorer_link(record_id: str, label_: str = "Open in the explorer") -> None:
    """A link that opens ``record_id`` in the record explorer (in this tab, within the session;
    a plain link when the page runs outside the console's navigation, as in page tests)."""
    try:
        st.page_link(EXPLORER, label=label_, icon=":material/open_in_new:", query_params={Param.ID: record_id})
    except StreamlitPageNotFoundError:
        st.markdown(f"[{label_}]({explorer_href(record_id)})")


def revision_badge(record: MemoryRecord) -> str:
    """Markdown badge saying the record is retracted or superseded (the engine's
    ``revision_flag``); empty for any other (and for a redacted view, which withholds it)."""
    flag = revision_flag(record)
    return f":{REVISION_BADGES[flag]}-badge[{flag.upper()}]" if flag else ""


def revision_notice(record: MemoryRecord) -> None:
    """The badge and the engine's sentence on what a retract leaves (nothing when neither)."""
    reason = revision_reason(record)
    if reason is not None:
        st.markdown(f"{revision_badge(record)} {md(reason[0], 400)}")


def show_explanation(explanation: Explanation) -> None:
    verdict_badge(explanation.verdict.value)
    for reason in explanation.reasons:
        st.text(f"• {reason}")


def record_card(record: MemoryRecord, verdict: str | None = None,
                explain: Callable[[], Explanation] | None = None, key: str = "",
                on_open: Callable[[str], None] | None = None, rank: int | None = None) -> None:
    """Draw one record. ``verdict`` defaults to redacted/full from the record itself; ``rank``
    (optional) is shown before the badge."""
    verdict = verdict or ("redacted" if record.redacted else "full")
    with st.container(border=True):
        # The last column wide enough for "why?" at 1024 px (narrower, it read "w…").
        head = st.columns([1.2, 4.6, 1.4], vertical_alignment="center")
        with head[0]:
            if rank is not None:
                color = badge_color(verdict)
                st.markdown(f"**#{rank}** :{color}-badge[{verdict.upper()}]")
            else:
                verdict_badge(verdict)
        # Named by what it says (a redacted view: "redacted <type> record"); the id on hover and in
        # the explorer. Plain text, not st.code: ten code blocks per page slowed every simulator
        # load in the browser (bench/README.md).
        head[1].text(clean(label(record), 300), help=f"id {md(record.id, 300)}")
        if explain is not None:
            with head[2].popover("why?", width="stretch"):
                show_explanation(explain())
        st.markdown(metadata_line(record))
        revision_notice(record)  # a retracted record still reaches agents: say so on its card
        if record.redacted:
            st.caption("Redacted: metadata only. Payload, provenance, relations and audit log are withheld.")
        else:
            st.text(clean(summary(record), 300))
        explorer_link(record.id)
        if on_open is not None and st.button("Open", key=f"open_{key}_{record.id}"):
            on_open(record.id)
