"""One operation over many selected records: a chooser, one preview table, one confirmation, then
per-record results. The engine plans and applies through the operator's view
(``view.bulk_preview`` / ``bulk_apply``: one transaction and one audit entry per record, the role
and the clearance as stored at each call); this draws it.

The preview shown is the one applied: it is kept in the session until Apply, so a record another
operator changes in between is refused by the engine ("changed since the preview"), never
applied over what the operator did not see."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pandas as pd
import streamlit as st

from console.components.exposure_view import preview_profiles, show_exposures, widening_confirmed
from console.components.safe import clean, md
from console.components.words import plural
from membrane_engine import MAX_RATIONALE_LENGTH, MAX_REF_LENGTH, OperatorView, Sensitivity, permits, plan_exposures
from membrane_engine.errors import MembraneError

# op -> (label, what it does, destructive)
OPS: dict[str, tuple[str, str, bool]] = {
    "reinforce": ("Reinforce", "Raise salience by the reinforcement gain (capped at 1) and restart decay from now.", False),
    "pin": ("Pin", "Freeze salience at its current value.", False),
    "unpin": ("Unpin", "Restart decay from the current salience.", False),
    "penalize": ("Penalize", "Lower salience by an amount (never below the record's floor, never up).", True),
    "contest": ("Contest", "Mark semantic records contested by a record or an external reference.", False),
    "reinstate": ("Reinstate", "Bring contested semantic records back to active; salience unchanged.", False),
    "retract": ("Retract", "Salience 0; semantic records become retracted. The records stay in the store.", True),
    "reclassify": ("Reclassify", "Change sensitivity, scope and/or tags.", False),
    "delete": ("Delete (archive)", "Move the records to the archive (restore brings one back).", True),
}
UNCHANGED = "(unchanged)"


def _params(op: str, key: str) -> tuple[dict[str, Any], list[str]]:
    """The op's parameters from its widgets, and what is missing before a preview."""
    params: dict[str, Any] = {}
    missing: list[str] = []
    if op == "reinforce":
        if not st.checkbox("Use each record's own reinforcement gain", value=True, key=f"{key}_own_gain"):
            params["gain"] = st.number_input("Gain", min_value=0.0, max_value=1.0, value=0.1, step=0.05, key=f"{key}_gain")
    elif op == "penalize":
        params["amount"] = st.number_input("Amount", min_value=0.0, value=0.1, step=0.05, format="%.3f", key=f"{key}_amount")
    elif op == "contest":
        ref = st.text_input("Contesting reference", key=f"{key}_ref", max_chars=MAX_REF_LENGTH,
                            help="A record id (a contested_by relation is added) or an external reference").strip()
        params["contesting_ref"] = ref
        if not ref:
            missing.append("name what contests the records")
    elif op == "reclassify":
        c1, c2, c3 = st.columns(3)
        sensitivity = c1.selectbox("Sensitivity", [UNCHANGED] + [s.value for s in Sensitivity], key=f"{key}_sens")
        if sensitivity != UNCHANGED:
            params["sensitivity"] = sensitivity
        if c2.checkbox("Change scope", key=f"{key}_scope_on"):
            params["scope"] = c2.text_input("New scope (empty = unscoped)", key=f"{key}_scope").strip()
        if c3.checkbox("Change tags", key=f"{key}_tags_on"):
            tags = c3.text_input("New tags (comma-separated)", key=f"{key}_tags")
            params["tags"] = [t.strip() for t in tags.split(",") if t.strip()]
        if not params:
            missing.append("choose what to change")
    return params, missing


def _facts(record: Any) -> dict[str, str]:
    """What an operator checks before and after a change."""
    if record is None:
        return {}
    return {"salience": f"{record.salience:.4g}", "status": record.revision_status or "",
            "pinned": "pinned" if record.lifecycle.pinned else "not pinned", "sensitivity": record.sensitivity.value,
            "scope": record.scope or "(unscoped)", "tags": ", ".join(record.tags) or "(no tags)"}


def _fact(record: Any) -> str:
    facts = _facts(record)
    return ", ".join(v for k, v in facts.items() if v and k != "tags") if facts else ""


def change_text(change: Any) -> str:
    """Only what differs, "field before → after"; an archive says so."""
    if change.kind == "archive":
        return "moved to the archive"
    before, after = _facts(change.before), _facts(change.after)
    diffs = [f"{k} {before.get(k, '') or '—'} → {v or '—'}" for k, v in after.items() if before.get(k) != v]
    return "; ".join(diffs) or "unchanged (only the audit entry is written)"


def preview_frame(preview: Any, names: dict[str, str]) -> pd.DataFrame:
    """One row per record: what it is, what would change (or why it is refused)."""
    rows = []
    for item in preview.items:
        rid = item.record_id
        if item.ok:
            change = item.plan.change(rid)
            rows.append({"record": clean(names.get(rid, rid), 120), "will": "change",
                         "change": clean(change_text(change), 300), "now": clean(_fact(change.before), 200),
                         "why not": "", "id": clean(rid, 200)})
        else:
            rows.append({"record": clean(names.get(rid, rid), 120), "will": "be refused", "change": "", "now": "",
                         "why not": clean(item.error, 500), "id": clean(rid, 200)})
    return pd.DataFrame(rows, columns=["record", "will", "change", "why not", "now", "id"])


def results_frame(result: Any, names: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"record": clean(names.get(o.record_id, o.record_id), 120),
                          "result": "applied" if o.applied else "not applied",
                          "detail": clean(change_text(o.plan.change(o.record_id)) if o.applied else o.error, 500),
                          "id": clean(o.record_id, 200)} for o in result.outcomes],
                        columns=["record", "result", "detail", "id"])


def _fingerprint(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def show_results(key: str) -> None:
    """The per-record results of the last bulk apply made with this key (once)."""
    done = st.session_state.pop(f"{key}_results", None)
    if done is None:
        return
    line, frame, ok = done
    (st.success if ok else st.warning)(line)
    st.dataframe(frame, hide_index=True, key=f"{key}_results_table", width="stretch")


def bulk_panel(view: OperatorView, ids: list[str], key: str, ops: list[str] | None = None,
               title: str | None = None, op_names: dict[str, str] | None = None) -> None:
    """Choose an operation for ``ids``, preview it for every record at once, confirm, apply.
    ``ops``: the operations offered (default all of OPS); ``op_names``: other labels for some.
    ``ids`` may come from the browser: the view refuses (per record) any it does not see in full."""
    operator = view.operator
    count = len(ids)
    if st.session_state.pop(f"{key}_reset", False):  # an applied change: clear its inputs before they are drawn
        st.session_state[f"{key}_rationale"] = ""
    st.subheader(title or f"Apply to {plural(count, 'record')}")
    if not permits(operator, "reinforce")[0]:
        st.info(f"Changing records needs the curator role; {md(operator.name, 80)} is a {operator.role.value}.",
                icon=":material/lock:")
        return
    choices = ops or list(OPS)
    shown = {o: (op_names or {}).get(o, OPS[o][0]) for o in choices}
    op = st.selectbox("Operation", choices, key=f"{key}_op",
                      format_func=lambda o: shown[o] + ("" if permits(operator, o)[0] else " (admin only)"))
    label, what, destructive = OPS[op]
    label = shown[op]
    allowed, why_not = permits(operator, op)
    st.caption(what)
    params, missing = _params(op, key)
    rationale = st.text_input("Rationale", key=f"{key}_rationale", max_chars=MAX_RATIONALE_LENGTH,
                              placeholder="Why: it becomes every audit entry's rationale").strip()
    if not allowed:
        st.info(f"{label} is not available to you: {why_not}.", icon=":material/lock:")
        return
    if not rationale:
        missing.append("write a rationale")
    if missing:
        st.caption("To preview: " + ", ".join(missing) + ".")
        return
    # The preview shown is kept until it is applied or its inputs change (the module docstring).
    fingerprint = _fingerprint(op, ids, params, rationale, operator.actor)
    stash = f"{key}_preview"
    kept = st.session_state.get(stash)
    if kept is None or kept[0] != fingerprint or st.button("Preview again", key=f"{key}_again"):
        try:
            preview = view.bulk_preview(op, ids, rationale, **params)
        except MembraneError as exc:
            st.error(f"The engine refused: {md(str(exc), 1000)}")
            return
        # Each preview has a number of its own: its confirmation and its Apply button are keyed by
        # it, so a confirmation given for one preview never applies another (say, one made
        # because another operator's change took a record out of the selection).
        number = int(st.session_state.get(f"{key}_previews", 0)) + 1
        st.session_state[f"{key}_previews"] = number
        st.session_state[stash] = (fingerprint, preview, number)
    else:
        preview, number = kept[1], kept[2]
    names = view.labels(ids)  # the records named by what they say, as far as the clearance reads
    accepted, refused = len(preview.accepted), len(preview.refused)
    st.markdown(f"**Preview:** {label.lower()} {plural(accepted, 'record')}"
                + (f"; {plural(refused, 'record')} will be refused (see why below)" if refused else "") + ".")
    st.info(preview.policy, icon=":material/info:")
    st.dataframe(preview_frame(preview, names), hide_index=True, key=f"{key}_preview_table", width="stretch",
                 column_config={"record": st.column_config.TextColumn(width="medium"),
                                "will": st.column_config.TextColumn(width="small"),
                                "change": st.column_config.TextColumn(width="medium"),
                                "why not": st.column_config.TextColumn(width="medium"),
                                "now": st.column_config.TextColumn("now (before)", width="small")})
    if not accepted:
        st.warning("Nothing to apply: the engine refuses every selected record.")
        return
    profiles, origin = preview_profiles(view)
    exposures = plan_exposures([i.plan for i in preview.accepted], profiles)
    if exposures.counts and any(exposures.counts.values()):
        show_exposures(exposures, origin, key=f"{key}_exposure")
    access_ok = widening_confirmed(exposures, f"{key}_widen")
    confirmed = st.checkbox(f"I confirm: {label.lower()} {plural(accepted, 'record')} as previewed, one "
                            "transaction and one audit entry each.", key=f"{key}_confirm_{number}")
    if st.button(f"Apply to {plural(accepted, 'record')}", type="primary", key=f"{key}_apply_{number}",
                 disabled=not (confirmed and access_ok)):
        if not (confirmed and access_ok):
            st.error("Not applied: the preview is not confirmed.")
            st.stop()
        try:  # the view checks the role, the clearance and who made the preview, as stored now
            result = view.bulk_apply(preview)
        except MembraneError as exc:
            st.error(f"Not applied: {md(str(exc), 1000)}")
            st.stop()
        done, failed = len(result.applied), len(result.failed)
        line = f"{label} applied to {plural(done, 'record')}" + (f"; {failed} not applied" if failed else "") + "."
        names = {**names, **view.labels(ids)}
        st.session_state[f"{key}_results"] = (line, results_frame(result, names), not failed)
        st.session_state.pop(stash, None)
        st.session_state[f"{key}_reset"] = True
        st.rerun()


__all__ = ["OPS", "bulk_panel", "change_text", "preview_frame", "results_frame", "show_results"]
