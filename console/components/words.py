"""The console's fixed vocabulary: counted nouns, and one colour per action on every chart."""

from __future__ import annotations

from membrane_engine.schema import AuditAction

from .chart_safety import PALETTE

# One colour per audit action and per curation operation, the same on every chart and table
# (the audit timeline, the decay page's markers, history, review). A retract is written as a
# `delete` entry whose record stays in the store; it has its own colour so it reads as what it is.
ACTION_COLORS: dict[str, str] = {
    "create": PALETTE[2],      # green
    "reinforce": PALETTE[0],   # blue
    "revise": PALETTE[3],      # purple
    "fork": PALETTE[5],        # cyan
    "merge": PALETTE[10],      # violet
    "decay": PALETTE[4],       # orange: a penalty
    "retract": PALETTE[7],     # pink
    "delete": PALETTE[1],      # red
    "restore": PALETTE[11],    # teal
    "pin": PALETTE[6],         # amber
    "unpin": PALETTE[8],       # grey
    "restore version": PALETTE[9],  # olive: a record brought back to an earlier version
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
