"""SPEC 3: trust gating (full / redacted / hidden), the redacted view, explanations."""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timezone

import numpy as np
import pytest

from membrane_engine import RetrieveRequest, TrustContext, Verdict
from membrane_engine.errors import NilTrustError
from membrane_engine.rules.trust import decide, verdicts

from tests.support.records import T0, iso, rec, trust

LEVELS = ["public", "low", "medium", "high", "hyper"]


def expected_verdict(sensitivity: str, max_sensitivity: str) -> str:
    d = LEVELS.index(sensitivity) - LEVELS.index(max_sensitivity)
    return "full" if d <= 0 else "redacted" if d == 1 else "hidden"


@pytest.mark.parametrize("sensitivity, verdict", [
    ("public", "full"), ("low", "full"), ("medium", "full"), ("high", "redacted"), ("hyper", "hidden"),
])
def test_redaction_table_under_max_medium(sensitivity, verdict):
    assert decide(sensitivity, "", trust("medium")).verdict.value == verdict


@pytest.mark.parametrize("max_s, sens", list(itertools.product(LEVELS, LEVELS)))
def test_redaction_table_every_pair(max_s, sens):
    assert decide(sens, "", trust(max_s)).verdict.value == expected_verdict(sens, max_s)


def test_unknown_sensitivity_is_hidden():
    assert decide("secret", "", trust("hyper")).verdict is Verdict.HIDDEN
    assert decide(None, "", trust("hyper")).verdict is Verdict.HIDDEN


@pytest.mark.parametrize("scope, scopes, sens, verdict", [
    ("alpha", [], "low", "full"),                 # no scopes given: every scope allowed
    ("alpha", [], "high", "redacted"),
    ("", ["alpha"], "low", "full"),               # unscoped: visible in every scope
    ("", ["alpha"], "high", "redacted"),
    ("alpha", ["alpha", "beta"], "low", "full"),  # exact match
    ("beta", ["alpha", "beta"], "high", "redacted"),
    ("gamma", ["alpha"], "low", "hidden"),        # no match
    ("gamma", ["alpha"], "high", "hidden"),       # no match: hidden even one level above
    ("gamma", ["alpha"], "public", "hidden"),
    ("Alpha", ["alpha"], "low", "hidden"),        # exact string match only
    ("alpha-1", ["alpha"], "low", "hidden"),
    ("alpha", ["alpha-1", "lph"], "low", "hidden"),
    ("", [""], "low", "full"),
])
def test_scope_rules(scope, scopes, sens, verdict):
    assert decide(sens, scope, trust("medium", scopes)).verdict.value == verdict


def test_authenticated_and_actor_do_not_change_the_decision():
    for sens, scope in itertools.product(LEVELS, ["", "alpha", "beta"]):
        a = decide(sens, scope, TrustContext(max_sensitivity="low", authenticated=True, actor_id="x", scopes=["alpha"]))
        b = decide(sens, scope, TrustContext(max_sensitivity="low", authenticated=False, actor_id="", scopes=["alpha"]))
        assert a.verdict == b.verdict


def test_trust_context_accepts_strings_and_rejects_a_single_scope_string():
    t = TrustContext(max_sensitivity="high", scopes=["a"])
    assert t.max_sensitivity.value == "high" and t.scopes == ("a",)
    with pytest.raises(Exception):
        TrustContext(max_sensitivity="high", scopes="alpha")
    with pytest.raises(Exception):
        TrustContext(max_sensitivity="secret")


def test_decide_equals_vectorized_verdicts():
    sens_values = LEVELS + ["secret"]
    scope_names = ["", "alpha", "beta", "gamma", "Alpha"]
    pairs = list(itertools.product(sens_values, scope_names))
    levels = np.array([LEVELS.index(s) if s in LEVELS else -1 for s, _ in pairs], dtype=np.int8)
    codes = np.array([scope_names.index(sc) for _, sc in pairs], dtype=np.int32)
    names = {0: "hidden", 1: "redacted", 2: "full"}
    contexts = [trust(m, scopes) for m in LEVELS
                for scopes in ([], ["alpha"], ["alpha", "beta"], ["delta"], [""], ["gamma", "Alpha"])]
    for ctx in contexts:
        vec = verdicts(levels, codes, scope_names, ctx)
        for (sens, scope), code in zip(pairs, vec):
            assert names[int(code)] == decide(sens, scope, ctx).verdict.value, (sens, scope, ctx)


# --------------------------------------------------------------------------- the redacted view

MARKERS = ["PAYLOAD-MARKER-7f3a", "PROV-MARKER-91cc", "REL-MARKER-5d2e", "AUDIT-MARKER-c0de",
           "EXTRA-MARKER-aa11", "CREATOR-MARKER-0b0b", "DECAY-MARKER-9999"]


def secret_record(rid: str = "secret", sensitivity: str = "high", scope: str = "alpha", type_: str = "semantic"):
    payload = {"kind": "semantic", "subject": MARKERS[0], "predicate": "is", "object": {"deep": MARKERS[0]}}
    if type_ == "competence":
        payload = {"kind": "competence", "skill_name": MARKERS[0],
                   "performance": {"success_count": 9, "failure_count": 1}}
    doc = rec(rid, type_, sensitivity=sensitivity, scope=scope, salience=0.8, confidence=0.65,
              tags=["t1", "t2"], payload=payload, pinned=True, deletion_policy="never",
              last_reinforced_at=datetime(2026, 5, 1, tzinfo=timezone.utc),
              provenance={"sources": [{"kind": "artifact", "ref": MARKERS[1], "hash": MARKERS[1]}],
                          "created_by": MARKERS[5]},
              relations=[{"predicate": MARKERS[2], "target_id": "anchor-rec", "weight": 0.4}],
              audit_log=[{"action": "create", "actor": MARKERS[3], "timestamp": iso(T0), "rationale": MARKERS[3]}],
              x_vendor=MARKERS[4])
    doc["lifecycle"]["decay"]["x_decay"] = MARKERS[6]
    doc["lifecycle"]["x_lifecycle"] = MARKERS[6]
    return doc


# What Membrane's retrieval.Redact marshals to (zero-valued omitempty fields left out: no
# min_salience, max_age_seconds, reinforcement_gain, pinned or relations), plus our flag.
EXPECTED_REDACTED = {
    "id": "secret", "type": "semantic", "sensitivity": "high", "confidence": 0.65, "salience": 0.8,
    "scope": "alpha", "tags": ["t1", "t2"], "created_at": "2026-06-01T12:00:00Z",
    "updated_at": "2026-06-01T12:00:00Z",
    "lifecycle": {
        "decay": {"curve": "exponential", "half_life_seconds": 0},
        "last_reinforced_at": "0001-01-01T00:00:00Z", "deletion_policy": "auto_prune",
    },
    "provenance": {"sources": []}, "payload": None, "audit_log": [], "redacted": True,
}


def _assert_clean(view) -> None:
    blob = view.model_dump_json()
    for marker in MARKERS:
        assert marker not in blob
    assert view.model_dump(mode="json") == EXPECTED_REDACTED | {"id": view.id, "type": view.type.value,
                                                                   "sensitivity": view.sensitivity.value,
                                                                   "salience": view.salience}


def test_redacted_view_shape_in_retrieve(mem):
    mem.import_records([rec("anchor-rec"), secret_record()])
    resp = mem.retrieve(RetrieveRequest(trust=trust("medium", ["alpha"]), as_of=T0))
    views = {r.id: r for r in resp.records}
    view = views["secret"]
    assert view.redacted is True and view.payload is None
    assert view.model_dump(mode="json") == EXPECTED_REDACTED
    assert json.loads(view.model_dump_json()) == EXPECTED_REDACTED
    _assert_clean(view)
    assert views["anchor-rec"].redacted is False


def test_redacted_view_everywhere_it_is_returned(mem, tmp_path):
    mem.import_records([rec("anchor-rec"), secret_record(), secret_record("comp", type_="competence")])
    ctx = trust("medium", ["alpha"])
    by_type = mem.retrieve_by_type("semantic", ctx, as_of=T0)
    assert [r.id for r in by_type] == ["secret", "anchor-rec"] or [r.id for r in by_type] == ["anchor-rec", "secret"]
    _assert_clean(next(r for r in by_type if r.id == "secret"))
    resp = mem.retrieve(RetrieveRequest(trust=ctx, memory_types=["competence"], as_of=T0))
    _assert_clean(resp.records[0])
    _assert_clean(resp.selection.selected[0])
    assert resp.selection.scores == {"comp": 0.5}
    out = tmp_path / "export.json"
    mem.export_file(out, trust=ctx, as_of=T0)
    text = out.read_text()
    for marker in MARKERS:
        assert marker not in text
    docs = {d["id"]: d for d in json.loads(text)}
    assert docs["secret"] == EXPECTED_REDACTED


def test_redacted_view_salience_is_s_of_as_of(lite):
    doc = secret_record()
    doc["lifecycle"]["pinned"] = False
    lite.import_records([rec("anchor-rec"), doc])
    later_day = datetime(2026, 6, 2, 12, 0, tzinfo=timezone.utc)
    resp = lite.retrieve(RetrieveRequest(trust=trust("medium"), as_of=later_day))
    view = next(r for r in resp.records if r.id == "secret")
    assert view.salience == pytest.approx(0.4)


# --------------------------------------------------------------------------- explain


def test_explain_reason_sentences(mem):
    mem.import_records([
        rec("hi", sensitivity="high", scope="alpha"),
        rec("beta", sensitivity="low", scope="beta"),
        rec("open", sensitivity="low", scope=""),
        rec("hyper", sensitivity="hyper", scope="alpha"),
        rec("low-alpha", sensitivity="low", scope="alpha"),
        rec("faded", sensitivity="low", salience=0.12, pinned=True),
    ])
    e = mem.explain("hi", trust("medium", ["alpha", "global"]))
    assert e.verdict is Verdict.REDACTED
    assert "sensitivity high is one level above max medium: redacted" in e.reasons
    assert "scope alpha is in [alpha, global]" in e.reasons

    e = mem.explain("beta", trust("medium", ["alpha", "global"]))
    assert e.verdict is Verdict.HIDDEN
    assert "scope beta not in [alpha, global]: hidden" in e.reasons
    assert (e.id, e.type, e.sensitivity, e.scope) == ("beta", "semantic", "low", "beta")

    e = mem.explain("open", trust("medium", ["alpha"]))
    assert e.verdict is Verdict.FULL
    assert "unscoped: visible in every scope" in e.reasons
    assert "sensitivity low is within max medium" in e.reasons

    e = mem.explain("low-alpha", trust("medium"))
    assert e.verdict is Verdict.FULL
    assert "no scopes given: all scopes allowed" in e.reasons

    e = mem.explain("hyper", trust("medium"))
    assert e.verdict is Verdict.HIDDEN
    assert "sensitivity hyper is 2 levels above max medium: hidden" in e.reasons

    when = datetime(2026, 12, 1, tzinfo=timezone.utc)
    e = mem.explain("faded", trust("medium"), as_of=when, min_salience=0.3)
    assert "salience 0.12 at 2026-12-01 is below min 0.3" in e.reasons
    assert e.salience == pytest.approx(0.12)
    e = mem.explain("faded", trust("medium"), as_of=when, min_salience=0.1)
    assert not any("below min" in r for r in e.reasons)


def test_explain_of_a_hidden_record_names_no_content(mem):
    mem.import_records([rec("anchor-rec"), secret_record(sensitivity="hyper")])
    e = mem.explain("secret", trust("low", ["beta"]), as_of=T0, min_salience=0.5)
    assert e.verdict is Verdict.HIDDEN
    blob = e.model_dump_json()
    for marker in MARKERS:
        assert marker not in blob
    assert (e.id, e.type, e.sensitivity, e.scope) == ("secret", "semantic", "hyper", "alpha")


def test_explain_requires_trust_and_an_existing_record(lite):
    from membrane_engine.errors import NotFoundError

    lite.import_records([rec("x")])
    with pytest.raises(NilTrustError):
        lite.explain("x", None)
    with pytest.raises(NotFoundError):
        lite.explain("nope", trust())


def test_explain_verdict_matches_retrieval(mem):
    docs = [rec(f"r{i}-{s}-{sc or 'none'}", sensitivity=s, scope=sc)
            for i, (s, sc) in enumerate(itertools.product(LEVELS, ["", "alpha", "beta"]))]
    mem.import_records(docs)
    for ctx in [trust("low"), trust("medium", ["alpha"]), trust("public", ["beta", "alpha"]), trust("hyper", ["x"])]:
        returned = {r.id: ("redacted" if r.redacted else "full")
                    for r in mem.retrieve(RetrieveRequest(trust=ctx, as_of=T0)).records}
        for d in docs:
            verdict = mem.explain(d["id"], ctx).verdict.value
            assert returned.get(d["id"], "hidden") == verdict
            assert verdict == decide(d["sensitivity"], d["scope"], ctx).verdict.value


def test_gate_table_equals_decide_for_every_layer_level_scope_and_liveness():
    """The retrieval gate (one lookup per row by its gate code) agrees with ``decide`` for every
    combination of layer, sensitivity level (unknown and out-of-range included), scope and
    requested layers, and hides rows that are not alive."""
    from types import SimpleNamespace

    from membrane_engine.storage.columns import DEAD, TYPE_NAMES, gate_codes, gate_table

    scope_names = ["", "alpha", "beta", "gamma", "Alpha"]
    level_values = [-1, 0, 1, 2, 3, 4, 5, 9]
    combos = list(itertools.product(range(len(TYPE_NAMES)), level_values, range(len(scope_names))))
    tc = np.array([c[0] for c in combos], dtype=np.int8)
    levels = np.array([c[1] for c in combos], dtype=np.int8)
    scopes = np.array([c[2] for c in combos], dtype=np.int32)
    gate = gate_codes(tc, levels, scopes)
    gate[::7] = DEAD
    snap = SimpleNamespace(scope_names=scope_names)
    names = {0: "hidden", 1: "redacted", 2: "full"}
    for ctx in [trust(m, s) for m in LEVELS for s in ([], ["alpha"], ["alpha", "beta"], ["delta"])]:
        for wanted in ([True] * len(TYPE_NAMES), [k % 2 == 0 for k in range(len(TYPE_NAMES))]):
            got = gate_table(snap, ctx, np.array(wanted))[gate]
            for k, (t, level, scope) in enumerate(combos):
                sens = LEVELS[level] if 0 <= level < len(LEVELS) else "secret"
                want = decide(sens, scope_names[scope], ctx).verdict.value
                if gate[k] == DEAD or not wanted[t]:
                    want = "hidden"
                assert names[int(got[k])] == want, (t, level, scope_names[scope], ctx, wanted)
