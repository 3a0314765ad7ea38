"""Issue 18's audit findings (2, 3, 4), replayed against whichever engine is on PYTHONPATH, so the
old code and the new can be compared with one command each:

    PYTHONPATH=/path/to/old/checkout:$PWD python tests/support/audit_findings.py
    PYTHONPATH=$PWD python tests/support/audit_findings.py

(from the top of this repository: $PWD is where ``tests.support.curation`` comes from, and an
engine earlier on PYTHONPATH is the one replayed).

Each line says what the attacker did and what the engine said. Only public calls and raw SQL on
the SQLite file are used (an attacker with write access to the database, without the key).
tests/curation/test_audit_integrity.py holds the same attacks as tests."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

from membrane_engine import Membrane
from tests.support.curation import semantic, working

KEY = "correct horse battery staple"


def store(tmp: Path, name: str) -> tuple[Membrane, sqlite3.Connection]:
    os.environ["MEMBRANE_AUDIT_KEY"] = KEY
    m = Membrane.open(f"sqlite:///{tmp / name}", load_sample=False)
    m.import_records([semantic("x"), semantic("y"), working("z")])
    m.reinforce("x", "op", "used")
    m.reinforce("y", "op", "used")
    m.reclassify("z", "op", "tighter", sensitivity="high")
    return m, sqlite3.connect(tmp / name, isolation_level=None)


def said(problems) -> str:
    return "[] (nothing reported)" if not problems else f"{len(problems)} problem(s): {problems[0]}"


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    m, db = store(tmp, "a.db")
    db.execute("DELETE FROM records WHERE id = 'x'")
    db.execute("DELETE FROM audit_entries WHERE record_id = 'x'")
    print("2a record x deleted with all its audit rows:", said(m.verify_audit()))

    m, db = store(tmp, "b.db")
    row = db.execute("SELECT * FROM records WHERE id = 'x'").fetchone()
    m.reinforce("x", "op", "again")
    m.reinforce("y", "op", "later work")
    db.execute("DELETE FROM audit_entries WHERE record_id = 'x' AND position >= 2")
    db.execute("DELETE FROM records WHERE id = 'x'")
    db.execute(f"INSERT INTO records VALUES ({', '.join('?' * len(row))})", row)
    print("2b record x rolled back to an older row and head, later entries cut:", said(m.verify_audit()))

    m, db = store(tmp, "c.db")
    db.execute("UPDATE records SET sensitivity = 'public', sens_level = 0, "
               "doc = replace(doc, '\"thread_id\":\"th\"', '\"thread_id\":\"forged\"') WHERE id = 'z'")
    print("2c record z's payload and sensitivity edited in place:", said(m.verify_audit()))

    m, db = store(tmp, "d.db")
    row = db.execute("SELECT * FROM records WHERE id = 'z'").fetchone()
    m.delete("z", "op", "obsolete")
    head = db.execute("SELECT audit_head FROM archive WHERE id = 'z'").fetchone()[0]
    columns = [c[1] for c in db.execute("PRAGMA table_info(records)")]
    values = dict(zip(columns, row), audit_head=head)
    db.execute("DELETE FROM archive WHERE id = 'z'")
    db.execute(f"INSERT INTO records ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})", list(values.values()))
    print("2d archived record z moved back into the live table:", said(m.verify_audit()))

    m, _ = store(tmp, "e.db")
    forged = [{"action": "create", "actor": "ceo", "timestamp": "2020-01-01T00:00:00Z", "rationale": "approved by me"}]
    m.import_records([semantic("f", audit_log=forged)], actor="mallory")
    log = m.audit_log("f")
    print("3  imported with a fabricated audit_log; its log now:",
          [(e.action.value, e.actor, e.rationale) for e in log],
          "-> the importer appears" if any(e.actor == "mallory" for e in log) else "-> the importer appears nowhere")

    m, db = store(tmp, "f.db")
    del os.environ["MEMBRANE_AUDIT_KEY"]
    try:
        m.reinforce("x", "op", "keyless")
        print("4a keyless process wrote to the keyed store without complaint; with the key, verify says:", end=" ")
        os.environ["MEMBRANE_AUDIT_KEY"] = KEY
        print(said(m.verify_audit()))
    except Exception as exc:  # noqa: BLE001 (the new engine's refusal, whatever its class)
        print(f"4a keyless process refused: {type(exc).__name__}: {exc}")
    os.environ.pop("MEMBRANE_AUDIT_KEY", None)
    # The whole log rewritten with plain sha256 the way schema 1 hashed it, heads resealed.
    import hashlib
    import json

    def sha(fields) -> str:
        return "sha256:" + hashlib.sha256(json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()

    ends = {}
    for rid, position, action, actor, stamp, rationale, details in db.execute(
            "SELECT record_id, position, action, actor, timestamp, rationale, details FROM audit_entries "
            "ORDER BY record_id, position").fetchall():
        prev = ends.get(rid, (None, "0" * 64))[1]
        digest = sha([prev, rid, position, action, actor, stamp, rationale, details])
        db.execute("UPDATE audit_entries SET prev_hash = ?, hash = ? WHERE record_id = ? AND position = ?",
                   (prev, digest, rid, position))
        ends[rid] = (position, digest)
    for rid, (position, last) in ends.items():
        db.execute("UPDATE records SET audit_head = ? WHERE id = ?", (sha(["head", rid, position, last]), rid))
    print("4b keyed store, its log rewritten with plain sha256, verified without the key:", said(m.verify_audit()))


if __name__ == "__main__":
    main()
