from console.components.words import ACTION_COLORS, plural
from membrane_engine.schema import AuditAction


def test_plural_agrees_with_the_count() -> None:
    assert plural(1, "record") == "1 record"
    assert plural(0, "record") == "0 records"
    assert plural(1204, "audit entry") == "1,204 audit entries"
    assert plural(2, "match") == "2 matches"
    assert plural(3, "person", "people") == "3 people"


def test_every_audit_action_has_one_colour_and_retract_its_own() -> None:
    assert {a.value for a in AuditAction} <= set(ACTION_COLORS)
    assert ACTION_COLORS["retract"] != ACTION_COLORS["delete"]
    assert len(set(ACTION_COLORS.values())) == len(ACTION_COLORS)
