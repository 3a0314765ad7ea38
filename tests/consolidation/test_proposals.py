"""Consolidation proposals applied one by one, rejected, and the run's history (SPEC 12 in the
console's Review queue), on both databases with the store's clock at T0.

A dry run's report groups its items into proposals (``report.proposals``), each with a key that
stays the same while the store does; ``consolidate(only=[keys])`` plans again and applies just
those, reporting the ones the store no longer proposes as stale; ``reject_consolidation``
records keys that every later run leaves out until their sources change. Every write is one
transaction naming its actor, and the audit log verifies after each."""

from __future__ import annotations

from datetime import timedelta

import pytest

from membrane_engine import Membrane
from membrane_engine.consolidation import ledger, service
from membrane_engine.errors import AccessDeniedError, ValidationError
from membrane_engine.rules.chain import STORE_SUBJECT
from tests.membrane.membrane_kit import T0, go_record, iso

CHAIN = [("n1", "checkout", []), ("n2", "test", ["n1"]), ("n3", "deploy", ["n2"])]


def episode(rid: str, *, kind: str = "tool_sequence", summary: str = "ran a tool sequence", tools=(),
            outcome: str = "success", sensitivity: str = "low", scope: str = "project", hours_old: float = 1,
            salience: float = 1.0) -> dict:
    created = T0 - timedelta(hours=hours_old)
    payload: dict = {"kind": "episodic", "outcome": outcome,
                     "timeline": [{"t": iso(created), "event_kind": kind, "ref": rid, "summary": summary}]}
    if tools:
        payload["tool_graph"] = [{"id": n, "tool": t, **({"depends_on": d} if d else {})} if isinstance(t, str)
                                 else t for n, t, d in tools]
    doc = go_record(rid, "episodic", payload, sensitivity=sensitivity, scope=scope, salience=salience,
                    created_at=iso(created), updated_at=iso(created))
    doc["lifecycle"].update(last_reinforced_at=iso(created), anchor_salience=salience, anchor_at=iso(T0))
    return doc


def skill_episode(rid: str, **fields) -> dict:
    return episode(rid, tools=[("t1", "rg", []), ("t2", "pytest", [])], **fields)


def entity(rid: str, name: str, scope: str = "project", sensitivity: str = "low") -> dict:
    return go_record(rid, "entity", {"kind": "entity", "canonical_name": name, "primary_type": "Tool",
                                     "aliases": [{"value": name}]}, scope=scope, sensitivity=sensitivity)


def fact(rid: str, subject: str, scope: str = "project", sensitivity: str = "low", salience: float = 0.5) -> dict:
    doc = go_record(rid, "semantic", {"kind": "semantic", "subject": subject, "predicate": "observed_in",
                                      "object": "an old note", "validity": {"mode": "global"}},
                    scope=scope, sensitivity=sensitivity, salience=salience)
    doc["lifecycle"].update(anchor_salience=salience, anchor_at=iso(T0))
    return doc


def store_state(m: Membrane) -> tuple:
    """Every record id and the number of audit entries: what a write would change."""
    return sorted(m.ids()), m.audit_query(limit=0)[0]


def by_kind(report, consolidator: str, action: str | None = None) -> list:
    return [p for p in report.proposals if p.consolidator == consolidator and (action is None or p.action == action)]


@pytest.fixture
def mixed(mem: Membrane) -> Membrane:
    """A store whose dry run proposes one of each: a compression (an old episode), a fact created
    and reinforced in the run (two "build" events), a reinforcement of a known fact ("deploy"),
    a skill (two episodes with the same tools, linked to the entity "pytest") and a plan graph."""
    mem.import_records([
        entity("ent-pytest", "pytest"),
        fact("fact-deploy", "deploy"),
        episode("old", kind="noise", outcome="failure", hours_old=30),
        episode("build-a", kind="build", summary="build passed"),
        episode("build-b", kind="build", summary="build passed again"),
        episode("deploy-1", kind="deploy", summary="deployed"),
        skill_episode("skill-a"), skill_episode("skill-b"),
        episode("plan-src", kind="release", outcome="failure", tools=CHAIN),
    ])
    return mem


# --------------------------------------------------------------------------- proposals and keys


def test_a_dry_run_groups_items_into_proposals_with_stable_keys(mixed: Membrane):
    first = mixed.consolidate(dry_run=True)
    again = mixed.consolidate(dry_run=True)
    assert [p.key for p in first.proposals] == [p.key for p in again.proposals]
    assert len({p.key for p in first.proposals}) == len(first.proposals)
    [compressed] = by_kind(first, "episodic")
    assert (compressed.action, compressed.record_id, compressed.sources) == ("compressed", "old", ())
    [build] = [p for p in by_kind(first, "semantic", "created") if "build-a" in p.sources]
    # created by build-a, reinforced in the same run by build-b: one proposal, both items
    assert build.sources == ("build-a", "build-b") and [i.action for i in build.items] == ["created", "reinforced"]
    assert build.record.payload.subject == "build"
    [known] = by_kind(first, "semantic", "reinforced")
    assert (known.record_id, known.sources) == ("fact-deploy", ("deploy-1",))
    [skill] = by_kind(first, "competence")
    assert skill.action == "created" and skill.sources == ("skill-a", "skill-b")
    assert {p.consolidator for p in first.proposals} == {"episodic", "semantic", "competence", "plangraph"}
    for p in first.proposals:
        assert p.key.startswith(f"{p.consolidator}:{p.action}:")


def test_a_key_changes_when_a_source_changes(mixed: Membrane):
    before = {p.sources: p.key for p in mixed.consolidate(dry_run=True).proposals if p.consolidator == "competence"}
    mixed.reclassify("skill-b", "curator", "more sensitive than thought", sensitivity="medium")
    after = {p.sources: p.key for p in mixed.consolidate(dry_run=True).proposals if p.consolidator == "competence"}
    assert set(before) == set(after) == {("skill-a", "skill-b")}
    assert before != after  # same sources, another label: another proposal (a medium skill)


# --------------------------------------------------------------------------- applying some


def test_only_applies_the_chosen_proposal_and_nothing_else(mixed: Membrane):
    preview = mixed.consolidate(dry_run=True)
    [skill] = by_kind(preview, "competence")
    ids_before = set(mixed.ids())
    done = mixed.consolidate(actor="alice", only=[skill.key])
    assert done.stale == () and done.run is not None
    assert [p.key for p in done.proposals] == [skill.key]
    [new] = done.created
    assert set(mixed.ids()) - ids_before == {new}
    record = mixed.get(new)
    assert record.payload.skill_name == "skill:pytest+rg" and record.sensitivity.value == "low"
    # its entity links in both directions, written with it
    assert ("uses", "ent-pytest") in {(r.predicate, r.target_id) for r in record.relations}
    assert ("used_by", new) in {(r.predicate, r.target_id) for r in mixed.get("ent-pytest").relations}
    assert [(e.action.value, e.actor) for e in mixed.audit_log(new)] == [("create", "alice")]
    # the rest is untouched and still proposed
    assert mixed.salience_at("old", T0) == pytest.approx(1.0)
    assert mixed.salience_at("fact-deploy", T0) == pytest.approx(0.5)
    after = mixed.consolidate(dry_run=True)
    # ... and the skill, now known, is reinforced by its episodes at every run, as Membrane does
    [again] = by_kind(after, "competence")
    assert (again.action, again.record_id, again.sources) == ("reinforced", new, ("skill-a", "skill-b"))
    assert {p.key for p in after.proposals} - {again.key} == {p.key for p in preview.proposals} - {skill.key}
    assert mixed.verify_audit() == []


def test_a_created_record_left_out_leaves_its_entity_links_out(mem: Membrane):
    """The entity would get ``fact_subject_of`` from the new fact: applying only the compression
    writes neither the fact nor the entity's link, nor a revise entry on the entity."""
    mem.import_records([entity("ent-deploy", "deploy"), episode("old", kind="deploy", hours_old=30),
                        episode("fresh", kind="deploy", summary="deployed")])
    preview = mem.consolidate(dry_run=True)
    [fact_p] = by_kind(preview, "semantic", "created")
    assert ("subject_entity", "ent-deploy") in {(r.predicate, r.target_id) for r in fact_p.record.relations}
    [compress] = by_kind(preview, "episodic")
    entity_log = len(mem.audit_log("ent-deploy"))
    done = mem.consolidate(only=[compress.key])
    assert done.compressed == ["old"] and done.created == [] and done.links == ()
    assert len(mem.audit_log("ent-deploy")) == entity_log
    assert mem.get("ent-deploy").relations == []
    # applied on its own later, the fact brings its links
    done = mem.consolidate(only=[fact_p.key])
    [fid] = done.created
    assert ("fact_subject_of", fid) in {(r.predicate, r.target_id) for r in mem.get("ent-deploy").relations}
    assert mem.verify_audit() == []


def test_applying_every_key_of_a_preview_does_what_a_whole_run_does(mixed: Membrane):
    preview = mixed.consolidate(dry_run=True)
    done = mixed.consolidate(only=[p.key for p in preview.proposals])
    assert done.stale == ()

    def shape(report):
        new = set(report.created)
        return sorted((i.consolidator, i.action, i.sources, "" if i.record_id in new else i.record_id)
                      for i in report.items)

    assert shape(done) == shape(preview)
    assert mixed.verify_audit() == []


def test_a_proposal_whose_sources_changed_is_stale_and_not_applied(mixed: Membrane):
    preview = mixed.consolidate(dry_run=True)
    [skill] = by_kind(preview, "competence")
    [compress] = by_kind(preview, "episodic")
    mixed.delete("skill-b", "curator", "not a real run")
    before = store_state(mixed)
    done = mixed.consolidate(only=[skill.key])
    assert done.stale == (skill.key,) and done.items == () and done.run is None
    assert store_state(mixed) == before  # nothing written, not even a run entry
    # a fresh key next to the stale one: the fresh one is applied, the stale one reported
    done = mixed.consolidate(only=[skill.key, compress.key])
    assert done.stale == (skill.key,) and done.compressed == ["old"]
    assert mixed.verify_audit() == []


def test_a_proposal_applied_is_stale_when_applied_again_unless_the_store_proposes_it_anew(mixed: Membrane):
    preview = mixed.consolidate(dry_run=True)
    [plan] = by_kind(preview, "plangraph")
    assert mixed.consolidate(only=[plan.key]).stale == ()
    assert mixed.consolidate(only=[plan.key]).stale == (plan.key,)  # the episode has its plan now


def test_only_of_nothing_writes_nothing(mixed: Membrane):
    before = store_state(mixed)
    report = mixed.consolidate(only=[])
    assert report.items == () and report.stale == () and report.run is None
    assert store_state(mixed) == before


@pytest.mark.parametrize("bad", ["semantic:created:abc", ["nope"], [3], "x", ["semantic:created:" + "A" * 24],
                                 ["other:created:" + "a" * 24]])
def test_keys_are_checked(mixed: Membrane, bad):
    with pytest.raises(ValidationError):
        mixed.consolidate(only=bad)
    with pytest.raises(ValidationError):
        mixed.reject_consolidation(bad, "curator", "no")


# --------------------------------------------------------------------------- rejecting


def test_a_rejected_proposal_is_not_proposed_again_until_its_sources_change(mixed: Membrane):
    preview = mixed.consolidate(dry_run=True)
    [skill] = by_kind(preview, "competence")
    state = store_state(mixed)
    out = mixed.reject_consolidation([skill.key], "carol", "these two runs were a test harness")
    assert out.rejected == (skill.key,) and out.stale == ()
    assert sorted(mixed.ids()) == state[0]  # no record written; one entry on the store's own chain
    [entry] = [r for r in mixed.audit_query(record_id=STORE_SUBJECT, limit=10)[1]
               if (r.details or {}).get("kind") == "consolidation_rejected"]
    assert (entry.entry.actor, entry.entry.rationale) == ("carol", "these two runs were a test harness")
    assert entry.details["keys"] == [skill.key]
    again = mixed.consolidate(dry_run=True)
    assert by_kind(again, "competence") == [] and again.rejected == 1
    # a whole run leaves it out too, and so does a run asking for it by key
    assert mixed.consolidate(only=[skill.key]).stale == (skill.key,)
    assert mixed.consolidate().of("competence") == []
    # a third run of the same tools: the group's sources changed, so it is proposed again
    mixed.import_records([skill_episode("skill-c")])
    [back] = by_kind(mixed.consolidate(dry_run=True), "competence")
    assert back.sources == ("skill-a", "skill-b", "skill-c") and back.key != skill.key
    assert mixed.verify_audit() == []


def test_rejecting_a_key_no_longer_proposed_records_nothing(mixed: Membrane):
    preview = mixed.consolidate(dry_run=True)
    [plan] = by_kind(preview, "plangraph")
    mixed.consolidate(only=[plan.key])
    before = store_state(mixed)
    out = mixed.reject_consolidation([plan.key], "carol", "too late")
    assert out.rejected == () and out.stale == (plan.key,)
    assert store_state(mixed) == before


def test_a_rejection_needs_an_actor_and_a_rationale(mixed: Membrane):
    [p] = by_kind(mixed.consolidate(dry_run=True), "plangraph")
    for actor, rationale in ((None, "why"), ("  ", "why"), ("carol", ""), ("carol", "   "), ("carol", 3)):
        with pytest.raises(ValidationError):
            mixed.reject_consolidation([p.key], actor, rationale)


def test_rejecting_a_reinforcement_keeps_the_fact_as_it_is(mixed: Membrane):
    [known] = by_kind(mixed.consolidate(dry_run=True), "semantic", "reinforced")
    mixed.reject_consolidation([known.key], "carol", "deploy-1 was a dry run")
    mixed.consolidate()
    assert mixed.salience_at("fact-deploy", T0) == pytest.approx(0.5)
    assert [e.action.value for e in mixed.audit_log("fact-deploy")] == ["create", "create"]  # Go's, the import's


# --------------------------------------------------------------------------- history and the setting


def test_each_run_is_audited_on_the_store_chain_and_listed_in_the_history(mixed: Membrane):
    preview = mixed.consolidate(dry_run=True)
    assert ledger.history(mixed._ctx) == []  # a dry run writes no history
    [skill] = by_kind(preview, "competence")
    one = mixed.consolidate(actor="alice", only=[skill.key])
    whole = mixed.consolidate(actor=None)
    history = ledger.history(mixed._ctx)
    assert [h.run for h in history] == [whole.run, one.run]
    newest, oldest = history
    assert oldest.selected and not newest.selected
    assert oldest.actors == ("alice",) and oldest.counts == {"created": 1, "reinforced": 0, "compressed": 0}
    assert [(i.consolidator, i.action, i.record_id) for i in oldest.items] == [("competence", "created", one.created[0])]
    assert set(newest.actors) == {f"consolidation/{k}" for k in newest.by_consolidator}
    assert newest.counts == {a: len(getattr(whole, a)) if a != "reinforced" else
                             len(whole.of("semantic", "reinforced")) + len(whole.of("competence", "reinforced"))
                             for a in ("created", "reinforced", "compressed")}
    assert mixed.verify_audit() == []


def test_a_failing_consolidator_leaves_no_run_entry_of_its_own(mixed: Membrane, monkeypatch):
    def broken(p):
        raise RuntimeError("list failed")

    monkeypatch.setattr(service, "CONSOLIDATORS",
                        tuple((k, broken if k == "competence" else f) for k, f in service.CONSOLIDATORS))
    with pytest.raises(RuntimeError) as err:
        mixed.consolidate()
    partial = err.value.consolidation_report
    [run] = ledger.history(mixed._ctx)
    assert run.run == partial.run and set(run.by_consolidator) == {"episodic", "semantic"}
    assert mixed.verify_audit() == []


# --------------------------------------------------------------------------- the operator's view


def test_the_view_applies_rejects_and_lists_within_the_clearance(mem: Membrane):
    """A curator cleared for medium in "project" sees, applies and rejects only proposals over
    what the clearance sees in full; keys of proposals beyond it are stale to them; the history
    counts only what they see; a viewer may read the history but neither apply nor reject."""
    mem.operators.add("cara", "curator", "medium", scopes=["project"], actor="test")
    mem.operators.add("vic", "viewer", "hyper", actor="test")
    mem.operators.add("ada", "admin", "hyper", actor="test")
    mem.import_records([skill_episode("p1"), skill_episode("p2"),
                        skill_episode("h1", sensitivity="hyper", scope="vault"),
                        skill_episode("h2", sensitivity="hyper", scope="vault")])
    cara, vic, ada = (mem.as_operator(n) for n in ("cara", "vic", "ada"))
    mine = cara.consolidate(dry_run=True)
    every = ada.consolidate(dry_run=True)
    [vault] = [p for p in by_kind(every, "competence") if p.sources == ("h1", "h2")]
    assert vault.key not in {p.key for p in mine.proposals}
    assert cara.consolidate(only=[vault.key]).stale == (vault.key,)
    assert cara.reject_consolidation([vault.key], "not mine").stale == (vault.key,)
    with pytest.raises(AccessDeniedError):
        vic.reject_consolidation([vault.key], "no")
    with pytest.raises(AccessDeniedError):
        vic.consolidate(only=[vault.key])
    [project] = by_kind(mine, "competence")
    out = cara.reject_consolidation([project.key], "a test harness")
    assert out.rejected == (project.key,)
    applied = ada.consolidate(only=[vault.key, project.key])
    assert applied.stale == (project.key,) and len(applied.created) == 1  # cara's rejection holds for all
    assert mem.get(applied.created[0]).sensitivity.value == "hyper"
    # the history: ada sees her run and the rejection; cara only the rejection (the run made
    # one hyper record in "vault"); vic the rejection too (hyper, every scope)
    assert [h.kind for h in ada.consolidation_history()] == ["run", "rejected"]
    assert [h.kind for h in cara.consolidation_history()] == ["rejected"]
    [rejection] = cara.consolidation_history()
    assert rejection.actors == ("operator:cara",) and rejection.counts == {"rejected": 1}
    assert rejection.rationale == "a test harness"
    assert [h.kind for h in vic.consolidation_history()] == ["run", "rejected"]
    assert mem.verify_audit() == []


def test_the_auto_apply_setting_is_an_admins_and_audited(mem: Membrane):
    mem.operators.add("cara", "curator", "hyper", actor="test")
    mem.operators.add("ada", "admin", "hyper", actor="test")
    ada, cara = mem.as_operator("ada"), mem.as_operator("cara")
    assert cara.consolidation_auto_apply().on is False
    with pytest.raises(AccessDeniedError):
        cara.set_consolidation_auto_apply(True)
    with pytest.raises(ValidationError):
        ada.set_consolidation_auto_apply("yes")
    setting = ada.set_consolidation_auto_apply(True)
    assert (setting.on, setting.actor, setting.at) == (True, "operator:ada", T0)
    assert cara.consolidation_auto_apply() == setting
    before = mem.audit_query(limit=0)[0]
    assert ada.set_consolidation_auto_apply(True) == setting  # already on: nothing written
    assert mem.audit_query(limit=0)[0] == before
    ada.set_consolidation_auto_apply(False)
    assert cara.consolidation_auto_apply().on is False
    assert [(h.kind, h.auto_apply, h.actors) for h in cara.consolidation_history()] == [
        ("setting", False, ("operator:ada",)), ("setting", True, ("operator:ada",))]
    assert mem.verify_audit() == []
