"""A process for the fault suite to kill: runs one large write against a store and reports on
stdout when it is inside the write transaction.

    python -m tests.support.fault_worker import URL N [pause]   # import N new records
    python -m tests.support.fault_worker merge URL N [pause]    # merge src-0..src-(N-1) into one

With ``pause`` the worker stops inside the transaction, after rows have been written (the
import's first progress callback; the merge's 10th row update), prints ``PAUSED`` and sleeps:
the test kills it there. Without, it prints ``STARTED`` just before the call and runs to the end
(``DONE``) unless killed first.
"""

from __future__ import annotations

import sys
import time

from membrane_engine import Membrane
from membrane_engine.storage.store import Store
from tests.support.security import T0, simple


def say(word: str) -> None:
    print(word, flush=True)


def new_records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        r = simple(f"bulk-{i:06d}", ("semantic", "episodic", "working", "entity")[i % 4])
        r["tags"] = [f"t{i % 7}"]
        r["scope"] = ("", "alpha", "beta")[i % 3]
        out.append(r)
    return out


def main() -> int:
    op, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pause = len(sys.argv) > 4 and sys.argv[4] == "pause"
    m = Membrane.open(url, load_sample=False, clock=lambda: T0)
    if op == "import":
        items = new_records(n)

        def progress(done: int, total: int) -> None:
            if pause and done < total:
                say("PAUSED")
                time.sleep(120)

        say("STARTED")
        m.import_records(items, actor="fault-worker", progress=progress)
    elif op == "merge":
        if pause:
            original = Store.update_row
            calls = {"n": 0}

            def update_row(self, conn, row):
                original(self, conn, row)
                calls["n"] += 1
                if calls["n"] == 10:
                    say("PAUSED")
                    time.sleep(120)

            Store.update_row = update_row  # type: ignore[method-assign]
        say("STARTED")
        m.merge([f"src-{i:05d}" for i in range(n)], simple("merged-all"), "fault-worker", "merge everything")
    else:
        raise SystemExit(f"unknown op {op}")
    say("DONE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
