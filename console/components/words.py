"""The console's fixed vocabulary: counted nouns, the order of sensitivity levels, and one name
per audit action (each action's colour: components/colours.py)."""

from __future__ import annotations

from membrane_engine import AuditAction, Sensitivity

from .colours import ACTION_COLORS

SENSITIVITY_ORDER = [s.value for s in Sensitivity]  # public to hyper: every table's and chart's order


# An action as stored, in the console's words: one name per action on every chart and table (a
# penalize is stored as Membrane's `decay` entry; a retract, a `delete` entry, is told apart from
# the entry's rationale by the engine: membrane_engine.rules.history.kind_of, activity.action_counts).
STORED_AS_WORD = {"decay": "penalize"}


def action_word(action: str) -> str:
    """``action`` (as stored, or already in words) as the console names it."""
    return STORED_AS_WORD.get(action, action)


assert {action_word(a.value) for a in AuditAction} <= set(ACTION_COLORS)

_IRREGULAR = {"entry": "entries", "policy": "policies", "identity": "identities", "child": "children"}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """"1 record", "2 records", "1,204 audit entries": the count with the noun in agreement."""
    if count == 1:
        return f"1 {noun}"
    if many is None:
        head, _, last = noun.rpartition(" ")
        many = (head + " " if head else "") + _IRREGULAR.get(last, last + ("es" if last.endswith(("s", "x", "ch", "sh")) else "s"))
    return f"{count:,} {many}"


def number(value: float | None, spec: str = ".3f", missing: str = "—") -> str:
    """A number as a person reads it: ``format(value, spec)``, and ``missing`` for None or NaN
    (never "None" or "nan")."""
    if value is None or value != value:
        return missing
    return format(value, spec)


def short_ids(ids: list[str], least: int = 6) -> dict[str, str]:
    """Each of ``ids`` cut to the shortest prefix (at least ``least`` characters) that no other
    of them starts with: what tells records apart beside a name they share."""
    out: dict[str, str] = {}
    unique = list(dict.fromkeys(ids))
    for rid in unique:
        n = min(least, len(rid))
        while n < len(rid) and any(o != rid and o.startswith(rid[:n]) for o in unique):
            n += 1
        out[rid] = rid if n >= len(rid) else rid[:n] + "…"
    return out


def distinct_names(names: dict[str, str]) -> dict[str, str]:
    """``names`` (id -> name) with a short id beside every name that more than one id has, so
    records that share a name can be told apart in a picker, a table or a chart."""
    by_name: dict[str, list[str]] = {}
    for rid, name in names.items():
        by_name.setdefault(name, []).append(rid)
    out = dict(names)
    for name, ids in by_name.items():
        if len(ids) > 1:
            short = short_ids(ids)
            for rid in ids:
                out[rid] = f"{name} [{short[rid]}]"
    return out
