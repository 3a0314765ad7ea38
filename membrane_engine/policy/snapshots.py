"""What each profile sees, as a file fit to commit, and the diff between two of them.

A snapshot is JSON lines: a header line naming the format and each profile's trust context,
then one line per (profile, record) the profile sees at all, ``{"profile", "id", "verdict"}``,
sorted by profile then id. A record absent under a profile is hidden to it, so the file grows
with what agents see, not with the store times the profiles. The same store and file give the
same bytes, so a diff in review shows exactly who gained and who lost what.

``diff`` compares two snapshots: a *gain* is a record newly full or redacted, or redacted
becoming full (AWS IAM Access Analyzer's "no new access" question asked of the data);
gains come first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from membrane_engine.errors import ValidationError
from membrane_engine.policy.check import Evaluator, Policy
from membrane_engine.rules.trust import TrustContext
from membrane_engine.rules.trust import VERDICT_NAMES as _NAMES

FORMAT = "membrane-policy-snapshot/1"
RANK = {"hidden": 0, "redacted": 1, "full": 2}


@dataclass
class Seen:
    """profile -> (trust context as a dict, {record id: "full" | "redacted"})."""

    profiles: dict[str, tuple[dict[str, Any], dict[str, str]]]


def _context(policy: Policy, name: str) -> dict[str, Any]:
    p = policy.profiles[name]
    return {"max_sensitivity": p.max_sensitivity.value, "scopes": list(p.scopes)}


def lines(membrane: Any, policy: Policy, ev: Evaluator | None = None, within: TrustContext | None = None
          ) -> Iterator[str]:
    """The snapshot's text: the header line, then one chunk of lines per profile that sees
    anything. Ids are sorted and formatted once for every profile; each profile then costs one
    gate pass, one fancy index and one join."""
    ev = ev or Evaluator(membrane, within=within)
    snap = ev.snap
    alive_rows = np.nonzero(ev.alive)[0]
    ids = snap.ids[alive_rows].astype(str)
    order = np.argsort(ids, kind="stable")
    rows = alive_rows[order]
    # Each record's line ends, once per verdict: a profile's lines are then one fancy index and
    # one join (the profile's head is the join's separator), not a Python loop per line.
    tails = np.empty((3, len(rows)), dtype=object)
    quoted = [json.dumps(i, ensure_ascii=False) for i in ids[order]]
    tails[1] = np.array([q + ',"verdict":"redacted"}\n' for q in quoted], dtype=object)
    tails[2] = np.array([q + ',"verdict":"full"}\n' for q in quoted], dtype=object)
    del quoted
    names = sorted(policy.profiles)
    header = {"format": FORMAT, "profiles": {n: _context(policy, n) for n in names}}
    yield json.dumps(header, sort_keys=True, ensure_ascii=False) + "\n"
    for name in names:
        codes = ev.verdicts(policy.trust(name))[rows]
        seen = np.nonzero(codes)[0]
        if len(seen):
            head = '{"profile":' + json.dumps(name, ensure_ascii=False) + ',"id":'
            yield head + head.join(tails[codes[seen], seen].tolist())


def write(membrane: Any, policy: Policy, out: TextIO | str | Path) -> int:
    """Write the snapshot; returns the number of (profile, record) lines."""
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8", newline="\n") as fh:
            return write(membrane, policy, fh)
    n = 0
    for chunk in lines(membrane, policy):
        out.write(chunk)
        n += chunk.count("\n")
    return n - 1


def current(membrane: Any, policy: Policy) -> Seen:
    """What each profile sees now, in the shape ``read`` returns."""
    ev = Evaluator(membrane)
    rows = np.nonzero(ev.alive)[0]
    ids = ev.snap.ids[rows]
    out = {}
    for name in sorted(policy.profiles):
        codes = ev.verdicts(policy.trust(name))[rows]
        seen = np.nonzero(codes)[0]
        out[name] = (_context(policy, name), dict(zip(ids[seen].tolist(), (_NAMES[c] for c in codes[seen].tolist()))))
    return Seen(out)


def read(path: str | Path) -> Seen:
    """A snapshot file; ValidationError naming the line for anything that is not one."""
    out: dict[str, tuple[dict[str, Any], dict[str, str]]] = {}
    number = 0
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                item = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise ValidationError(f"{path}:{number}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                                      f"{exc.start + 1})", [(f"line {number}", "not UTF-8")]) from None
            except ValueError as exc:
                raise ValidationError(f"{path}:{number}: not JSON ({exc})", [(f"line {number}", "not JSON")]) from None
            except RecursionError:  # json nests by recursion: a line of 10,000 brackets is no snapshot
                raise ValidationError(f"{path}:{number}: nested too deeply to be a snapshot line",
                                      [(f"line {number}", "nested too deeply")]) from None
            if number == 1:
                if not isinstance(item, dict) or item.get("format") != FORMAT \
                        or not isinstance(item.get("profiles", {}), dict):
                    raise ValidationError(f"{path}:1: not a policy snapshot (format {FORMAT} expected)",
                                          [("line 1", "format")])
                out = {name: (ctx, {}) for name, ctx in item.get("profiles", {}).items()}
                continue
            if (not isinstance(item, dict) or item.get("verdict") not in ("full", "redacted")
                    or item.get("profile") not in out or not isinstance(item.get("id"), str)):
                raise ValidationError(f"{path}:{number}: expected a profile of the header, an id and a verdict "
                                      "full or redacted", [(f"line {number}", "bad entry")])
            out[item["profile"]][1][item["id"]] = item["verdict"]
    if number == 0:
        raise ValidationError(f"{path}: empty, not a policy snapshot", [("line 1", "empty")])
    return Seen(out)


@dataclass(frozen=True)
class AccessChange:
    profile: str
    id: str
    before: str
    after: str

    @property
    def gain(self) -> bool:
        return RANK[self.after] > RANK[self.before]


def diff(old: Seen, new: Seen) -> list[AccessChange]:
    """Every (profile, record) whose verdict differs: gains first, then losses; by profile, id.
    A profile absent from one side sees nothing there."""
    changes = []
    for name in sorted(set(old.profiles) | set(new.profiles)):
        a = old.profiles.get(name, ({}, {}))[1]
        b = new.profiles.get(name, ({}, {}))[1]
        for rid in a.keys() | b.keys():
            va, vb = a.get(rid, "hidden"), b.get(rid, "hidden")
            if va != vb:
                changes.append(AccessChange(name, rid, va, vb))
    changes.sort(key=lambda c: (not c.gain, c.profile, c.id))
    return changes


__all__ = ["FORMAT", "Seen", "AccessChange", "lines", "write", "read", "current", "diff"]
