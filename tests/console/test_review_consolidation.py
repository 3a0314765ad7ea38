"""Page tests (AppTest) for the Review page's Consolidation section: proposals from a dry run
through the operator's view, each beside its sources; Apply, Reject and Apply all; the history
of runs; the admins' auto-apply setting; viewers and forged widget values refused. On a
temporary SQLite store holding the bundled sample store; the engine is asked independently what
the page must show and what it wrote."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane
from membrane_engine.rules.roles import Operator, Role
from tests.support.sessions import TEST_ADMIN, sample_store, sign_in

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "console" / "app_pages" / "review.py"
TIMEOUT = 60
CURATOR = Operator(name="cora", role=Role.CURATOR, max_sensitivity="hyper")
LOW = Operator(name="lo", role=Role.CURATOR, max_sensitivity="low", scopes=["project-alpha"])
VIEWER = Operator(name="vic", role=Role.VIEWER, max_sensitivity="hyper")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from sample_store(tmp_path / "review.db", monkeypatch)


class Engine:
    """A Membrane of the test's own on the page's store, opened per question."""

    def __init__(self, url: str):
        self.url = url

    def __enter__(self) -> Membrane:
        self.m = Membrane.open(self.url, load_sample=False)
        return self.m

    def __exit__(self, *exc) -> None:
        self.m.close()


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def section(who: Operator = TEST_ADMIN, find: bool = True) -> AppTest:
    """The Review page on its Consolidation section, proposals asked for (``find``)."""
    at = ok(sign_in(AppTest.from_file(str(PAGE), default_timeout=TIMEOUT), who).run())
    ok(at.segmented_control(key="rv_section").set_value("consolidation").run())
    if find:
        ok(at.button(key="rv_cons_find").click().run())
    return at


def said(elements) -> list[str]:
    """The messages of success / error boxes as read (the page escapes Markdown in them)."""
    return [e.value.replace("\\", "") for e in elements]


def forged_click(button) -> None:
    """A click the browser sends on a button the page drew disabled (a forged message: AppTest,
    like the browser's own widget, refuses to press a disabled button; Streamlit discards it)."""
    button.proto.disabled = False
    button.click()


def shown(at: AppTest) -> str:
    parts = [e.value for e in at.markdown] + [e.value for e in at.text] + [e.value for e in at.caption]
    parts += [e.value for e in at.subheader] + [e.value for e in at.info] + [e.value for e in at.success]
    parts += [e.value for e in at.error] + [e.value for e in at.warning]
    for frame in at.dataframe:
        parts.extend(str(v) for v in frame.value.to_numpy().ravel())
    return "\n".join(parts)


def dry_run(url: str, who: Operator | None = None):
    """The dry run the page must show ``who`` (None: everything, as the hyper admin sees it; the
    keys do not depend on the actor)."""
    with Engine(url) as m:
        return (m if who is None else m.as_operator(who.name)).consolidate(dry_run=True)


def apply_buttons(at: AppTest) -> dict[str, object]:
    """The page's Apply buttons by proposal key."""
    return {str(b.key)[len("rv_cons_apply_"):]: b for b in at.button if str(b.key).startswith("rv_cons_apply_")}


def show_kind(at: AppTest, kind: str) -> AppTest:
    return ok(at.selectbox(key="rv_cons_kind").set_value(kind).run())


def counts(url: str) -> tuple[int, int]:
    with Engine(url) as m:
        return len(m.ids()), m.audit_query(limit=0)[0]


# --------------------------------------------------------------------------- what is shown


def test_proposals_are_listed_beside_their_sources(store):
    at = section()
    report = dry_run(store)
    assert report.proposals, "the sample store proposes nothing"
    assert [s.value for s in at.subheader][0] == f"Proposals ({len(report.proposals):,})"
    show_kind(at, "competence")
    skills = [p for p in report.proposals if p.consolidator == "competence"]
    assert set(apply_buttons(at)) == {p.key for p in skills[:10]}
    text = shown(at)
    with Engine(store) as m:
        names = m.as_operator(TEST_ADMIN.name).labels([s for p in skills for s in p.sources[:6]])
    for p in skills[:10]:
        assert p.record.payload.skill_name in text  # the record to be created ...
        for s in p.sources[:6]:  # ... beside its sources: name, id, labels
            assert names[s] in text and s in text
    assert "competence · " in text or "· competence" in text
    assert at.dataframe == [] or all("when (UTC)" in f.value.columns for f in at.dataframe)  # no history yet


def test_a_curator_sees_only_proposals_within_the_clearance(store):
    at = section(LOW)
    mine = dry_run(store, LOW)
    everything = dry_run(store)
    assert len(mine.proposals) < len(everything.proposals)
    assert [s.value for s in at.subheader][0] == f"Proposals ({len(mine.proposals):,})"
    theirs = {p.key for p in everything.proposals} - {p.key for p in mine.proposals}
    assert not theirs & set(apply_buttons(at))
    text = shown(at)
    mine_sources = {s for p in mine.proposals for s in p.sources} | {p.record_id for p in mine.proposals}
    beyond = {s for p in everything.proposals for s in p.sources} - mine_sources
    assert beyond and not [s for s in beyond if s in text]


def test_the_queue_is_not_built_while_the_consolidation_section_is_shown(store, monkeypatch):
    from membrane_engine import OperatorView

    at = section(find=False)
    calls = {"n": 0}
    original = OperatorView.review_queue

    def counting(self, *args, **kwargs):
        calls["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(OperatorView, "review_queue", counting)
    ok(at.run())
    assert calls["n"] == 0 and "Contested" not in " ".join(h.value for h in at.header)


# --------------------------------------------------------------------------- apply, reject, apply all


def test_apply_one_proposal_writes_it_as_the_operator_and_lists_the_run(store):
    at = show_kind(section(), "competence")
    [first, *_] = [p for p in dry_run(store).proposals if p.consolidator == "competence"]
    before = counts(store)
    ok(apply_buttons(at)[first.key].click().run())
    assert any(s.startswith("Applied: 1 created") for s in said(at.success)), shown(at)
    with Engine(store) as m:
        new = [r for r in (m.get(i) for i in set(m.ids()) - set()) if r.type.value == "competence"
               and r.payload.skill_name == first.record.payload.skill_name and r.audit_log[0].actor == "operator:test-admin"]
        assert len(new) == 1
        assert len(m.ids()) == before[0] + 1
        assert m.verify_audit() == []
        [run] = m.as_operator(TEST_ADMIN.name).consolidation_history()
    assert run.selected and run.counts["created"] == 1
    history = at.dataframe[-1].value
    assert list(history["run"]) == [run.run] and "chosen proposals: competence 1 created" in history["what"][0]
    assert first.key not in apply_buttons(show_kind(at, "competence"))


def test_reject_one_proposal_and_it_is_not_proposed_again(store):
    at = show_kind(section(), "plangraph")
    target = [p for p in dry_run(store).proposals if p.consolidator == "plangraph"][0]
    reject = at.button(key=f"rv_cons_reject_{target.key}")
    assert reject.disabled  # a rejection needs a rationale
    ok(at.text_input(key="rv_cons_why").set_value("a one-off incident, not a plan").run())
    before = counts(store)
    ok(at.button(key=f"rv_cons_reject_{target.key}").click().run())
    assert any(s.startswith("Rejected") for s in said(at.success)), shown(at)
    assert target.key not in apply_buttons(show_kind(at, "plangraph"))
    assert counts(store)[0] == before[0]  # no record written
    with Engine(store) as m:
        assert target.key not in {p.key for p in m.consolidate(dry_run=True).proposals}
        [event] = m.as_operator(TEST_ADMIN.name).consolidation_history()
        assert (event.kind, event.actors, event.rationale) == (
            "rejected", ("operator:test-admin",), "a one-off incident, not a plan")
        assert m.verify_audit() == []
    assert "rejected 1 proposal: a one-off incident, not a plan" in list(at.dataframe[-1].value["what"])


def test_apply_all_needs_the_confirmation_and_applies_every_proposal(store):
    at = section()
    preview = dry_run(store)
    apply_all = [b for b in at.button if str(b.key).startswith("rv_cons_all_")][0]
    assert apply_all.disabled
    ok([c for c in at.checkbox if str(c.key).startswith("rv_cons_confirm_")][0].check().run())
    ok([b for b in at.button if str(b.key).startswith("rv_cons_all_")][0].click().run())
    assert any(s.startswith("Applied all") for s in said(at.success)), shown(at)
    created = sum(1 for p in preview.proposals if p.action == "created")
    with Engine(store) as m:
        [run] = m.as_operator(TEST_ADMIN.name).consolidation_history()
        assert run.counts["created"] == created and run.counts["compressed"] == sum(
            1 for p in preview.proposals if p.action == "compressed")
        assert m.verify_audit() == []
    # what the store proposes next is shown: the skills now known are reinforced, nothing is created
    assert all(p.action != "created" or p.consolidator == "semantic" for p in dry_run(store).proposals)


# --------------------------------------------------------------------------- who may


def test_a_viewer_sees_the_section_disabled_with_the_reason(store):
    before = counts(store)
    at = section(VIEWER, find=False)
    find = at.button(key="rv_cons_find")
    assert find.disabled
    assert any("needs the curator role" in i.value for i in at.info)
    assert at.button(key="rv_cons_auto").disabled
    # a forged press of the disabled button: nothing is planned, shown or written (the engine
    # would refuse the viewer's dry run too: tests/consolidation)
    forged_click(find)
    ok(at.run())
    assert not apply_buttons(at) and not [s for s in at.subheader if s.value.startswith("Proposals")]
    assert counts(store) == before
    assert [s.value for s in at.subheader] == ["History"]


def test_the_auto_apply_setting_is_an_admins_and_applies_on_find(store):
    at = section(CURATOR, find=False)
    assert at.button(key="rv_cons_auto").disabled
    forged_click(at.button(key="rv_cons_auto"))
    ok(at.run())
    assert not at.success
    with Engine(store) as m:
        assert m.as_operator(CURATOR.name).consolidation_auto_apply().on is False
    admin = section(find=False)
    ok(admin.button(key="rv_cons_auto").click().run())
    assert any("Apply automatically is now on" in s for s in said(admin.success))
    preview = dry_run(store)
    ok(admin.button(key="rv_cons_find").click().run())
    assert any(s.startswith("Applied automatically") for s in said(admin.success)), shown(admin)
    with Engine(store) as m:
        events = m.as_operator(TEST_ADMIN.name).consolidation_history()
        assert [e.kind for e in events] == ["run", "setting"]
        assert events[0].counts["created"] == sum(1 for p in preview.proposals if p.action == "created")
        assert events[0].actors == ("operator:test-admin",) and m.verify_audit() == []


# --------------------------------------------------------------------------- forged and stale


def test_a_proposal_whose_source_changed_after_it_was_shown_is_not_applied(store):
    """A source deleted by someone else changes the store: the page plans again before it draws,
    the proposal is gone, and the click on its Apply finds no button to press."""
    at = show_kind(section(), "competence")
    target = [p for p in dry_run(store).proposals if p.consolidator == "competence"][0]
    with Engine(store) as m:
        m.delete(target.sources[0], "someone-else", "not a real run")
    before = counts(store)
    ok(apply_buttons(at)[target.key].click().run())
    assert counts(store) == before and not at.success
    assert target.key not in apply_buttons(show_kind(at, "competence"))


def test_a_proposal_rejected_elsewhere_after_it_was_shown_is_reported_stale(store):
    """A rejection changes no record, so the page keeps its dry run; Apply then asks the engine,
    which plans again, finds the proposal left out and writes nothing."""
    at = show_kind(section(), "competence")
    target = [p for p in dry_run(store).proposals if p.consolidator == "competence"][0]
    with Engine(store) as m:
        assert m.reject_consolidation([target.key], "someone-else", "not a skill").rejected == (target.key,)
    before = counts(store)
    ok(apply_buttons(at)[target.key].click().run())
    assert any("had changed since they were shown" in e for e in said(at.error)), shown(at)
    assert counts(store) == before


def test_a_clearance_lowered_after_the_proposals_were_shown_is_held_at_the_moment_of_writing(store):
    """The page showed a proposal over medium records; the curator's clearance is lowered to low
    before Apply: the page plans again within the clearance as stored now, the proposal is not
    offered any more, and nothing is written."""
    at = show_kind(section(CURATOR), "competence")
    target = next(p for p in dry_run(store).proposals if p.action == "created" and
                  p.record.sensitivity.value in ("medium", "high") and p.key in apply_buttons(at))
    with Engine(store) as m:
        m.operators.set(CURATOR.name, actor="test", max_sensitivity="low")
    before = counts(store)
    ok(apply_buttons(at)[target.key].click().run())
    assert counts(store) == before and not at.success
    assert target.key not in apply_buttons(at) and target.key not in {p.key for p in dry_run(store, CURATOR).proposals}


def test_a_curator_demoted_after_the_proposals_were_shown_writes_nothing(store):
    at = show_kind(section(CURATOR), "competence")
    [target, *_] = apply_buttons(at)
    with Engine(store) as m:
        m.operators.set(CURATOR.name, actor="test", role="viewer")
    before = counts(store)
    forged_click(apply_buttons(at)[target])
    ok(at.run())
    assert counts(store) == before
    assert any("needs the curator role" in i.value for i in at.info)
    assert not apply_buttons(at)  # the proposals are gone with the role


def test_a_forged_consolidator_filter_falls_back_to_all(store):
    at = section()
    box = at.selectbox(key="rv_cons_kind")
    box.options = [*box.options, "merge-everything"]  # a value the page never offered
    ok(box.set_value("merge-everything").run())
    assert at.selectbox(key="rv_cons_kind").value == "all"
    assert len(apply_buttons(at)) == min(10, len(dry_run(store).proposals))
