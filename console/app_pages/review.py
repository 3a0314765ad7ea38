"""Review: the queue an operator works through. Contested records, each beside what contests it,
resolved by Supersede, Retract or Reinstate (previewed by the engine, confirmed, one transaction);
and records about to be pruned, with when, to reinforce, pin or let go. Its Consolidation section
(components/consolidation_view.py) lists what consolidation would write, to apply or reject.

The engine builds the queue through the signed-in operator's view (membrane_engine/review.py):
what is beyond the clearance is counted, never shown; a redacted record is metadata only. Writes
go through the view, which checks the role and the clearance as stored at the moment of writing,
as on Curate."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pandas as pd
import streamlit as st

from console import keys
from console.components.bulk_view import bulk_panel, show_results
from console.components.clearance import key_of
from console.components.consolidation_view import consolidation_section
from console.components.page import page_preamble
from console.components.plan_view import outcome_line, plan_names, render_plan
from console.components.safe import clean, md
from console.components.words import plural
from membrane_engine import MAX_RATIONALE_LENGTH, format_time
from membrane_engine.errors import MembraneError

K = keys.REVIEW
HORIZONS = {1: "1 day", 3: "3 days", 7: "7 days", 14: "14 days", 30: "30 days"}
RESOLVE = {
    "reinstate": ("Reinstate", "The record holds: back to active; salience unchanged.", False),
    "retract": ("Retract", "The record is wrong: salience 0, status retracted. It stays in the store.", True),
    "supersede": ("Supersede", "Replace the record with a corrected one (edit the new record below); the old one "
                               "is retracted.", True),
}

page = page_preamble(K, "Review",
                     "Contested records beside what contests them, and records about to be pruned. Every resolution "
                     "is previewed by the engine, names you as the actor and carries your rationale into the audit "
                     "log.")
view = page.view
operator = page.operator


@st.cache_data(show_spinner=False, max_entries=16)
def review_queue(_view, store: tuple, who: str, cleared: tuple, days: int, minute: str) -> Any:
    """The view's queue, kept per store state (any write, here or in another process, gives a new
    key), operator and clearance, horizon and minute: a page revisited reads it again instead of
    building it anew (bench/README.md). Keyed by the operator too: the view logs the
    contested records it shows as that operator's reads ("who looked")."""
    return _view.review_queue(horizon=timedelta(days=days))


if st.session_state.pop(K("reset"), False):  # an applied resolution: clear its inputs before they are drawn
    st.session_state[K("rationale")] = ""
    for name in [k for k in st.session_state if str(k).startswith(K("confirm", ""))]:
        del st.session_state[name]
    st.session_state.pop(K("json_for"), None)

SECTIONS = {"queue": "Contested and pruning", "consolidation": "Consolidation"}
section = st.segmented_control("Section", list(SECTIONS), default="queue", key=K("section"),
                               format_func=SECTIONS.get, label_visibility="collapsed")
if section == "consolidation":  # only the section shown is built: the queue's reads are not made
    consolidation_section(view, operator, K)
    st.stop()

top = st.columns([1, 3])
days = top[0].selectbox("Pruning horizon", list(HORIZONS), index=2, key=K("horizon"),
                        format_func=HORIZONS.get, help="List records that prune would take now or within this time")
queue = review_queue(view, view.state(), view.name, key_of(operator.clearance), days,
                     view.now().replace(second=0, microsecond=0).isoformat())
may_write = view.may("reinstate")[0]

# ----------------------------------------------------------------------------- contested

st.header(f"Contested ({queue.contested_total:,})")
if queue.contested_withheld:
    st.caption(f"{plural(queue.contested_withheld, 'more contested record')} beyond your clearance "
               "(counted, not shown).")

last = st.session_state.pop(K("outcome"), None)
if last:
    ok, line = last
    (st.success if ok else st.error)(md(line, 1500))

if not queue.contested:
    st.info("No contested record within your clearance.", icon=":material/task_alt:")


def _contesters(item: Any) -> list[str]:
    lines = []
    for c in item.contesters:
        how = " and ".join({"relation": "contested_by relation", "audit": "contest entry"}[v] for v in c.via)
        if c.record_id is None:
            lines.append(f"external reference: {clean(c.ref, 200)} ({how})")
        else:
            lines.append(f"{clean(c.label, 160)}  [{clean(c.record_id, 80)}] ({how})")
    if item.contesters_withheld:
        lines.append(f"+ {plural(item.contesters_withheld, 'record')} beyond your clearance (counted, not shown)")
    if not lines:
        lines.append("(nothing named: contested without a reference)")
    return lines


def pick(record_id: str) -> None:
    st.session_state[K("target")] = record_id


PER_PAGE = 20
pages = max(1, -(-len(queue.contested) // PER_PAGE))
page_no = min(int(st.session_state.get(K("contested_page"), 1) or 1), pages)
first = (page_no - 1) * PER_PAGE
if len(queue.contested) < queue.contested_total:
    st.caption(f"Listing the {len(queue.contested):,} most recently contested.")
for k, item in enumerate(queue.contested[first:first + PER_PAGE], start=first):
    with st.container(border=True):
        left, right = st.columns([1, 1])
        with left:
            st.caption("Contested record")
            st.text(clean(item.label, 300))
            r = item.record
            scope = clean(r.scope, 80) if r.scope else "(unscoped)"
            st.caption(f"{r.type.value} · {r.sensitivity.value} · {md(scope, 80)} · salience {r.salience:.3f} · "
                       f"id {md(r.id, 80)}")
        with right:
            st.caption("Contested by")
            if item.record.redacted:
                st.text("(withheld: the record is beyond your clearance, metadata only)")
            else:
                st.text("\n".join(_contesters(item)))
                when = item.contested_at or item.record.updated_at
                why = f": {clean(item.rationale, 300)}" if item.rationale else ""
                st.caption(f"since {format_time(when)[:16].replace('T', ' ')}{md(why, 320)}")
                if may_write:
                    st.button("Resolve…", key=K("pick", k), on_click=pick, args=(item.record.id,),
                              help="Choose this record in the Resolve section below")

if pages > 1:
    st.pagination(pages, key=K("contested_page"), default=page_no)

resolvable = [item for item in queue.contested if not item.record.redacted]
if resolvable:
    st.subheader("Resolve")
    if not may_write:
        st.info(f"Resolving needs the curator role; {md(operator.name, 80)} is a {operator.role.value}.",
                icon=":material/lock:")
    else:
        names = {item.record.id: item.label for item in resolvable}
        c = st.columns([3, 2])
        target = c[0].selectbox("Contested record", list(names), key=K("target"),
                                format_func=lambda rid: clean(names[rid], 120))
        action = c[1].radio("Resolution", list(RESOLVE), key=K("action"), horizontal=True,
                            format_func=lambda a: RESOLVE[a][0])
        label, what, destructive = RESOLVE[action]
        st.caption(what)
        new_record: dict[str, Any] | None = None
        problems: list[str] = []
        if action == "supersede":
            if st.session_state.get(K("json_for")) != target or K("json") not in st.session_state:
                try:  # a logged read: the template shows the record's content
                    seen = view.get(target)
                    doc = {} if seen.redacted else seen.to_json_dict()
                except MembraneError:
                    doc = {}
                for field in ("audit_log", "created_at", "updated_at", "redacted", "relations"):
                    doc.pop(field, None)
                for field in ("anchor_salience", "anchor_at"):
                    doc.get("lifecycle", {}).pop(field, None)
                if isinstance(doc.get("payload"), dict):
                    doc["payload"].pop("revision", None)
                if isinstance(doc.get("salience"), float):
                    doc["salience"] = round(doc["salience"], 4)
                doc = {"id": str(uuid.uuid4()), **{k: v for k, v in doc.items() if k != "id"}}
                st.session_state[K("json")] = json.dumps(doc, indent=2, ensure_ascii=False)
                st.session_state[K("json_for")] = target
            st.caption("The new record, prefilled from the contested one with a fresh id: correct what it says. "
                       "The engine adds the supersedes relation, the provenance and the revision links.")
            text = st.text_area("New record (Membrane JSON)", key=K("json"), height=260)
            try:
                new_record = json.loads(text)
                if not isinstance(new_record, dict):
                    problems.append("The new record must be a JSON object.")
            except ValueError as exc:
                problems.append(f"The new record is not valid JSON: {exc}")
        rationale = st.text_input("Rationale", key=K("rationale"), max_chars=MAX_RATIONALE_LENGTH,
                                  placeholder="Why: it becomes the audit entry's rationale").strip()

        def call_args() -> list[Any]:
            """The view's arguments (no actor: the view names the operator)."""
            if action == "supersede":
                return [target, new_record, rationale]
            return [target, rationale]

        if not rationale:
            st.caption("To preview: write a rationale.")
        for problem in problems:
            st.warning(md(problem, 500))
        if rationale and not problems:
            try:
                plan = view.preview(action, *call_args())
            except MembraneError as exc:
                st.error(f"The engine refuses: {md(str(exc), 1500)}")
            else:
                named = plan_names(view, plan)
                render_plan(plan, key=K("plan"), names=named)
                confirmed = True
                # Keyed by the record and the resolution: a confirmation (or a click) given for one
                # record never applies to another that took its place in the list.
                if destructive:
                    confirmed = st.checkbox(f"I confirm: {label.lower()} this record as previewed.",
                                            key=K("confirm", action, target))
                if st.button(f"Apply: {label.lower()}", type="primary", key=K("apply", action, target),
                             disabled=not confirmed):
                    try:  # the view checks the role and the clearance, as stored now
                        done = getattr(view, action)(*call_args())
                        st.session_state[K("outcome")] = (True, f"{label} done for “{names[target]}”: "
                                                                  f"{outcome_line(done, named)}")
                    except MembraneError as exc:
                        st.session_state[K("outcome")] = (False, f"{label} refused: {exc}")
                    st.session_state[K("reset")] = True
                    st.rerun()

# ----------------------------------------------------------------------------- about to be pruned

st.header(f"About to be pruned ({queue.pruning_total:,})")
st.caption(f"Records prune would archive now or within {HORIZONS[days]}: not pinned, policy auto_prune, salience "
           f"falling below {queue.threshold:g}.")
if queue.pruning_withheld:
    st.caption(f"{plural(queue.pruning_withheld, 'more record')} beyond your clearance (counted, not shown).")
show_results(K("prune"))
if not queue.pruning:
    st.info(f"Nothing within your clearance will be pruned within {HORIZONS[days]}.", icon=":material/task_alt:")
else:
    now = queue.as_of

    def when(p: Any) -> str:
        if p.eligible_now:
            return "now"
        hours = (p.prune_at - now).total_seconds() / 3600
        return f"in {hours:.0f} h" if hours < 48 else f"in {hours / 24:.1f} days"

    frame = pd.DataFrame([{
        "record": clean(p.label, 200), "type": p.type, "salience": p.salience, "prunes": when(p),
        "at": format_time(p.prune_at)[:16].replace("T", " "), "id": clean(p.record_id, 200),
    } for p in queue.pruning])
    st.dataframe(frame, hide_index=True, width="stretch", key=K("prune_table"),
                 column_config={"record": st.column_config.TextColumn(width="large"),
                                "salience": st.column_config.NumberColumn(format="%.5f")})
    if len(queue.pruning) < queue.pruning_total:
        st.caption(f"Showing the first {len(queue.pruning):,} (soonest first).")
    full = [p for p in queue.pruning if not p.redacted]
    pick = {p.record_id: p.label for p in full}
    if may_write and pick:
        if st.button(f"Select all {plural(len(pick), 'listed record')}", key=K("prune_all")):
            st.session_state[K("prune_ids")] = list(pick)
        chosen = st.multiselect("Records to act on", list(pick), key=K("prune_ids"),
                                format_func=lambda rid: clean(pick.get(rid, rid), 120))
        if chosen:
            with st.container(border=True):
                bulk_panel(view, chosen, key=K("prune"), ops=["reinforce", "pin", "delete"],
                           op_names={"delete": "Let go (archive now)"}, title=f"Keep or let go: {plural(len(chosen), 'record')}")
    elif not may_write:
        st.info(f"Reinforcing, pinning or letting go needs the curator role; {md(operator.name, 80)} is a "
                f"{operator.role.value}.", icon=":material/lock:")
