"""Membrane's pkg/consolidation tests (8408c8c) ported to ``Membrane.consolidate``, on both
databases, with the store's clock at T0 (so ``as_of`` and the write time are T0).

Each test names the Go test it ports. Go tests drive one consolidator at a time; here the whole
run is driven and its report read per consolidator (``report.of``), which is what the engine
offers. Membrane reads a record's stored salience where SPEC 12 reads S(as_of), so records that
Go stores with salience s are imported with their anchor at T0 (S(T0) = s). Where SPEC 12
deviates on purpose (trust on write, one scope per derived record) the test asserts SPEC and
says why. What is not ported, and why: tests/membrane/README.md.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from membrane_engine import Membrane, TrustContext
from membrane_engine.consolidation import service
from membrane_engine.consolidation.report import KINDS
from membrane_engine.consolidation.competence import scope_policy, signature, tool_names
from membrane_engine.consolidation.entity_links import (
    Entity,
    EntityIndex,
    canonical_semantic,
    link_terms,
    may_link,
    may_link_back,
    plan_entity_terms,
)
from membrane_engine.consolidation.plangraph import infer_intent
from membrane_engine.consolidation.semantic import derive_tags
from membrane_engine.errors import AccessDeniedError, ValidationError
from membrane_engine.model.records import sensitivity_level, validate_record
from membrane_engine.storage.store import Store

from membrane_kit import T0, go_record, iso

HOUR = 3600
LEVEL = {s: sensitivity_level(s) for s in ("public", "low", "medium", "high", "hyper")}


# --------------------------------------------------------------------------- records as the Go tests make them


def episode(rid: str, *, events=(("event", "old event"),), tools=(), outcome: str | None = None,
            sensitivity: str = "low", scope: str = "", created=T0, salience: float = 1.0, tags=(),
            confidence: float = 1.0, pinned: bool = False) -> dict:
    """An episodic record as Membrane's tests build it (NewMemoryRecord plus the fields they
    set); its salience is anchored at T0, so S(T0) is the salience Go stores. ``tools``:
    (id, tool, depends_on) or a tool name per node."""
    payload: dict = {"kind": "episodic",
                     "timeline": [{"t": iso(created), "event_kind": k, "ref": rid, "summary": s} for k, s in events]}
    if tools:
        nodes = []
        for k, t in enumerate(tools, 1):
            node_id, tool, deps = t if isinstance(t, tuple) else (f"t{k}", t, [])
            nodes.append({"id": node_id, "tool": tool, **({"depends_on": deps} if deps else {})})
        payload["tool_graph"] = nodes
    if outcome:
        payload["outcome"] = outcome
    doc = go_record(rid, "episodic", payload, sensitivity=sensitivity, scope=scope, salience=salience,
                    confidence=confidence, tags=list(tags), created_at=iso(created), updated_at=iso(created))
    doc["lifecycle"].update(last_reinforced_at=iso(created), pinned=pinned, anchor_salience=salience,
                            anchor_at=iso(T0))
    return doc


def tool_episode(rid: str, tools, **fields) -> dict:
    """embedder_test.go episodicToolRecord: a successful "tool_sequence" episode (an hour old
    here, where Go's is a month old: compression is not what these tests look at)."""
    fields.setdefault("created", T0 - timedelta(hours=1))
    return episode(rid, events=(("tool_sequence", "ran a reusable tool sequence"),), tools=tools,
                   outcome="success", **fields)


def semantic_source(rid: str, kind: str, summary: str, outcome: str, **fields) -> dict:
    """semantic_test.go semanticSourceEpisode: medium, scope "project", confidence 0.7,
    salience 0.8, tags deploy and Consolidated."""
    defaults = dict(sensitivity="medium", scope="project", confidence=0.7, salience=0.8,
                    tags=("deploy", "Consolidated"))
    return episode(rid, events=((kind, summary),), outcome=outcome, **{**defaults, **fields})


def entity(rid: str, name: str, scope: str = "project", sensitivity: str = "low", aliases=None) -> dict:
    """entity_links_test.go newEntityRecord: a Project entity named ``name`` with itself as alias."""
    return go_record(rid, "entity", {"kind": "entity", "canonical_name": name, "primary_type": "Project",
                                     "aliases": aliases if aliases is not None else [{"value": name}]},
                     scope=scope, sensitivity=sensitivity)


def fact(rid: str, subject: str, salience: float = 1.0, predicate: str = "observed_in", **fields) -> dict:
    doc = go_record(rid, "semantic", {"kind": "semantic", "subject": subject, "predicate": predicate,
                                      "object": "old deployment note", "validity": {"mode": "global"}},
                    salience=salience, **fields)
    doc["lifecycle"].update(anchor_salience=salience, anchor_at=iso(T0))
    return doc


def skill(rid: str, name: str, salience: float = 1.0, **fields) -> dict:
    doc = go_record(rid, "competence", {"kind": "competence", "skill_name": name,
                                        "triggers": [{"signal": name.split(":", 1)[-1]}],
                                        "recipe": [{"step": "run tests", "tool": "test"}]},
                    salience=salience, **fields)
    doc["lifecycle"].update(anchor_salience=salience, anchor_at=iso(T0))
    return doc


def relations(m: Membrane, rid: str) -> set[tuple[str, str]]:
    return {(r.predicate, r.target_id) for r in m.get(rid).relations}


def entries(m: Membrane, rid: str) -> list[tuple[str, str]]:
    return [(e.action.value, e.actor) for e in m.audit_log(rid)]


def of_type(m: Membrane, memory_type: str) -> list:
    return [r for r in (m.get(i) for i in m.ids()) if r.type.value == memory_type]


# --------------------------------------------------------------------------- episodic_test.go


def test_episodic_consolidate_compresses_eligible_records(mem: Membrane):
    """episodic_test.go TestEpisodicConsolidateCompressesEligibleRecords"""
    mem.import_records([
        episode("old", created=T0 - timedelta(hours=25), salience=0.8),
        episode("near-floor", created=T0 - timedelta(hours=48), salience=0.08),
        episode("recent", created=T0 - timedelta(hours=2), salience=0.8),
        episode("at-floor", created=T0 - timedelta(hours=48), salience=0.05),
        episode("pinned", created=T0 - timedelta(hours=48), salience=0.8, pinned=True),
    ])
    report = mem.consolidate(actor=None)
    assert sorted(report.compressed) == ["near-floor", "old"]
    assert report.counts["episodic_compressed"] == 2
    for rid, want in (("old", 0.4), ("near-floor", 0.05), ("recent", 0.8), ("at-floor", 0.05), ("pinned", 0.8)):
        assert mem.salience_at(rid, T0) == pytest.approx(want, abs=1e-4), rid
    assert ("decay", "consolidation/episodic") in entries(mem, "old")
    assert ("decay", "consolidation/episodic") not in entries(mem, "recent")
    assert mem.verify_audit() == []


def test_consolidation_run_all_includes_episodic_compression(mem: Membrane):
    """episodic_test.go TestConsolidationRunAllIncludesEpisodicCompression"""
    mem.import_records([episode("old-run-all", created=T0 - timedelta(hours=48), salience=0.6)])
    report = mem.consolidate()
    assert report.counts == {"episodic_compressed": 1, "semantic_extracted": 0, "competence_extracted": 0,
                             "plan_graphs_extracted": 0, "duplicates_resolved": 0}
    assert mem.salience_at("old-run-all", T0) == pytest.approx(0.3, abs=1e-4)


def test_compression_reads_salience_and_age_at_as_of(mem: Membrane):
    """SPEC 12: compression reads S(as_of) and the age at as_of (Membrane: its stored salience
    and the wall clock). An episode a day old only at a later as_of is compressed then; one
    created after as_of is no source at all; the value written is never above S(now)."""
    mem.import_records([episode("young", created=T0 - timedelta(hours=12), salience=0.8)])
    assert mem.consolidate(dry_run=True).compressed == []
    later = T0 + timedelta(hours=13)
    report = mem.consolidate(as_of=later, dry_run=True)
    [item] = report.of("episodic")
    s_later = mem.salience_at("young", later)
    assert item.salience_after == pytest.approx(s_later * 0.5)
    assert item.salience_before == pytest.approx(mem.salience_at("young", T0))
    earlier = T0 - timedelta(hours=13)
    assert mem.consolidate(as_of=earlier, dry_run=True).items == ()


# --------------------------------------------------------------------------- semantic_test.go


def test_semantic_consolidator_creates_record_with_entity_links(mem: Membrane):
    """semantic_test.go TestSemanticConsolidatorCreatesRecordWithEntityLinks. The entity is low
    and the fact medium (its source's): the fact names the entity, but the entity gets no
    ``fact_subject_of`` back **(deviation, SPEC 12 trust on write: a record is never changed on
    the strength of a more sensitive source; Membrane writes it)**; at the fact's own
    sensitivity it does (the second store below)."""
    mem.import_records([entity("entity-deploy", "deploy"),
                        semantic_source("episode-semantic-create", "deploy", "deployment completed", "success")])
    report = mem.consolidate(actor=None)
    assert len(report.of("semantic", "created")) == 1 and report.of("semantic", "reinforced") == []
    [sem] = of_type(mem, "semantic")
    assert (sem.payload.subject, sem.payload.predicate, sem.payload.object) == \
        ("entity-deploy", "observed_in", "deployment completed")
    assert (sem.sensitivity.value, sem.confidence, sem.scope) == ("medium", 0.7, "project")
    assert sem.tags == ["consolidated", "deploy"]
    assert {("derived_from", "episode-semantic-create"), ("subject_entity", "entity-deploy")} <= relations(mem, sem.id)
    assert ("fact_subject_of", sem.id) not in relations(mem, "entity-deploy")
    assert sem.provenance.sources[0].ref == "episode-semantic-create"
    assert sem.payload.evidence[0].source_id == "episode-semantic-create"
    assert entries(mem, sem.id) == [("create", "consolidation/semantic")]
    assert mem.verify_audit() == []


def test_semantic_entity_gets_the_inverse_link_at_the_facts_sensitivity(mem: Membrane):
    """semantic_test.go TestSemanticConsolidatorCreatesRecordWithEntityLinks, the inverse half:
    an entity as sensitive as the fact, in its scope, gets ``fact_subject_of``."""
    mem.import_records([entity("entity-deploy", "deploy", sensitivity="medium"),
                        semantic_source("episode", "deploy", "deployment completed", "success")])
    report = mem.consolidate(actor=None)
    [sem_id] = [i.record_id for i in report.of("semantic", "created")]
    assert ("fact_subject_of", sem_id) in relations(mem, "entity-deploy")
    assert ("revise", "consolidation/semantic") in entries(mem, "entity-deploy")
    assert mem.verify_audit() == []


def test_semantic_consolidator_reinforces_existing_and_dedupes_within_run(mem: Membrane):
    """semantic_test.go TestSemanticConsolidatorReinforcesExistingAndDedupesWithinRun. The known
    fact is in the episodes' scope and sensitivity here (the Go test's is unscoped and low, which
    SPEC 12 keeps apart: next test). "build" is seen twice: created once, then reinforced, and
    reported in both lists (SPEC 12)."""
    mem.import_records([
        fact("semantic-existing", "deploy", salience=0.95, scope="project", sensitivity="medium"),
        semantic_source("episode-semantic-existing", "deploy", "deployment completed", "success"),
        semantic_source("episode-semantic-new-a", "build", "build completed", "success"),
        semantic_source("episode-semantic-new-b", "build", "build completed again", "success"),
    ])
    report = mem.consolidate(actor=None)
    created, reinforced = report.of("semantic", "created"), report.of("semantic", "reinforced")
    assert len(created) == 1 and len(reinforced) == 2
    build = created[0].record_id
    assert set(report.reinforced) == {"semantic-existing", build}
    assert mem.salience_at("semantic-existing", T0) == 1.0
    assert ("reinforce", "consolidation/semantic") in entries(mem, "semantic-existing")
    assert entries(mem, build) == [("create", "consolidation/semantic"), ("reinforce", "consolidation/semantic")]
    [build_item] = [i for i in reinforced if i.record_id == build]
    assert build_item.sources == ("episode-semantic-new-b",)
    assert mem.verify_audit() == []


def test_semantic_never_reinforces_across_scopes_or_from_a_more_sensitive_episode(mem: Membrane):
    """SPEC 12 trust on write, against the Go test above: Membrane reinforces the unscoped low
    fact from medium episodes of scope "project"; here that fact is left alone and a fact in the
    episode's scope and sensitivity is created."""
    mem.import_records([fact("unscoped-low", "deploy", salience=0.5),
                        fact("project-low", "deploy", salience=0.5, scope="project"),
                        semantic_source("episode", "deploy", "deployment completed", "success")])
    report = mem.consolidate()
    assert report.reinforced == []
    [new] = report.of("semantic", "created")
    assert (new.record.scope, new.record.sensitivity.value) == ("project", "medium")
    for rid in ("unscoped-low", "project-low"):
        assert mem.salience_at(rid, T0) == 0.5
        assert [a for a, _ in entries(mem, rid)] == ["create", "create"]  # Go's and the import's


def test_semantic_less_sensitive_episode_reinforces_a_more_sensitive_fact(mem: Membrane):
    """The other direction is allowed: a low episode reinforces the high fact of its scope."""
    mem.import_records([fact("high", "deploy", salience=0.5, scope="project", sensitivity="high"),
                        semantic_source("episode", "deploy", "deployment completed", "success", sensitivity="low")])
    report = mem.consolidate()
    assert report.reinforced == ["high"] and report.created == []
    assert mem.salience_at("high", T0) == pytest.approx(0.6)


def test_semantic_leaves_a_retracted_fact_alone(mem: Membrane):
    """A retracted fact is neither revived nor created again **(deviation: Membrane would
    reinforce it)**."""
    mem.import_records([fact("gone", "deploy", salience=0.5, scope="project", sensitivity="medium"),
                        semantic_source("episode", "deploy", "deployment completed", "success")])
    mem.retract("gone", "curator", "wrong")
    report = mem.consolidate()
    assert report.of("semantic") == []
    assert mem.salience_at("gone", T0) == 0.0


def test_semantic_consolidator_skips_ineligible_episodes(mem: Membrane):
    """semantic_test.go TestSemanticConsolidatorSkipsIneligibleEpisodes"""
    mem.import_records([semantic_source("episode-semantic-failed", "deploy", "failed deploy", "failure"),
                        semantic_source("episode-semantic-empty", "deploy", "", "success")])
    assert mem.consolidate().of("semantic") == []


def test_entity_relations_are_stamped_with_the_write_time(mem: Membrane):
    """semantic_test.go TestCanonicalizeSemanticRecordEntitiesUsesCurrentTimeFallback: the
    relations a new fact gets carry the time they were written, never Go's zero time."""
    mem.import_records([entity("entity-zero-created", "deploy", sensitivity="medium"),
                        semantic_source("episode", "deploy", "deployment completed", "success")])
    [item] = mem.consolidate().of("semantic", "created")
    stored = mem.get(item.record_id)
    assert {r.created_at for r in stored.relations} == {T0}
    back = [r for r in mem.get("entity-zero-created").relations if r.target_id == item.record_id]
    assert [r.created_at for r in back] == [T0]


def test_derive_tags_skips_existing_consolidated_tag():
    """semantic_test.go TestDeriveTagsSkipsExistingConsolidatedTag"""
    assert derive_tags(["alpha", "CONSOLIDATED", "beta"]) == ["consolidated", "alpha", "beta"]


# --------------------------------------------------------------------------- competence_test.go


def test_derived_sensitivity_is_the_highest_of_the_sources(mem: Membrane):
    """competence_test.go TestDeriveMaxSensitivityUsesPublicWhenAllSourcesArePublic and
    TestCompetenceConsolidatorPreservesPublicSourceSensitivity: all-public sources give a public
    skill; low and high give a high one. (Go's fallback to low for no source or an unknown
    sensitivity cannot happen here: a group has two sources, and the store refuses unknown
    sensitivities.)"""
    mem.import_records([tool_episode("public-a", ["search"], sensitivity="public"),
                        tool_episode("public-b", ["search"], sensitivity="public"),
                        tool_episode("mixed-low", ["deploy"], sensitivity="low"),
                        tool_episode("mixed-high", ["deploy"], sensitivity="high")])
    report = mem.consolidate()
    skills = {i.record.payload.skill_name: i.record for i in report.of("competence", "created")}
    assert skills["skill:search"].sensitivity.value == "public"
    assert skills["skill:deploy"].sensitivity.value == "high"
    assert "sensitivity=max(high)" in mem.audit_log(skills["skill:deploy"].id)[0].rationale


def test_scopes_are_preserved_and_never_mixed(mem: Membrane):
    """competence_test.go TestDeriveConservativeScopeVariants: one scope is preserved (the
    policy text as Membrane's), unscoped stays unscoped; sources of different scopes are never
    combined **(deviation: Membrane files them under "consolidated:mixed-scope")**, so a
    pattern seen once in each of two scopes makes no skill."""
    assert scope_policy("project:alpha") == "preserved(project:alpha)"
    assert scope_policy("") == "preserved(unscoped)"
    mem.import_records([tool_episode("a1", ["lint"], scope="project:alpha"),
                        tool_episode("a2", ["lint"], scope="project:alpha"),
                        tool_episode("u1", ["fmt"]), tool_episode("u2", ["fmt"]),
                        tool_episode("m1", ["build"], scope="project:beta"),
                        tool_episode("m2", ["build"], scope="project:alpha"),
                        tool_episode("m3", ["build"])])
    report = mem.consolidate()
    skills = {i.record.payload.skill_name: i.record for i in report.of("competence", "created")}
    assert set(skills) == {"skill:lint", "skill:fmt"}
    assert skills["skill:lint"].scope == "project:alpha" and skills["skill:fmt"].scope == ""
    assert "scope=preserved(project:alpha)" in mem.audit_log(skills["skill:lint"].id)[0].rationale
    assert all(not i.record.scope.startswith("consolidated:") for i in report.items if i.record is not None)


def test_competence_consolidator_skips_blank_tool_patterns(mem: Membrane):
    """competence_test.go TestCompetenceConsolidatorSkipsBlankToolPatterns"""
    mem.import_records([tool_episode("blank-tool-a", [" "]), tool_episode("blank-tool-b", [""])])
    assert mem.consolidate().of("competence") == []


def test_competence_consolidator_reinforces_existing_skill(mem: Membrane):
    """competence_test.go TestCompetenceConsolidatorReinforcesExistingSkill"""
    mem.import_records([tool_episode("reinforce-source-a", [" test "]), tool_episode("reinforce-source-b", [" test "]),
                        skill("existing-skill", "skill:test", salience=0.95)])
    report = mem.consolidate(actor=None)
    assert report.of("competence", "created") == []
    [item] = report.of("competence", "reinforced")
    assert item.record_id == "existing-skill" and set(item.sources) == {"reinforce-source-a", "reinforce-source-b"}
    assert item.rationale == "Reinforced: 2 episodes match pattern test"
    assert mem.salience_at("existing-skill", T0) == 1.0
    assert ("reinforce", "consolidation/competence") in entries(mem, "existing-skill")


def test_competence_record_as_membrane_builds_it(mem: Membrane):
    """competence.go's new record (no Go test reads it whole): recipe from the tools, required
    tools, performance, version, confidence, tags, provenance per source and derived_from."""
    mem.import_records([tool_episode("ep-a", ["rg", "go test"]), tool_episode("ep-b", ["go test", "rg"])])
    [item] = mem.consolidate(actor=None).of("competence", "created")
    rec = mem.get(item.record_id)
    p = rec.payload
    assert p.skill_name == "skill:go test+rg" and p.triggers[0].signal == "go test+rg"
    assert [(s.step, s.tool) for s in p.recipe] == [("Step 1: invoke rg", "rg"), ("Step 2: invoke go test", "go test")]
    assert p.required_tools == ["rg", "go test"] and p.version == "1"
    assert (p.performance.success_count, p.performance.success_rate) == (2, 1.0)
    assert (rec.confidence, rec.tags) == (0.8, ["consolidated", "auto-competence"])
    assert [(s.kind.value, s.ref, s.created_by) for s in rec.provenance.sources] == \
        [("outcome", "ep-a", "consolidation/competence"), ("outcome", "ep-b", "consolidation/competence")]
    assert {("derived_from", "ep-a"), ("derived_from", "ep-b")} <= relations(mem, rec.id)


def test_extract_tool_names_normalizes_and_skips_blank_tools():
    """competence_test.go TestExtractToolNamesNormalizesAndSkipsBlankTools"""
    assert tool_names([{"tool": " rg "}, {"tool": ""}, {"tool": "  "}, {"tool": "go test"}]) == ["rg", "go test"]
    assert signature(["rg", "go test"]) == "go test+rg"


def test_infer_intent_skips_blank_timeline_events():
    """competence_test.go TestInferIntentSkipsBlankTimelineEvents"""
    assert infer_intent({"timeline": [{"event_kind": ""}, {"event_kind": "deploy"}]}) == "deploy"
    assert infer_intent({}) == "unknown"


# --------------------------------------------------------------------------- plangraph_test.go

CHAIN = [("n1", "checkout", []), ("n2", "test", ["n1"]), ("n3", "deploy", ["n2"])]


def test_plan_graph_consolidator_creates_plan_with_entity_links_and_skips_duplicates(mem: Membrane):
    """plangraph_test.go TestPlanGraphConsolidatorCreatesPlanWithEntityLinksAndSkipsDuplicates"""
    mem.import_records([entity("entity-deploy", "deploy"), tool_episode("plan-source-linked", CHAIN, scope="project")])
    report = mem.consolidate(actor=None)
    [item] = report.of("plangraph", "created")
    plan = mem.get(item.record_id)
    assert plan.payload.intent == "tool_sequence"
    assert len(plan.payload.nodes) == 3 and len(plan.payload.edges) == 2
    assert [(e.from_, e.to, e.kind.value) for e in plan.payload.edges] == [("n1", "n2", "control"), ("n2", "n3", "control")]
    assert {("derived_from", "plan-source-linked"), ("uses", "entity-deploy")} <= relations(mem, plan.id)
    assert ("used_by", plan.id) in relations(mem, "entity-deploy")
    assert (plan.confidence, plan.tags, plan.scope) == (0.7, ["consolidated", "auto-plangraph"], "project")
    assert entries(mem, plan.id) == [("create", "consolidation/plangraph")]
    assert mem.consolidate().of("plangraph") == []  # the duplicate pass
    assert mem.verify_audit() == []


def test_plan_graph_consolidator_skips_unsupported_episodes(mem: Membrane):
    """plangraph_test.go TestPlanGraphConsolidatorSkipsUnsupportedEpisodes"""
    short = tool_episode("short-plan-source", [("n1", "checkout", []), ("n2", "test", [])])
    working = go_record("not-episodic", "working", {"kind": "working", "thread_id": "thread", "state": "planning"})
    bad = short | {"id": "bad-payload", "payload": {"kind": "semantic", "subject": "x", "predicate": "is",
                                                    "object": "y", "validity": {"mode": "global"}}}
    mem.import_records([short, working])
    with pytest.raises(ValidationError):
        mem.import_records([bad])
    with pytest.raises(ValidationError):
        validate_record(bad)
    assert mem.consolidate().of("plangraph") == []


def test_plan_entity_terms_includes_known_string_params():
    """plangraph_test.go TestPlanEntityTermsIncludesKnownStringParams"""
    got = plan_entity_terms([
        {"op": "deploy", "params": {"tool": "kubectl", "command": "apply", "repo": "orchid",
                                    "repository": "orchid/service", "file": "deployment.yaml", "service": "api",
                                    "package": "pkg/api", "ignored": "not indexed"}},
        {"op": "", "params": {"tool": "", "command": 123}},
    ])
    assert got == ["deploy", "kubectl", "apply", "orchid", "orchid/service", "deployment.yaml", "api", "pkg/api"]


# --------------------------------------------------------------------------- entity_links_test.go


def _index(*entities: Entity, names: dict[str, list[str]]) -> EntityIndex:
    by_id = {e.id: e for e in entities}
    return EntityIndex({term: sorted((by_id[i] for i in ids), key=lambda e: e.id) for term, ids in names.items()})


def test_canonicalize_semantic_record_entities():
    """entity_links_test.go TestCanonicalizeSemanticRecordEntities"""
    orchid, borealis = Entity("entity-orchid", "project", 1), Entity("entity-borealis", "project", 1)
    index = _index(orchid, borealis, names={"orchid": ["entity-orchid"], "borealis": ["entity-borealis"]})
    payload = {"subject": "Orchid", "predicate": "depends_on", "object": "Borealis"}
    linked = canonical_semantic(index, payload, "project", LEVEL["low"])
    assert (payload["subject"], payload["object"]) == ("entity-orchid", "entity-borealis")
    assert linked.forward == [("subject_entity", "entity-orchid"), ("object_entity", "entity-borealis")]
    assert linked.back == [("entity-orchid", "fact_subject_of"), ("entity-borealis", "fact_object_of")]


def test_canonicalize_semantic_record_entities_skips_unsupported_inputs():
    """entity_links_test.go TestCanonicalizeSemanticRecordEntitiesSkipsUnsupportedInputs: nothing
    to resolve (no entity, or an object that is not a string) leaves the payload as it was. (The
    Go test's working record and store without a lookup have no counterpart: only new facts
    are canonicalised, and every store can look entities up.)"""
    payload = {"subject": "Orchid", "predicate": "is", "object": 3}
    assert canonical_semantic(EntityIndex(), payload, "project", 1).forward == []
    assert payload == {"subject": "Orchid", "predicate": "is", "object": 3}


def test_find_entity_by_term_order_and_trust():
    """entity_links_test.go TestFindEntityByTermRejectsInvalidMatches (a match, no match), with
    Membrane's order (the record's scope first, then unscoped, by id) and SPEC 12's rules: an
    unscoped record finds only unscoped entities, and none more sensitive than the record."""
    scoped, unscoped = Entity("z-scoped", "project", 1), Entity("a-unscoped", "", 1)
    secret = Entity("0-secret", "project", 4)
    index = _index(scoped, unscoped, secret, names={"orchid": ["z-scoped", "a-unscoped", "0-secret"]})
    assert index.find("  ORCHID ", "project", 1) == scoped
    assert index.find("Orchid", "project", 4) == secret
    assert index.find("Orchid", "", 4) == unscoped
    assert index.find("Orchid", "other", 1) == unscoped
    assert index.find("Borealis", "project", 4) is None
    assert index.find(None, "project", 4) is None


def test_link_record_to_entity_terms_dedupes_matches():
    """entity_links_test.go TestLinkRecordToEntityTermsDedupesMatches"""
    orchid = Entity("entity-orchid", "project", 1)
    index = _index(orchid, names={"orchid": ["entity-orchid"], "project": ["entity-orchid"]})
    linked = link_terms(index, ["Orchid", "project", "missing"], "project", 1, "uses", "used_by")
    assert linked.forward == [("uses", "entity-orchid")]
    assert linked.back == [("entity-orchid", "used_by")]


def test_link_direction_rules():
    """SPEC 12 trust on write, the two directions (``entity_links`` module docstring)."""
    e = Entity("e", "project", LEVEL["medium"])
    assert may_link(LEVEL["high"], e) and may_link(LEVEL["medium"], e) and not may_link(LEVEL["low"], e)
    assert may_link_back(LEVEL["medium"], "project", e) and may_link_back(LEVEL["low"], "project", e)
    assert not may_link_back(LEVEL["high"], "project", e)
    assert may_link_back(LEVEL["medium"], "", Entity("u", "", LEVEL["medium"]))  # both unscoped
    assert not may_link_back(LEVEL["medium"], "project", Entity("u", "", LEVEL["hyper"]))


def test_sensitivity_rank():
    """entity_links_test.go TestSensitivityRank"""
    assert [sensitivity_level(s) for s in ("public", "low", "medium", "high", "hyper", "")] == [0, 1, 2, 3, 4, -1]


# --------------------------------------------------------------------------- embedder_test.go


def test_created_records_get_ranking_vectors_at_write_time(mem: Membrane):
    """embedder_test.go TestCompetenceConsolidatorWithEmbedderEmbedsNewCompetence,
    TestPlanGraphConsolidatorWithEmbedderEmbedsNewPlan and
    TestNewServiceWithEmbedderWiresDurableConsolidators: two episodes of a three-step chain make
    one skill and two plans, each embedded as it is written (SPEC 12; Membrane embeds skills and
    plans, and facts only in a later backfill: here every created record)."""
    mem.import_records([tool_episode("run-all-a", CHAIN), tool_episode("run-all-b", CHAIN)])
    report = mem.consolidate()
    assert report.counts["competence_extracted"] == 1 and report.counts["plan_graphs_extracted"] == 2
    with mem.store.read() as conn:
        kept = mem.store.vectors_of(conn, report.created, mem.embedder.name)
    assert set(kept) == set(report.created)


class _FailingEmbedder:
    name = "failing-test-embedder"
    dim = 8

    def embed(self, texts):
        raise RuntimeError("embedding unavailable")


def test_a_failing_ranking_provider_writes_no_vectors_but_the_records(store_url):
    """embedder_test.go (the recording embedder returns an error): Membrane ignores it and keeps
    the records; so does the engine."""
    m = Membrane.open(store_url, load_sample=False, clock=lambda: T0, embedder=_FailingEmbedder())
    try:
        m.import_records([tool_episode("episode-a", ["go-test"]), tool_episode("episode-b", ["go-test"])])
        report = m.consolidate()
        assert report.counts["competence_extracted"] == 1
        assert all(m.get(i) for i in report.created)
        assert m.verify_audit() == []
    finally:
        m.close()


# --------------------------------------------------------------------------- consolidation_test.go


@pytest.mark.parametrize("failing, wrapper, kept", [
    ("episodic", "episodic consolidation", ()),
    ("semantic", "semantic consolidation", ("episodic",)),
    ("competence", "competence consolidation", ("episodic", "semantic")),
    ("plangraph", "plan graph consolidation", ("episodic", "semantic", "competence")),
])
def test_run_all_wraps_pipeline_errors(mem: Membrane, monkeypatch, failing, wrapper, kept):
    """consolidation_test.go TestRunAllWrapsPipelineErrors: a consolidator that fails stops the
    run with Membrane's wrapper text; the ones before it keep their work (one transaction each,
    ``consolidation.service``), and nothing of the failing one is written."""
    mem.import_records([tool_episode("a", CHAIN, created=T0 - timedelta(hours=30)),
                        tool_episode("b", CHAIN, created=T0 - timedelta(hours=30))])
    expected = mem.consolidate(dry_run=True)

    def broken(p):
        raise RuntimeError("list failed")

    monkeypatch.setattr(service, "CONSOLIDATORS",
                        tuple((k, broken if k == failing else f) for k, f in service.CONSOLIDATORS))
    with pytest.raises(RuntimeError) as err:
        mem.consolidate()
    assert any(wrapper in note for note in err.value.__notes__)
    partial = err.value.consolidation_report
    assert {i.consolidator for i in partial.items} == set(kept)
    monkeypatch.undo()
    for kind in KINDS:
        done = [i for i in partial.items if i.consolidator == kind]
        assert len(done) == (len(expected.of(kind)) if kind in kept else 0)
    written = {r.type.value for r in (mem.get(i) for i in mem.ids())}
    assert ("plan_graph" in written) == ("plangraph" in kept)
    assert mem.verify_audit() == []


def test_a_failure_in_the_middle_of_a_consolidator_leaves_none_of_it(mem: Membrane, monkeypatch):
    """consolidator_error_test.go (failing store doubles) as a fault in the middle of the plan
    graph consolidator's writes: its records were inserted, then updating the entity fails."""
    mem.import_records([entity("entity-deploy", "deploy", scope=""), tool_episode("a", CHAIN), tool_episode("b", CHAIN)])
    before = (sorted(mem.ids()), mem.audit_query()[0])
    calls = {"n": 0}
    original = Store.write_updates

    def failing(self, conn, audit_rows, updates, last=False):
        if updates:  # the entity's used_by relations, after the plans' rows and audit entries
            calls["n"] += 1
            raise RuntimeError("disk full")
        return original(self, conn, audit_rows, updates, last)

    monkeypatch.setattr(service, "CONSOLIDATORS", tuple(c for c in service.CONSOLIDATORS if c[0] == "plangraph"))
    monkeypatch.setattr(Store, "write_updates", failing)
    with pytest.raises(RuntimeError):
        mem.consolidate()
    monkeypatch.undo()
    assert calls["n"] == 1
    assert (sorted(mem.ids()), mem.audit_query()[0]) == before
    assert mem.verify_audit() == []


# --------------------------------------------------------------------------- SPEC 12 beyond the Go tests


def _snapshot(m: Membrane, as_of) -> tuple:
    docs = sorted(json.dumps(d, sort_keys=True) for d in m.iter_export(as_of=as_of))
    total, rows = m.audit_query(limit=100_000)
    return docs, total, [(r.record_id, r.position, r.entry.rationale) for r in rows]


def test_dry_run_writes_nothing_and_tells_what_a_run_writes(sample_membrane: Membrane):
    """SPEC 12: ``dry_run=True`` returns what would happen and writes nothing (rows and audit
    log unchanged); the run then does exactly that (ids of new records aside: generated)."""
    from tests.conftest import SAMPLE_NOW

    m = sample_membrane
    before = _snapshot(m, SAMPLE_NOW)
    preview = m.consolidate(as_of=SAMPLE_NOW, dry_run=True)
    assert preview.dry_run and preview.created and preview.reinforced and preview.compressed
    assert _snapshot(m, SAMPLE_NOW) == before
    done = m.consolidate(as_of=SAMPLE_NOW)

    def shape(report):  # a record created by the run has a new id each time
        new = set(report.created)
        return sorted((i.consolidator, i.action, i.record_type, i.sources,
                       "" if i.record_id in new else i.record_id) for i in report.items)

    assert shape(preview) == shape(done)
    assert set(done.created) <= set(m.ids())
    assert m.verify_audit() == []


def test_derived_records_are_never_less_sensitive_than_a_source_nor_in_another_scope(sample_membrane: Membrane):
    """SPEC 12 trust on write over the sample store: every created record is at least as
    sensitive as each source and in its scope; every record reinforced is at least as sensitive
    as each source that reinforced it, and in its scope."""
    from tests.conftest import SAMPLE_NOW

    m = sample_membrane
    report = m.consolidate(as_of=SAMPLE_NOW)
    assert report.created and report.reinforced
    for item in report.items:
        if item.action == "compressed":
            continue
        rec = m.get(item.record_id)
        for src in map(m.get, item.sources):
            assert sensitivity_level(rec.sensitivity) >= sensitivity_level(src.sensitivity), (item, src.id)
            assert rec.scope == src.scope, (item, src.id)
    for link in report.links:  # an entity never names a record more sensitive or of another scope
        a, b = m.get(link.source_id), m.get(link.target_id)
        if a.type.value == "entity":
            assert sensitivity_level(a.sensitivity) >= sensitivity_level(b.sensitivity) and a.scope == b.scope
        else:
            assert sensitivity_level(b.sensitivity) <= sensitivity_level(a.sensitivity)
    assert m.verify_audit() == []


def test_hyper_episodes_make_hyper_records_that_reads_gate(mem: Membrane):
    """A hyper episode's plan is hyper: a medium agent never gets it; audit entries name the
    actor given and provenance names it too."""
    mem.import_records([tool_episode("secret", CHAIN, sensitivity="hyper", scope="vault")])
    report = mem.consolidate(actor="nightly-consolidator")
    [plan] = report.of("plangraph", "created")
    assert plan.record.sensitivity.value == "hyper" and plan.record.scope == "vault"
    assert entries(mem, plan.record_id) == [("create", "nightly-consolidator")]
    assert mem.get(plan.record_id).provenance.created_by == "nightly-consolidator"
    agent = TrustContext(max_sensitivity="medium", authenticated=True, actor_id="a", scopes=["vault"])
    assert mem.retrieve_by_type("plan_graph", agent) == []


def test_arguments_are_checked():
    with pytest.raises(ValidationError):
        service._checked_actor("  ")
    with pytest.raises(ValidationError):
        service._checked_actor(3)
    assert service._checked_actor(None) is None


def test_arguments_are_checked_by_the_facade(mem: Membrane):
    with pytest.raises(ValidationError):
        mem.consolidate(dry_run="no")
    with pytest.raises(ValidationError):
        mem.consolidate(as_of="yesterday")


# --------------------------------------------------------------------------- the operator's view


def test_operator_view_consolidates_within_the_clearance(mem: Membrane):
    """SPEC 10 and 12: a curator's run uses only records their clearance sees in full. The hyper
    episode and the other scope's episodes are no sources; nothing created lies beyond the
    clearance; entries name operator:NAME. A viewer may not run it."""
    mem.operators.add("cara", "curator", "medium", scopes=["project"], actor="test")
    mem.operators.add("vic", "viewer", "hyper", actor="test")
    mem.import_records([tool_episode("p1", CHAIN, scope="project"), tool_episode("p2", CHAIN, scope="project"),
                        tool_episode("h1", CHAIN, scope="project", sensitivity="hyper"),
                        tool_episode("h2", CHAIN, scope="project", sensitivity="hyper"),
                        tool_episode("o1", CHAIN, scope="other"), tool_episode("o2", CHAIN, scope="other")])
    with pytest.raises(AccessDeniedError):
        mem.as_operator("vic").consolidate(dry_run=True)
    view = mem.as_operator("cara")
    preview = view.consolidate(dry_run=True)
    used = {s for i in preview.items for s in i.sources} | set(preview.compressed)
    assert used == {"p1", "p2"}
    report = view.consolidate()
    assert {s for i in report.items for s in i.sources} == {"p1", "p2"}
    for rid in report.created:
        assert view.verdict(rid).value == "full"
        assert {a for _, a in entries(mem, rid)} == {"operator:cara"}
    # the hyper and other-scope episodes are consolidated by a run that sees them
    rest = {i.record.scope: i for i in mem.consolidate().of("competence", "created")}
    assert set(rest["project"].sources) == {"p1", "p2", "h1", "h2"} and set(rest["other"].sources) == {"o1", "o2"}
    assert rest["project"].record.sensitivity.value == "hyper"  # the highest of its sources
    assert mem.verify_audit() == []


def test_consolidation_of_many_episodes_reads_no_models_of_the_sources(mem: Membrane, monkeypatch):
    """Speed by design (bench/consolidation.py measures it): the sources are streamed payloads,
    never records; only created records and the records rewritten are models."""
    from membrane_engine.model import records as model

    mem.import_records([tool_episode(f"ep-{k}", ["rg"] if k % 2 else CHAIN, scope=f"s{k % 3}")
                        for k in range(60)])
    built = {"n": 0}
    original = model.MemoryRecord.model_validate.__func__

    def counting(cls, *args, **kwargs):
        built["n"] += 1
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(model.MemoryRecord, "model_validate", classmethod(counting))
    report = mem.consolidate()
    monkeypatch.undo()
    created = len(report.created)
    changed = len({i.record_id for i in report.items if i.action != "created"})
    assert created > 30
    assert built["n"] <= created + changed + len({link.source_id for link in report.links})
