"""Page tests (AppTest) for imported history told truthfully: the decay page and the History tab
draw a past the trail cannot tell as unknown (a named band, no line), not flat; the audit page and
the History tab mark entries that came with an import as claimed; the import page refuses an
entry dated after the import, names the ids already in the store (no widening, no button), and
clears its preview once an import is done. The store is built with a clock in the past."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane
from membrane_engine.rules.labels import label
from membrane_engine.rules.roles import Operator, Role

from console.components.chart_safety import plot_text
from console.components.record_detail import UNKNOWN_LABEL
from tests.support.sessions import sign_in

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "console" / "app_pages"
UTC = timezone.utc
DAY = 86400
TIMEOUT = 60
IMPORTED = "4c1a2b3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
NATIVE = "5d2b3c4e-6f7a-4b8c-9d0e-1f2a3b4c5d6e"
# Midnight six days ago: IMPORTED was created then, reinforced a day later and penalized a day
# after that by its agent (Membrane's entries: no before/after values), and imported at T0 + 3 d.
T0 = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=6)


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def doc(rid: str, subject: str, audit_log: list | None = None, updated: datetime = T0, salience: float = 1.0) -> dict:
    return {"id": rid, "type": "semantic", "sensitivity": "low", "confidence": 0.9, "salience": salience,
            "scope": "", "tags": ["a"], "created_at": iso(T0), "updated_at": iso(updated),
            "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": DAY, "min_salience": 0.0,
                                    "max_age_seconds": 0, "reinforcement_gain": 0.1},
                          "pinned": False, "deletion_policy": "auto_prune"},
            "provenance": {"sources": []}, "relations": [], "audit_log": audit_log or [],
            "payload": {"kind": "semantic", "subject": subject, "predicate": "runs on", "object": "postgres 16",
                        "validity": {"mode": "global"}}}


MEMBRANE_LOG = [
    {"action": "create", "actor": "agent:kestrel", "timestamp": iso(T0), "rationale": "captured"},
    {"action": "reinforce", "actor": "agent:kestrel", "timestamp": iso(T0 + timedelta(days=1)), "rationale": "used"},
    {"action": "decay", "actor": "agent:kestrel", "timestamp": iso(T0 + timedelta(days=2)), "rationale": "penalty: stale"},
]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'imported.db'}"
    clock = Clock()
    m = Membrane.open(url, load_sample=False, clock=clock)
    clock.now = T0 + timedelta(days=3)
    m.import_records([doc(IMPORTED, "billing service", MEMBRANE_LOG, updated=T0 + timedelta(days=2), salience=0.4),
                      doc(NATIVE, "search service")], actor="operator:ann")
    m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    st.cache_resource.clear()
    yield url
    st.cache_resource.clear()


def run(at) -> AppTest:
    """Run an AppTest (or the AppTest of a widget just set): no exception."""
    at = at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def page(name: str) -> AppTest:
    return run(AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT))


def numbers(data) -> list[float]:
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"])).tolist()
    return [math.nan if v is None else v for v in data]


def instants(data) -> list[datetime | None]:
    out = []
    for x in data:
        if x is None:
            out.append(None)
            continue
        t = pd.Timestamp(x)
        out.append((t.tz_localize(UTC) if t.tzinfo is None else t).to_pydatetime())
    return out


def table(at: AppTest, *columns: str) -> pd.DataFrame:
    for el in at.dataframe:
        if all(c in el.value.columns for c in columns):
            return el.value
    raise AssertionError(f"no table with columns {columns}")


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


# ----------------------------------------------------------------------------- decay


def test_decay_draws_an_imported_past_without_values_as_unknown_not_flat(store):
    at = page("decay")
    at.datetime_input(key="decay_start").set_value(T0.astimezone(UTC).replace(tzinfo=None))
    at.select_slider(key="decay_horizon").set_value("1 week")
    at.text_input(key="decay_query").set_value(IMPORTED[:13])
    run(at)
    at.multiselect(key="decay_ids").set_value([IMPORTED])
    run(at)

    m = Membrane.open(store, load_sample=False)
    name = plot_text(label(m.get(IMPORTED), 40), 80)
    m.close()
    (chart,) = at.get("plotly_chart")
    spec = json.loads(chart.proto.spec)
    line = next(t for t in spec["data"] if t.get("name") == name)
    xs, ys = instants(line["x"]), numbers(line["y"])
    anchor = T0 + timedelta(days=2)  # its stored anchor: the last thing the file tells
    before = [y for x, y in zip(xs, ys) if x < anchor - timedelta(minutes=1)]
    after = [(x, y) for x, y in zip(xs, ys) if x >= anchor + timedelta(minutes=1)]
    assert before and all(math.isnan(y) for y in before)  # no flat 0.4 before the anchor
    assert all(y == pytest.approx(0.4 * 2 ** -((x - anchor).total_seconds() / DAY), rel=1e-4) for x, y in after)

    band = next(t for t in spec["data"] if t.get("name") == f"{name}: {UNKNOWN_LABEL}")
    assert band["fill"] == "toself" and band["line"]["dash"] == "dash"
    corners = [x for x in instants(band["x"]) if x is not None]
    assert abs((min(corners) - T0).total_seconds()) < 3600
    assert abs((max(corners) - anchor).total_seconds()) < 3600
    assert "unknown, not flat" in texts(at.caption)
    row = table(at, "below at (UTC)").iloc[0]
    assert "part of the window is unknown" in row["status"]
    assert row["S(start)"] is None or math.isnan(row["S(start)"])


# ----------------------------------------------------------------------------- record detail: history


def detail_script() -> None:
    import streamlit as st

    from console.components.clearance import operator_view
    from console.components.record_detail import render_record

    view = operator_view("records")
    record = view.get(st.query_params["id"])
    render_record(view, record, key="rx_detail")


def detail(rid: str) -> AppTest:
    at = AppTest.from_function(detail_script, default_timeout=TIMEOUT)
    sign_in(at, Operator(name="vic", role=Role.VIEWER, max_sensitivity="hyper"))
    at.query_params["id"] = rid
    return run(at)


def test_history_tab_marks_claimed_entries_and_an_unknown_past(store):
    at = detail(IMPORTED)
    versions = table(at, "when (UTC)", "who", "source")
    assert list(versions["action"]) == ["create", "reinforce", "penalize", "create"]
    assert list(versions["source"]) == ["claimed by the import"] * 3 + [""]
    assert list(versions["who"]) == ["agent:kestrel"] * 3 + ["operator:ann"]

    (el,) = [e for e in at.get("plotly_chart") if "hist_curve" in e.proto.id]
    data = json.loads(el.proto.spec)["data"]
    line = next(t for t in data if t.get("name") == "salience")
    anchor = T0 + timedelta(days=2)
    early = [y for x, y in zip(instants(line["x"]), numbers(line["y"])) if x < anchor - timedelta(minutes=1)]
    assert early and all(math.isnan(y) for y in early)
    assert any(t.get("name") == UNKNOWN_LABEL and t.get("fill") == "toself" for t in data)

    # The record right after the claimed reinforce: its salience then is unknown, not a number.
    at.selectbox(key="rx_detail_hist_version").set_value(1)
    run(at)
    then = table(at, "field", "now", "changed").set_index("field")
    assert then.loc["salience"].iloc[0] == UNKNOWN_LABEL

    native = table(detail(NATIVE), "when (UTC)", "who", "source")
    assert list(native["source"]) == [""]


# ----------------------------------------------------------------------------- audit


def test_audit_page_marks_entries_that_came_with_the_import_as_claimed(store):
    at = page("audit")
    frame = table(at, "actor", "rationale")
    mine = frame[frame["record_id"] == f"/records?id={IMPORTED}"].sort_values("position")
    assert list(mine["actor"]) == ["agent:kestrel (claimed by the import)"] * 3 + ["operator:ann"]
    native = frame[frame["record_id"] == f"/records?id={NATIVE}"]
    assert list(native["actor"]) == ["operator:ann"]


# ----------------------------------------------------------------------------- import


def upload(at: AppTest, name: str, records: list) -> AppTest:
    return run(at.file_uploader(key="ie_upload").set_value((name, json.dumps(records).encode(), "application/json")))


def test_an_upload_with_an_entry_dated_after_the_import_is_refused(store):
    at = page("import_export")
    late = doc("late-one", "forged", [{"action": "revise", "actor": "operator:admin", "timestamp": "2099-01-01T00:00:00Z",
                                       "rationale": "forged"}])
    upload(at, "late.json", [late])
    for box in [c for c in at.checkbox if c.key == "ie_widen"]:
        run(box.check())
    run(at.button(key="ie_import").click())
    problems = table(at, "index", "message")
    assert list(problems["field"]) == ["audit_log.0.timestamp"] and list(problems["id"]) == ["late-one"]
    assert "2099-01-01T00:00:00" in problems["message"].iloc[0]
    m = Membrane.open(store, load_sample=False)
    assert "late-one" not in m.ids()
    total, rows = m.audit_query(limit=1)
    assert rows[0].entry.timestamp.year < 2099  # nothing from 2099 heads the log
    m.close()


def test_a_reimport_is_flagged_as_refused_not_a_widening_and_a_done_import_clears_its_preview(store):
    new = [doc("new-one", "queue service"), doc("new-two", "cache service")]
    at = page("import_export")
    upload(at, "new.json", new)
    assert at.button(key="ie_import").disabled  # new records widen access: confirm first
    run(at.checkbox(key="ie_widen").check())
    run(at.button(key="ie_import").click())
    assert "Imported 2 records from new.json" in texts(at.success)
    # Done: the outcome only, no preview and no button for a finished import.
    assert not [b for b in at.button if b.key == "ie_import"]
    assert not [c for c in at.checkbox if c.key == "ie_widen"]
    run(at)
    assert not [b for b in at.button if b.key == "ie_import"]

    # The same file again: the preview names the ids already in the store and says the import
    # will be refused; it is no widening, and there is nothing to press.
    again = page("import_export")
    upload(again, "new.json", new + [doc("new-three", "mail service")])
    error = texts(again.error).replace("\\", "")
    assert "2 ids of this file are already in the store: the import will be refused" in error
    assert "new-one" in error and "new-two" in error and "new-three" not in error
    assert not [c for c in again.checkbox if c.key == "ie_widen"]
    assert "widens access" not in texts(again.warning)
    assert again.button(key="ie_import").disabled


def test_an_upload_is_read_from_a_private_file_that_is_gone_afterwards(store, monkeypatch):
    """The page hands the engine a file of its own (0600), copied in chunks, byte order mark and
    all dropped as before, and removes it once read."""
    from membrane_engine.transfer import imports

    seen = []
    real = imports.preview_file

    def spy(store_, path):
        seen.append((Path(path), Path(path).stat().st_mode & 0o777, Path(path).parent.stat().st_mode & 0o777))
        return real(store_, path)

    monkeypatch.setattr(imports, "preview_file", spy)  # each run of the page imports it anew
    at = page("import_export")
    body = "\ufeff" + "\n".join(json.dumps(d) for d in [doc("bom-one", "x"), doc("bom-two", "y")])
    run(at.file_uploader(key="ie_upload").set_value(("with bom.jsonl", body.encode(), "application/x-ndjson")))
    assert "with bom.jsonl: 2 records in the file" in texts(at.text)
    ((path, mode, folder),) = seen
    assert path.name == "with_bom.jsonl" and mode == 0o600 and folder == 0o700
    assert not path.exists() and not path.parent.exists()
