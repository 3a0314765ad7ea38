"""Page tests (AppTest) for decay, selector, audit, curate and import/export, each page script
run on its own against a temporary SQLite store holding the bundled sample store."""

from __future__ import annotations

import base64
import json
import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from membrane_engine.rules.labels import label
from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.retrieval.labels import labels
from membrane_engine.oversight.finders import filter_ids

from console.components.words import distinct_names
from tests.support.sessions import sample_store

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "console" / "app_pages"
SAMPLE = ROOT / "sample_data" / "membrane_sample.json"
UTC = timezone.utc
TIMEOUT = 60


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh SQLite store with the sample loaded; the console reads it via MEMBRANE_DB_URL."""
    yield from sample_store(tmp_path / "pages_b.db", monkeypatch)


def fresh(url: str) -> Membrane:
    return Membrane.open(url, load_sample=False)


def page(name: str) -> AppTest:
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly figures on the page by widget key, as their JSON spec."""
    out = {}
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        out[el.proto.id] = spec
    return out


def values(data) -> list[float]:
    """A trace's numbers: Plotly 7 writes numpy arrays as base64 typed arrays."""
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"])).tolist()
    return list(data)


def table(at: AppTest, *columns: str):
    """The first dataframe on the page that has these columns (dataframes carry no key in AppTest)."""
    for el in at.dataframe:
        frame = el.value
        if all(c in frame.columns for c in columns):
            return frame
    raise AssertionError(f"no table with columns {columns}")


def trace_names(at: AppTest) -> list[str]:
    return [t.get("name", "") for spec in charts(at).values() for t in spec["data"]]


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def unescaped(text: str) -> str:
    """Markdown text as it reads once rendered (record strings are backslash-escaped by md())."""
    return re.sub(r"\\(.)", r"\1", text)


def pick(at: AppTest, key: str, record_id: str) -> AppTest:
    """Search for a record in a record picker and choose it."""
    ok(at.text_input(key=f"{key}_query").set_value(record_id[:13]).run())
    return ok(at.multiselect(key=f"{key}_ids").set_value([record_id]).run())


def reinforced_record(url: str) -> tuple[str, datetime]:
    m = fresh(url)
    _, rows = m.audit_query(action="reinforce", limit=1)
    m.close()
    return rows[0].record_id, rows[0].entry.timestamp


# ----------------------------------------------------------------------------- decay


def test_decay_chart_for_a_chosen_record_with_reinforcements_and_thresholds(store):
    at = page("decay")
    assert not at.get("plotly_chart")  # nothing chosen: no chart, an invitation instead
    assert "Pick one or more records" in texts(at.info)

    rid, reinforced_at = reinforced_record(store)
    start = at.datetime_input(key="decay_start")
    start.set_value(datetime.combine(reinforced_at.date() - timedelta(days=2), start.value.time()))
    at.select_slider(key="decay_horizon").set_value("90 days")
    pick(at, "decay", rid)

    names = trace_names(at)
    m = fresh(store)
    name = labels(m, [rid], TrustContext(max_sensitivity="hyper"), limit=40)[rid]
    m.close()
    assert name in names, names  # the record named by what it says
    assert "reinforce" in names, names  # audit reinforce entries marked, named by action
    spec = next(iter(charts(at).values()))
    assert "prune threshold 0.001" in names and "threshold 0.1" in names
    curve = next(t for t in spec["data"] if t.get("name", "") == name)
    ys = values(curve["y"])
    assert len(ys) == 400 and not np.isnan(ys[-1]) and 0 <= ys[-1] <= 1

    frame = table(at, "below at (UTC)")
    assert list(frame["id"]) == [rid]


def test_decay_time_below_matches_the_engine_and_hypothetical_profiles_plot(store):
    at = page("decay")
    at.text_input(key="decay_p_name").set_value("fast")
    at.number_input(key="decay_p_half").set_value(1.0)
    at.selectbox(key="decay_p_unit").set_value("hours")
    ok(at.button(key="FormSubmitter:decay_profile_form-Add profile").click().run())
    assert any("fast (hypothetical)" in n for n in trace_names(at))
    row = table(at, "below at (UTC)").iloc[0]
    # exponential from 1.0 with a 1 h half-life: below 0.1 after log2(10) hours
    start = at.datetime_input(key="decay_start").value.replace(tzinfo=UTC)
    expected = start + timedelta(hours=3.321928)
    assert abs(row["below at (UTC)"].to_pydatetime() - expected) < timedelta(minutes=1)


def test_decay_prune_preview_matches_the_engine(store):
    at = page("decay")
    at.datetime_input(key="decay_prune_at").set_value(datetime(2027, 6, 1, 0, 0))
    ok(at.button(key="decay_prune_go").click().run())
    m = fresh(store)
    expected = m.prune("test", "preview", as_of=datetime(2027, 6, 1, tzinfo=UTC), dry_run=True)
    assert at.metric[0].value == f"{len(expected):,}"
    shown = list(table(at, "S(as of)")["id"])
    assert shown == expected[:50]
    assert len(m.ids()) == 221  # a preview writes nothing


# ----------------------------------------------------------------------------- selector


def test_selector_shows_engine_signals_and_needs_more_follows_the_threshold(store):
    at = page("selector")
    ok(at.datetime_input(key="sel_as_of").set_value(datetime(2026, 11, 20, 12, 0)).run())
    frame = table(at, "applicability", "score")
    assert len(frame) >= 2
    m = fresh(store)
    selection = m.retrieve(RetrieveRequest(
        trust=TrustContext(max_sensitivity="medium", authenticated=True, actor_id="agent-1", scopes=[]),
        memory_types=["competence", "plan_graph"], as_of=datetime(2026, 11, 20, 12, tzinfo=UTC))).selection
    assert dict(zip(frame["id"], frame["score"])) == pytest.approx(selection.scores)
    assert list(frame["id"]) == [s.record_id for s in selection.signals]
    assert {"applicability", "success", "recency", "score"} <= set(trace_names(at))
    # Candidates are named by what they say (skill name, plan intent), the id beside, never on the axis.

    seen = {r.id: label(r) for r in selection.selected}  # as the context gets them: redacted ones unnamed
    # Candidates that share a name carry a short id beside it (console/components/words.py).
    seen = distinct_names({s.record_id: seen[s.record_id] for s in selection.signals})
    assert list(frame["record"]) == [seen[s.record_id] for s in selection.signals]
    assert any(r.startswith("redacted competence record") for r in frame["record"])
    axis = [y for spec in charts(at).values() for y in spec["data"][0]["y"]]
    assert axis and all(re.match(r"\d+\. ", y) for y in axis)
    assert axis[0].startswith("1. " + seen[selection.signals[0].record_id][:30])
    assert not any(s.record_id[:8] in y for s in selection.signals for y in axis)

    def badge() -> str:
        found = [v for v in texts(at.markdown).splitlines() if "-badge[" in v]
        assert len(found) == 1, found
        return found[0]

    ok(at.slider(key="sel_threshold").set_value(0.0).run())
    assert "FALSE" in badge() and "green" in badge()
    ok(at.slider(key="sel_threshold").set_value(1.0).run())
    assert "TRUE" in badge() and "red" in badge()
    assert "is below the threshold 1.00" in texts(at.markdown)


def test_selector_with_no_candidates_says_so(store):
    at = page("selector")
    ok(at.number_input(key="sel_min_salience").set_value(5.0).run())
    assert "No competence or plan_graph record" in texts(at.info)
    assert not at.get("plotly_chart")
    ok(at.number_input(key="sel_min_salience").set_value(0.0).run())
    assert at.get("plotly_chart")


# ----------------------------------------------------------------------------- audit


def test_audit_filter_narrows_the_table_and_verification_reports_intact(store):
    at = page("audit")
    m = fresh(store)
    everything, _ = m.audit_query(limit=0)
    reinforced, _ = m.audit_query(action="reinforce", limit=0)
    assert at.metric[0].value == f"{everything:,}"
    assert len(table(at, "seq", "rationale")) == 50

    ok(at.selectbox(key="audit_action").set_value("reinforce").run())
    assert at.metric[0].value == f"{reinforced:,}"
    assert 0 < reinforced < everything
    assert set(table(at, "seq", "rationale")["action"]) == {"reinforce"}

    rid, _ = reinforced_record(store)
    ok(at.text_input(key="audit_record").set_value(rid).run())
    frame = table(at, "seq", "rationale")
    # Each record id links to the explorer.
    assert set(frame["record_id"]) == {f"/records?id={rid}"} and set(frame["action"]) == {"reinforce"}
    assert "audit_timeline" in " ".join(charts(at).keys()) or at.get("plotly_chart")

    ok(at.button(key="audit_verify").click().run())
    assert "intact" in texts(at.success)


def test_audit_activity_follows_a_new_entry(store):
    """The activity chart is cached by the log's newest entry: a write shows at the next run."""
    def plotted(at: AppTest) -> int:
        spec = charts(at)
        activity = next(fig for key, fig in spec.items() if "audit_activity" in key)
        return int(sum(sum(values(trace["y"])) for trace in activity["data"]))

    at = page("audit")
    before = plotted(at)
    assert before == fresh(store).audit_query(limit=0)[0]
    rid, _ = reinforced_record(store)
    m = fresh(store)
    m.reinforce(rid, actor="ops:test", rationale="again")
    m.close()
    ok(at.run())
    assert plotted(at) == before + 1
    assert at.metric[0].value == f"{before + 1:,}"


def test_audit_verification_reports_a_tampered_entry(store):
    path = store.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        rid = conn.execute("SELECT record_id FROM audit_entries WHERE position = 0 LIMIT 1").fetchone()[0]
        conn.execute("UPDATE audit_entries SET rationale = 'rewritten' WHERE record_id = ? AND position = 0", (rid,))
    at = page("audit")
    ok(at.button(key="audit_verify").click().run())
    assert "problem" in texts(at.error)
    problems = table(at, "problem")
    assert rid in set(problems["record_id"])


def test_audit_csv_holds_every_filtered_entry(store):
    from console.components.audit_table import filtered_csv

    m = fresh(store)
    total, _ = m.audit_query(action="reinforce", limit=0)
    lines = filtered_csv(m, {"action": "reinforce"}).decode().strip().splitlines()
    assert lines[0].startswith("timestamp,record_id") and len(lines) == total + 1


# ----------------------------------------------------------------------------- curate


def pinned_free_record(url: str) -> str:
    m = fresh(url)
    for rid in m.ids():
        r = m.get(rid)
        if not r.lifecycle.pinned and 0.05 < r.salience < 0.8 and r.type.value != "episodic":
            return rid
    raise AssertionError("no suitable record in the sample")


def test_curate_reinforce_writes_its_audit_entry_and_raises_salience(store):
    rid = pinned_free_record(store)
    later = datetime.now(UTC) + timedelta(days=1)
    before = fresh(store).salience_at(rid, later)
    entries_before = len(fresh(store).audit_log(rid))

    at = AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT)
    at.query_params["id"] = rid  # ?id= preselects
    ok(at.run())
    assert at.multiselect(key="curate_ids").value == [rid]
    assert not any("details" in el.value.columns for el in at.dataframe)  # no preview without a rationale
    ok(at.text_area(key="curate_rationale").set_value("it keeps paying off").run())
    preview = table(at, "details", "actor")
    assert list(preview["action"]) == ["reinforce"] and list(preview["actor"]) == ["operator:test-admin"]
    assert len(fresh(store).audit_log(rid)) == entries_before  # a preview writes nothing

    ok(at.button(key="curate_apply").click().run())
    assert "Reinforce done" in texts(at.success)
    m = fresh(store)
    log = m.audit_log(rid)
    assert len(log) == entries_before + 1
    assert (log[-1].action.value, log[-1].actor, log[-1].rationale) == ("reinforce", "operator:test-admin",
                                                                         "it keeps paying off")
    assert m.salience_at(rid, later) > before


def test_curate_destructive_needs_confirmation_and_engine_errors_are_shown(store):
    m = fresh(store)
    episodic = next(r for r in m.retrieve_by_type("episodic", TrustContext(max_sensitivity="hyper")))
    at = AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT)
    ok(at.run())
    ok(at.selectbox(key="curate_op").set_value("retract").run())
    pick(at, "curate", episodic.id)
    ok(at.text_area(key="curate_rationale").set_value("wrong").run())
    errors = unescaped(texts(at.error))
    assert "episodic records cannot be retracted." in errors  # the engine's words, as a sentence
    assert "Error" not in errors  # never a class name (EpisodicImmutableError)
    assert not [b for b in at.button if b.key == "curate_apply"]

    rid = pinned_free_record(store)
    ok(at.text_input(key="curate_query").set_value(rid[:13]).run())
    ok(at.multiselect(key="curate_ids").set_value([rid]).run())
    apply = at.button(key="curate_apply")
    assert apply.disabled  # destructive: disabled until confirmed
    ok(at.checkbox(key="curate_confirm").check().run())
    ok(at.button(key="curate_apply").click().run())
    assert "Retract done" in texts(at.success)
    assert fresh(store).get(rid).salience == 0.0


def test_curate_resets_its_selection_after_apply_and_when_the_operation_changes(store):
    """Issue 22: the record chosen for one operation is never the target of the next one."""
    rid = pinned_free_record(store)
    at = AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT)
    at.query_params["id"] = rid  # a link chooses it for the harmless default (reinforce)
    ok(at.run())
    assert at.multiselect(key="curate_ids").value == [rid]
    # The picker names the record by what it says and its type; the id is in the help.
    m = fresh(store)

    assert at.multiselect(key="curate_ids").format_func(rid) == f"{label(m.get(rid), 70)} · {m.get(rid).type.value}"
    assert rid in unescaped(at.multiselect(key="curate_ids").help)
    # Switching to a destructive operation drops the choice (and the link's id).
    ok(at.selectbox(key="curate_op").set_value("retract").run())
    assert at.multiselect(key="curate_ids").value == []
    assert "id" not in at.query_params
    assert not [b for b in at.button if b.key == "curate_apply"]
    # Chosen again and applied: the selection, rationale and confirmation are cleared.
    pick(at, "curate", rid)
    ok(at.text_area(key="curate_rationale").set_value("wrong").run())
    name = label(m.get(rid))
    # The preview names the record by what it says (the id in its help) in the heading and the
    # audit entries to be written.
    heading = next(e for e in at.markdown if name in unescaped(e.value))
    assert rid in unescaped(heading.help)
    assert name in set(next(d.value for d in at.dataframe if "action" in d.value.columns)["record"])
    ok(at.checkbox(key="curate_confirm").check().run())
    ok(at.button(key="curate_apply").click().run())
    assert "Retract done" in texts(at.success)
    assert f"“{name}” changed" in unescaped(texts(at.success))
    assert at.multiselect(key="curate_ids").value == []
    assert at.text_area(key="curate_rationale").value == ""
    assert not [b for b in at.button if b.key == "curate_apply"]  # nothing chosen: no preview, no Apply
    # The outcome stays until the operation changes.
    ok(at.selectbox(key="curate_op").set_value("pin").run())
    assert "Retract done" not in texts(at.success)
    assert fresh(store).audit_log(rid)[-1].action.value == "delete"  # only the one retract was written


def test_curate_fork_uses_the_prefilled_json_with_a_fresh_id(store):
    rid = pinned_free_record(store)
    at = AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT)
    ok(at.run())
    ok(at.selectbox(key="curate_op").set_value("fork").run())
    pick(at, "curate", rid)
    ok(at.text_area(key="curate_rationale").set_value("a variant").run())
    doc = json.loads(at.text_area(key="curate_json").value)
    assert doc["id"] != rid and "audit_log" not in doc
    assert at.button(key="curate_apply").disabled  # the new record widens access: confirm first
    ok(at.checkbox(key="curate_widen").check().run())
    ok(at.button(key="curate_apply").click().run())
    m = fresh(store)
    forked = m.get(doc["id"])
    assert f"“{label(forked)}” created" in unescaped(texts(at.success))  # named by what the operator wrote
    assert any(r.predicate == "derived_from" and r.target_id == rid for r in forked.relations)
    assert m.audit_log(rid)[-1].action.value == "fork"


# ----------------------------------------------------------------------------- import / export


def test_import_of_a_bad_file_shows_per_record_errors_and_writes_nothing(store):
    m = fresh(store)
    count, audit_total = len(m.ids()), m.audit_query(limit=0)[0]
    sample = json.loads(SAMPLE.read_text())
    good = dict(sample[0], id="new-good-record", audit_log=[], relations=[])
    bad_conf = dict(good, id="new-bad-1", confidence=3)
    bad_type = dict(good, id="new-bad-2", type="nonsense")
    body = "\n".join(json.dumps(r) for r in (good, bad_conf, bad_type)).encode()

    at = page("import_export")
    ok(at.file_uploader(key="ie_upload").set_value(("mixed.jsonl", body, "application/x-ndjson")).run())
    ok(at.checkbox(key="ie_widen").check().run())  # new records widen access (SPEC 11)
    ok(at.button(key="ie_import").click().run())
    assert "nothing was written" in texts(at.error)
    problems = table(at, "index", "message")
    assert sorted(problems["index"].unique()) == [1, 2]
    assert set(problems["field"]) == {"confidence", "type"}
    assert set(problems["id"]) == {"new-bad-1", "new-bad-2"}
    m = fresh(store)
    assert len(m.ids()) == count and m.audit_query(limit=0)[0] == audit_total


def test_import_of_a_file_of_junk_lists_the_first_1000_problems_and_says_how_many(store):
    m = fresh(store)
    count = len(m.ids())
    at = page("import_export")
    ok(at.file_uploader(key="ie_upload").set_value(("junk.json", b"[" + b",".join([b"{}"] * 300) + b"]",
                                                    "application/json")).run())
    ok(at.button(key="ie_import").click().run())
    assert "nothing was written: 1,200 problems; the first 1,000 are listed" in texts(at.error)
    assert len(table(at, "index", "message")) == 1000
    assert len(fresh(store).ids()) == count


def test_import_of_existing_ids_is_refused_clearly_and_a_good_file_imports(store):
    sample = json.loads(SAMPLE.read_text())
    at = page("import_export")
    ok(at.file_uploader(key="ie_upload").set_value(("dup.json", json.dumps(sample[:2]).encode(), "application/json")).run())
    # The preview names the ids already in the store and says the import will be refused: no
    # widening to confirm (nothing would be written), no button to press.
    assert "2 ids of this file are already in the store: the import will be refused" in texts(at.error)
    assert sample[0]["id"] in unescaped(texts(at.error)) and sample[1]["id"] in unescaped(texts(at.error))
    assert not [c for c in at.checkbox if c.key == "ie_widen"]
    assert at.button(key="ie_import").disabled

    good = dict(sample[0], id="brand-new-record", audit_log=[], relations=[])
    ok(at.file_uploader(key="ie_upload").set_value(("one.json", json.dumps([good]).encode(), "application/json")).run())
    ok(at.checkbox(key="ie_widen").check().run())
    ok(at.button(key="ie_import").click().run())
    assert "Imported 1 record" in texts(at.success)
    assert fresh(store).get("brand-new-record").id == "brand-new-record"


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_export_of_a_filter_produces_the_right_count(store, fmt):
    m = fresh(store)
    wanted = filter_ids(m, types=["competence"], scopes=["infra-ops"])
    at = page("import_export")
    ok(at.radio(key="ie_what").set_value("Filter").run())
    at.multiselect(key="ie_types").set_value(["competence"])
    at.multiselect(key="ie_scopes").set_value(["infra-ops"])
    ok(at.radio(key="ie_format").set_value(fmt).run())
    ok(at.button(key="ie_prepare").click().run())
    assert f"Export ready: {len(wanted):,} records" in texts(at.success) and len(wanted) > 1
    path = Path(at.session_state["ie_export"]["path"])
    text = path.read_text()
    docs = json.loads(text) if fmt == "json" else [json.loads(line) for line in text.splitlines() if line.strip()]
    assert sorted(d["id"] for d in docs) == sorted(wanted) and 0 < len(wanted) < 221


def test_export_of_the_whole_store_and_of_pasted_ids(store):
    at = page("import_export")
    ok(at.button(key="ie_prepare").click().run())
    assert "Export ready: 221 records" in texts(at.success)

    ids = fresh(store).ids()[:3]
    ok(at.radio(key="ie_what").set_value("Ids").run())
    ok(at.text_area(key="ie_ids").set_value(f"{ids[0]}, {ids[1]}\n{ids[2]} not-a-real-id").run())
    assert "not in the store" in texts(at.warning)
    assert "Export ready" not in texts(at.success)  # the earlier file no longer matches the selection
    ok(at.button(key="ie_prepare").click().run())
    assert "Export ready: 3 records" in texts(at.success)


def test_a_new_export_replaces_the_sessions_previous_one_and_a_failed_one_leaves_nothing(store, monkeypatch):
    at = page("import_export")
    ok(at.button(key="ie_prepare").click().run())
    first = Path(at.session_state["ie_export"]["path"])
    root = first.parent.parent
    assert first.exists() and root.name.startswith("membrane-export-")
    ok(at.radio(key="ie_format").set_value("jsonl").run())
    ok(at.button(key="ie_prepare").click().run())
    second = Path(at.session_state["ie_export"]["path"])
    assert second.exists() and not first.parent.exists()  # the earlier file and its folder are gone
    mine = {p for p in root.iterdir()}
    assert second.parent in mine

    from membrane_engine.errors import StoreUnavailableError
    from membrane_engine.transfer import export

    def failing(ctx, path, **kwargs):
        Path(path).write_text("half")  # a failure after writing began
        raise StoreUnavailableError("disk went away")

    monkeypatch.setattr(export, "export_file", failing)
    ok(at.radio(key="ie_format").set_value("json").run())
    ok(at.button(key="ie_prepare").click().run())
    assert "Export failed: disk went away" in texts(at.error)
    assert "ie_export" not in at.session_state and not second.parent.exists()
    assert {p for p in root.iterdir()} == mine - {second.parent}  # nothing left by the failure


# ----------------------------------------------------------------------------- record content stays inert

HOSTILE_ID = "evil-**bold**-<b>x</b>-[link](javascript:alert(1))"


def test_hostile_record_strings_stay_inert_on_every_page(store):
    sample = json.loads(SAMPLE.read_text())
    base = next(r for r in sample if r["type"] == "competence")
    hostile = dict(base, id=HOSTILE_ID, tags=["<img src=x onerror=alert(1)>", "**tag**"], relations=[],
                   audit_log=[{"action": "create", "actor": "<script>alert(1)</script>", "rationale": "_it_ <b>b</b>",
                               "timestamp": "2026-11-19T10:00:00Z"}],
                   sensitivity="low", scope="")
    hostile["payload"] = dict(base["payload"], skill_name="<b>skill</b> **loud**")
    m = fresh(store)
    m.import_records([hostile])
    m.close()

    def check(at: AppTest) -> None:
        ok(at)
        for el in list(at.markdown) + list(at.caption) + list(at.success) + list(at.error) + list(at.warning) + list(at.info):
            value = str(el.value)
            assert "<b>" not in value and "<script>" not in value and "<img" not in value, value
            assert "**bold**" not in value and "](javascript" not in value, value
        for spec in charts(at).values():
            text = json.dumps(spec)
            assert "<b>x</b>" not in text and "<script>" not in text and "<b>skill</b>" not in text

    at = page("decay")
    check(pick(at, "decay", HOSTILE_ID))
    assert any("&lt;b&gt;skill&lt;/b&gt; **loud**" in n for n in trace_names(at)), trace_names(at)  # named by its label, escaped

    at = page("audit")
    check(at.text_input(key="audit_record").set_value(HOSTILE_ID).run())
    assert at.metric[0].value == "2"  # its own entry and the importer's

    at = page("selector")
    check(at)
    assert HOSTILE_ID in set(table(at, "applicability", "score")["id"])

    at = AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT)
    at.query_params["id"] = HOSTILE_ID
    check(at.run())
    check(at.text_area(key="curate_rationale").set_value("**why**").run())
    check(at.button(key="curate_apply").click().run())
    assert fresh(store).audit_log(HOSTILE_ID)[-1].actor == "operator:test-admin"


def test_curate_delete_then_restore_from_the_archive(store):
    rid = pinned_free_record(store)
    m = fresh(store)
    assert m.get(rid).lifecycle.deletion_policy.value != "never"
    at = AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT)
    ok(at.run())
    ok(at.selectbox(key="curate_op").set_value("delete").run())
    pick(at, "curate", rid)
    ok(at.text_area(key="curate_rationale").set_value("obsolete").run())
    assert at.button(key="curate_apply").disabled
    ok(at.checkbox(key="curate_confirm").check().run())
    ok(at.button(key="curate_apply").click().run())
    assert "Delete (archive) done" in unescaped(texts(at.success))
    assert rid not in fresh(store).ids() and rid in fresh(store).archived_ids()

    ok(at.selectbox(key="curate_op").set_value("restore").run())
    ok(at.multiselect(key="curate_archived").set_value([rid]).run())
    ok(at.text_area(key="curate_rationale").set_value("needed after all").run())
    assert list(table(at, "details", "actor")["action"]) == ["restore"]  # as the audit log names it (stored as revise)
    ok(at.checkbox(key="curate_widen").check().run())  # restoring widens access again
    ok(at.button(key="curate_apply").click().run())
    assert "Restore from archive done" in unescaped(texts(at.success))
    m = fresh(store)
    assert rid in m.ids() and m.audit_log(rid)[-1].rationale.startswith("restored from archive")


def test_audit_checkpoint_download_and_verify_against_an_uploaded_one(store):
    """The page's checkpoint workflow: the download is the engine's checkpoint; verifying against
    an uploaded one reports a cut tail in words (which place, what it means)."""
    at = page("audit")
    m = fresh(store)
    cp = m.audit_checkpoint()
    body = json.dumps(cp).encode()
    ok(at.file_uploader(key="audit_checkpoint_upload").set_value(("cp.json", body, "application/json")).run())
    ok(at.button(key="audit_verify_checkpoint").click().run())
    assert "intact against the checkpoint" in texts(at.success)
    rid = m.audit_query(limit=1)[1][0].record_id  # the newest entry's record: cut it with its history
    m.close()
    with sqlite3.connect(store.removeprefix("sqlite:///")) as conn:
        conn.execute("DELETE FROM audit_entries WHERE record_id = ?", (rid,))
        conn.execute("DELETE FROM records WHERE id = ?", (rid,))
    ok(at.button(key="audit_verify_checkpoint").click().run())
    assert "problem" in texts(at.error)
    problems = table(at, "what it means")
    assert "rollback" in set(problems["kind"])
    assert any("rolled back" in text for text in problems["what it means"])


def test_audit_page_explains_a_record_edited_outside_the_engine(store):
    path = store.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        rid = conn.execute("SELECT id FROM records WHERE sensitivity != 'hyper' ORDER BY id LIMIT 1").fetchone()[0]
        conn.execute("UPDATE records SET sensitivity = 'hyper', sens_level = 4 WHERE id = ?", (rid,))
    at = page("audit")
    ok(at.button(key="audit_verify").click().run())
    problems = table(at, "what it means")
    assert list(problems["record_id"]) == [rid] and list(problems["kind"]) == ["content"]
    assert "outside the engine" in problems["what it means"][0]
    assert problems["where"][0].startswith(f"record {rid}, entry")
