"""Consolidation speed (SPEC 12, issue 31: 100k episodic records in at most 120 s).

    python -m bench.consolidation --episodes 100k --db sqlite --repeat 3
    python -m bench.consolidation --episodes 100k --db both

The store is one of ``bench.run``'s generated stores (``bench.generate``, seed 42, kept in
``/tmp/membrane-bench`` or the PostgreSQL schema ``bench_<n>_s42``), sized so that it holds about
the number of episodic records asked (about 39% of a generated store is episodic), with its entities,
facts, skills and plans around them. Each measurement runs in a fresh process with the
Membrane's clock and ``as_of`` at the generated stores' ``NOW``:

- **dry run**: ``consolidate(dry_run=True)``, ``--repeat`` times, the median printed (and each
  consolidator's median);
- **run**: one ``consolidate()`` that writes, on a copy of the SQLite file (PostgreSQL: on the
  store itself, which is dropped afterwards so the next run generates it anew), then
  ``verify_audit`` of the store.

Prints medians (wall, and the CPU of the measuring process) and what the run did; ``--out FILE``
also writes them as JSON. The figures are in bench/README.md ("Consolidation").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Episodic records in a generated store: 44% are drawn, fewer are kept (bench.generate leaves
# out what a prune an hour before NOW would take; 89,103 of 227,273 at seed 42).
EPISODIC_SHARE = 0.39
TARGET_S = 120.0


def _size(text: str) -> int:
    from bench.run import parse_size

    return parse_size(text)


def store_size(episodes: int) -> int:
    return math.ceil(episodes / EPISODIC_SHARE)


# --------------------------------------------------------------------------- in the worker process


def _timed_consolidators() -> dict[str, list[float]]:
    """Wall seconds of each consolidator's transaction, by kind, as ``consolidate`` runs them."""
    from membrane_engine.consolidation import service

    times: dict[str, list[float]] = {}
    original = service.run_one

    def timed(ctx, kind, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(ctx, kind, *args, **kwargs)
        finally:
            times.setdefault(kind, []).append(time.perf_counter() - t0)

    service.run_one = timed
    return times


def worker(url: str, mode: str, repeat: int) -> dict[str, Any]:
    from bench.generate import NOW
    from bench.run import peak_rss_mb
    from membrane_engine import Membrane

    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    try:
        t0 = time.perf_counter()
        snap = m.columns.current()
        load_s = time.perf_counter() - t0
        from membrane_engine.storage.columns import TYPE_CODES

        episodic = int(((snap.type_code == TYPE_CODES["episodic"]) & snap.alive).sum())
        records = len(snap)
        del snap
        per_kind = _timed_consolidators()
        wall, cpu, report = [], [], None
        for _ in range(repeat if mode == "dry" else 1):
            c0, t0 = time.process_time(), time.perf_counter()
            report = m.consolidate(actor=None, as_of=NOW, dry_run=mode == "dry")
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        out: dict[str, Any] = {
            "mode": mode, "records": records, "episodic": episodic, "cache_load_s": round(load_s, 2),
            "wall_s": [round(x, 2) for x in wall], "cpu_s": [round(x, 2) for x in cpu],
            "median_s": round(statistics.median(wall), 2), "cpu_median_s": round(statistics.median(cpu), 2),
            "consolidators_median_s": {k: round(statistics.median(v), 2) for k, v in per_kind.items()},
            "counts": report.counts, "created": len(report.created), "reinforced": len(report.reinforced),
            "compressed": len(report.compressed), "links": len(report.links),
        }
        del report
        if mode == "run":
            t0 = time.perf_counter()
            problems = m.verify_audit()
            out["verify_s"] = round(time.perf_counter() - t0, 1)
            out["verify_problems"] = len(problems)
        out["peak_rss_mb"] = peak_rss_mb()
        return out
    finally:
        m.close()


def _in_worker(url: str, mode: str, repeat: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.consolidation", "--worker", mode, "--url", url, "--repeat", str(repeat)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise SystemExit(f"worker failed ({mode}, {url}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- the driver


def measure(kind: str, n: int, seed: int, stores: Path, pg: str, repeat: int, progress: bool) -> dict[str, Any]:
    from bench.run import drop_pg_schema, ensure_store, store_url

    info = ensure_store(kind, n, seed, stores, pg, "bench", progress)
    url = store_url(kind, n, seed, stores, pg, "bench")
    dry = _in_worker(url, "dry", repeat)
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="membrane-consolidation-", dir=stores) as tmp:
            copy = Path(tmp) / "copy.db"
            source = Path(url.split("///", 1)[1])
            shutil.copyfile(source, copy)
            run = _in_worker(f"sqlite:///{copy}", "run", 1)
    else:
        run = _in_worker(url, "run", 1)
        drop_pg_schema(pg, f"bench_{n}_s{seed}")  # consolidated: the next run generates it anew
        (stores / f"{kind}-bench-{n}-s{seed}.json").unlink(missing_ok=True)
    return {"db": kind, "store_records": n, "store": info, "dry_run": dry, "run": run}


def _line(r: dict[str, Any]) -> str:
    d, w = r["dry_run"], r["run"]
    met = "yes" if w["median_s"] <= TARGET_S else "no"
    kinds = ", ".join(f"{k} {v} s" for k, v in w["consolidators_median_s"].items())
    return (f"{r['db']}: {d['episodic']:,} episodic of {d['records']:,} records | dry run median {d['median_s']} s "
            f"(CPU {d['cpu_median_s']} s, {len(d['wall_s'])} runs) | run {w['median_s']} s (CPU {w['cpu_median_s']} s; "
            f"{kinds}) | target <= {TARGET_S:.0f} s: {met}\n"
            f"  created {w['created']:,}, reinforced {w['reinforced']:,}, compressed {w['compressed']:,}, "
            f"entity links {w['links']:,}; counts {w['counts']}; verify_audit {w['verify_s']} s, "
            f"{w['verify_problems']} problems; peak RSS {w['peak_rss_mb']} MB (run), {d['peak_rss_mb']} MB (dry)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.consolidation", description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", default="100k", help="episodic records wanted (the store is sized for them)")
    p.add_argument("--db", choices=("sqlite", "postgres", "both"), default="sqlite")
    p.add_argument("--repeat", type=int, default=3, help="dry runs measured (the writing run is one)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--stores", type=Path, default=Path(os.environ.get("MEMBRANE_BENCH_STORES", "/tmp/membrane-bench")))
    p.add_argument("--pg-url", default=os.environ.get("MEMBRANE_BENCH_POSTGRES_URL")
                   or os.environ.get("MEMBRANE_TEST_POSTGRES_URL") or "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    p.add_argument("--out", type=Path, help="also write the results as JSON")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--worker", choices=("dry", "run"), help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.url, args.worker, args.repeat)))
        return 0
    n = store_size(_size(args.episodes))
    started = datetime.now(timezone.utc)
    load = os.getloadavg()[0]
    results = [measure(kind, n, args.seed, args.stores, args.pg_url, args.repeat, not args.no_progress)
               for kind in (("sqlite", "postgres") if args.db == "both" else (args.db,))]
    report = {"command": "python -m bench.consolidation " + " ".join(argv if argv is not None else sys.argv[1:]),
              "started": started.isoformat(timespec="seconds"), "load_start": round(load, 2),
              "load_end": round(os.getloadavg()[0], 2), "results": results}
    print(f"consolidation, {started:%Y-%m-%d %H:%M} UTC, load average {report['load_start']} at the start, "
          f"{report['load_end']} at the end")
    for r in results:
        print(_line(r))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
