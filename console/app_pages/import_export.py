"""Import and export: Membrane JSON (an array) or JSONL in and out, all or nothing."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from console import auth, state
from console.cli import MAX_UPLOAD_MB
from console.components.clearance import describe, signed_in
from console.components.safe import clean, md
from console.components.exposure_view import preview_profiles, show_exposures, widening_confirmed
from console.components.trust_form import trust_context_form
from console.components.words import plural
from membrane_engine import Sensitivity
from membrane_engine.storage.columns import TYPE_NAMES
from membrane_engine.errors import AlreadyExistsError, MembraneError, ValidationError
from membrane_engine.exposure import import_exposures
from membrane_engine.imports import parse_text
from membrane_engine.clearance import scopes_seen
from membrane_engine.lookups import briefs, filter_ids
from membrane_engine.operators import permits
from membrane_engine.trust import narrowest

PARSED_KEY = "ie_parsed"
IMPORT_RESULT_KEY = "ie_import_result"
EXPORT_KEY = "ie_export"
UNSCOPED = "(unscoped)"
_RECORD_LOC = re.compile(r"^record (\d+)(?::\s*(.*))?$")


@st.cache_resource(show_spinner=False)
def export_root() -> tempfile.TemporaryDirectory:
    """Where this server writes export files, one folder per prepared export. A session's
    previous export is removed when it prepares another; what sessions leave behind goes with
    the server process (the directory's finalizer), instead of piling up in the temp folder."""
    return tempfile.TemporaryDirectory(prefix="membrane-export-")


def _remove_export(folder: Path) -> None:
    if folder.parent == Path(export_root().name):  # only a folder this page made
        shutil.rmtree(folder, ignore_errors=True)


operator = signed_in()
clearance = operator.clearance
m = state.membrane()

st.title("Import / export")
st.caption("Records travel in Membrane's JSON shape: a `.json` array or `.jsonl` (one record per line). An import "
           "is all or nothing: one bad record and nothing is written.")

tab_in, tab_out = st.tabs(["Import", "Export"])


def problem_rows(problems: list[tuple[str, str]], items: list[Any] | None) -> pd.DataFrame:
    """The engine's (location, message) pairs as index / id / field / message rows."""
    rows = []
    for loc, message in problems:
        match = _RECORD_LOC.match(loc)
        index = int(match.group(1)) if match else None
        field = (match.group(2) or "(record)") if match else loc
        rid = ""
        if index is not None and items is not None and 0 <= index < len(items) and isinstance(items[index], dict):
            rid = clean(items[index].get("id", ""), 80)
        rows.append({"index": index, "id": rid, "field": clean(field, 200), "message": clean(message, 500)})
    return pd.DataFrame(rows, columns=["index", "id", "field", "message"])


# ----------------------------------------------------------------------------- import

with tab_in:
    may_import, why_not = permits(auth.current(), "import")
    if not may_import:
        st.info(f"Import is not available to you: {why_not}.", icon=":material/lock:")
        upload = None
    else:
        upload = st.file_uploader("Membrane JSON or JSONL file", type=["json", "jsonl"], key="ie_upload",
                                  help="A .json file holds an array of records (or one record); .jsonl one record "
                                  f"per line; at most {MAX_UPLOAD_MB} MB")
    if upload is not None and upload.size > MAX_UPLOAD_MB * 1024 * 1024:
        st.error(f"{clean(upload.name, 120)} is {upload.size / 2**20:,.1f} MB; the console takes files up to "
                 f"{MAX_UPLOAD_MB} MB (import larger ones with the engine's import_file).")
        upload = None
    if upload is None:
        st.session_state.pop(PARSED_KEY, None)
    else:
        parsed = st.session_state.get(PARSED_KEY)
        if parsed is None or parsed[0] != upload.file_id:
            try:
                text = upload.getvalue().decode("utf-8-sig")
                items, parse_error = parse_text(text, jsonl=upload.name.lower().endswith(".jsonl"), name=upload.name), None
            except UnicodeDecodeError as exc:
                items, parse_error = None, ValidationError(f"{upload.name} is not UTF-8 text ({exc.reason})",
                                                           [("file", "not UTF-8")])
            except ValidationError as exc:
                items, parse_error = None, exc
            parsed = (upload.file_id, upload.name, items, parse_error, len(items) if items is not None else 0)
            st.session_state[PARSED_KEY] = parsed
            st.session_state.pop(IMPORT_RESULT_KEY, None)
        _, name, items, parse_error, in_file = parsed
        if parse_error is not None:
            st.error(f"The file cannot be read: {md(parse_error, 800)}")
        else:
            st.text(f"{clean(name, 120)}: {plural(in_file, 'record')} in the file; the store holds {m.count():,}.")
            result = st.session_state.get(IMPORT_RESULT_KEY)
            if result is None or result[0] != upload.file_id:
                profiles, origin = preview_profiles(m)
                asked = (upload.file_id, tuple(sorted(profiles.items())))
                cached = st.session_state.get("ie_exposures")
                if cached is None or cached[0] != asked:  # a large file is gated once, not on every rerun
                    cached = (asked, import_exposures(items or [], profiles))
                    st.session_state["ie_exposures"] = cached
                exposures = cached[1]
                if exposures.widens:
                    show_exposures(exposures, origin, key="ie_exposure")
                access_ok = widening_confirmed(exposures, "ie_widen")
                go = st.button(f"Import {plural(in_file, 'record')}", type="primary", key="ie_import",
                               disabled=not items or not access_ok)
                if go and not access_ok:  # checked in the run that imports, not only by the button
                    st.error("Not imported: the import widens access and the widening is not confirmed.")
                elif go and items:
                    bar = st.progress(0.0, text="Validating every record…")

                    def progress(done: int, total: int) -> None:
                        text = f"Validated {done:,} of {total:,}" if done < total else "Writing…"
                        bar.progress(done / max(total, 1), text=text)

                    # Checked at the moment of writing, against the session's operator.
                    actor = auth.authorize("import").actor
                    try:
                        count = m.import_records(items, actor=actor, progress=progress)
                        result = (upload.file_id, "ok", count, None)
                    except AlreadyExistsError as exc:
                        result = (upload.file_id, "exists", 0, str(exc))
                    except ValidationError as exc:
                        result = (upload.file_id, "invalid", 0, (problem_rows(list(exc.problems), items), exc.total))
                    except MembraneError as exc:
                        result = (upload.file_id, "failed", 0, str(exc))
                    bar.empty()
                    # The parsed records are let go once imported or refused: a session that stays
                    # open must not keep a large upload's objects alive.
                    st.session_state[PARSED_KEY] = (upload.file_id, name, None, None, in_file)
                    items = None
                    st.session_state[IMPORT_RESULT_KEY] = result
            if result is not None and result[0] == upload.file_id:
                _, outcome, count, detail = result
                if outcome == "ok":
                    st.success(f"Imported {plural(count, 'record')}. The store now holds {m.count():,}.", icon=":material/check_circle:")
                elif outcome == "exists":
                    st.error(f"Import refused, nothing was written: {md(detail, 800)}. Records are never replaced; "
                             "remove those ids from the file (or import into another store).", icon=":material/block:")
                elif outcome == "invalid":
                    bad, total = detail
                    records_bad = bad["index"].dropna().nunique()
                    if total > len(bad):  # the engine lists the first 1,000 problems and counts the rest
                        st.error(f"Import refused, nothing was written: {total:,} problems; the first "
                                 f"{len(bad):,} are listed.", icon=":material/block:")
                    else:
                        st.error(f"Import refused, nothing was written: {len(bad):,} problem(s) in "
                                 f"{plural(records_bad, 'record')}.", icon=":material/block:")
                    st.dataframe(bad, hide_index=True, key="ie_problems",
                                 column_config={"message": st.column_config.TextColumn(width="large")})
                else:
                    st.error(f"Import failed, nothing was written: {md(detail, 800)}")

# ----------------------------------------------------------------------------- export

with tab_out:
    what = st.radio("What to export", ["Whole store", "Ids", "Filter"], horizontal=True, key="ie_what",
                    format_func={"Whole store": "The whole store", "Ids": "Ids I type or paste",
                                 "Filter": "A filter by type / scope / sensitivity"}.get)
    ids: list[str] | None = None
    if what == "Ids":
        pasted = st.text_area("Record ids (one per line, or separated by commas or spaces)", key="ie_ids", height=120)
        wanted = list(dict.fromkeys(t for t in re.split(r"[\s,;]+", pasted) if t))
        seen = m.explain_many(wanted, clearance) if wanted else {}
        live = briefs(m, [i for i in wanted if i in seen and seen[i].value != "hidden"])
        ids = [i for i in wanted if i in live]
        unknown = [i for i in wanted if i not in live]
        if unknown:
            st.warning(f"{len(unknown)} id(s) not in the store (or beyond your clearance) are skipped: "
                       + ", ".join(md(i, 60) for i in unknown[:10]) + (" …" if len(unknown) > 10 else ""))
    elif what == "Filter":
        f1, f2, f3 = st.columns(3)
        types = f1.multiselect("Types", TYPE_NAMES, key="ie_types")
        scopes = f2.multiselect("Scopes", [UNSCOPED] + scopes_seen(m, clearance), key="ie_scopes")
        sens = f3.multiselect("Sensitivity", [s.value for s in Sensitivity], key="ie_sens")
        ids = filter_ids(m, types=types, scopes=["" if s == UNSCOPED else s for s in scopes], sensitivities=sens)
    total = m.count() if ids is None else len(ids)
    st.text(f"Selected: {plural(total, 'record')}.")

    c1, c2 = st.columns([1, 3])
    fmt = c1.radio("Format", ["json", "jsonl"], key="ie_format", horizontal=True)
    gated = c2.checkbox("Only what a trust context may see (hidden records left out, redacted ones as metadata)",
                        key="ie_gated")
    st.caption(f"Exports go through your clearance ({describe(clearance)}): records beyond it are left out or "
               "written as their redacted view.")
    # The engine gates the export by the clearance, or by the stricter of it and a chosen context.
    trust = clearance
    if gated:
        with st.expander("Trust context", expanded=True):
            trust = narrowest(trust_context_form("ie_trust", scopes_seen(m, clearance)), clearance)

    signature = hash((what, tuple(ids) if ids is not None else None, fmt,
                      trust.model_dump_json() if trust is not None else None))
    if st.button("Prepare the export file", type="primary", key="ie_prepare", disabled=total == 0):
        previous = st.session_state.pop(EXPORT_KEY, None)
        if previous:
            _remove_export(Path(previous["path"]).parent)
        folder = Path(tempfile.mkdtemp(dir=export_root().name))
        path = folder / f"membrane_export.{fmt}"
        try:
            with st.spinner("Writing records…"):
                count = m.export_file(path, ids=ids, trust=trust)
            st.session_state[EXPORT_KEY] = {"path": str(path), "count": count, "format": fmt,
                                            "size": path.stat().st_size, "signature": signature}
        except MembraneError as exc:
            _remove_export(folder)
            st.error(f"Export failed: {md(exc, 800)}")
        except BaseException:
            _remove_export(folder)
            raise
    prepared = st.session_state.get(EXPORT_KEY)
    if prepared and prepared.get("signature") != signature:
        st.caption("The selection or format changed since the last export was prepared: prepare it again.")
    elif prepared and Path(prepared["path"]).exists():
        size_kb = prepared["size"] / 1024
        st.success(f"Export ready: {plural(prepared['count'], 'record')}, {size_kb:,.1f} KiB of {prepared['format']}.",
                   icon=":material/inventory_2:")
        export_path = Path(prepared["path"])
        st.download_button(f"Download {export_path.name}", data=lambda: export_path.read_bytes(),
                           file_name=export_path.name, key="ie_download", on_click="ignore",
                           mime="application/json" if prepared["format"] == "json" else "application/x-ndjson")
        st.caption("Written to a temporary file through the engine's streaming export; prepare again after the store "
                   "changes.")
