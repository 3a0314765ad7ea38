"""Policy checks at scale (SPEC 11): 20 profiles x 50 assertions, and a snapshot of 20 profiles.

    python -m bench.policies --n 100000            # the cached bench store (made if missing)
    python -m bench.policies --db sqlite:////tmp/m1.db

Targets (issue 20): the check in at most 10 s and the snapshot in at most 30 s on the 1M store.
The policy is generated from a seed: profiles over every sensitivity with 0-3 of the store's
scopes; assertions of every form over selections by sensitivity, scope, type, tag and id. The
column cache is loaded first (cold open, reported apart), as a console or a CI job that opened
the store has it; the check then includes its SQL tag scans. Nothing is written to the store.

Written as JSON to ``--out`` (bench/results by default): ``policies-<db>-latest.json``, which
git keeps and bench/README.md's tables show, and a dated copy git ignores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.generate import TAGS
from bench.run import (DEFAULT_OUT, DEFAULT_PG, DEFAULT_STORES, db_kind, ensure_store, label, parse_size, stamp,
                       store_url, write_results)
from membrane_engine import Membrane
from membrane_engine.storage.columns import TYPE_NAMES
from membrane_engine.policy.check import check, parse_policy
from membrane_engine.policy.snapshots import write
from membrane_engine.model.records import Sensitivity

SENS = [s.value for s in Sensitivity]
EXPECTS = ["full", "redacted", "hidden", "not-full", "visible"]
TARGET_CHECK_S, TARGET_SNAPSHOT_S = 10.0, 30.0


def policy_text(m: Membrane, profiles: int, assertions: int, seed: int) -> str:
    """A policy over the store's own scopes and ids (TOML, as an operator would write it)."""
    rng = random.Random(seed)
    snap = m.columns.current()
    scopes = sorted(s for s in snap.scope_names if s)  # the vocabulary's order varies by process
    ids = [str(snap.ids[i]) for i in rng.sample(range(len(snap.ids)), 40)]
    out = []
    for k in range(profiles):
        chosen = rng.sample(scopes, rng.randint(0, min(3, len(scopes))))
        out.append(f'[profiles.agent-{k}]\nmax_sensitivity = "{SENS[k % 5]}"\nscopes = {json.dumps(chosen)}\n')
    for k in range(assertions):
        fields = {}
        kind = k % 5
        if kind == 0:
            fields["sensitivity"] = rng.sample(SENS, 2)
        elif kind == 1:
            fields["scopes"] = rng.sample(scopes, 2)
        elif kind == 2:
            fields["types"] = rng.sample(TYPE_NAMES, 2)
            fields["sensitivity"] = rng.sample(SENS, 3)
        elif kind == 3:
            fields["tags"] = [TAGS[k % 3]]  # three distinct tags: three SQL scans per check
        else:
            fields["ids"] = rng.sample(ids, 5)
        sel = ", ".join(f"{key} = {json.dumps(v)}" for key, v in fields.items())
        rule = (f'expect = "{rng.choice(EXPECTS)}"' if k % 2 == 0
                else f'verdict = "{rng.choice(["full", "redacted", "hidden"])}"\nmax = {rng.randint(0, 1000)}')
        out.append(f'[[assert]]\nprofile = "agent-{k % profiles}"\nrecords = {{ {sel} }}\n{rule}\n')
    return "\n".join(out)


def measure(url: str, profiles: int, assertions: int, seed: int, repeat: int) -> dict:
    t0 = time.perf_counter()
    m = Membrane.open(url, load_sample=False)
    m.columns.current()
    cold = time.perf_counter() - t0
    policy = parse_policy(policy_text(m, profiles, assertions, seed), "bench-policy.toml")
    checks, snaps = [], []
    report = None
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            t = time.perf_counter()
            report = check(m, policy)
            checks.append(time.perf_counter() - t)
            t = time.perf_counter()
            lines = write(m, policy, Path(tmp) / "snapshot.jsonl")
            snaps.append(time.perf_counter() - t)
            size = (Path(tmp) / "snapshot.jsonl").stat().st_size
    m.close()
    return {"records": report.total, "profiles": profiles, "assertions": assertions, "failing": len(report.failures),
            "cold_open_s": round(cold, 2), "check_s": [round(x, 2) for x in checks],
            "snapshot_s": [round(x, 2) for x in snaps], "snapshot_lines": lines, "snapshot_mb": round(size / 1e6, 1),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.policies", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", default="100k", help="size of the cached bench store (10k, 100k, 1m), made if missing")
    p.add_argument("--db", help="check this store instead of the cached bench store")
    p.add_argument("--profiles", type=int, default=20)
    p.add_argument("--assertions", type=int, default=50)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where policies-<db>-latest.json goes")
    args = p.parse_args(argv)
    url = args.db
    if url is None:
        n = parse_size(args.n)
        ensure_store("sqlite", n, args.seed, DEFAULT_STORES, DEFAULT_PG, "bench", progress=True)
        url = store_url("sqlite", n, args.seed, DEFAULT_STORES, DEFAULT_PG)
    started = datetime.now(timezone.utc)
    r = {"command": "python -m bench.policies " + " ".join(argv if argv is not None else sys.argv[1:]),
         "started": started.isoformat(timespec="seconds"), "db": url,
         "targets_s": {"check": TARGET_CHECK_S, "snapshot": TARGET_SNAPSHOT_S},
         **measure(url, args.profiles, args.assertions, args.seed, args.repeat)}
    best_check, best_snap = min(r["check_s"]), min(r["snapshot_s"])
    print(json.dumps(r))
    kind = f"policies-{db_kind(url)}"
    write_results(r, args.out, f"{kind}-latest.json", f"{stamp(started)}-{kind}.json")
    print(f"{label(r['records'])} records, {r['profiles']} profiles x {r['assertions']} assertions "
          f"(load {r['loadavg'][0]:.1f}): check {best_check:.2f} s (target {TARGET_CHECK_S:g} s), "
          f"snapshot {best_snap:.2f} s for {r['snapshot_lines']:,} lines, {r['snapshot_mb']} MB "
          f"(target {TARGET_SNAPSHOT_S:g} s); cold open {r['cold_open_s']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
