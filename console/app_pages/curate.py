"""Curate: the SPEC 6 operations on one record or a selection, each previewed by the engine
before it is applied, with the signed-in operator as the actor and a rationale on every audit
entry. Everything goes through the operator's view: it names the actor, and checks the role and
the clearance (as stored at that moment) at each preview and each write."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pandas as pd
import streamlit as st

from console import keys
from console.components.guard import sentence
from console.components.words import plural
from console.components.exposure_view import preview_profiles, show_exposures, widening_confirmed
from console.components.page import page_preamble
from console.components.plan_view import outcome_line, plan_names, render_plan, status_of
from console.components.record_picker import record_picker
from console.components.safe import clean, md
from console.keys import Param
from membrane_engine import (ACTION_ROLES, MAX_RATIONALE_LENGTH, MAX_REF_LENGTH, Role, Sensitivity, permits,
                             plan_exposures)
from membrane_engine.errors import MembraneError, ValidationError

K = keys.CURATE

# op -> (label, what it does, destructive, targets): targets "each" = every selected record on its
# own, "one" = exactly one source plus a new record, "many" = the selection plus a new record,
# "archive" = ids from the archive.
OPS: dict[str, tuple[str, str, bool, str]] = {
    "reinforce": ("Reinforce", "Raise salience by the reinforcement gain (capped at 1) and restart decay from now.", False, "each"),
    "penalize": ("Penalize", "Lower salience by an amount (never below the record's min salience floor, never up).", True, "each"),
    "retract": ("Retract", "Salience 0; a semantic record's status becomes retracted. The record stays in the store.", True, "each"),
    "contest": ("Contest", "Mark a semantic record contested by another record or an external reference.", False, "each"),
    "supersede": ("Supersede", "Retract one record and create its replacement (a new record you edit below).", True, "one"),
    "fork": ("Fork", "Create a new record derived from one source; the source is unchanged.", False, "one"),
    "merge": ("Merge", "Retract every selected record and create one merged record derived from each.", True, "many"),
    "pin": ("Pin", "Freeze salience at its current value.", False, "each"),
    "unpin": ("Unpin", "Restart decay from the current salience.", False, "each"),
    "reclassify": ("Reclassify", "Change sensitivity, scope and/or tags.", False, "each"),
    "delete": ("Delete (archive)", "Move the record to the archive; restore brings it back. Refused for policy 'never'.", True, "each"),
    "restore": ("Restore from archive", "Bring an archived (pruned or deleted) record back as it was.", False, "archive"),
}
NEW_RECORD_NAMES = {"supersede": "new_record", "fork": "forked_record", "merge": "merged_record"}
RESULTS_KEY = K("results")
RESET_KEY = K("reset")
UNCHANGED = "(unchanged)"

page = page_preamble(K, "Curate",
                     "Every change is previewed by the engine first (nothing is written until you apply), names you "
                     "as the actor, carries your rationale into the audit log, and runs as one transaction per "
                     "operation.")
view = page.view
operator_ = page.operator


def reset_selection() -> None:
    """Forget the chosen records and the confirmations: after an Apply and when the operation
    changes, so the next (perhaps destructive) operation never acts on a record chosen for
    another one. Values are assigned, not removed, so the browser's copies clear too; a link's
    `?id=` is dropped with them, so it does not choose them again."""
    st.session_state[K("ids")] = []
    st.session_state[K("archived")] = []
    st.session_state[K("query")] = ""
    st.session_state[K("confirm")] = False
    st.session_state[K("widen")] = False
    st.session_state.pop(K("json_for"), None)  # a fresh template (and id) for the next new record
    if Param.ID in st.query_params:
        del st.query_params[Param.ID]


def operation_changed() -> None:
    reset_selection()
    st.session_state.pop(RESULTS_KEY, None)  # the last outcome belongs to the previous operation


# Clear the inputs of an applied action before its widgets are drawn again.
if st.session_state.pop(RESET_KEY, False):
    st.session_state[K("rationale")] = ""
    reset_selection()


def problem_frame(problems: list[tuple[str, str]]) -> pd.DataFrame:
    """The engine's (field, message) pairs as an inert table (messages can quote record text)."""
    return pd.DataFrame([(clean(f, 200), clean(msg, 500)) for f, msg in problems], columns=["field", "message"])


# ----------------------------------------------------------------------------- who, what, on what

if not view.may("reinforce")[0]:
    who = f"{operator_.name} is a {operator_.role.value}"
    st.info(f"Curation needs the curator role; {who}.", icon=":material/lock:")
    st.stop()

# A link may open the page on a harmless operation, never on one that removes or rewrites
# records or needs the admin role: those are chosen here, by hand.
url_op = st.query_params.get(Param.OP)
if (K("op") not in st.session_state and url_op in OPS and not OPS[url_op][2]
        and ACTION_ROLES[url_op] is not Role.ADMIN):
    st.session_state[K("op")] = url_op
top = st.columns([2, 3])
top[0].text(f"Acting as {operator_.actor}")
op = top[1].selectbox("Operation", list(OPS), key=K("op"), on_change=operation_changed,
                      format_func=lambda o: OPS[o][0] + ("" if permits(operator_, o)[0] else " (admin only)"),
                      help="Changing the operation clears the records chosen and the confirmations")
label, what, destructive, targets = OPS[op]
allowed, why_not = view.may(op)
if destructive:
    st.warning(f"{what} Destructive: you will be asked to confirm.", icon=":material/warning:")
else:
    st.info(what, icon=":material/info:")

last = st.session_state.get(RESULTS_KEY)
if last:
    for ok, line, problems in last:
        (st.success if ok else st.error)(md(line, 1500))
        if problems:
            st.dataframe(problem_frame(problems), hide_index=True)

if targets == "archive":
    archived = view.archived_ids()
    if not archived:
        st.caption("The archive is empty: nothing has been pruned or deleted.")
    # Only ids the view listed stay chosen (a value sent from the browser is not an option by itself).
    sent = st.session_state.get(K("archived"), [])
    if isinstance(sent, (list, tuple)) and any(i not in archived for i in sent):
        st.session_state[K("archived")] = [i for i in sent if i in archived]
    ids = st.multiselect("Archived records", archived, key=K("archived"), format_func=lambda r: clean(r, 120),
                         help="Archived records are named by id: their content is in the archive")
else:
    # Only records the clearance sees in full: a curation shows and changes what a redacted view withholds.
    ids = record_picker(view, K.prefix, "Records" if targets != "one" else "Source record",
                        full_only=True, help="`?id=` in the URL preselects")
    if ids:
        current = []
        names = view.labels(ids)
        for rid in ids:
            try:
                r = view.get(rid)
            except MembraneError:  # gone, or beyond the clearance since it was picked
                continue
            current.append({"record": clean(names.get(rid, rid), 120), "type": r.type.value, "salience": r.salience,
                            "status": clean(status_of(r), 80), "pinned": r.lifecycle.pinned,
                            "policy": r.lifecycle.deletion_policy.value if r.lifecycle.deletion_policy else "", "sensitivity": r.sensitivity.value,
                            "scope": clean(r.scope, 200), "tags": clean(", ".join(r.tags), 300), "id": clean(rid, 200)})
        st.dataframe(pd.DataFrame(current), hide_index=True, key=K("current"),
                     column_config={"salience": st.column_config.NumberColumn(format="%.4f")})

# ----------------------------------------------------------------------------- parameters

kwargs: dict[str, Any] = {}
extra: list[Any] = []  # positional arguments between the id and the actor (penalize, contest)
new_record: dict[str, Any] | None = None
problems_before_preview: list[str] = []

if op == "reinforce":
    own_gain = st.checkbox("Use each record's own reinforcement gain", value=True, key=K("own_gain"))
    if not own_gain:
        kwargs["gain"] = st.number_input("Gain", min_value=0.0, max_value=1.0, value=0.1, step=0.05, key=K("gain"))
elif op == "penalize":
    extra = [st.number_input("Amount", min_value=0.0, value=0.1, step=0.05, format="%.3f", key=K("amount"))]
elif op == "contest":
    ref = st.text_input("Contesting reference", key=K("ref"), max_chars=MAX_REF_LENGTH,
                        help="A record id (a contested_by relation is added) or an external reference").strip()
    extra = [ref]
    if not ref:
        problems_before_preview.append("Name what contests the record (a record id or a reference).")
elif op == "reclassify":
    c1, c2, c3 = st.columns(3)
    sensitivity = c1.selectbox("Sensitivity", [UNCHANGED] + [s.value for s in Sensitivity], key=K("sens"))
    if sensitivity != UNCHANGED:
        kwargs["sensitivity"] = sensitivity
    if c2.checkbox("Change scope", key=K("scope_on")):
        kwargs["scope"] = c2.text_input("New scope (empty = unscoped)", key=K("scope")).strip()
    if c3.checkbox("Change tags", key=K("tags_on")):
        tags = c3.text_input("New tags (comma-separated)", key=K("tags"))
        kwargs["tags"] = [t.strip() for t in tags.split(",") if t.strip()]
elif targets in ("one", "many"):
    if targets == "one" and len(ids) > 1:
        problems_before_preview.append(f"{label} takes exactly one source record; {len(ids)} are selected.")
    source = ids[0] if ids else None
    if source is not None:
        if st.session_state.get(K("json_for")) != (op, source) or K("json") not in st.session_state:
            try:  # through the view: the template shows the source's content, so it is a logged read
                seen = view.get(source)
                doc = {} if seen.redacted else seen.to_json_dict()
            except MembraneError:
                doc = {}
            for k in ("audit_log", "created_at", "updated_at", "redacted"):
                doc.pop(k, None)
            for k in ("anchor_salience", "anchor_at"):
                doc.get("lifecycle", {}).pop(k, None)
            if isinstance(doc.get("salience"), float):
                doc["salience"] = round(doc["salience"], 4)
            doc = {"id": str(uuid.uuid4()), **{k: v for k, v in doc.items() if k != "id"}}
            st.session_state[K("json")] = json.dumps(doc, indent=2, ensure_ascii=False)
            st.session_state[K("json_for")] = (op, source)
        st.markdown(f"**The new record** (prefilled from {md(source, 120)} with a fresh id; the engine adds the "
                    "relations, provenance and revision links of the operation itself)")
        text = st.text_area("New record (Membrane JSON)", key=K("json"), height=320, label_visibility="collapsed")
        if st.button("New id and fresh template", key=K("json_reset")):
            st.session_state.pop(K("json_for"), None)
            st.rerun()
        try:
            new_record = json.loads(text)
            if not isinstance(new_record, dict):
                problems_before_preview.append("The new record must be a JSON object.")
                new_record = None
        except ValueError as exc:
            problems_before_preview.append(f"The new record is not valid JSON: {exc}")

rationale = st.text_area("Rationale", key=K("rationale"), height=80, max_chars=MAX_RATIONALE_LENGTH,
                         placeholder="Why: it becomes the audit entry's rationale").strip()

# ----------------------------------------------------------------------------- calls


def calls() -> list[tuple[str, list[Any], dict[str, Any]]]:
    """(label, args, kwargs) for each call of the view this action makes, in SPEC 8 argument
    order without the actor (the view names the operator)."""
    if targets in ("each", "archive"):
        return [(rid, [rid, *extra, rationale], kwargs) for rid in ids]
    if targets == "one":
        return [(ids[0], [ids[0], new_record, rationale], {})] if ids else []
    return [(", ".join(ids), [list(ids), new_record, rationale], {})] if ids else []


def describe(exc: Exception) -> tuple[str, list[tuple[str, str]]]:
    """The engine's refusal as a sentence (never a class name), and its (field, message) pairs."""
    return sentence(exc), list(exc.problems) if isinstance(exc, ValidationError) else []


missing = []
if not ids:
    missing.append(("choose the records" if targets == "many" else "choose the record")
                   if targets != "archive" else "choose archived records")
if not rationale:
    missing.append("write a rationale")
st.subheader("Preview")
if not allowed:
    st.info(f"{label} is not available to you: {why_not}.", icon=":material/lock:")
    st.stop()
if missing or problems_before_preview:
    if missing:
        st.caption("To preview: " + ", ".join(missing) + ".")
    for problem in problems_before_preview:
        st.warning(md(problem, 500))
    st.stop()

previews: list[tuple[str, Any, Exception | None]] = []
for name, args, kw in calls():
    try:
        previews.append((name, view.preview(op, *args, **kw), None))
    except Exception as exc:  # the engine's refusal is shown, never a traceback
        previews.append((name, None, exc))

failed = [(name, exc) for name, _, exc in previews if exc is not None]
for name, exc in failed:
    message, problems = describe(exc)
    st.error(f"{md(name, 200)}: {md(message, 1500)}")
    if problems:
        st.dataframe(problem_frame(problems), hide_index=True)
ok = [(name, plan) for name, plan, exc in previews if exc is None]
# Named as the preview saw them: after a delete, a record is no longer there to name itself.
named: dict[str, str] = {}
for k, (name, plan) in enumerate(ok):
    if len(ok) > 1:
        st.text(f"{label}: {clean(name, 160)}")
    names = plan_names(view, plan)
    named.update(names)
    render_plan(plan, key=K("preview", k), names=names)

if failed:
    st.warning("Fix or deselect the records the engine refuses; nothing is applied while any preview fails.")
    st.stop()

# Who gains access (SPEC 11): a change that widens any profile's access needs its own confirmation.
profiles, origin = preview_profiles(view)
exposures = plan_exposures([plan for _, plan in ok], profiles)
if exposures.counts and any(exposures.counts.values()):
    show_exposures(exposures, origin, key=K("exposure"))
access_ok = widening_confirmed(exposures, K("widen"))

confirmed = True
if destructive:
    count = len(ids)
    confirmed = st.checkbox(f"I confirm: {label.lower()} {plural(count, 'record')} as shown above.",
                            key=K("confirm"))
if st.button(f"Apply: {label.lower()}", type="primary", key=K("apply"), disabled=not (confirmed and access_ok)):
    # The view checks the role and the clearance here, at the moment of writing, as stored now
    # (not what the page showed): a viewer's session replaying a curator's events writes nothing.
    results = []
    # The widening confirmation is checked here too, in the run that applies.
    for name, args, kw in calls() if access_ok else []:
        try:
            plan = getattr(view, op)(*args, **kw)
            results.append((True, f"{label} done: {outcome_line(plan, named)}", []))
        except Exception as exc:  # report the engine's message, never a traceback
            message, problems = describe(exc)
            results.append((False, f"{label} refused for {name}: {message}", problems))
    if not access_ok:
        results.append((False, f"{label} not applied: it widens access and the widening is not confirmed.", []))
    st.session_state[RESULTS_KEY] = results
    st.session_state[RESET_KEY] = True
    st.rerun()
if destructive and not confirmed:
    st.caption("This operation is destructive: tick the confirmation to enable Apply.")
if not access_ok:
    st.caption("This change widens access: confirm it above to enable Apply.")
