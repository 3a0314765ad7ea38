"""Membrane's pkg/decay tests (decay_test.go at 8408c8c) ported to our API, on both databases.

Membrane decays by a sweep (ApplyDecay) that rewrites the stored salience; here salience is a
pure function S(t) of the record's anchor (SPEC 2, a deliberate deviation: the sweep compounds,
Membrane's PR #25), so "after ApplyDecay" reads as "S at that instant" (``salience_at`` /
``get(as_of=...)``), no ``decay`` audit entry is written, and the anchor is ``updated_at`` (which
Membrane bumps whenever it changes salience), set equal to last_reinforced_at below.

Not ported, with the reason: TestApplyDecayAllAndPruneReturnListErrors,
TestApplyDecayAllAndPrunePropagatePerRecordErrors and TestServiceOperationTransactionErrors
(failing Go store doubles; our atomicity: tests/curation/test_curation_atomic.py);
TestScheduler* (no sweep to schedule)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pytest

from membrane_engine import Membrane
from membrane_engine.errors import NotFoundError, ValidationError
from membrane_engine.model.records import validate_record

from membrane_kit import T0, iso

HOUR = 3600


def new_record(rid: str, at: datetime, **decay) -> dict:
    """decay_test.go newRecord: salience 0.8, one-hour half-life, floor 0.1, gain 0.3."""
    profile = {"curve": "exponential", "half_life_seconds": HOUR, "min_salience": 0.1, "reinforcement_gain": 0.3}
    profile.update(decay)
    return {"id": rid, "type": "semantic", "sensitivity": "low", "confidence": 0.9, "salience": 0.8,
            "created_at": iso(at), "updated_at": iso(at),
            "lifecycle": {"decay": profile, "last_reinforced_at": iso(at), "deletion_policy": "auto_prune"},
            "provenance": {"sources": None},
            "payload": {"kind": "semantic", "subject": rid, "predicate": "is", "object": "test record",
                        "validity": {"mode": "global"}},
            "audit_log": [{"action": "create", "actor": "test", "timestamp": iso(at), "rationale": "fixture"}]}


def test_exponential_decay(mem: Membrane):
    """decay_test.go TestExponentialDecay"""
    mem.import_records([new_record("half", T0, min_salience=0.2),
                        new_record("floor", T0, min_salience=0.2) | {"salience": 0.3}])
    assert mem.salience_at("half", T0 + timedelta(hours=1)) == pytest.approx(0.4, abs=1e-4)
    assert mem.salience_at("floor", T0 + timedelta(hours=10)) == 0.2
    # Go's Exponential holds a non-positive half-life at the floor; SPEC 1 refuses such a
    # profile (half_life_seconds >= 1: "time to halve" of zero means nothing).
    with pytest.raises(ValidationError) as err:
        validate_record(new_record("zero", T0, half_life_seconds=0))
    assert "half_life_seconds" in str(err.value)


def test_service_apply_decay_reinforce_and_penalize(mem: Membrane):
    """decay_test.go TestServiceApplyDecayReinforceAndPenalize"""
    rec = new_record("decay-cycle", T0 - timedelta(hours=1)) | {"created_at": iso(T0 - timedelta(hours=2))}
    mem.import_records([rec])
    decayed = mem.get("decay-cycle")  # S(now), one half-life after the anchor
    assert abs(decayed.salience - 0.4) <= 0.02
    before = decayed.lifecycle.last_reinforced_at
    mem.reinforce("decay-cycle", "tester", "useful")
    reinforced = mem.get("decay-cycle")
    assert reinforced.salience > decayed.salience
    assert reinforced.lifecycle.last_reinforced_at > before
    assert "reinforce" in [e.action.value for e in mem.audit_log("decay-cycle")]
    mem.penalize("decay-cycle", 100, "tester", "not useful")
    assert mem.get("decay-cycle").salience == 0.1  # the floor


def test_decay_future_timestamp_reinforce_cap_and_penalty_above_floor(mem: Membrane):
    """decay_test.go TestDecayFutureTimestampReinforceCapAndPenaltyAboveFloor"""
    # Only its reinforcement lies in the future: an imported audit entry dated after the import is
    # refused (an imported history cannot come from the future), so its create entry is at T0.
    future = new_record("future-decay", T0 + timedelta(hours=1))
    future |= {"created_at": iso(T0), "audit_log": [dict(future["audit_log"][0], timestamp=iso(T0))]}
    mem.import_records([future,
                        new_record("cap-reinforce", T0, reinforcement_gain=0.2) | {"salience": 0.95},
                        new_record("small-penalty", T0, min_salience=0.1)])
    assert mem.get("future-decay").salience == pytest.approx(0.8, abs=1e-4)
    mem.reinforce("cap-reinforce", "tester", "cap")
    assert mem.get("cap-reinforce").salience == 1.0
    mem.penalize("small-penalty", 0.25, "tester", "small")
    assert mem.get("small-penalty").salience == pytest.approx(0.55, abs=1e-4)


@pytest.mark.parametrize("amount", [-0.1, math.nan, math.inf, -math.inf])
def test_penalize_rejects_invalid_amount(mem: Membrane, amount: float):
    """decay_test.go TestPenalizeRejectsInvalidAmount"""
    mem.import_records([new_record("invalid-penalty", T0)])
    log = mem.audit_log("invalid-penalty")
    with pytest.raises(ValidationError) as err:
        mem.penalize("invalid-penalty", amount, "tester", "invalid")
    assert "amount" in str(err.value)
    assert mem.get("invalid-penalty").salience == 0.8 and mem.audit_log("invalid-penalty") == log


def test_service_returns_errors_for_missing_records(mem: Membrane):
    """decay_test.go TestServiceReturnsErrorsForMissingRecords (ApplyDecay: salience_at)"""
    for call in (lambda: mem.salience_at("missing", T0), lambda: mem.reinforce("missing", "tester", "useful"),
                 lambda: mem.penalize("missing", 0.1, "tester", "not useful")):
        with pytest.raises(NotFoundError):
            call()


@pytest.mark.parametrize("salience", [math.inf, -0.4])
def test_apply_decay_clamps_invalid_computed_salience(salience: float):
    """decay_test.go TestApplyDecayClampsInvalidComputedSalience: Go clamps an infinite or
    negative stored salience when it decays it; SPEC 1 never stores one (refused, naming it)."""
    with pytest.raises(ValidationError) as err:
        validate_record(new_record("bad", T0) | {"salience": salience})
    assert "salience" in str(err.value)


def test_apply_decay_all_skips_pinned_records(mem: Membrane):
    """decay_test.go TestApplyDecayAllSkipsPinnedRecords"""
    active = new_record("active", T0 - timedelta(hours=1)) | {"created_at": iso(T0 - timedelta(hours=2))}
    pinned = new_record("pinned", T0 - timedelta(hours=1)) | {"created_at": iso(T0 - timedelta(hours=2))}
    pinned["lifecycle"] = pinned["lifecycle"] | {"pinned": True}
    mem.import_records([active, pinned])
    assert mem.get("pinned").salience == 0.8
    assert mem.get("active").salience < 0.8


def test_apply_decay_max_age_and_prune(mem: Membrane):
    """decay_test.go TestApplyDecayMaxAgeAndPrune. Pruning archives (SPEC 6 deviation:
    Membrane deletes the record and its audit rows; here restore can bring it back)."""
    mem.import_records([new_record("expired", T0 - timedelta(hours=2), min_salience=0, max_age_seconds=1)])
    assert mem.get("expired").salience == 0
    assert mem.prune("tester", "sweep", dry_run=False) == ["expired"]
    with pytest.raises(NotFoundError):
        mem.get("expired")
    assert mem.archived_ids() == ["expired"]


def test_prune_only_deletes_eligible_auto_prune_records(mem: Membrane):
    """decay_test.go TestPruneOnlyDeletesEligibleAutoPruneRecords"""
    eligible = new_record("eligible", T0, min_salience=0) | {"salience": 0}
    pinned = new_record("pinned-zero", T0, min_salience=0) | {"salience": 0}
    pinned["lifecycle"] = pinned["lifecycle"] | {"pinned": True}
    manual = new_record("manual-zero", T0, min_salience=0) | {"salience": 0}
    manual["lifecycle"] = manual["lifecycle"] | {"deletion_policy": "manual_only"}
    floor = new_record("floor", T0, min_salience=0.1) | {"salience": 0.1}
    mem.import_records([eligible, pinned, manual, floor])
    assert mem.prune("tester", "sweep", dry_run=False) == ["eligible"]
    assert sorted(mem.ids()) == ["floor", "manual-zero", "pinned-zero"]


def test_prune_follows_spec_not_the_floor_rule(mem: Membrane):
    """SPEC 6 deviation from Prune's ``salience <= min_salience`` condition: a record with floor
    0 decays towards 0 without reaching it (here 0.8 * 2^-720), so Go would keep it forever;
    S < 0.001 alone makes it eligible here."""
    mem.import_records([new_record("old", T0 - timedelta(days=30), min_salience=0)])
    assert 0 < mem.get("old").salience < 1e-200
    assert mem.prune("tester", "sweep") == ["old"]
