"""Record explorer: filter and search the store (paged in the engine), open a record in a dialog,
and apply one operation to many selected records.

Everything comes through the signed-in operator's view (the engine gates: above the clearance a
record is redacted or absent, and every record shown in full is logged as the operator's read).
Selecting one row (or ``?id=RECORD`` in the URL) opens that record in a dialog; selecting several
offers "Apply to N records" (components/bulk_view.py).
"""

from __future__ import annotations

import hashlib
import json
from functools import partial

import pandas as pd
import streamlit as st

from console import keys
from console.components.clearance import key_of
from console.components.bulk_view import bulk_panel, show_results
from console.components.graph_view import neighbourhood
from console.components.page import page_preamble
from console.components.record_detail import render_record
from console.components.safe import clean, md
from console.components.time_picker import instant_picker
from console.components.trust_form import LAYERS, SENSITIVITIES
from console.keys import Param
from membrane_engine import MAX_SEARCH_TEXT_LENGTH, NO_STATUS, SORTS, Filters, RevisionStatus, format_time
from membrane_engine.errors import MembraneError, NotFoundError

K = keys.RECORDS
PAGE_SIZES = [25, 50, 100, 250]
STATUSES = [s.value for s in RevisionStatus] + [NO_STATUS]

page = page_preamble(K, "Record explorer", "The records of the store, filtered and searched by the engine.")
view = page.view
clearance = page.clearance


@st.cache_data(show_spinner=False, max_entries=16)
def _tags(_view, store: tuple, cleared: tuple) -> dict[str, int]:
    return _view.tag_counts()


@st.cache_data(show_spinner=False, max_entries=256)
def _incoming(_view, store: tuple, record_id: str, cleared: tuple) -> list[str]:
    return _view.referencing(record_id)


def open_record(record_id: str) -> None:
    st.query_params[Param.ID] = record_id
    st.session_state[K("id_box")] = record_id


def close_record() -> None:
    st.query_params.pop(Param.ID, None)
    st.session_state[K("id_box")] = ""


def open_from_box() -> None:
    value = st.session_state.get(K("id_box"), "").strip()
    if value:
        st.query_params[Param.ID] = value
    else:
        st.query_params.pop(Param.ID, None)


def select_rows(table_key: str, ids_key: str) -> None:
    """A selection changed: one row opens its record; several are kept for bulk work."""
    state_ = st.session_state.get(table_key)
    rows = state_.selection.rows if state_ is not None else []
    ids = st.session_state.get(ids_key, [])
    chosen = [ids[r] for r in rows if r < len(ids)]
    st.session_state[K("selected")] = chosen
    if len(chosen) == 1:
        open_record(chosen[0])
    else:
        close_record()


@st.dialog("Record", width="large", on_dismiss=close_record)
def record_dialog() -> None:
    """The record of ``?id=`` as the clearance sees it (read inside the dialog, so a relation
    opened from it replaces it)."""
    record_id = st.query_params.get(Param.ID, "")
    try:
        # Opening a record is a read the view logs ("who looked", SPEC 10). A record seen
        # redacted is read as it is now: its salience at another instant would tell its decay,
        # which the redacted view withholds.
        record = view.get(record_id)
        if as_of is not None and not record.redacted:
            record = view.get(record_id, as_of=as_of)
    except NotFoundError:
        st.error(f"No live record with id {md(record_id, 200)} within your clearance (it may have been pruned "
                 "or deleted; the Audit log page shows archived records).")
        return
    title = view.labels([record.id]).get(record.id, "")
    st.markdown(f"**{md(title, 200)}**" if title else "**(no label)**")
    st.code(clean(record.id, 300), language=None)
    targets = [r.target_id for r in record.relations]
    # A target the view does not return is "not in the store" as far as this page can say.
    known = set(view.labels(targets)) if targets else set()
    render_record(view, record, on_open=open_record, key=K("detail"), known=known,
                  referenced_by=None if record.redacted else _incoming(view, store, record.id, key_of(clearance)),
                  as_of=None if record.redacted else as_of)
    neighbourhood(view, record.id, key=K("hood"), as_of=as_of)


store = view.state()
tags_available = _tags(view, store, key_of(clearance))
selected_id = st.query_params.get(Param.ID, "")
if K("id_box") not in st.session_state:
    st.session_state[K("id_box")] = selected_id

# ---------------------------------------------------------------------------- filters

with st.container(border=True):
    c = st.columns([3, 2, 2, 2])
    text = c[0].text_input("Search", key=K("text"), max_chars=MAX_SEARCH_TEXT_LENGTH, placeholder="id, tag or any text in the record",
                           help="Case-insensitive substring of the id, a tag or anything in the record's JSON")
    types = c[1].multiselect("Type", LAYERS, key=K("types"))
    sens = c[2].multiselect("Sensitivity", SENSITIVITIES, key=K("sens"))
    scope_options = [""] + view.scopes()
    scopes = c[3].multiselect("Scope", scope_options, key=K("scopes"),
                              format_func=lambda s: s if s else "(unscoped)")
    c = st.columns([3, 2, 2, 2])
    tags = c[0].multiselect("Tags (all of)", list(tags_available), key=K("tags"),
                            format_func=lambda t: f"{t} ({tags_available.get(t, 0):,})")
    statuses = c[1].multiselect("Revision status", STATUSES, key=K("status"),
                                help="Semantic records carry a revision status; 'none' selects records without one")
    low, high = c[2].slider("Salience at as-of", 0.0, 1.0, (0.0, 1.0), step=0.01, key=K("salience"),
                            help="The upper end at 1.00 includes everything above 1")
    sort = c[3].selectbox("Sort by", SORTS, key=K("sort"),
                          format_func=lambda s: {"salience": "salience (highest first)", "newest": "newest first",
                                                 "oldest": "oldest first", "id": "id"}[s])
    c = st.columns([3, 2, 2, 2])
    with c[0]:
        as_of = instant_picker(K("as_of"), "As of", help="Salience is S(t) at this instant.")
    page_size = c[1].selectbox("Rows per page", PAGE_SIZES, index=1, key=K("page_size"))

filters = Filters(types=types, sensitivities=sens, scopes=scopes, tags=tags, statuses=statuses,
                  salience_min=low if low > 0 else None, salience_max=high if high < 1.0 else None, text=text)
when = as_of or view.now()
fingerprint = hashlib.sha1(json.dumps([filters.__dict__, sort, page_size, str(as_of)], sort_keys=True,
                                      default=str).encode()).hexdigest()[:10]
page_key = K("page", fingerprint)
page_no = int(st.session_state.get(page_key, 1) or 1)
try:
    total, found = view.search(filters, offset=(page_no - 1) * page_size, limit=page_size, sort=sort, as_of=when)
except MembraneError as exc:
    st.error(f"The engine refused the search: {exc}")
    st.stop()
pages = max(1, -(-total // page_size))
if page_no > pages:  # the store shrank under us
    page_no = 1
    total, found = view.search(filters, offset=0, limit=page_size, sort=sort, as_of=when)

head = st.columns([1, 1, 3])
head[0].metric("Matching records", f"{total:,}")
head[1].metric("In the store", f"{view.count():,}", help="Records your clearance sees")

show_results(K("bulk"))
selected: list[str] = []
if not total:
    st.info("No record matches these filters.")
else:
    offset = (page_no - 1) * page_size
    st.caption(f"Showing {offset + 1:,}–{offset + len(found):,} of {total:,}. Select a row to open the record; "
               "select several to apply one operation to all of them.")
    ids_key = K("page_ids")
    st.session_state[ids_key] = [r.id for r in found]
    # Each record named by what it says, as the clearance may read it (a redacted one by its type).
    names = view.labels([r.id for r in found])
    frame = pd.DataFrame([{
        "summary": clean(names.get(r.id, "") or r.id, 200), "type": r.type.value,
        # A redacted row's salience at another instant would tell its decay: shown only for now.
        "salience": round(r.salience, 4) if as_of is None or not r.redacted else None,
        "status": r.revision_status or "", "sensitivity": r.sensitivity.value,
        "scope": clean(r.scope, 200) if r.scope else "(unscoped)", "tags": clean(", ".join(r.tags), 300),
        "confidence": round(r.confidence, 3), "created": format_time(r.created_at)[:16].replace("T", " "),
        "id": clean(r.id, 200),
    } for r in found])
    # The selection is by row position: a page whose rows changed (a write re-sorted it) is a new
    # table with no selection, so a selection always names the records the operator ticked.
    rows_seen = hashlib.sha1("\n".join(st.session_state[ids_key]).encode()).hexdigest()[:10]
    table_key = K("table", fingerprint, page_no, rows_seen)
    event = st.dataframe(frame, hide_index=True, width="stretch", key=table_key,
                         on_select=partial(select_rows, table_key, ids_key), selection_mode="multi-row",
                         column_config={"summary": st.column_config.TextColumn(width="large", pinned=True),
                                        "salience": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0,
                                                                                   format="%.3f")})
    rows = event.selection.rows if event is not None else []
    page_ids = st.session_state[ids_key]
    selected = [page_ids[r] for r in rows if r < len(page_ids)]
    if pages > 1:
        st.pagination(pages, key=page_key, default=page_no)

# ---------------------------------------------------------------------------- many records

if len(selected) > 1:
    with st.container(border=True):
        bulk_panel(view, selected, key=K("bulk"))

# ---------------------------------------------------------------------------- one record

st.divider()
box = st.columns([4, 1])
box[0].text_input("Open record by id", key=K("id_box"), on_change=open_from_box,
                  placeholder="paste an id, or select a row above")
if st.query_params.get(Param.ID, ""):
    box[1].button("Close", on_click=close_record, key=K("close"), width="stretch")
    record_dialog()
