"""Choosing records: a search box (id or tag) feeding a multiselect; `?id=` preselects.

Each option is named by what the record says (``view.labels``, gated by the operator's
clearance) and its type; the ids of the chosen records are in the widget's help.

Nothing the browser sends becomes an option by itself: the options are what the operator's view
returns (its search, and the chosen ids it confirms on this run), so a forged widget value or
``?id=`` naming a record beyond the clearance is dropped, never offered, labelled or returned."""

from __future__ import annotations

import streamlit as st

from console.keys import Param
from membrane_engine import OperatorView

from .safe import clean, md
from .words import distinct_names


def ids_from_url(live: set[str] | None = None) -> list[str]:
    """Ids named in the page URL: `?id=a&id=b` or `?id=a,b` (a value that is itself a live id
    is kept whole, so ids containing commas still work)."""
    out: list[str] = []
    for value in st.query_params.get_all(Param.ID):
        if live is not None and value in live:
            out.append(value)
        else:
            out.extend(part.strip() for part in value.split(",") if part.strip())
    return list(dict.fromkeys(out))


LABEL_LIMIT = 70  # characters of an option's name
MAX_IDS = 1000  # ids one picker confirms per run (a longer forged list is cut, not looked up)


def _offered(view: OperatorView, ids: list[str], full_only: bool) -> dict[str, str]:
    """Which of ``ids`` the picker may offer, with their labels: live records the view returns
    (with ``full_only``, those it sees in full). An id that is not a string, too long, or beyond
    the clearance is simply not offered."""
    ids = list(dict.fromkeys(i for i in ids if isinstance(i, str) and 0 < len(i) <= 512))[:MAX_IDS]
    if not ids:
        return {}
    named = view.labels(ids, limit=LABEL_LIMIT)
    if full_only:
        full = view.briefs(list(named))
        return {rid: name for rid, name in named.items() if rid in full}
    return named


def record_picker(view: OperatorView, key: str, label: str = "Records", *, full_only: bool = False,
                  from_url: bool = True, max_selections: int | None = None, limit: int = 200,
                  help: str | None = None) -> list[str]:
    """Search box plus multiselect; returns the chosen ids: live records the operator's view
    returns (with ``full_only``, sees in full). Others are "not in the store" here."""
    state_key = f"{key}_ids"
    if state_key not in st.session_state:
        raw = st.query_params.get_all(Param.ID) if from_url else []
        named = list(dict.fromkeys(raw + ids_from_url()))  # whole values too: an id may contain commas
        live = set(_offered(view, named, full_only)) if named else set()
        initial = ids_from_url(live) if from_url else []
        missing = [i for i in initial if i not in live]
        if missing:
            st.warning("Not in the store, or beyond your clearance: " + ", ".join(md(i, 80) for i in missing[:5]),
                       icon=":material/warning:")
        chosen = [i for i in initial if i in live]
        st.session_state[state_key] = chosen[:max_selections] if max_selections else chosen
    query = st.text_input("Find records by id, tag or name", key=f"{key}_query",
                          placeholder="part of an id, a tag or what the record says",
                          help="Case-insensitive substring match on ids, tags and the names the options show")
    hits = view.find(query, limit=limit, full_only=full_only)
    # The chosen ids come back from the browser: each run they are confirmed by the view, and
    # only what it returns stays chosen (set before the widget is drawn, so a forged one is gone).
    sent = st.session_state.get(state_key, [])
    sent = list(sent) if isinstance(sent, (list, tuple)) else []
    named = _offered(view, sent, full_only)
    chosen = list(dict.fromkeys(rid for rid in sent if isinstance(rid, str) and rid in named))
    if chosen != sent:
        st.session_state[state_key] = chosen
    options = list(dict.fromkeys(chosen + [h.id for h in hits]))
    types = {rid: b.type for rid, b in view.briefs(chosen).items()} if chosen else {}
    types.update((h.id, h.type) for h in hits)
    fresh = [h.id for h in hits if h.id not in named]
    named.update(view.labels(fresh, limit=LABEL_LIMIT) if fresh else {})  # the search applied full_only already
    named = distinct_names(named)  # records that say the same thing, told apart by a short id
    if query and not hits:
        st.caption("No record id, tag or name contains that text.")
    elif len(hits) >= limit:
        st.caption(f"Showing the first {limit} matches; type more to narrow the list.")

    def shown(rid: str) -> str:
        name = named.get(rid, rid)
        kind = types.get(rid)
        return clean(f"{name} · {kind}" if kind and not name.startswith("redacted ") else name, 120)

    ids_help = ("Chosen: " + ", ".join(md(r, 80) for r in chosen[:10])
                + (f" and {len(chosen) - 10:,} more" if len(chosen) > 10 else "")) if chosen else ""
    return st.multiselect(label, options, key=state_key, format_func=shown, max_selections=max_selections,
                          help="\n\n".join(part for part in (help, ids_help) if part) or None)
