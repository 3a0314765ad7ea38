"""Import and export: Membrane JSON (an array) or JSONL in and out, all or nothing."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from console.cli import MAX_UPLOAD_MB
from console import keys
from console.components.clearance import describe
from console.components.page import page_preamble
from console.components.safe import clean, md
from console.components.exposure_view import preview_profiles, show_exposures, widening_confirmed
from console.components.trust_form import trust_context_form
from console.components.words import plural
from membrane_engine import TYPE_NAMES, Sensitivity, Verdict, import_exposures, new_export_file, track_private, untrack_private
from membrane_engine import export_root as private_export_root
from membrane_engine.errors import AlreadyExistsError, MembraneError, ValidationError

K = keys.IMPORT_EXPORT
PARSED_KEY = K("parsed")
IMPORT_RESULT_KEY = K("import_result")
EXPOSURES_KEY = K("exposures")
UPLOAD_CHUNK = 1 << 20  # bytes copied at a time from an upload to its file
EXPORT_KEY = K("export")
UNSCOPED = "(unscoped)"
_RECORD_LOC = re.compile(r"^record (\d+)(?::\s*(.*))?$")


def export_root() -> Path:
    """Where this server writes export files, one private folder per prepared export. A
    session's previous export is removed when it prepares another; what sessions leave behind
    goes with the server process, at exit and on SIGTERM / SIGINT too, and a killed server's
    folder is removed by the next start (membrane_engine.transfer.private_files)."""
    return private_export_root()


@contextmanager
def spooled(upload: Any) -> Iterator[Path]:
    """The upload as a file the engine reads one record at a time (``preview_file``,
    ``import_file``), copied in chunks instead of decoded and parsed whole (which held every
    record of the upload in memory at once). Private (0600 in a 0700 folder of its own), named as the
    upload so the engine's messages name it, removed when the block ends."""
    folder = Path(tempfile.mkdtemp(prefix="membrane-upload-"))
    track_private(folder)  # holds records in full: removed on SIGTERM / SIGINT too
    try:
        suffix = ".jsonl" if upload.name.lower().endswith(".jsonl") else ".json"
        stem = re.sub(r"[^\w.-]", "_", Path(upload.name).stem)[:80] or "upload"
        path = folder / f"{stem}{suffix}"
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            upload.seek(0)
            head = upload.read(UPLOAD_CHUNK)
            # A byte order mark, as some editors write, is not part of the JSON (read as utf-8-sig before).
            out.write(head[3:] if head.startswith(b"\xef\xbb\xbf") else head)
            shutil.copyfileobj(upload, out, UPLOAD_CHUNK)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        untrack_private(folder)


def _remove_export(folder: Path) -> None:
    if folder.parent == export_root():  # only a folder this page made
        shutil.rmtree(folder, ignore_errors=True)


page = page_preamble(K, "Import / export",
                     "Records travel in Membrane's JSON shape: a `.json` array or `.jsonl` (one record per line). An "
                     "import is all or nothing: one bad record and nothing is written.", clearance_caption=False)
view = page.view
clearance = page.clearance

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
    may_import, why_not = view.may("import")
    if not may_import:
        st.info(f"Import is not available to you: {why_not}.", icon=":material/lock:")
        upload = None
    else:
        upload = st.file_uploader("Membrane JSON or JSONL file", type=["json", "jsonl"], key=K("upload"),
                                  help="A .json file holds an array of records (or one record); .jsonl one record "
                                  f"per line; at most {MAX_UPLOAD_MB} MB")
    if upload is not None and upload.size > MAX_UPLOAD_MB * 1024 * 1024:
        st.error(f"{clean(upload.name, 120)} is {upload.size / 2**20:,.1f} MB; the console takes files up to "
                 f"{MAX_UPLOAD_MB} MB (import larger ones with the engine's import_file).")
        upload = None
    if upload is None:
        st.session_state.pop(PARSED_KEY, None)
        st.session_state.pop(EXPOSURES_KEY, None)
    else:
        parsed = st.session_state.get(PARSED_KEY)
        if parsed is None or parsed[0] != upload.file_id:
            try:
                with spooled(upload) as path:
                    preview, parse_error = view.preview_import_file(path), None
            except ValidationError as exc:
                preview, parse_error = None, exc
            parsed = (upload.file_id, upload.name, preview, parse_error)
            st.session_state[PARSED_KEY] = parsed
            st.session_state.pop(IMPORT_RESULT_KEY, None)
        _, name, preview, parse_error = parsed
        result = st.session_state.get(IMPORT_RESULT_KEY)
        if result is not None and result[0] == upload.file_id:
            # A finished import shows its outcome only: no preview, no button to press again.
            _, outcome, count, detail = result
            if outcome == "ok":
                st.success(f"Imported {plural(count, 'record')} from {clean(name, 120)}. Your clearance now sees "
                           f"{view.count():,} records.", icon=":material/check_circle:")
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
                st.dataframe(bad, hide_index=True, key=K("problems"),
                             column_config={"message": st.column_config.TextColumn(width="large")})
            else:
                st.error(f"Import failed, nothing was written: {md(detail, 800)}")
        elif parse_error is not None:
            st.error(f"The file cannot be read: {md(parse_error, 800)}")
        elif preview is None:  # let go after an import whose outcome is gone: nothing to offer again
            st.info("This file was imported or refused already; upload it again to preview it anew.")
        else:
            in_file = preview.count
            st.text(f"{clean(name, 120)}: {plural(in_file, 'record')} in the file; your clearance sees "
                    f"{view.count():,} records of the store.")
            existing = preview.existing_count
            if existing:
                # The engine refuses the whole import (AlreadyExistsError): nothing would be
                # written, so nothing widens, and the button stays off.
                more = f" (and {existing - len(preview.existing):,} more)" if existing > len(preview.existing) else ""
                st.error(f"{plural(existing, 'id')} of this file {'is' if existing == 1 else 'are'} already in the "
                         "store: the import will be refused, nothing written (records are never replaced). "
                         + ", ".join(md(i, 60) for i in preview.existing) + more, icon=":material/block:")
                access_ok = False
            else:
                profiles, origin = preview_profiles(view)
                asked = (upload.file_id, tuple(sorted(profiles.items())))
                cached = st.session_state.get(EXPOSURES_KEY)
                if cached is None or cached[0] != asked:  # a large file is gated once, not on every rerun
                    cached = (asked, import_exposures(preview.briefs, profiles))
                    st.session_state[EXPOSURES_KEY] = cached
                exposures = cached[1]
                if exposures.widens:
                    show_exposures(exposures, origin, key=K("exposure"))
                access_ok = widening_confirmed(exposures, K("widen"))
            go = st.button(f"Import {plural(in_file, 'record')}", type="primary", key=K("import"),
                           disabled=not in_file or bool(existing) or not access_ok)
            if go and existing:  # checked in the run that imports, not only by the button
                st.error("Not imported: ids of the file are already in the store.")
            elif go and not access_ok:
                st.error("Not imported: the import widens access and the widening is not confirmed.")
            elif go and in_file:
                bar = st.progress(0.0, text="Validating every record…")

                def progress(done: int, total: int) -> None:
                    text = f"Validated {done:,} of {total:,}" if done < total else "Writing…"
                    bar.progress(min(done / max(total, 1), 1.0), text=text)

                try:  # the view checks the role at the moment of writing and names the operator
                    with spooled(upload) as path:  # the engine reads it one record at a time
                        count = view.import_file(path, progress=progress)
                    result = (upload.file_id, "ok", count, None)
                except AlreadyExistsError as exc:
                    result = (upload.file_id, "exists", 0, str(exc))
                except ValidationError as exc:
                    result = (upload.file_id, "invalid", 0, (problem_rows(list(exc.problems), preview.briefs), exc.total))
                except MembraneError as exc:
                    result = (upload.file_id, "failed", 0, str(exc))
                bar.empty()
                # The preview is let go once imported or refused: a session that stays open must
                # not keep a large upload's records alive, and a finished import offers no button.
                st.session_state[PARSED_KEY] = (upload.file_id, name, None, None)
                st.session_state.pop(EXPOSURES_KEY, None)
                st.session_state[IMPORT_RESULT_KEY] = result
                upload.close()  # before the rerun makes its own copy (below)
                st.rerun()
    if upload is not None:
        # Streamlit hands each script run a copy of the upload of its own (a deep copy of the
        # widget's value), which the run's module keeps until the cyclic collector frees it: the
        # console runs none after a script run (runner.postScriptGC) and an import pauses it.
        # Closed, the copy lets its buffer go as the run ends.
        upload.close()

# ----------------------------------------------------------------------------- export

with tab_out:
    what = st.radio("What to export", ["Whole store", "Ids", "Filter"], horizontal=True, key=K("what"),
                    format_func={"Whole store": "The whole store", "Ids": "Ids I type or paste",
                                 "Filter": "A filter by type / scope / sensitivity"}.get)
    ids: list[str] | None = None
    if what == "Ids":
        pasted = st.text_area("Record ids (one per line, or separated by commas or spaces)", key=K("ids"), height=120)
        wanted = list(dict.fromkeys(t for t in re.split(r"[\s,;]+", pasted) if t))
        seen = view.explain_many(wanted, clearance) if wanted else {}
        ids = [i for i in wanted if seen.get(i, Verdict.HIDDEN) is not Verdict.HIDDEN]
        live = set(ids)
        unknown = [i for i in wanted if i not in live]
        if unknown:
            st.warning(f"{len(unknown)} id(s) not in the store (or beyond your clearance) are skipped: "
                       + ", ".join(md(i, 60) for i in unknown[:10]) + (" …" if len(unknown) > 10 else ""))
    elif what == "Filter":
        f1, f2, f3 = st.columns(3)
        types = f1.multiselect("Types", TYPE_NAMES, key=K("types"))
        scopes = f2.multiselect("Scopes", [UNSCOPED] + view.scopes(), key=K("scopes"))
        sens = f3.multiselect("Sensitivity", [s.value for s in Sensitivity], key=K("sens"))
        ids = view.filter_ids(types=types, scopes=["" if s == UNSCOPED else s for s in scopes], sensitivities=sens)
    total = view.count() if ids is None else len(ids)
    st.text(f"Selected: {plural(total, 'record')}.")

    c1, c2 = st.columns([1, 3])
    fmt = c1.radio("Format", ["json", "jsonl"], key=K("format"), horizontal=True)
    gated = c2.checkbox("Only what a trust context may see (hidden records left out, redacted ones as metadata)",
                        key=K("gated"))
    st.caption(f"Exports go through your clearance ({describe(clearance)}): records beyond it are left out or "
               "written as their redacted view.")
    # The engine gates the export by the clearance, or by the stricter of it and a chosen context.
    trust = None  # the view narrows any context to the clearance; None: the clearance itself
    if gated:
        with st.expander("Trust context", expanded=True):
            trust = trust_context_form(K("trust"), view.scopes())

    signature = hash((what, tuple(ids) if ids is not None else None, fmt,
                      trust.model_dump_json() if trust is not None else None))
    if st.button("Prepare the export file", type="primary", key=K("prepare"), disabled=total == 0):
        previous = st.session_state.pop(EXPORT_KEY, None)
        if previous:
            _remove_export(Path(previous["path"]).parent)
        path = new_export_file(f"membrane_export.{fmt}")  # 0600: export_file keeps it
        folder = path.parent
        try:
            with st.spinner("Writing records…"):
                count = view.export_file(path, ids=ids, trust=trust)
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
                           file_name=export_path.name, key=K("download"), on_click="ignore",
                           mime="application/json" if prepared["format"] == "json" else "application/x-ndjson")
        st.caption("Written to a temporary file through the engine's streaming export; prepare again after the store "
                   "changes.")
