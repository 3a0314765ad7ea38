from console.components.words import ACTION_COLORS, action_word, distinct_names, number, plural
from membrane_engine.model.records import AuditAction


def test_plural_agrees_with_the_count() -> None:
    assert plural(1, "record") == "1 record"
    assert plural(0, "record") == "0 records"
    assert plural(1204, "audit entry") == "1,204 audit entries"
    assert plural(2, "match") == "2 matches"
    assert plural(3, "person", "people") == "3 people"


def test_every_audit_action_has_one_colour_and_retract_its_own() -> None:
    assert {action_word(a.value) for a in AuditAction} <= set(ACTION_COLORS)
    assert ACTION_COLORS["retract"] != ACTION_COLORS["delete"]
    assert len(set(ACTION_COLORS.values())) == len(ACTION_COLORS)


def test_no_two_actions_share_a_shade() -> None:
    """Colours an operator tells apart at a glance: every pair differs by a clear RGB distance."""
    def rgb(colour: str) -> tuple[int, int, int]:
        return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))

    pairs = [(a, b) for a in ACTION_COLORS for b in ACTION_COLORS if a < b]
    close = [(a, b) for a, b in pairs
             if sum((x - y) ** 2 for x, y in zip(rgb(ACTION_COLORS[a]), rgb(ACTION_COLORS[b]))) ** 0.5 < 70]
    assert close == []


def test_a_semantic_summary_reads_an_object_as_words() -> None:
    from console.components.record_card import summary
    from membrane_engine import MemoryRecord

    record = MemoryRecord.model_validate({
        "id": "s1", "type": "semantic", "sensitivity": "low", "confidence": 0.9, "salience": 1.0,
        "payload": {"kind": "semantic", "subject": "billing", "predicate": "runs_on",
                    "object": {"engine": "postgres", "version": 16}},
    })
    assert summary(record) == "billing runs_on engine: postgres; version: 16"


def test_a_preview_names_a_retract_and_a_change_that_changes_nothing(tmp_path) -> None:
    """Curate's preview: the entry to be written reads "retract" (as the audit log names it), and
    retracting a record already retracted says that nothing but its time and entry is new."""
    from console.components.plan_view import entries_frame, what_changes
    from membrane_engine import Membrane

    m = Membrane.open(f"sqlite:///{tmp_path / 's.db'}", load_sample=False)
    try:
        m.import_records([{"id": "s1", "type": "semantic", "sensitivity": "low", "confidence": 0.9, "salience": 0.8,
                           "payload": {"kind": "semantic", "subject": "billing", "predicate": "runs_on",
                                       "object": "postgres", "evidence": [{"source_type": "doc", "source_id": "d"}]}}])
        first = m.preview("retract", "s1", "operator:ann", "wrong")
        assert what_changes(first.changes[0]) == "changed"
        assert list(entries_frame(first)["action"]) == ["retract"]
        m.retract("s1", "operator:ann", "wrong")
        again = m.preview("retract", "s1", "operator:ann", "still wrong")
        assert what_changes(again.changes[0]).startswith("already so")
        assert what_changes(m.preview("reinforce", "s1", "operator:ann", "seen", gain=0.2).changes[0]) == "changed"
    finally:
        m.close()


def test_one_name_per_action_a_penalize_is_never_called_decay() -> None:
    assert action_word("decay") == "penalize" and action_word("retract") == "retract"
    assert "decay" not in ACTION_COLORS and "penalize" in ACTION_COLORS


def test_shared_names_get_a_short_id_and_missing_numbers_a_dash() -> None:
    named = distinct_names({"3f9a2c-aaaa": "debug flaky test", "3f9a2c-bbbb": "debug flaky test", "x1": "other"})
    assert named == {"3f9a2c-aaaa": "debug flaky test [3f9a2c-a…]", "3f9a2c-bbbb": "debug flaky test [3f9a2c-b…]",
                     "x1": "other"}
    assert number(None) == number(float("nan")) == "—" and number(0.12345, ".2f") == "0.12"
