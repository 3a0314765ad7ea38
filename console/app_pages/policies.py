"""Policies: the policy file's agent profiles and assertions (SPEC 11), checked live against
the store, with the failing records and the engine's reasons, and what the file covers.

Evaluation is the engine's (membrane_engine.policy.check.check, the same as `membrane-console
check`); nothing is written. Failing records are listed only as far as the signed-in
operator's clearance reaches: above it, counts.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from console import auth, keys
from console.components import policy_source
from console.components.audit_table import link_column, record_link
from console.components.colours import ASSERTION_STYLES
from console.components.page import page_preamble
from console.components.safe import clean, md
from console.components.words import plural
from membrane_engine import covers

K = keys.POLICIES
page = page_preamble(K, "Policies",
                     "Agent profiles and assertions about what each may see, written down in a TOML file and checked "
                     "like tests (`membrane-console check FILE` in CI). Nothing here writes to the store.",
                     clearance_caption=False)
view = page.view

REFUSED_KEY = K("upload_refused")  # why the last file sent was not used


def _uploaded() -> None:
    """Kept apart from the widget, whose value Streamlit drops while another page is shown: only
    the operator adding or removing a file changes the session's policy. The file is parsed
    here, once, not on every run of a page that uses it."""
    st.session_state.pop(REFUSED_KEY, None)
    upload = st.session_state.get(K("file"))
    if upload is None:
        policy_source.drop_upload()
        return
    refused = policy_source.take_upload(upload.name, upload.size, upload.getvalue, auth.current())
    if refused:
        st.session_state[REFUSED_KEY] = refused


may_replace, why_not = view.may(policy_source.REPLACE_ACTION)
with st.expander("Use another policy file", expanded=False):
    if may_replace:
        # max_upload_size (whole MB) has the browser refuse a large file before sending it;
        # take_upload holds the real limit.
        st.file_uploader("Policy file (TOML)", type=["toml"], key=K("file"), on_change=_uploaded,
                         max_upload_size=1,
                         help=f"At most {policy_source.MAX_UPLOAD_BYTES // 1024} KB. Used for this session: this "
                              "page, the previews of Curate and Import, and the profile presets of the trust forms")
    else:
        st.caption(f"Only a curator or an admin can use another policy file for the session ({md(why_not, 200)}). "
                   "The checks below are of the console's policy file.")
if st.session_state.get(REFUSED_KEY):
    st.error(md(st.session_state[REFUSED_KEY], 500), icon=":material/block:")

source = policy_source.active(view)
st.text(f"Policy file: {clean(source.label, 300)}")
if source.error is not None:
    st.error(f"The policy file is invalid: {len(source.error.located)} problem(s). `membrane-console check` "
             "exits 2 on it.", icon=":material/error:")
    st.dataframe(pd.DataFrame([{"line": line, "key": clean(key, 200), "problem": clean(msg, 500)}
                               for line, key, msg in source.error.located]), hide_index=True, key=K("errors"))
    st.stop()
if source.policy is None:
    st.info("No policy file is active. Start the console with `--policies FILE` (or set MEMBRANE_POLICIES), or "
            "(as a curator or admin) upload one above. The README shows the format.", icon=":material/info:")
    st.stop()

policy = source.policy
clearance = page.clearance


def evaluated(policy, state: tuple, clearance_key: str):
    """The check, the coverage and each profile's verdict counts over what the operator's
    clearance sees (the view's), kept for this session until the store, the clearance or the
    file changes (a rerun of the page, say a widget, costs nothing at 1M)."""
    kept = st.session_state.get(K("evaluated"))  # holds the policy itself: compared by identity
    if kept is None or kept[0][0] != (state, clearance_key) or kept[0][1] is not policy:
        kept = (((state, clearance_key), policy), view.check_policy(policy), view.policy_coverage(policy),
                view.policy_profile_counts(policy))
        st.session_state[K("evaluated")] = kept
    return kept[1:]


report, cov, profile_counts = evaluated(policy, view.state(), clearance.model_dump_json())
beyond = view.beyond_clearance()

# ----------------------------------------------------------------------------- summary

failed = report.failures
cols = st.columns(4)
cols[0].metric("Assertions", len(report.outcomes))
cols[1].metric("Holding", len(report.outcomes) - len(failed))
cols[2].metric("Failing", len(failed))
cols[3].metric("Records covered", f"{report.covered:,} of {report.total:,}")

if beyond:  # a verdict over the whole store would tell something about records beyond the clearance
    st.info(f"{len(failed)} assertion(s) fail over the records you see. {plural(beyond, 'record')} beyond your "
            "clearance were not checked here: `membrane-console check` checks the whole store.",
            icon=":material/visibility_off:")
elif failed:
    st.error(f"{len(failed)} assertion(s) fail: `membrane-console check` would exit 1.", icon=":material/cancel:")
else:
    st.success("Every assertion holds: `membrane-console check` would exit 0.", icon=":material/check_circle:")

# ----------------------------------------------------------------------------- profiles

st.subheader("Profiles")
rows = []
for name, p in sorted(policy.profiles.items()):
    counts = profile_counts[name]
    wider = not covers(clearance, policy.trust(name))
    rows.append({"profile": clean(name, 80), "max sensitivity": p.max_sensitivity.value,
                 "scopes": clean(", ".join(p.scopes) or "(every scope)", 300), **counts,
                 "wider than your clearance": "yes: counted over what you see" if wider else "",
                 "description": clean(p.description, 300)})
st.dataframe(pd.DataFrame(rows), hide_index=True, key=K("profiles"))
st.caption("Pick a profile as the context on the Trust simulator, What-if and Selector pages (Preset: Profile: NAME).")

# ----------------------------------------------------------------------------- assertions

st.subheader("Assertions")
table = []
for o in report.outcomes:
    a = o.assertion
    rule = f"expect {a.expect.value}" if a.expect else " ".join(
        [f"{a.verdict.value}"] + [f"min {a.min}"] * (a.min is not None) + [f"max {a.max}"] * (a.max is not None))
    line = policy.lines[o.index] if o.index < len(policy.lines) else None
    table.append({"status": "holds" if o.passed else "FAILS", "line": line, "assertion": clean(o.title, 300),
                  "profile": clean(a.profile, 80), "records": clean(a.records.describe(), 300), "rule": rule,
                  "matched": o.matched, **o.counts, "result": clean(o.message, 500)})
st.dataframe(pd.DataFrame(table).style.map(ASSERTION_STYLES.get, subset=["status"]), hide_index=True, key=K("asserts"),
             column_config={"result": st.column_config.TextColumn(width="large")})


for o in failed:
    st.error(f"Fails: {md(o.title, 300)}: {md(o.message, 500)}", icon=":material/cancel:")
    visible = list(o.shown)  # the engine evaluated only the records the clearance sees
    if visible:
        # Metadata only: the records a failing assertion lists are the ones it says must not be
        # exposed (often secrets), and this page is read and shared as a report. Each id opens the
        # record in the explorer, where the operator's clearance decides what it shows.
        st.dataframe(pd.DataFrame([{
            "id": record_link(r.id), "type": r.type, "sensitivity": r.sensitivity,
            "scope": clean(r.scope or "(unscoped)", 120),
            "tags": clean(", ".join(r.tags), 300) if r.tags is not None else "",  # None: the profile sees nothing
            "verdict": r.verdict, "reasons (explain)": clean("; ".join(r.reasons), 600)} for r in visible]),
            hide_index=True, key=K("fail", o.index),
            column_config={"id": link_column("id"), "reasons (explain)": st.column_config.TextColumn(width="large")})
    withheld = o.offending - len(visible)
    if withheld:
        reason = "beyond the first listed"
        st.caption(f"{plural(withheld, 'more offending record')} not listed ({reason}).")
    if o.offending == 0:
        st.caption("No record is at fault: too few matching records have the verdict.")

# ----------------------------------------------------------------------------- coverage

st.subheader("Coverage")
c1, c2 = st.columns([2, 3])
with c1:
    st.metric("Records no assertion selects", f"{cov['records'] - cov['covered']:,}")
    unused = cov["profiles_unused"]
    if unused:
        st.warning("Profiles no assertion uses: " + md(", ".join(unused), 500))
    else:
        st.caption("Every profile has at least one assertion.")
    st.dataframe(pd.DataFrame([{"profile": clean(k, 80), "records its assertions select": v}
                               for k, v in cov["per_profile"].items()]), hide_index=True, key=K("cov_profiles"))
with c2:
    cov_rows = [{"by": dim, "value": clean(value, 120), "records": total, "not covered": missed}
                for dim, values in cov["by"].items() for value, (total, missed) in values.items()]
    st.dataframe(pd.DataFrame(cov_rows), hide_index=True, key=K("cov"))

# ----------------------------------------------------------------------------- snapshot

st.subheader("Snapshot")
st.caption("What each profile sees (id and verdict per record, sorted): commit it, and `membrane-console check "
           "FILE --against SNAPSHOT` fails when a profile gains access. It lists record ids only.")
if beyond:
    st.caption("Downloading a snapshot needs a clearance that sees every record: it names every record each "
               "profile sees, and one short of the store would make `--against` report changes that are not.")
elif st.button("Prepare the snapshot", key=K("snap")):
    st.download_button("Download snapshot (JSON lines)", "".join(view.policy_snapshot_lines(policy)),
                       file_name="policy-snapshot.jsonl",
                       mime="application/x-ndjson", key=K("snap_dl"))
