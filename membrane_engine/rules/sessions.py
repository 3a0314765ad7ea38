"""Browser sessions in the operator log (SPEC 10): what the engine writes when it starts and
ends a session, and how ``verify_audit`` finds a session row changed outside the engine.

A session row (``operator_tokens``, kind ``session``) carries a MAC (row_seal.py), so a row
minted or edited without the audit key signs no one in. A row *deleted* outside the engine
leaves no row to check; it only signs its operator out, but a change outside the engine should
still be named. So every session the engine starts is an entry of the keyed operator log
(``session_start``: its id and expiry), and so is every session it ends before its time and
every expired one it sweeps away (``session_end``: the ids and why). ``problems`` then names:

- a session the log says is live (started, not ended, not expired) whose row is gone;
- a session row the log has no start for (minted outside the engine), or one it ended (put
  back), or whose operator or expiry differ from its start (changed).

A session is named by ``session_id``, a digest of its token's hash: never the token, and not the
stored hash either, so the log gives away nothing a sign-in could use.

Stores from before sessions were logged: the first session entry the engine writes to a store
lists the session rows there already (``adopted``), as its start for each of them. Before that
entry there is nothing to compare with, and ``problems`` checks nothing; after it, every row
must be accounted for. An expired session is never reported missing (the engine sweeps expired
rows away, and they sign no one in).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

SESSION = "session"  # the token kind of a browser session
START = "session_start"
END = "session_end"
ACTIONS = (START, END)

# Why the engine ended sessions (``session_end``'s ``why``).
SIGNED_OUT = "signed out"
EXPIRED = "expired"
PASSWORD_CHANGED = "password changed"
ACCESS_CHANGED = "role, clearance or scopes changed"
OPERATOR_REMOVED = "operator removed"


def session_id(token_hash: str) -> str:
    """The name of a session in the log and in findings: 16 hex digits of a digest of its
    token's hash, which lets no one sign in."""
    return hashlib.sha256(f"membrane-session:{token_hash}".encode()).hexdigest()[:16]


def start_details(token_hash: str, expires_at: float) -> dict[str, Any]:
    return {"session": session_id(token_hash), "expires_at": float(expires_at)}


def end_details(token_hashes: Iterable[str], why: str) -> dict[str, Any]:
    return {"sessions": sorted(session_id(h) for h in token_hashes), "why": why}


def with_adopted(details: dict[str, Any], adopted: Iterable[Any]) -> dict[str, Any]:
    """The details of the log's first session entry: with the session rows already in the store
    (rows with token_hash, operator and expires_at), other than the one it starts."""
    listed = [{"session": session_id(r.token_hash), "operator": r.operator, "expires_at": float(r.expires_at)}
              for r in adopted if session_id(r.token_hash) != details.get("session")]
    return {**details, "adopted": sorted(listed, key=lambda a: a["session"])} if listed else details


@dataclass
class _Started:
    operator: str
    expires_at: float
    seq: int
    adopted: bool = False


def _when(epoch: float) -> str:
    try:
        return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return repr(epoch)


def problems(events: Iterable[Any], tokens: Iterable[Any], now: float, flagged: Iterable[str] = ()
             ) -> list[tuple[str, str]]:
    """(where, problem) pairs for session rows changed outside the engine. ``events``: the
    operator log by seq (rows with seq, action, operator, details); ``tokens``: the token rows
    (token_hash, kind, operator, expires_at); ``flagged``: token hashes already reported (a MAC
    that does not hold), not reported twice."""
    started: dict[str, _Started] = {}
    ended: dict[str, tuple[str, int]] = {}
    logging = False
    for e in events:
        if e.action not in ACTIONS:
            continue
        try:
            details = json.loads(e.details)
            if not logging:
                for a in details.get("adopted", []):
                    started[a["session"]] = _Started(a["operator"], float(a["expires_at"]), int(e.seq), True)
            if e.action == START:
                started[details["session"]] = _Started(e.operator, float(details["expires_at"]), int(e.seq))
            else:
                for sid in details["sessions"]:
                    ended[sid] = (str(details.get("why", "")), int(e.seq))
        except (ValueError, TypeError, KeyError, AttributeError):
            pass  # an unreadable entry: the log's own check reports it as changed
        logging = True
    if not logging:
        return []
    out: list[tuple[str, str]] = []
    skip, present = set(flagged), set()
    for row in tokens:
        if row.kind != SESSION:
            continue
        sid = session_id(row.token_hash)
        present.add(sid)
        if row.token_hash in skip:
            continue
        where = f"session {sid} of {row.operator!r}"
        start = started.get(sid)
        if start is None:
            out.append((where, f"has no '{START}' in the operator log: minted outside the engine"))
        elif sid in ended:
            why, seq = ended[sid]
            out.append((where, f"the operator log ended it ({why}, event {seq}): put back outside the engine"))
        elif (row.operator, float(row.expires_at)) != (start.operator, start.expires_at):
            out.append((where, f"operator or expiry differ from its start (event {start.seq}): changed outside the "
                               "engine"))
    for sid, start in sorted(started.items(), key=lambda s: s[1].seq):
        if sid in present or sid in ended or start.expires_at <= now:
            continue
        how = "in the store when sessions began to be logged" if start.adopted else "started"
        out.append((f"session {sid} of {start.operator!r}",
                    f"deleted outside the engine: the operator log has it live until {_when(start.expires_at)} "
                    f"({how} at event {start.seq}), and no sign-out, expiry or revocation ended it"))
    return out
