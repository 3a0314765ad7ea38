"""What-if: two trust contexts side by side and every record whose verdict differs between them.

The diff runs vectorized in the engine (the operator's view: ``view.compare``) over the records
the operator's clearance sees, those beyond it one total; only the changed rows on the page shown
are explained. Nothing is written.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from console import keys, state
from console.components.charts import style
from console.components.colours import VERDICT_COLORS
from console.components.page import ignored, page_preamble
from console.components.record_card import explorer_href, record_card, show_explanation
from console.components.safe import clean
from console.components.trust_form import (BASE, LAYERS, SENSITIVITIES, context_from_query, context_query, fill,
                                           trust_context_form)
from console.components.words import plural
from console.keys import Param
from membrane_engine.errors import NotFoundError

K, A, B = keys.WHAT_IF, keys.WHAT_IF_A, keys.WHAT_IF_B  # the page, and its two trust context forms
PAGE_SIZE = 25
VERDICT_RANK = {"hidden": 0, "redacted": 1, "full": 2}
ARROW = "→"

page = page_preamble(K, "What-if",
                     "Compare two trust contexts: how many records each sees, and exactly which records change verdict "
                     "(hidden → redacted, redacted → full, ...) with the engine's reasons on both sides.")
view = page.view


def proposed_change(a: dict) -> dict:
    """B starts as a copy of A with one proposed change: max sensitivity one level up (down at hyper)."""
    level = SENSITIVITIES.index(a["max_sensitivity"])
    b = dict(a)
    b["max_sensitivity"] = SENSITIVITIES[level + 1] if level + 1 < len(SENSITIVITIES) else SENSITIVITIES[level - 1]
    b["actor_id"] = a["actor_id"]
    return b


def current(key: str) -> dict:
    return {
        "max_sensitivity": st.session_state.get(f"{key}_max_sensitivity", "medium"),
        "scopes": list(st.session_state.get(f"{key}_scopes", [])),
        "actor_id": st.session_state.get(f"{key}_actor_id", ""),
        "authenticated": bool(st.session_state.get(f"{key}_authenticated", True)),
    }


def copy_a_to_b(change: bool) -> None:
    values = proposed_change(current(A.prefix)) if change else current(A.prefix)
    for field, value in values.items():
        st.session_state[B(field)] = value
    st.session_state[B("preset")] = "Custom"


scopes = view.scopes()
# Both contexts live in the URL (a_* and b_* parameters), so a comparison can be shared and Back /
# Forward restore it; context A is the session's shared trust context when the URL names none.
seed = page.seed_from_url((*state.trust_widgets(A.prefix), *state.trust_widgets(B.prefix), K("types")),
                          drawn=A("max_sensitivity"), trust_prefix=Param.CONTEXT_A)
if seed is not None:
    url_a, problems_a = context_from_query(Param.CONTEXT_A, seed)
    url_b, problems_b = context_from_query(Param.CONTEXT_B, seed)
    fill(A.prefix, url_a)
    fill(B.prefix, url_b or proposed_change({**BASE, **url_a}))
    st.session_state[K("types")] = [t for t in seed.get(Param.TYPES, "").split(",") if t in LAYERS]
    page.link_problems([ignored(p) for p in problems_a + problems_b])
else:
    page.link_problems()
col_a, col_b = st.columns(2, gap="large")
with col_a:
    st.subheader("Context A")
    trust_a = trust_context_form(A.prefix, scopes)
with col_b:
    st.subheader("Context B")
    trust_b = trust_context_form(B.prefix, scopes)
    b1, b2 = st.columns(2)
    b1.button("Copy A to B", on_click=copy_a_to_b, args=(False,), width="stretch", key=K("copy"))
    b2.button("A with max sensitivity +1", on_click=copy_a_to_b, args=(True,), width="stretch", key=K("propose"))

types = st.multiselect("Only these memory types", LAYERS, key=K("types"), help="Empty compares every layer")
shared = {**context_query(Param.CONTEXT_A, trust_a), **context_query(Param.CONTEXT_B, trust_b)}
if types:
    shared[Param.TYPES] = ",".join(types)
page.keep_in_url(shared, trust_prefix=Param.CONTEXT_A)

diff = view.compare(trust_a, trust_b, memory_types=types, limit=0)
st.divider()
# Every count below is over the records your clearance sees; the others are this one total
# (counted now over every type, so no choice on the page breaks it down).
beyond = view.beyond_clearance()
if beyond:
    st.caption(f"{plural(beyond, 'record')} beyond your clearance: not compared here.")

cols = st.columns(6)
cols[0].metric("Records compared", f"{diff.total:,}",
               help="The live records of the chosen memory types (all when none is chosen) that your clearance sees, "
                    "every one judged under both contexts")
cols[1].metric("Verdict changes", f"{diff.changed:,}",
               help="Records whose verdict (full, redacted, hidden) under B differs from their verdict under A")
VERDICT_HELP = {"full": "sensitivity at or below the context's max and scope allowed: seen whole",
                "redacted": "sensitivity one level above the context's max, scope allowed: metadata only"}
for i, verdict in enumerate(("full", "redacted")):
    cols[2 + 2 * i].metric(f"{verdict.capitalize()} under A", f"{diff.counts_a[verdict]:,}",
                           help=f"Records context A gets {verdict}: {VERDICT_HELP[verdict]}")
    gap = diff.counts_b[verdict] - diff.counts_a[verdict]
    cols[3 + 2 * i].metric(f"{verdict.capitalize()} under B", f"{diff.counts_b[verdict]:,}",
                           delta=f"{gap:+,} vs A" if gap else "same as A", delta_color="off",
                           delta_arrow="auto" if gap else "off",
                           help=f"Records context B gets {verdict}: {VERDICT_HELP[verdict]}; the delta is B less A")

left, right = st.columns([3, 2])
with left:
    fig = go.Figure()
    for verdict in ("full", "redacted", "hidden"):
        fig.add_bar(y=["A", "B"], x=[diff.counts_a[verdict], diff.counts_b[verdict]], name=verdict, orientation="h",
                    marker_color=VERDICT_COLORS[verdict], hovertemplate="%{y}: %{x} " + verdict + "<extra></extra>")
    fig.update_layout(barmode="stack", legend=dict(orientation="h", y=-0.3, traceorder="normal"))
    fig.update_yaxes(autorange="reversed", type="category")
    st.plotly_chart(style(fig, height=180), width="stretch", key=K("bar"))
with right:
    st.markdown("**Changes by kind**")
    if diff.transitions:
        st.dataframe(pd.DataFrame([{"A": a, ARROW: ARROW, "B": b, "records": n}
                                   for (a, b), n in sorted(diff.transitions.items(),
                                                           key=lambda kv: (VERDICT_RANK[kv[0][0]] - VERDICT_RANK[kv[0][1]], kv[0]))]),
                     hide_index=True, width="stretch", key=K("transitions"))
    else:
        st.text("(no record changes verdict)")

if not diff.changed:
    st.success("Both contexts see exactly the same records with the same verdicts.", icon=":material/check_circle:")
    st.stop()

st.subheader("Records whose verdict changes")
kinds = ["all"] + [f"{a} {ARROW} {b}" for (a, b) in diff.transitions]
kind = st.selectbox("Show", kinds, key=K("kind"))
transition = None if kind == "all" else tuple(kind.split(f" {ARROW} "))
n = view.compare(trust_a, trust_b, memory_types=types, transition=transition, limit=0).listed
if not n:
    st.stop()
pages = max(1, -(-n // PAGE_SIZE))
page_no = st.pagination(pages, key=K("page")) if pages > 1 else 1
offset = (min(max(1, int(page_no or 1)), pages) - 1) * PAGE_SIZE
shown = view.compare(trust_a, trust_b, memory_types=types, transition=transition, offset=offset, limit=PAGE_SIZE).rows
st.caption(f"Showing {offset + 1:,}–{offset + len(shown):,} of {plural(n, 'changed record')}. Gains first, then losses. "
           "Records hidden under both contexts never appear.")


def differing_reasons(record_id: str) -> tuple[str, str]:
    """The rules that changed the verdict: the engine's reasons on each side that the other side
    does not give, in full (every reason when the two sides give the same ones)."""
    try:
        ex_a, ex_b = view.explain(record_id, trust_a), view.explain(record_id, trust_b)
    except NotFoundError:
        return "(record removed)", "(record removed)"
    only_a = [r for r in ex_a.reasons if r not in ex_b.reasons] or ex_a.reasons
    only_b = [r for r in ex_b.reasons if r not in ex_a.reasons] or ex_b.reasons
    return "; ".join(only_a), "; ".join(only_b)


# What each says, only where a context sees it in full and your clearance may read it: a record
# neither context sees in full is named as redacted (its label is payload).
names = view.labels([c.id for c in shown if "full" in (c.before, c.after)])
names.update({c.id: f"redacted {c.type} record" for c in shown if c.id not in names})
rows = []
for c in shown:
    why_a, why_b = differing_reasons(c.id)
    # The rule that changed it: the reason of the stricter side (what withholds the record there).
    stricter_a = VERDICT_RANK[c.before] < VERDICT_RANK[c.after]
    rows.append({"record": clean(names.get(c.id, c.id), 120), "A": c.before, "B": c.after,
                 "rule that changed it": clean(f"under {'A' if stricter_a else 'B'}: " + (why_a if stricter_a else why_b)),
                 "why under A": clean(why_a), "why under B": clean(why_b), "type": c.type,
                 "sensitivity": c.sensitivity, "scope": clean(c.scope, 200) if c.scope else "(unscoped)",
                 "id": clean(c.id, 200), "explorer": explorer_href(c.id)})
event = st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K("rows", offset, kind),
                     on_select="rerun", selection_mode="single-row",
                     column_config={"record": st.column_config.TextColumn(width="medium", pinned=True),
                                    "A": st.column_config.TextColumn(width="small"),
                                    "B": st.column_config.TextColumn(width="small"),
                                    "rule that changed it": st.column_config.TextColumn(width="large"),
                                    "why under A": st.column_config.TextColumn(width="large"),
                                    "why under B": st.column_config.TextColumn(width="large"),
                                    "explorer": st.column_config.LinkColumn("explorer", display_text="Open")})
picked = event.selection.rows if event is not None and hasattr(event, "selection") else []
if picked:
    change = shown[picked[0]]
    st.markdown("**Selected record** as the more permissive of the two contexts sees it, within your clearance")
    try:
        shown_view = view.record_view(change.id, trust_a, trust_b)
    except NotFoundError:
        shown_view = None
        st.error("The record has been removed since.")
    if shown_view is None:
        st.info("Neither context sees this record any more: it has been reclassified since.")
    else:
        # Each context narrowed to your clearance by the view: what is shown is no wider than it.
        seen_record, best = shown_view
        why_a, why_b = differing_reasons(change.id)
        with st.container(border=True):
            st.markdown("**The rule that changed the verdict**")
            st.text(f"Under A ({change.before}): {clean(why_a)}")
            st.text(f"Under B ({change.after}): {clean(why_b)}")
        record_card(seen_record, verdict=best.value, key=K("selected"))
        ex_a, ex_b = st.columns(2)
        with ex_a:
            st.markdown("**Under A**")
            show_explanation(view.explain(change.id, trust_a))
        with ex_b:
            st.markdown("**Under B**")
            show_explanation(view.explain(change.id, trust_b))
else:
    st.caption("Select a row to see the rule that changed its verdict in full, and the record (metadata only when "
               "neither context sees it in full).")
