"""Reinstate (a contested record back to active) and bulk work: one operation over many records,
one preview, one transaction and one audit entry per record, with failures injected between the
preview and the apply (another process's write, a refusal of the operation's own rules)."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta

import pytest
from tests.support.curation import DAY, episodic, semantic, working

from membrane_engine import Membrane, TrustContext
from membrane_engine.errors import EpisodicImmutableError, NotFoundError, ValidationError

ACTOR = "operator:ann"


def _logs(m: Membrane, ids: list[str]) -> dict[str, int]:
    return {rid: len(m.audit_log(rid)) for rid in ids}


def _status(m: Membrane, rid: str) -> str | None:
    return m.get(rid).revision_status or "active"  # a semantic record without a revision block is active


# ----------------------------------------------------------------------------- reinstate


def test_reinstate_brings_a_contested_record_back_with_salience_unchanged(m: Membrane, clock) -> None:
    m.import_records([semantic("a"), semantic("b")])
    m.contest("a", "b", ACTOR, "b says otherwise")
    clock.advance(DAY)
    before = m.get("a")
    plan = m.preview("reinstate", "a", ACTOR, "checked: a holds")
    assert plan.record("a").revision_status == "active"
    assert m.get("a").revision_status == "contested"  # a preview writes nothing
    m.reinstate("a", ACTOR, "checked: a holds")
    after = m.get("a")
    assert after.revision_status == "active"
    assert after.salience == pytest.approx(before.salience)
    assert after.lifecycle.anchor_salience == before.lifecycle.anchor_salience
    assert after.lifecycle.anchor_at == before.lifecycle.anchor_at
    last = after.audit_log[-1]
    assert (last.action.value, last.actor, last.rationale) == ("revise", ACTOR, "reinstated: checked: a holds")
    assert len(after.audit_log) == len(before.audit_log) + 1
    assert m.verify_audit() == []


def test_reinstate_refuses_what_is_not_contested_naming_record_and_status(m: Membrane) -> None:
    m.import_records([semantic("a"), semantic("r"), working("w"), episodic("e")])
    m.retract("r", ACTOR, "wrong")
    with pytest.raises(ValidationError, match=r"record 'a' is active; only a contested record"):
        m.reinstate("a", ACTOR, "x")
    with pytest.raises(ValidationError, match=r"record 'r' is retracted"):
        m.reinstate("r", ACTOR, "x")
    with pytest.raises(ValidationError, match=r"record 'w' is a working record, which has no revision status"):
        m.reinstate("w", ACTOR, "x")
    with pytest.raises(EpisodicImmutableError, match="'e' is episodic"):
        m.reinstate("e", ACTOR, "x")
    # SPEC 6 order: arguments, then the record exists, then episodic immutability.
    with pytest.raises(ValidationError, match="rationale"):
        m.reinstate("e", ACTOR, "")
    with pytest.raises(NotFoundError):
        m.reinstate("nope", ACTOR, "x")
    assert _logs(m, ["a", "w", "e"]) == {"a": 1, "w": 1, "e": 1}  # only the import entries


# ----------------------------------------------------------------------------- bulk


def test_bulk_preview_says_per_record_and_writes_nothing(m: Membrane) -> None:
    m.import_records([semantic("a"), episodic("e"), semantic("b")])
    p = m.bulk_preview("retract", ["a", "e", "b", "a"], ACTOR, "cleanup")
    assert [i.record_id for i in p.items] == ["a", "e", "b"]  # de-duplicated, in order
    assert [i.record_id for i in p.accepted] == ["a", "b"]
    assert "episodic" in p.refused[0].error
    assert p.accepted[0].plan.record("a").salience == 0.0
    assert "every other record is applied" in p.policy  # the failure semantics, said up front
    assert _status(m, "a") == "active"
    assert _logs(m, ["a", "e", "b"]) == {"a": 1, "e": 1, "b": 1}


def test_bulk_arguments_are_refused_once_for_the_whole_call(m: Membrane) -> None:
    m.import_records([semantic("a")])
    with pytest.raises(ValidationError, match="gain"):
        m.bulk_preview("reinforce", ["a"], ACTOR, "x", gain=-1)
    with pytest.raises(ValidationError, match="rationale"):
        m.bulk_preview("reinforce", ["a"], ACTOR, "  ")
    with pytest.raises(ValidationError, match="cannot be applied to many"):
        m.bulk_preview("merge", ["a"], ACTOR, "x")
    with pytest.raises(ValidationError, match="unknown parameter|takes"):
        m.bulk_preview("pin", ["a"], ACTOR, "x", gain=0.1)
    with pytest.raises(ValidationError, match="ids must not be empty"):
        m.bulk_preview("pin", [], ACTOR, "x")
    with pytest.raises(ValidationError, match="sensitivity"):
        m.bulk_preview("reclassify", ["a"], ACTOR, "x", sensitivity="secret")


def _reinforce_five(m: Membrane) -> list[str]:
    ids = [f"r{k}" for k in range(5)]
    m.import_records([semantic(rid, salience=0.3) for rid in ids])
    return ids


def _assert_applied_exactly(m: Membrane, ids: list[str], applied: set[str], before_logs: dict[str, int],
                            action: str) -> None:
    after_logs = _logs(m, ids)
    for rid in ids:
        if rid in applied:
            assert after_logs[rid] == before_logs[rid] + 1, rid
            assert m.audit_log(rid)[-1].action.value == action
            assert m.audit_log(rid)[-1].actor == ACTOR
    assert m.verify_audit() == []


def test_bulk_apply_with_a_concurrent_write_in_the_middle_applies_the_others(m: Membrane, store_url, clock) -> None:
    ids = _reinforce_five(m)
    p = m.bulk_preview("reinforce", ids, ACTOR, "used often", gain=0.2)
    assert len(p.accepted) == 5
    before_logs = _logs(m, ids)
    # Another process (its own connection) reclassifies the middle record after the preview.
    other = Membrane.open(store_url, load_sample=False, clock=clock)
    try:
        other.reclassify("r2", "operator:bob", "now medium", sensitivity="medium")
    finally:
        other.close()
    result = m.bulk_apply(p)
    assert result.applied == ["r0", "r1", "r3", "r4"]
    [failed] = result.failed
    assert failed.record_id == "r2" and "changed by someone else since the preview" in failed.error
    for rid in result.applied:
        assert m.get(rid).salience == pytest.approx(0.5)
    assert m.get("r2").salience == pytest.approx(0.3)  # bob's reclassify only
    assert m.audit_log("r2")[-1].actor == "operator:bob"
    assert _logs(m, ["r2"])["r2"] == before_logs["r2"] + 1
    _assert_applied_exactly(m, ids, set(result.applied), before_logs, "reinforce")


def _delete_in_other_process(url: str, rid: str) -> None:
    from tests.support.workers import fixed_clock

    other = Membrane.open(url, load_sample=False, clock=fixed_clock)
    try:
        other.delete(rid, "operator:bob", "gone")
    finally:
        other.close()


def test_bulk_apply_after_another_process_deleted_one_reports_it_not_found(m: Membrane, store_url) -> None:
    ids = _reinforce_five(m)
    p = m.bulk_preview("pin", ids, ACTOR, "keep these")
    before_logs = _logs(m, ids)
    proc = multiprocessing.get_context("spawn").Process(target=_delete_in_other_process, args=(store_url, "r2"))
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0
    result = m.bulk_apply(p)
    assert result.applied == ["r0", "r1", "r3", "r4"]
    assert result.failed[0].record_id == "r2" and "not found" in result.failed[0].error
    assert all(m.get(rid).lifecycle.pinned for rid in result.applied)
    assert "r2" in m.archived_ids()
    _assert_applied_exactly(m, [r for r in ids if r != "r2"], set(result.applied), before_logs, "revise")


def test_bulk_apply_skips_what_the_preview_refused_and_applies_the_rest(m: Membrane) -> None:
    m.import_records([semantic("a"), episodic("e"), semantic("b")])
    before_logs = _logs(m, ["a", "e", "b"])
    p = m.bulk_preview("retract", ["a", "e", "b"], ACTOR, "wrong")
    result = m.bulk_apply(p)
    assert result.applied == ["a", "b"]
    assert result.failed[0].record_id == "e" and result.failed[0].error.startswith("refused in the preview: ")
    assert _status(m, "a") == _status(m, "b") == "retracted"
    assert _logs(m, ["e"]) == {"e": before_logs["e"]}
    _assert_applied_exactly(m, ["a", "e", "b"], {"a", "b"}, before_logs, "delete")


def test_bulk_reinstate_refuses_records_that_are_not_contested(m: Membrane) -> None:
    m.import_records([semantic("a"), semantic("b"), semantic("c")])
    m.contest("a", "c", ACTOR, "c disagrees")
    m.contest("b", "", ACTOR, "doubtful")
    p = m.bulk_preview("reinstate", ["a", "c", "b"], ACTOR, "reviewed")
    assert [i.record_id for i in p.refused] == ["c"] and "is active" in p.refused[0].error
    result = m.bulk_apply(p)
    assert result.applied == ["a", "b"]
    assert _status(m, "a") == _status(m, "b") == "active"
    assert m.verify_audit() == []


def test_bulk_through_a_clearance_never_names_what_is_beyond_it(m: Membrane, store_url, clock) -> None:
    m.import_records([semantic("ok"), semantic("hid", sensitivity="hyper"), semantic("red", sensitivity="medium"),
                      episodic("hid-epi", sensitivity="hyper", scope="alpha")])
    low = TrustContext(max_sensitivity="low", scopes=["alpha"])
    p = m.bulk_preview("retract", ["ok", "hid", "red", "hid-epi", "absent"], ACTOR, "x", clearance=low)
    errors = {i.record_id: i.error for i in p.refused}
    assert errors["hid"] == "record 'hid' not found"
    assert errors["hid-epi"] == "record 'hid-epi' not found"  # not "episodic": its type is beyond the clearance
    assert errors["absent"] == "record 'absent' not found"
    assert "beyond your clearance" in errors["red"]
    assert [i.record_id for i in p.accepted] == ["ok"]
    # Relabelled beyond the clearance after the preview: refused when applied.
    other = Membrane.open(store_url, load_sample=False, clock=clock)
    try:
        other.reclassify("ok", "operator:bob", "secret now", sensitivity="hyper")
    finally:
        other.close()
    result = m.bulk_apply(p)
    assert result.applied == []
    assert result.failed[0].record_id == "ok" and "not found" in result.failed[0].error
    assert _status(m, "ok") == "active"
    assert m.verify_audit() == []


def test_bulk_delete_archives_each_with_one_entry(m: Membrane, clock) -> None:
    m.import_records([semantic("a"), semantic("n", lifecycle={"decay": {"curve": "exponential", "half_life_seconds": 86400},
                                                            "deletion_policy": "never"}), semantic("b")])
    clock.advance(timedelta(hours=1))
    p = m.bulk_preview("delete", ["a", "n", "b"], ACTOR, "let go")
    assert [i.record_id for i in p.refused] == ["n"] and "never" in p.refused[0].error
    result = m.bulk_apply(p)
    assert result.applied == ["a", "b"]
    assert set(m.archived_ids()) == {"a", "b"}
    for rid in ("a", "b"):
        log = m.audit_log(rid)
        assert len(log) == 2 and log[-1].action.value == "delete"
    assert m.verify_audit() == []
