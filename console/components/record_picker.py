"""Choosing records: a search box (id or tag) feeding a multiselect; `?id=` preselects.

Each option is named by what the record says (``membrane_engine.labels``, gated by the
operator's clearance) and its type; the ids of the chosen records are in the widget's help."""

from __future__ import annotations

import streamlit as st

from membrane_engine import Membrane, TrustContext
from membrane_engine.labels import labels as record_labels
from membrane_engine.lookups import briefs, search_records

from .safe import clean, md


def ids_from_url(live: set[str] | None = None) -> list[str]:
    """Ids named in the page URL: `?id=a&id=b` or `?id=a,b` (a value that is itself a live id
    is kept whole, so ids containing commas still work)."""
    out: list[str] = []
    for value in st.query_params.get_all("id"):
        if live is not None and value in live:
            out.append(value)
        else:
            out.extend(part.strip() for part in value.split(",") if part.strip())
    return list(dict.fromkeys(out))


def _offered(membrane: Membrane, ids: list[str], clearance: TrustContext, full_only: bool) -> set[str]:
    """Which of ``ids`` the picker may offer: live records the clearance sees (in full)."""
    wanted = {"full"} if full_only else {"full", "redacted"}
    live = set(membrane.ids()) & set(ids)
    return {rid for rid, v in membrane.explain_many(sorted(live), clearance).items() if v.value in wanted} if live else set()


def record_picker(membrane: Membrane, key: str, label: str = "Records", *, clearance: TrustContext,
                  full_only: bool = False, from_url: bool = True, max_selections: int | None = None,
                  limit: int = 200, help: str | None = None) -> list[str]:
    """Search box plus multiselect; returns the chosen ids: live records the operator's
    ``clearance`` sees (with ``full_only``, sees in full). Others are "not in the store" here."""
    state_key = f"{key}_ids"
    if state_key not in st.session_state:
        raw = st.query_params.get_all("id") if from_url else []
        named = list(dict.fromkeys(raw + ids_from_url()))  # whole values too: an id may contain commas
        live = _offered(membrane, named, clearance, full_only) if named else set()
        initial = ids_from_url(live) if from_url else []
        missing = [i for i in initial if i not in live]
        if missing:
            st.warning("Not in the store, or beyond your clearance: " + ", ".join(md(i, 80) for i in missing[:5]),
                       icon=":material/warning:")
        chosen = [i for i in initial if i in live]
        st.session_state[state_key] = chosen[:max_selections] if max_selections else chosen
    query = st.text_input("Find records by id or tag", key=f"{key}_query", placeholder="part of an id or a tag",
                          help="Case-insensitive substring match on ids and tags")
    hits = search_records(membrane, query, limit=limit, clearance=clearance, full_only=full_only)
    chosen = list(st.session_state.get(state_key, []))
    options = list(dict.fromkeys(chosen + [h.id for h in hits]))
    types = {rid: b.type for rid, b in briefs(membrane, options).items()}
    named = record_labels(membrane, options, clearance, limit=70)  # only what the clearance may read
    if query and not hits:
        st.caption("No record id or tag contains that text.")
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
