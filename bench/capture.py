"""Capture speed (SPEC 12, issue 31: at 1M records, capture p50 at most 15 ms including entity
resolution and ranking vectors, on SQLite and PostgreSQL).

    python -m bench.capture --size 1m --db both --n 200

The store is one of ``bench.run``'s generated stores (``bench.generate``, made if missing: SQLite
under ``--stores``, PostgreSQL in the schema ``<prefix>_<n>_s<seed>``). Each database is measured
in a fresh process with the Membrane's clock at the generated stores' ``NOW``, opened and warmed
as a console or membraned server is (``Membrane.open`` then ``Membrane.warm``). Then:

- **first capture**: the process's first ``capture_memory``, reported apart: on a store never
  captured into it builds the entity term index from every entity record;
- ``--warmup`` captures not counted, then ``--n`` timed ``capture_memory`` calls, each its own
  transaction, cycling through a mix of what agents write (``KINDS``): an event naming an
  existing entity by its canonical name, one naming it by its alias with a project, an event
  naming an entity nothing matches (created), an observation stating a fact about two existing
  entities (a derived semantic record, linked both ways), and a tool's output. Existing
  entities are picked from the store (seeded), in the busy scopes and unscoped, at least as
  sensitive as the capture so they are matched rather than duplicated.

Prints wall-clock p50 and p95 over all timed captures and per kind, the CPU time of the
measuring process (the database server's own CPU not included), and the ratio of p50 to the
target; writes ``capture-<db>-latest.json`` (git keeps it) and a dated copy under ``--out``.
The captures write: a cached store grows by ``--warmup + --n + 1`` captures a run (and is
reused as it is by later runs: only a missing store is generated).
``--profile FILE``: cProfile of the timed captures, dumped to FILE (the top printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.run import (  # noqa: E402
    DEFAULT_OUT,
    DEFAULT_PG,
    DEFAULT_STORES,
    ensure_store,
    label,
    parse_size,
    peak_rss_mb,
    stamp,
    store_records,
    store_url,
    write_results,
)

TARGET_MS = 15.0
KINDS = ("event_by_name", "event_by_alias", "event_new_entity", "observation_fact", "tool_output")
# Captures go to the generated stores' busiest scopes, and unscoped (the whole of the
# unscoped records is the pool of an unscoped capture, and part of every scoped one's).
SCOPES = ("project-alpha", "project-beta", "team-infra", "")
LEVEL = "low"  # the captures' sensitivity: entities at low or above are matched
TOOLS = ("kubectl", "psql", "terraform", "git", "curl")


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT)
    return done.stdout.strip() if done.returncode == 0 else ""


def existing_entities(url: str, per_scope: int, seed: int) -> dict[str, list[str]]:
    """Canonical names of live entity records, by scope, that a capture at LEVEL matches
    (read before timing, straight from the records table)."""
    from sqlalchemy import create_engine, text

    from membrane_engine.model.records import sensitivity_level

    rng = random.Random(seed)
    out: dict[str, list[str]] = {}
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            for scope in SCOPES:
                rows = conn.execute(text("SELECT doc, sensitivity FROM records WHERE type = 'entity' AND scope = :s "
                                         "ORDER BY id LIMIT 2000"), {"s": scope}).all()
                names = sorted({json.loads(doc)["payload"]["canonical_name"] for doc, sens in rows
                                if sensitivity_level(sens) >= sensitivity_level(LEVEL)})
                rng.shuffle(names)
                out[scope] = names[:per_scope]
    finally:
        engine.dispose()
    return out


def requests(n: int, seed: int, names: dict[str, list[str]]) -> list[tuple[str, dict[str, Any]]]:
    """``n`` capture requests (kind, request fields), cycling through KINDS and SCOPES."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        kind, scope = KINDS[k % len(KINDS)], SCOPES[(k // len(KINDS)) % len(SCOPES)]
        pick = names[scope] or ["Gateway"]
        a, b = rng.choice(pick), rng.choice(pick)
        base = {"source": "bench-agent", "scope": scope, "sensitivity": LEVEL, "tags": ["bench", kind]}
        if kind == "event_by_name":
            req = {**base, "source_kind": "event", "content": {"entity": a, "text": f"deploy of {a} finished"},
                   "reason_to_remember": f"{a} was deployed"}
        elif kind == "event_by_alias":
            req = {**base, "source_kind": "event", "content": {"entity": a.lower(), "project": scope or "shared",
                                                               "text": f"{a.lower()} latency alert cleared"},
                   "context": {"ticket": f"INC-{k}"}}
        elif kind == "event_new_entity":
            req = {**base, "source_kind": "event",
                   "content": {"entity": f"BenchSvc{seed}x{k}x{rng.randrange(10**9)}", "text": "new service seen"}}
        elif kind == "observation_fact":
            req = {**base, "source_kind": "observation",
                   "content": {"subject": a, "predicate": "depends_on", "object": b},
                   "reason_to_remember": f"{a} depends on {b}"}
        else:
            tool = TOOLS[k % len(TOOLS)]
            req = {**base, "source_kind": "tool_output",
                   "content": {"tool_name": tool, "args": {"target": a}, "result": {"ok": True, "rows": k}}}
        out.append((kind, req))
    return out


def _stats(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    p95 = s[min(len(s) - 1, max(0, round(0.95 * len(s)) - 1))]
    return {"p50_ms": round(statistics.median(s), 3), "p95_ms": round(p95, 3), "min_ms": round(s[0], 3),
            "max_ms": round(s[-1], 3), "runs": len(s)}


def worker(url: str, n: int, warmup: int, seed: int, profile: str | None) -> dict[str, Any]:
    """Everything measured, in this (fresh) process."""
    from bench.generate import NOW
    from membrane_engine import Membrane

    names = existing_entities(url, 40, seed)
    reqs = requests(warmup + n + 1, seed, names)
    t0 = time.perf_counter()
    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    m.warm()
    out: dict[str, Any] = {"records": len(m.columns.current()), "open_warm_s": round(time.perf_counter() - t0, 2),
                           "entities_known": {s or "(unscoped)": len(v) for s, v in names.items()}}

    def one(req: dict[str, Any]) -> tuple[float, float, Any]:
        c0, t0 = time.process_time(), time.perf_counter()
        resp = m.capture_memory(req)
        return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000, resp

    wall, cpu, _ = one(reqs[0][1])
    out["first_capture"] = {"wall_ms": round(wall, 1), "cpu_ms": round(cpu, 1)}
    for _, req in reqs[1:warmup + 1]:
        one(req)
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
    walls: list[float] = []
    cpus: list[float] = []
    by_kind: dict[str, list[float]] = {}
    matched = created = updated = 0
    for kind, req in reqs[warmup + 1:]:
        if prof is not None:
            prof.enable()
        wall, cpu, resp = one(req)
        if prof is not None:
            prof.disable()
        walls.append(wall)
        cpus.append(cpu)
        by_kind.setdefault(kind, []).append(wall)
        matched += sum(1 for x in resp.mentions if not x.created)
        created += len(resp.created_records)
        updated += len(resp.updated_records)
    out["capture"] = {**_stats(walls), "cpu_p50_ms": round(statistics.median(cpus), 3)}
    out["by_kind"] = {k: _stats(v) for k, v in by_kind.items()}
    out["ratio_to_target"] = round(out["capture"]["p50_ms"] / TARGET_MS, 2)
    out["mentions_matched"], out["records_created"], out["records_updated"] = matched, created, updated
    out["peak_rss_mb"] = peak_rss_mb()
    if prof is not None:
        import pstats

        prof.dump_stats(profile)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
    m.close()
    return out


def _in_worker(url: str, args: argparse.Namespace, profile: str | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.capture", "--worker", "--url", url, "--n", str(args.n),
           "--warmup", str(args.warmup), "--seed", str(args.seed)]
    if profile:
        cmd += ["--profile", profile]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if profile and done.stderr:
        print(done.stderr[-12000:], file=sys.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"capture worker failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capture", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="1m", help="store size (10k, 100k, 1m, ...)")
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--n", type=int, default=200, help="timed captures")
    parser.add_argument("--warmup", type=int, default=10, help="captures before timing (not counted)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--stores", type=Path, default=DEFAULT_STORES, help="where generated SQLite stores are cached")
    parser.add_argument("--pg-url", default=DEFAULT_PG, help="PostgreSQL URL (stores go in schemas <prefix>_<n>_s<seed>)")
    parser.add_argument("--pg-schema-prefix", default="bench", help="schema name prefix for PostgreSQL stores")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory for the JSON results")
    parser.add_argument("--profile", help="cProfile the timed captures into this file (<db> in it is replaced)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        print(json.dumps(worker(args.url, args.n, args.warmup, args.seed, args.profile)))
        return 0

    n = parse_size(args.size)
    kinds = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    for kind in kinds:
        started = datetime.now(timezone.utc)
        url = store_url(kind, n, args.seed, args.stores, args.pg_url, args.pg_schema_prefix)
        # A store an earlier run captured into holds more than n records: ensure_store would
        # take it for a broken one and make it anew, so it is only asked for a missing store.
        if not store_records(url):
            ensure_store(kind, n, args.seed, args.stores, args.pg_url, args.pg_schema_prefix, True)
        elif store_records(url) < n:
            raise SystemExit(f"{url} holds fewer than {n} records: not a generated store of that size")
        report: dict[str, Any] = {
            "command": "python -m bench.capture " + " ".join(argv if argv is not None else sys.argv[1:]),
            "started": started.isoformat(timespec="seconds"), "commit": _git("rev-parse", "--short", "HEAD") or None,
            "uncommitted": _git("diff", "--name-only", "HEAD", "--", "membrane_engine", "bench").splitlines(),
            "db": kind, "n": n, "records_before": store_records(url), "target_ms": TARGET_MS, "kinds": list(KINDS),
            "scopes": list(SCOPES), "sensitivity": LEVEL,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "loadavg_start": [round(x, 2) for x in os.getloadavg()]}}
        profile = args.profile.replace("<db>", kind) if args.profile else None
        report["result"] = r = _in_worker(url, args, profile)
        report["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        report["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        dated = write_results(report, args.out, f"capture-{kind}-latest.json",
                              f"{stamp(started)}-capture-{kind}-{label(n).lower()}.json")
        c = r["capture"]
        print(f"{kind} {label(n)}: capture p50 {c['p50_ms']:.1f} ms, p95 {c['p95_ms']:.1f} ms "
              f"(CPU p50 {c['cpu_p50_ms']:.1f} ms), {c['runs']} captures; p50 / target {TARGET_MS:.0f} ms = "
              f"{r['ratio_to_target']:.2f}; first capture {r['first_capture']['wall_ms']:.0f} ms; "
              f"open + warm {r['open_warm_s']} s")
        for k, s in r["by_kind"].items():
            print(f"  {k:<18} p50 {s['p50_ms']:7.1f}  p95 {s['p95_ms']:7.1f}")
        print(f"  load average {report['machine']['loadavg_start']} -> {report['machine']['loadavg_end']}; "
              f"results {dated}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
