"""The console's fixed vocabulary: counted nouns, the order of sensitivity levels, and one colour
per action on every chart."""

from __future__ import annotations

from membrane_engine.schema import AuditAction, Sensitivity

SENSITIVITY_ORDER = [s.value for s in Sensitivity]  # public to hyper: every table's and chart's order


# One colour per audit action (no two closer than 70 apart in RGB, so each reads at a glance) and per curation operation, the same on every chart and table
# (the audit timeline, the decay page's markers, history, review). A retract is written as a
# `delete` entry whose record stays in the store; it has its own colour so it reads as what it is.
ACTION_COLORS: dict[str, str] = {
    "create": "#16a34a",           # green
    "reinforce": "#2563eb",        # blue
    "revise": "#9333ea",           # purple
    "fork": "#06b6d4",             # cyan
    "merge": "#78350f",            # brown
    "decay": "#f97316",            # orange: a penalty
    "retract": "#db2777",          # pink
    "delete": "#b91c1c",           # dark red
    "restore": "#115e59",          # dark teal
    "pin": "#facc15",              # yellow
    "unpin": "#6b7280",            # grey
    "restore version": "#84cc16",  # lime: a record brought back to an earlier version
}
assert {a.value for a in AuditAction} <= set(ACTION_COLORS)

_IRREGULAR = {"entry": "entries", "policy": "policies", "identity": "identities", "child": "children"}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """"1 record", "2 records", "1,204 audit entries": the count with the noun in agreement."""
    if count == 1:
        return f"1 {noun}"
    if many is None:
        head, _, last = noun.rpartition(" ")
        many = (head + " " if head else "") + _IRREGULAR.get(last, last + ("es" if last.endswith(("s", "x", "ch", "sh")) else "s"))
    return f"{count:,} {many}"
