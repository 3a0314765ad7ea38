"""The writer of the gate race test (test_gate_race.py), run as a process of its own:
relabels the store's records as fast as it can, round robin, through ``Membrane.reclassify``,
and logs each relabel with the monotonic clock read just before the call and just after it
returned (so the commit happened in between).

Each relabel also sets the record's one tag to ``label:<sensitivity>:<scope>``: a record
handed out with a tag that disagrees with its labels would be a torn read.

    python -m tests.support.race_writer URL SECONDS LOG
LOG gets one JSON line per relabel: [id, sensitivity, scope, t_before, t_after].
"""

from __future__ import annotations

import json
import sys
import time

from membrane_engine import Membrane

# (sensitivity, scope) in turn: full, hidden by sensitivity, full, hidden by scope, full,
# redacted (medium is one level above the reader's low), back to the start.
CYCLE = [("hyper", "alpha"), ("low", "alpha"), ("low", "beta"), ("low", "alpha"), ("medium", "alpha"),
         ("low", "alpha")]


def tag(sensitivity: str, scope: str) -> str:
    return f"label:{sensitivity}:{scope}"


def main(url: str, seconds: float, log_path: str) -> None:
    m = Membrane.open(url, load_sample=False)
    ids = m.ids()
    step = {rid: k for k, rid in enumerate(ids)}  # staggered: at any moment, records in every state
    end = time.monotonic() + seconds
    with open(log_path, "w", encoding="utf-8") as log:
        print("ready", flush=True)
        i = 0
        while time.monotonic() < end:
            rid = ids[i % len(ids)]
            sensitivity, scope = CYCLE[step[rid] % len(CYCLE)]
            step[rid] += 1
            before = time.monotonic()
            m.reclassify(rid, "race:writer", "race", sensitivity=sensitivity, scope=scope,
                         tags=[tag(sensitivity, scope)])
            log.write(json.dumps([rid, sensitivity, scope, before, time.monotonic()]) + "\n")
            i += 1
    m.close()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
