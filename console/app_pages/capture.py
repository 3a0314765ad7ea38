"""Capture: write into the store as an agent does (SPEC 12, Membrane's CaptureMemory): an event,
a tool's output, an observation or working state, with its source, scope and sensitivity.

The engine previews every capture before anything is written (``OperatorView.preview_capture``,
planned by the same code that writes): the entities each mention resolves to, the ones it would
create, the edges both ways and the fact an observation derives. Capture writes it in one
transaction as the signed-in operator (``OperatorView.capture_memory``): curators and admins
only, at a sensitivity and in a scope their clearance sees in full, as the engine checks again at
the moment of writing. The whole form is kept in the page's URL, as every page's state is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from urllib.parse import urlencode

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from console import keys
from console.components.guard import sentence
from console.components.page import ignored, page_preamble
from console.components.record_card import explorer_href
from console.components.safe import clean, md
from console.components.time_picker import from_param, instant_picker, set_instant, to_param
from console.components.words import plural
from console.keys import CaptureParam as P
from console.keys import Param
from membrane_engine import MAX_TASK_LENGTH, CaptureMemoryRequest, MemoryType, Sensitivity, TaskState, label
from membrane_engine.errors import MembraneError, ValidationError

K = keys.CAPTURE

# What an agent captures (Membrane's source kinds); anything else is an event of the kind typed.
KINDS = {"event": "Event", "tool_output": "Tool output", "observation": "Observation",
         "working_state": "Working state", "other": "Other kind…"}
NEW_SCOPE = "\x00new"  # the scope option that reveals a field for a scope no record has yet
GRAPH = "app_pages/graph.py"  # relative to console/app.py
MAX_URL_VALUE = 2000  # longer fields are not written into the address (they stay in the session)


@dataclass(frozen=True)
class Field:
    """A content field: its label, how its text becomes a JSON value, and its help."""

    label: str
    kind: str  # text, area, lines, commas, json_object, json_or_text, state
    help: str = ""


FIELDS: dict[str, Field] = {
    "ref": Field("Reference", "text", "What it happened in (a turn, a ticket, a run): the event's ref, and a "
                                      "reference to any record of the scope that holds it"),
    "tool_name": Field("Tool name", "text", "Required for tool output; mentioned as a tool entity"),
    "args": Field("Arguments (JSON object)", "json_object", 'For example {"pattern": "TODO", "path": "pkg"}'),
    "result": Field("Result (JSON, or plain text)", "json_or_text", "Parsed as JSON when it is JSON, else kept as text"),
    "depends_on": Field("Depends on (tool call ids, comma-separated)", "commas"),
    "subject": Field("Subject", "text", "Mentioned as an entity; with a predicate and an object, an observation "
                                        "states a fact and derives a semantic record"),
    "predicate": Field("Predicate", "text", "For example leaks_memory_through, reviews, runs_on"),
    "object": Field("Object (JSON, or plain text)", "json_or_text", "Parsed as JSON when it is JSON, else kept as text"),
    "thread_id": Field("Thread id", "text", "Required for working state"),
    "state": Field("Task state", "state"),
    "next_actions": Field("Next actions (one per line)", "lines"),
    "open_questions": Field("Open questions (one per line)", "lines"),
    "context_summary": Field("Context summary", "text"),
    "text": Field("Text", "area", "What happened, in the agent's words"),
    "project": Field("Project", "text", "Mentioned as a project entity"),
    "file": Field("File", "text", "Mentioned as a file entity"),
}
KIND_FIELDS = {
    "event": ("ref", "text", "project", "subject", "file"),
    "tool_output": ("tool_name", "args", "result", "depends_on", "project", "file"),
    "observation": ("subject", "predicate", "object", "text", "project", "file"),
    "working_state": ("thread_id", "state", "next_actions", "open_questions", "context_summary", "project"),
}
STATES = [s.value for s in TaskState]
TYPES = [""] + [t.value for t in MemoryType]

# widget -> URL parameter; a content field's widget is "f_<key>", its parameter the key itself.
URL_OF = {"source": P.SOURCE, "kind": P.SOURCE_KIND, "event_kind": P.EVENT_KIND, "entities": P.ENTITIES,
          "more": P.MORE, "context": P.CONTEXT, "reason": P.REASON, "summary": P.SUMMARY,
          "proposed": P.PROPOSED_TYPE, "tags": P.TAGS, "scope": P.SCOPE, "sens": P.SENSITIVITY,
          **{f"f_{name}": name for name in FIELDS}}
TEXT_WIDGETS = [w for w in URL_OF if w not in ("kind", "proposed", "scope", "sens", "f_state")]
RESULT = K("result")  # the last capture written: its response, shown until the next one
FORGED = K("forged")  # a widget value the page never offered, seen on this run

page = page_preamble(K, "Capture",
                     "Write as an agent would: an event, a tool's output, an observation or working state. The engine "
                     "previews which entities each mention resolves to or creates, the edges and any fact derived, "
                     "before anything is written; Capture writes it in one transaction, naming you as the actor.")
view = page.view
operator_ = page.operator
clearance = page.clearance
allowed, why_not = view.may("capture")
locked = not allowed

# ----------------------------------------------------------------------------- what may be chosen

LEVELS = [s.value for s in Sensitivity][: clearance.max_level + 1]
DEFAULT_LEVEL = "low" if "low" in LEVELS else LEVELS[0]
# Unscoped records are within every clearance; a scoped clearance writes only into its scopes,
# any other into a scope records already have or a new one.
if clearance.scopes:
    SCOPES = ["", *clearance.scopes]
else:
    SCOPES = ["", *[s for s in view.scopes() if s], NEW_SCOPE]


def scope_words(scope: str) -> str:
    return "(unscoped)" if scope == "" else "a new scope…" if scope == NEW_SCOPE else clean(scope, 80)


def defaults() -> dict[str, Any]:
    values: dict[str, Any] = {w: "" for w in TEXT_WIDGETS}
    values.update({"kind": "event", "proposed": "", "scope": "", "sens": DEFAULT_LEVEL, "f_state": "executing",
                   "new_scope": ""})
    return values


def fill(values: dict[str, Any]) -> None:
    for widget, value in values.items():
        st.session_state[K(widget)] = value


def clear_form() -> None:
    fill(defaults())
    set_instant(K("ts"), None)
    st.session_state.pop(RESULT, None)


def seed_widgets(seed: dict[str, str]) -> list[str]:
    """Fill the form from the URL; what a link asked for that the page cannot take, in words."""
    values, problems = defaults(), []
    for widget in TEXT_WIDGETS:
        values[widget] = seed.get(URL_OF[widget], "")
    kind = seed.get(P.SOURCE_KIND, "event")
    if kind in KINDS and kind != "other":
        values["kind"] = kind
    elif kind:
        values["kind"], values["event_kind"] = "other", kind
    choices = [
        ("proposed", P.PROPOSED_TYPE, TYPES, "a memory type"),
        ("f_state", "state", STATES, "a task state: " + ", ".join(STATES)),
        ("sens", P.SENSITIVITY, LEVELS, "a sensitivity within your clearance: " + ", ".join(LEVELS)),
    ]
    for widget, param, options, expected in choices:
        if param in seed:
            if seed[param] in options:
                values[widget] = seed[param]
            else:
                problems.append(ignored(f"{param}={seed[param]!r}: expected {expected}"))
    scope = seed.get(P.SCOPE, "")
    if scope in SCOPES:
        values["scope"] = scope
    elif NEW_SCOPE in SCOPES:
        values["scope"], values["new_scope"] = NEW_SCOPE, scope
    else:
        problems.append(ignored(f"{P.SCOPE}={scope!r}: expected a scope within your clearance: "
                                + ", ".join(scope_words(s) for s in SCOPES)))
    when, problem = from_param(P.TIMESTAMP, seed.get(P.TIMESTAMP, ""))
    if problem:
        problems.append(ignored(problem))
    set_instant(K("ts"), when)
    fill(values)
    known = set(URL_OF.values()) | {P.TIMESTAMP}
    problems += [ignored(f"{k}={v!r}: not a parameter of this page") for k, v in seed.items() if k not in known]
    return problems


URL_WIDGETS = tuple(K(w) for w in (*URL_OF, "new_scope", "ts"))
seed = page.seed_from_url(URL_WIDGETS, drawn=K("source"), trust_prefix=None)
if seed is not None:
    page.link_problems(seed_widgets(seed))
else:
    page.link_problems()
for widget, value in defaults().items():  # a first visit without a URL
    st.session_state.setdefault(K(widget), value)

# A value the page never offered (a forged widget event): refused for this run, nothing is
# previewed or written, and the field goes back to what the page offers.
forged: list[str] = []
if st.session_state.get(K("kind")) is None:  # the source kind's buttons, all deselected
    st.session_state[K("kind")] = "event"
for widget, options, name in (("sens", LEVELS, "sensitivity"), ("scope", SCOPES, "scope"),
                              ("kind", list(KINDS), "source kind"), ("proposed", TYPES, "proposed type"),
                              ("f_state", STATES, "task state")):
    value = st.session_state.get(K(widget))
    if value not in options:
        forged.append(f"{name} {clean(value, 80)!r} is not one you may choose here"
                      + (f" (your clearance: up to {LEVELS[-1]})" if widget == "sens" else ""))
        st.session_state[K(widget)] = defaults()[widget]

# ----------------------------------------------------------------------------- the form

if locked:
    st.info(f"Capture is not available to you: {why_not}. The form is shown as it would be, disabled.",
            icon=":material/lock:")
else:
    st.caption(f"Acting as {md(operator_.actor, 120)}. Scopes and sensitivities are offered within your clearance.")

problems: list[str] = []  # what keeps the form from being a request, in words


def json_value(text: str, what: str, *, object_only: bool = False, or_text: bool = False) -> Any:
    """The JSON value of a field (None when empty); a problem naming the field otherwise."""
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        if or_text:
            return text.strip()
        problems.append(f"{what} is not valid JSON: {exc}")
        return None
    if object_only and not isinstance(value, dict):
        problems.append(f"{what} must be a JSON object (got {type(value).__name__})")
        return None
    return value


def field_value(name: str, field: Field, text: str) -> Any:
    if field.kind in ("text", "area", "state"):
        return text.strip() or None
    if field.kind == "lines":
        return [line.strip() for line in text.splitlines() if line.strip()] or None
    if field.kind == "commas":
        return [item.strip() for item in text.split(",") if item.strip()] or None
    return json_value(text, field.label.split(" (")[0], object_only=field.kind == "json_object",
                      or_text=field.kind == "json_or_text")


def draw_field(name: str, field: Field) -> None:
    key = K(f"f_{name}")
    if field.kind == "state":
        st.selectbox(field.label, STATES, key=key, disabled=locked)
    elif field.kind in ("area", "lines", "json_object", "json_or_text"):
        st.text_area(field.label, key=key, height=90, help=field.help or None, disabled=locked)
    else:
        st.text_input(field.label, key=key, help=field.help or None, disabled=locked)


# Above the two columns: in one of them its five choices do not fit at 1024 px.
kind = st.segmented_control("Source kind", list(KINDS), key=K("kind"), format_func=KINDS.get, disabled=locked,
                            help="Event and tool output become episodic records, working state a working record; "
                                 "an observation with subject, predicate and object also a fact")
kind = kind or "event"
what_col, envelope_col = st.columns([3, 2], gap="medium")
with what_col:
    st.subheader("What the agent captured")
    if kind == "other":
        st.text_input("Event kind", key=K("event_kind"), placeholder="e.g. deploy, user_message", disabled=locked,
                      help="Stored as an episode of this kind")
    shown = KIND_FIELDS.get(kind, KIND_FIELDS["event"])
    pairs = [shown[k:k + 2] for k in range(0, len(shown), 2)]
    for pair in pairs:
        cols = st.columns(2)
        for col, name in zip(cols, pair):
            with col:
                draw_field(name, FIELDS[name])
    st.text_area("Other entities mentioned (one per line)", key=K("entities"), height=80, disabled=locked,
                 help="Each is sent as a content key containing \"entity\" (entity, entity_2, ...), which the "
                      "engine reads as a mention")
    with st.expander("More content and context (JSON)"):
        st.text_area("More content (a JSON object, merged with the fields above)", key=K("more"), height=90,
                     disabled=locked, placeholder='{"person_entity": "Dev Patel"}')
        st.text_area("Context (any JSON)", key=K("context"), height=90, disabled=locked,
                     help="Kept with the episode; keys containing ref or record_id name references too")

with envelope_col:
    st.subheader("Source and labels")
    st.text_input("Source", key=K("source"), placeholder="e.g. kestrel", disabled=locked,
                  help="Who captured it (the agent); named in the provenance, and the actor of the entities and "
                       "facts a capture creates when no operator writes")
    scope_choice = st.selectbox("Scope", SCOPES, key=K("scope"), format_func=scope_words, disabled=locked,
                                help="Everything the capture creates is in this scope; mentions resolve to "
                                     "entities of this scope, then unscoped ones")
    if scope_choice == NEW_SCOPE:
        st.text_input("New scope", key=K("new_scope"), disabled=locked)
    st.selectbox("Sensitivity", LEVELS, key=K("sens"), disabled=locked,
                 help="Everything the capture creates has it; a mention matches only entities at least as "
                      "sensitive (a less sensitive one is never changed by it)")
    st.selectbox("Proposed type", TYPES, key=K("proposed"), disabled=locked,
                 format_func=lambda t: t or "(from the source kind)")
    st.text_input("Tags (comma-separated)", key=K("tags"), disabled=locked)
    st.text_input("Summary", key=K("summary"), disabled=locked)
    st.text_input("Reason to remember", key=K("reason"), disabled=locked)
    when = instant_picker(K("ts"), "Timestamp", help="When it happened.", disabled=locked)

# ----------------------------------------------------------------------------- the request

state = st.session_state
scope = state[K("new_scope")].strip() if scope_choice == NEW_SCOPE else scope_choice
content: dict[str, Any] = {}
for name in shown:
    value = field_value(name, FIELDS[name], state.get(K(f"f_{name}"), ""))
    if value is not None:
        content[name] = value
mentions = [line.strip() for line in state[K("entities")].splitlines() if line.strip()]
for k, mention in enumerate(mentions):
    content["entity" if k == 0 else f"entity_{k + 1}"] = mention
more = json_value(state[K("more")], "More content", object_only=True)
for key_, value in (more or {}).items():
    if key_ in content:
        problems.append(f"More content: key {key_!r} is also given above; give it once")
    else:
        content[key_] = value
context = json_value(state[K("context")], "Context")
source_kind = state[K("event_kind")].strip() if kind == "other" else kind
if kind == "other" and not source_kind:
    problems.append("Name the event kind")

fields = {"source": state[K("source")].strip(), "source_kind": source_kind, "content": content or None,
          "context": context, "reason_to_remember": state[K("reason")].strip(),
          "proposed_type": state[K("proposed")], "summary": state[K("summary")].strip(),
          "tags": [t.strip() for t in state[K("tags")].split(",") if t.strip()], "scope": scope,
          "sensitivity": state[K("sens")], "timestamp": when}

query = {URL_OF[w]: str(state[K(w)]) for w in URL_OF
         if w != "kind" and state.get(K(w)) not in ("", None) and len(str(state[K(w)])) <= MAX_URL_VALUE}
query[P.SOURCE_KIND] = kind
query[P.SCOPE] = scope
if when is not None:
    query[P.TIMESTAMP] = to_param(when)
for name in FIELDS:  # only the fields of the kind chosen
    if name not in shown:
        query.pop(name, None)
if kind != "other":
    query.pop(P.EVENT_KIND, None)
page.keep_in_url(query, trust_prefix=None)
if any(len(str(state.get(K(w), ""))) > MAX_URL_VALUE for w in URL_OF):
    st.caption(f"Fields longer than {MAX_URL_VALUE:,} characters are not kept in the page's address.")

# ----------------------------------------------------------------------------- showing a capture


def short(text: str, limit: int) -> str:
    text = clean(text, 10 * limit)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def names_of(response: Any) -> dict[str, str]:
    """What each record of a capture is called; the derived fact as it reads."""
    records = [response.primary_record, *response.created_records, *response.updated_records]
    names = {r.id: label(r, 80) for r in records}
    fact = response.derived_record
    if fact is not None:
        p = fact.payload
        obj = p.object if isinstance(p.object, str) else json.dumps(p.object, ensure_ascii=False)
        names[fact.id] = f"{names.get(p.subject, p.subject)} · {p.predicate} · {names.get(obj, obj)}"
    return names


def created_ids(response: Any) -> set[str]:
    return {response.primary_record.id, *(r.id for r in response.created_records)}


def record_rows(response: Any, written: bool) -> pd.DataFrame:
    fact, names = response.derived_record, names_of(response)
    rows = []
    for r in [response.primary_record, *response.created_records]:
        is_fact = fact is not None and r.id == fact.id
        role = "captured" if r.id == response.primary_record.id else "derived fact" if is_fact else "new entity"
        row = {"role": role, "type": r.type.value, "record": short(names[r.id], 120),
               "sensitivity": r.sensitivity.value, "scope": clean(r.scope, 80) if r.scope else "(unscoped)"}
        if written:
            row.update(explorer=explorer_href(r.id), id=clean(r.id, 80))
        rows.append(row)
    return pd.DataFrame(rows)


def mention_rows(response: Any, written: bool) -> pd.DataFrame:
    rows = []
    for m in response.mentions:
        row = {"mention": clean(m.surface, 120), "entity": clean(m.canonical_name, 120),
               "resolution": "new entity" if m.created else "matched"}
        row["explorer"] = explorer_href(m.entity_id) if written or not m.created else ""
        rows.append(row)
    return pd.DataFrame(rows)


def edge_rows(response: Any) -> pd.DataFrame:
    names, new = names_of(response), created_ids(response)

    def end(rid: str) -> str:
        return ("(new) " if rid in new else "") + short(names.get(rid, rid), 48)

    return pd.DataFrame([{"from": end(e.source_id), "predicate": e.predicate, "to": end(e.target_id)}
                         for e in response.edges])


# Fixed widths for the short columns: the names get the rest, at 1024 px too.
LINK = {"explorer": st.column_config.LinkColumn("explorer", display_text="Open", width=70),
        "role": st.column_config.TextColumn("role", width=100), "type": st.column_config.TextColumn("type", width=80),
        "sensitivity": st.column_config.TextColumn("sensitivity", width=80),
        "resolution": st.column_config.TextColumn("resolution", width=90),
        "predicate": st.column_config.TextColumn("predicate", width=120),
        "from": st.column_config.TextColumn("from", width=210), "to": st.column_config.TextColumn("to", width=210)}


def show_capture(response: Any, written: bool, key: str) -> None:
    """What a capture writes (``written`` False: would write), in tables."""
    primary = response.primary_record
    new_entities = sum(m.created for m in response.mentions)
    fact = response.derived_record
    article = "an" if primary.type.value[0] in "aeiou" else "a"
    parts = [f"{article} {primary.type.value} record ({primary.sensitivity.value}, "
             f"{'scope ' + md(primary.scope, 80) if primary.scope else 'unscoped'})",
             plural(new_entities, "new entity", "new entities"), plural(len(response.edges), "edge")]
    if fact is not None:
        parts.append("a derived fact")
    linked = len(response.updated_records)
    st.markdown(("Wrote " if written else "Would write ") + ", ".join(parts) + "; "
                + (f"{'links' if written else 'would link'} {plural(linked, 'existing record')}" if linked
                   else "no existing record changed")
                + f". Interpretation: **{md(response.interpretation_status or 'tentative', 20)}**.")
    if response.mentions:
        st.markdown("**Mentions**")
        st.dataframe(mention_rows(response, written), hide_index=True, width="stretch", key=f"{key}_mentions",
                     column_config=LINK)
    else:
        st.caption("No mention: the content names no subject, tool, project, file or entity.")
    st.markdown("**Records " + ("created**" if written else "to create**") + (
        "" if written else " (their ids are made when the capture is written)"))
    st.dataframe(record_rows(response, written), hide_index=True, width="stretch", key=f"{key}_records",
                 column_config=LINK)
    if fact is not None:
        st.markdown("**Derived fact**")
        st.text(clean(names_of(response)[fact.id], 500))
    if response.edges:
        st.markdown("**Edges**")
        st.dataframe(edge_rows(response), hide_index=True, width="stretch", key=f"{key}_edges", column_config=LINK)


def graph_link(response: Any) -> None:
    """The Graph page on a task naming the capture's entities: its roots and their edges."""
    names = list(dict.fromkeys(m.canonical_name for m in response.mentions if m.canonical_name))
    task = " ".join(names)[:MAX_TASK_LENGTH]
    if not task:
        return
    try:
        st.page_link(GRAPH, label="See them on the Graph page", icon=":material/hub:", query_params={Param.TASK: task})
    except StreamlitPageNotFoundError:  # outside the console's navigation (page tests)
        st.markdown(f"[See them on the Graph page](graph?{urlencode({Param.TASK: task})})")


last = st.session_state.get(RESULT)
if last is not None:
    with st.container(border=True):
        st.success("Captured. The records below are in the store. The form still holds the capture: Capture "
                   "again would write another record.", icon=":material/check_circle:")
        show_capture(last, True, K("written"))
        graph_link(last)

# ----------------------------------------------------------------------------- preview and capture

st.subheader("Preview")
if locked:
    st.stop()
for problem in forged:
    st.error(f"Refused: {md(problem, 300)}. Nothing was previewed or written.")
if forged:
    state[FORGED] = forged
    st.stop()
if not fields["source"]:
    st.caption("To preview: name the source (the agent that captured it).")
    st.stop()
for problem in problems:
    st.warning(md(problem, 500))
if problems:
    st.stop()


def refusal(exc: Exception) -> None:
    st.error(md(sentence(exc), 1500))
    if isinstance(exc, ValidationError) and exc.problems:
        st.dataframe(pd.DataFrame([(clean(f, 200), clean(m, 500)) for f, m in exc.problems],
                     columns=["field", "problem"]), hide_index=True)


def attempt(call: Callable[[], Any]) -> Any:
    """The engine's answer, or None once its refusal is shown (never a traceback)."""
    try:
        return call()
    except MembraneError as exc:
        refusal(exc)
        return None


request = attempt(lambda: CaptureMemoryRequest(**fields))
if request is None:
    st.stop()
preview = attempt(lambda: view.preview_capture(request))
if preview is None:
    st.stop()
show_capture(preview, False, K("preview"))
with st.expander("The request as sent"):
    st.json(request.model_dump(mode="json"), expanded=False)

buttons = st.container(horizontal=True)
capture_clicked = buttons.button("Capture", type="primary", key=K("apply"), icon=":material/save:",
                                 help="Write it: one transaction, audit entries naming you")
buttons.button("Clear the form", key=K("clear"), on_click=clear_form)
if capture_clicked:
    # The view checks the role and the clearance again here, as stored now, on the request of
    # this run (the one previewed above).
    written = attempt(lambda: view.capture_memory(request))
    if written is not None:
        st.session_state[RESULT] = written
        st.rerun()
