"""Page tests (AppTest) for the Review page: the contested queue resolved by Reinstate, Retract and
Supersede, the records about to be pruned acted on in bulk, and role checks, on a temporary
SQLite store holding the bundled sample store. The engine is asked independently what the page
must show and what it wrote."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane, TrustContext
from membrane_engine.retrieval.labels import labels
from membrane_engine.rules.roles import Operator, Role
from tests.support.sessions import TEST_ADMIN, sample_store, sign_in

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "console" / "app_pages" / "review.py"
TIMEOUT = 60
ALL = TrustContext(max_sensitivity="hyper")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from sample_store(tmp_path / "review.db", monkeypatch)


def fresh(url: str) -> Membrane:
    return Membrane.open(url, load_sample=False)


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def page(who: Operator = TEST_ADMIN) -> AppTest:
    return ok(sign_in(AppTest.from_file(str(PAGE), default_timeout=TIMEOUT), who).run())


def keyed(elements, prefix: str):
    """The one widget whose key starts with ``prefix`` (confirmations and Apply buttons are keyed
    by the preview or the record they belong to)."""
    [found] = [e for e in elements if str(e.key).startswith(prefix)]
    return found


def shown_text(at: AppTest) -> str:
    parts = [e.value for e in at.markdown] + [e.value for e in at.text] + [e.value for e in at.caption]
    parts += [e.value for e in at.header] + [e.value for e in at.info] + [e.value for e in at.success]
    for frame in at.dataframe:
        parts.extend(str(v) for v in frame.value.to_numpy().ravel())
    return "\n".join(parts)


def test_contested_records_are_listed_beside_what_contests_them(store):
    m = fresh(store)
    try:
        queue = m.review_queue(ALL)
    finally:
        m.close()
    assert queue.contested  # the sample store has contested records
    at = page()
    assert at.header[0].value == f"Contested ({queue.contested_total:,})"
    text = shown_text(at)
    for item in queue.contested:
        assert item.label in text
        for contester in item.contesters:
            assert contester.label in text
    assert at.selectbox(key="rv_target").options == [item.label for item in queue.contested]


def test_reinstate_from_the_review_page_writes_one_entry_as_the_operator(store):
    at = page()
    target = at.selectbox(key="rv_target").value  # the first contested record (an id)
    m = fresh(store)
    try:
        before = len(m.audit_log(target))
    finally:
        m.close()
    at.radio(key="rv_action").set_value("reinstate")
    ok(at.text_input(key="rv_rationale").set_value("the evidence holds").run())
    assert any("Audit entries to be written (1)" in t.value for t in at.text)  # the engine's preview
    ok(keyed(at.button, "rv_apply_").click().run())
    assert any("Reinstate done" in s.value for s in at.success)
    m = fresh(store)
    try:
        record = m.get(target)
        assert record.revision_status == "active"
        assert len(record.audit_log) == before + 1
        last = record.audit_log[-1]
        assert (last.actor, last.rationale) == ("operator:test-admin", "reinstated: the evidence holds")
        assert target not in {i.record.id for i in m.review_queue(ALL).contested}
        assert m.verify_audit() == []
    finally:
        m.close()


def test_retract_needs_the_confirmation(store):
    at = page()
    target = at.selectbox(key="rv_target").value
    at.radio(key="rv_action").set_value("retract")
    ok(at.text_input(key="rv_rationale").set_value("it is wrong").run())
    assert keyed(at.button, "rv_apply_").disabled
    ok(keyed(at.checkbox, "rv_confirm_").check().run())
    ok(keyed(at.button, "rv_apply_").click().run())
    m = fresh(store)
    try:
        assert m.get(target).revision_status == "retracted"
        assert m.get(target).audit_log[-1].rationale == "retracted: it is wrong"
    finally:
        m.close()


def test_supersede_from_the_review_page_creates_the_corrected_record(store):
    at = page()
    target = at.selectbox(key="rv_target").value
    at.radio(key="rv_action").set_value("supersede")
    ok(at.run())
    doc = json.loads(at.text_area(key="rv_json").value)
    doc["payload"]["object"] = "corrected value"
    at.text_area(key="rv_json").set_value(json.dumps(doc))
    ok(at.text_input(key="rv_rationale").set_value("corrected").run())
    ok(keyed(at.checkbox, "rv_confirm_").check().run())
    ok(keyed(at.button, "rv_apply_").click().run())
    assert any("Supersede done" in s.value for s in at.success)
    m = fresh(store)
    try:
        new = m.get(doc["id"])
        assert new.payload.object == "corrected value"
        assert any(r.predicate == "supersedes" and r.target_id == target for r in new.relations)
        assert m.get(target).revision_status == "retracted"
        assert m.verify_audit() == []
    finally:
        m.close()


def test_records_about_to_be_pruned_are_reinforced_in_bulk(store):
    m = fresh(store)
    try:
        queue = m.review_queue(ALL)
    finally:
        m.close()
    at = page()
    assert at.header[1].value == f"About to be pruned ({queue.pruning_total:,})"
    frame = next(d.value for d in at.dataframe if "prunes" in d.value.columns)
    assert list(frame["id"]) == [p.record_id for p in queue.pruning]
    chosen = [p.record_id for p in queue.pruning[:3]]
    at.multiselect(key="rv_prune_ids").set_value(chosen)
    ok(at.run())
    at.selectbox(key="rv_prune_op").set_value("reinforce")
    at.checkbox(key="rv_prune_own_gain").uncheck()
    ok(at.run())
    at.number_input(key="rv_prune_gain").set_value(0.5)
    ok(at.text_input(key="rv_prune_rationale").set_value("still needed").run())
    preview = next(d.value for d in at.dataframe if "will" in d.value.columns)
    assert list(preview["id"]) == chosen and set(preview["will"]) == {"change"}
    assert all(c.startswith("salience ") and " → " in c for c in preview["change"]), list(preview["change"])
    assert any("every other record is applied" in i.value for i in at.info)  # the failure semantics
    assert keyed(at.button, "rv_prune_apply_").disabled
    ok(keyed(at.checkbox, "rv_prune_confirm_").check().run())
    ok(keyed(at.button, "rv_prune_apply_").click().run())
    assert any("Reinforce applied to 3 records" in s.value for s in at.success)
    m = fresh(store)
    try:
        for rid in chosen:
            last = m.audit_log(rid)[-1]
            assert (last.action.value, last.actor, last.rationale) == ("reinforce", "operator:test-admin", "still needed")
            assert m.get(rid).salience > 0.49  # S(now) + 0.5, decaying since
        # Not eligible now (a short half-life may bring one back within the horizon).
        now = {p.record_id for p in m.review_queue(ALL, horizon=timedelta(0)).pruning}
        assert not now & set(chosen)
        assert m.verify_audit() == []
    finally:
        m.close()


def test_a_viewer_sees_the_queue_without_buttons(store):
    viewer = Operator(name="vic", role=Role.VIEWER, max_sensitivity="hyper")
    at = page(viewer)
    assert at.header[0].value.startswith("Contested (")
    assert not at.button and not at.text_input
    assert any("needs the curator role" in i.value for i in at.info)


def test_the_queue_is_read_through_the_clearance(store):
    low = Operator(name="lo", role=Role.CURATOR, max_sensitivity="low", scopes=["project-alpha"])
    m = fresh(store)
    try:
        mine = m.review_queue(low.clearance)
        everything = m.review_queue(ALL)
        hidden = [i for i in everything.contested if i.record.id not in {j.record.id for j in mine.contested}]
        names = labels(m, [i.record.id for i in hidden], ALL)
    finally:
        m.close()
    at = page(low)
    assert at.header[0].value == f"Contested ({mine.contested_total:,})"
    text = shown_text(at)
    assert hidden and names
    for name in names.values():
        assert name not in text
    if mine.contested_withheld:
        assert f"{mine.contested_withheld}" in text and "beyond your clearance" in text


def test_resolve_button_beside_a_record_chooses_it(store):
    at = page()
    items = at.selectbox(key="rv_target").options
    assert len(items) > 1
    ok(at.button(key="rv_pick_1").click().run())
    assert at.selectbox(key="rv_target").index == 1


def _prune_preview(store: str, op: str, rationale: str) -> tuple[AppTest, list[str]]:
    m = fresh(store)
    try:
        chosen = [p.record_id for p in m.review_queue(ALL).pruning[:3]]
    finally:
        m.close()
    at = page()
    at.multiselect(key="rv_prune_ids").set_value(chosen)
    ok(at.run())
    at.selectbox(key="rv_prune_op").set_value(op)
    ok(at.text_input(key="rv_prune_rationale").set_value(rationale).run())
    ok(keyed(at.checkbox, "rv_prune_confirm_").check().run())
    return at, chosen


def test_the_preview_shown_is_the_one_applied_and_a_record_changed_since_is_reported(store):
    at, chosen = _prune_preview(store, "pin", "keep for now")
    # Another operator changes the middle record after the preview was shown (it stays in the list).
    m = fresh(store)
    try:
        m.reclassify(chosen[1], "operator:bob", "retagged", tags=["bob"])
        logs = {rid: len(m.audit_log(rid)) for rid in chosen}
    finally:
        m.close()
    ok(keyed(at.button, "rv_prune_apply_").click().run())
    assert any("Pin applied to 2 records; 1 not applied." in w.value for w in at.warning)
    results = next(d.value for d in at.dataframe if "result" in d.value.columns)
    assert list(results["result"]) == ["applied", "not applied", "applied"]
    assert "changed by someone else since the preview" in results["detail"][1]
    m = fresh(store)
    try:
        assert [m.get(rid).lifecycle.pinned for rid in chosen] == [True, False, True]
        assert {rid: len(m.audit_log(rid)) for rid in chosen} == {
            chosen[0]: logs[chosen[0]] + 1, chosen[1]: logs[chosen[1]], chosen[2]: logs[chosen[2]] + 1}
        assert m.verify_audit() == []
    finally:
        m.close()


def test_a_confirmation_never_carries_over_to_another_preview(store):
    at, chosen = _prune_preview(store, "pin", "keep for now")
    # Another operator reinforces the middle record: it leaves the prune list, so the selection
    # (and the preview) change under the operator's confirmation.
    m = fresh(store)
    try:
        m.reinforce(chosen[1], "operator:bob", "still used", gain=0.9)
    finally:
        m.close()
    ok(keyed(at.button, "rv_prune_apply_").click().run())
    assert not any("applied to" in s.value for s in list(at.success) + list(at.warning))
    assert at.multiselect(key="rv_prune_ids").value == [chosen[0], chosen[2]]
    assert not keyed(at.checkbox, "rv_prune_confirm_").value  # the new preview asks again
    m = fresh(store)
    try:
        assert not any(m.get(rid).lifecycle.pinned for rid in chosen)
    finally:
        m.close()


def test_a_long_queue_is_listed_twenty_at_a_time(store):
    m = fresh(store)
    try:
        semantic = [r.id for r in m.retrieve_by_type("semantic", ALL) if r.revision_status in (None, "active")][:25]
        for rid in semantic:
            m.contest(rid, "ticket-7", "operator:bob", "audit finding 7")
        total = m.review_queue(ALL).contested_total
    finally:
        m.close()
    assert total >= 25
    at = page()
    assert at.header[0].value == f"Contested ({total:,})"
    assert len([b for b in at.button if str(b.key).startswith("rv_pick_")]) == 20
    assert len(at.selectbox(key="rv_target").options) == total  # every listed record can be resolved
    assert "external reference: ticket-7 (contest entry)" in shown_text(at)


def test_a_revisit_reads_the_queue_kept_and_a_write_or_another_clearance_builds_it(store, monkeypatch):
    """The queue is kept per store state, clearance, horizon and minute: a second visit does not
    build it again; a write (by another process here) or another operator's clearance does, and
    an operator never gets the queue built for another clearance."""
    from membrane_engine.context import EngineContext
    from membrane_engine.curation import review

    moment = fresh(store).now()
    monkeypatch.setattr(EngineContext, "now", lambda self: moment)  # one minute for every visit
    built: list[str] = []
    real = review.review_queue
    monkeypatch.setattr(review, "review_queue",
                        lambda ctx, clearance, *a, **kw: built.append(clearance.max_sensitivity)
                        or real(ctx, clearance, *a, **kw))
    first = page()
    assert built == ["hyper"]
    again = page()
    assert built == ["hyper"] and again.header[0].value == first.header[0].value
    low = Operator(name="lo", role=Role.CURATOR, max_sensitivity="low", scopes=["project-alpha"])
    narrow = page(low)
    assert built == ["hyper", "low"]
    m = fresh(store)
    try:
        assert narrow.header[0].value == f"Contested ({real(m.context, low.clearance).contested_total:,})"
        target = m.review_queue(ALL).contested[0].record.id
        built.clear()
        m.reinstate(target, "operator:ann", "holds after all")  # another process writes
    finally:
        m.close()
    page()
    assert built == ["hyper"]
