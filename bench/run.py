"""The benchmark: how the engine answers at 10k, 100k and 1M records, on SQLite and PostgreSQL.

    python -m bench.run --sizes 10k,100k,1m --db both

For each database and size it makes sure a generated store exists (``bench.generate``, cached
under ``--stores``, default /tmp/membrane-bench, reused across runs), then measures in fresh
processes, so cold open and peak memory are the engine's own:

- cold open: ``Membrane.open`` plus the first query's load of the column cache
- retrieve: limit 20, max sensitivity medium, two scopes, all types, min_salience 0.2
- retrieve_by_id, explain (with as_of and min_salience), a reinforce including bringing the
  column cache up to date, metrics (its first call in the process, which counts every audit
  entry, reported apart as ``metrics_first``), prune preview (``prune(dry_run=True)``),
  ``audit_checkpoint`` and one ``verify_audit`` of the whole store against that checkpoint
- the same retrieve on two yardsticks (bench/reference.py): the naive reference (every record
  loaded and filtered in Python, layer by layer) and the bare numpy floor (filter + top-k over
  the cached columns); reported as ratios
- peak RSS of the measuring process

Medians and p95 in milliseconds are printed and written as JSON under ``--out``
(bench/results by default): ``latest.json``, and a dated copy that git ignores. All requests
ask "as of" the generated stores' NOW, and the Membrane's clock stands at NOW, so runs are
comparable. Reinforce writes (a few audit entries and anchors per run): the cached stores
drift by that much between runs.

The machine is measured as it is: ``loadavg`` (start and end) is recorded with the numbers,
because other work on the same cores shows up in every median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STORES = Path(os.environ.get("MEMBRANE_BENCH_STORES", "/tmp/membrane-bench"))
DEFAULT_OUT = ROOT / "bench" / "results"
DEFAULT_PG = (os.environ.get("MEMBRANE_BENCH_POSTGRES_URL") or os.environ.get("MEMBRANE_TEST_POSTGRES_URL")
              or "postgresql+psycopg://postgres@127.0.0.1:5432/test")
TARGETS_MS = {"retrieve": 50, "retrieve_by_id": 5, "explain": 5, "reinforce": 20, "metrics": 1000,
              "prune_preview": 1000, "cold_open": 10_000, "audit_checkpoint": 100, "verify_audit": 60_000}


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    for suffix, factor in (("k", 1_000), ("m", 1_000_000)):
        if text.endswith(suffix):
            return int(float(text[:-1]) * factor)
    return int(text)


def label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


# --------------------------------------------------------------------------- stores


def db_kind(url: str) -> str:
    """The database of a store's URL as results files name it: ``sqlite`` or ``postgres``."""
    return "postgres" if url.startswith("postgresql") else "sqlite"


def write_results(report: dict[str, Any], out: Path, latest: str, dated: str) -> Path:
    """``report`` as ``out/<latest>`` and ``out/<dated>``, each written whole or not at all.

    The latest file of each benchmark is the one git keeps: ``python -m bench.tables`` makes
    bench/README.md's tables from it. The dated one is this run's record on this machine only
    (bench/results/.gitignore)."""
    for name in (dated, latest):
        write_json(out / name, report)
    return out / dated


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` as ``path`` (its folder made), written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def stamp(started: datetime | str) -> str:
    """A run's start as dated results files begin: ``20261126T233433Z``."""
    when = datetime.fromisoformat(started) if isinstance(started, str) else started
    return when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _pg_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


def store_url(kind: str, n: int, seed: int, stores: Path, pg: str, prefix: str = "bench") -> str:
    if kind == "sqlite":
        return f"sqlite:///{stores / f'sqlite-{n}-s{seed}.db'}"
    return _pg_url(pg, f"{prefix}_{n}_s{seed}")


def store_records(url: str) -> int | None:
    """How many records the store at ``url`` holds; None when there is no store to read."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM records")).scalar())
    except Exception:
        return None
    finally:
        engine.dispose()


def _reset(kind: str, n: int, seed: int, stores: Path, pg: str, prefix: str) -> None:
    if kind == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            (stores / f"sqlite-{n}-s{seed}.db{suffix}").unlink(missing_ok=True)
        return
    from sqlalchemy import create_engine, text

    schema = f"{prefix}_{n}_s{seed}"
    engine = create_engine(pg, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    finally:
        engine.dispose()


def vacuum_pg_store(url: str) -> float:
    """VACUUM (ANALYZE) a freshly generated PostgreSQL store; returns the seconds it took. A
    server with autovacuum on (the default) does this itself soon after a bulk load; this
    machine's server runs with autovacuum off, and a store never vacuumed is measured with every
    first read of a row setting its hint bits (writing pages) and no index-only scans."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    started = time.perf_counter()
    try:
        with engine.connect() as conn:
            for table in ("records", "audit_entries", "changes", "archive"):
                conn.execute(text(f"VACUUM (ANALYZE) {table}"))
    finally:
        engine.dispose()
    return round(time.perf_counter() - started, 1)


def drop_pg_schema(pg: str, schema: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(pg, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        engine.dispose()


def ensure_store(kind: str, n: int, seed: int, stores: Path, pg: str, prefix: str, progress: bool) -> dict[str, Any]:
    """The generated store for (kind, n, seed), made if missing. Returns its generation record
    (timings of the run that made it)."""
    from bench.generate import generate

    stores.mkdir(parents=True, exist_ok=True)
    marker = stores / f"{kind}-{prefix}-{n}-s{seed}.json"
    url = store_url(kind, n, seed, stores, pg, prefix)
    if marker.exists() and store_records(url) is not None:
        return json.loads(marker.read_text())
    if store_records(url) == n:  # made by a plain `python -m bench.generate` run
        info = {"records": n, "made_by": "bench.generate (timings not recorded)"}
    else:
        _reset(kind, n, seed, stores, pg, prefix)
        print(f"generating {kind} store of {label(n)} records (seed {seed}) ...", file=sys.stderr, flush=True)
        info = generate(url, n, seed, progress=progress, jsonl=stores / f"records-{n}-s{seed}.jsonl")
        if kind == "postgres":
            info["vacuum_s"] = vacuum_pg_store(url)
    info["generated_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    marker.write_text(json.dumps(info))
    return info


# --------------------------------------------------------------------------- measuring (in a worker process)


class Samples(list):
    """Wall-clock seconds per run, with the process's CPU seconds per run alongside (``cpu``):
    on a machine shared with other work, wall time includes waiting for a core; CPU time is
    what the engine itself spent (the database server's own CPU, for PostgreSQL, not included)."""

    def __init__(self, wall=(), cpu=()):
        super().__init__(wall)
        self.cpu = list(cpu)


def _stats(samples: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in samples)
    p95 = ms[min(len(ms) - 1, max(0, round(0.95 * len(ms)) - 1))]
    out = {"median_ms": round(statistics.median(ms), 3), "p95_ms": round(p95, 3), "min_ms": round(ms[0], 3),
           "runs": len(ms)}
    cpu = getattr(samples, "cpu", None)
    if cpu:
        out["cpu_median_ms"] = round(statistics.median(cpu) * 1000, 3)
    return out


def _timed(fn, repeat: int, warmup: int = 1) -> tuple[Samples, Any]:
    out = None
    for _ in range(warmup):
        out = fn()
    samples = Samples()
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - t0)
        samples.cpu.append(time.process_time() - c0)
    return samples, out


def peak_rss_mb() -> float:
    """Peak resident memory of this process: VmHWM (per address space, so a worker started by
    exec does not inherit its parent's peak, as ru_maxrss does on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def bench_trust():
    from bench.generate import BENCH_SCOPES
    from membrane_engine import TrustContext

    return TrustContext(max_sensitivity="medium", authenticated=True, actor_id="bench", scopes=list(BENCH_SCOPES))


def engine_worker(url: str, repeat: int, seed: int) -> dict[str, Any]:
    """Everything measured on the engine's own path, in this (fresh) process."""
    import numpy as np

    from bench.generate import NOW
    from bench.reference import numpy_floor, request
    from membrane_engine import Membrane
    from membrane_engine.rules.trust import verdicts

    c0, t0 = time.process_time(), time.perf_counter()
    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    snap = m.columns.current()
    cold = Samples([time.perf_counter() - t0], [time.process_time() - c0])
    out: dict[str, Any] = {"records": len(snap), "cold_open": _stats(cold)}
    trust = bench_trust()
    req = request(trust, NOW)

    samples, resp = _timed(lambda: m.retrieve(req), repeat, warmup=2)
    out["retrieve"] = _stats(samples)
    out["retrieve_page"] = len(resp.records)
    out["selection_candidates"] = len(resp.selection.scores) if resp.selection else 0
    out["selection_selected"] = len(resp.selection.selected) if resp.selection else 0
    samples, rows = _timed(lambda: numpy_floor(snap, req), repeat, warmup=2)
    out["numpy_floor"] = _stats(samples)
    # The floor orders by S alone (ties in any order): compare the saliences of the two pages.
    out["floor_agrees"] = np.allclose(np.sort(rows[1]), np.sort([r.salience for r in resp.records]), rtol=0, atol=1e-9)

    rng = random.Random(seed)
    full = np.flatnonzero(snap.alive & (verdicts(snap.sens_level, snap.scope_code, snap.scope_names, trust) == 2))
    picks = [str(snap.ids[i]) for i in rng.sample(list(full), min(len(full), max(repeat, 20)))]
    it = iter(picks * 3)
    samples, _ = _timed(lambda: m.retrieve_by_id(next(it), trust), repeat)
    out["retrieve_by_id"] = _stats(samples)
    it = iter(picks * 3)
    samples, _ = _timed(lambda: m.explain(next(it), trust, as_of=NOW, min_salience=0.2), repeat)
    out["explain"] = _stats(samples)

    write_s, refresh_s, total_s = Samples(), Samples(), Samples()
    for rid in picks[: min(len(picks), max(5, repeat))]:
        c0, t0 = time.process_time(), time.perf_counter()
        m.reinforce(rid, "bench", "benchmark: reinforce")
        c1, t1 = time.process_time(), time.perf_counter()
        m.columns.current()
        c2, t2 = time.process_time(), time.perf_counter()
        write_s.append(t1 - t0)
        refresh_s.append(t2 - t1)
        total_s.append(t2 - t0)
        write_s.cpu.append(c1 - c0)
        refresh_s.cpu.append(c2 - c1)
        total_s.cpu.append(c2 - c0)
    out["reinforce"] = _stats(total_s)
    out["reinforce_write"] = _stats(write_s)
    out["reinforce_cache_refresh"] = _stats(refresh_s)

    few = max(3, min(repeat, 7))
    # The first call of a process counts every audit entry; later ones only the entries since.
    samples, _ = _timed(lambda: m.metrics(), 1, warmup=0)
    out["metrics_first"] = _stats(samples)
    samples, metrics = _timed(lambda: m.metrics(), few, warmup=0)
    out["metrics"] = _stats(samples)
    samples, pruned = _timed(lambda: m.prune("bench", "benchmark: preview", dry_run=True), few)
    out["prune_preview"] = _stats(samples)
    out["prune_candidates"] = len(pruned)
    samples, checkpoint = _timed(lambda: m.audit_checkpoint(), repeat)
    out["audit_checkpoint"] = _stats(samples)
    # One walk of the whole audit trail (every chain, the store-wide sequence, every record's
    # content digest) against the checkpoint just taken.
    samples, problems = _timed(lambda: m.verify_audit(checkpoint=checkpoint), 1, warmup=0)
    out["verify_audit"] = _stats(samples)
    out["verify_problems"] = [str(p) for p in problems[:5]]
    out["peak_rss_mb"] = peak_rss_mb()
    m.close()
    return out


def naive_worker(url: str, repeat: int) -> dict[str, Any]:
    """The naive reference on the same request, and whether it agrees with the fast path."""
    from bench.generate import NOW
    from bench.reference import naive_retrieve, request, same_response
    from membrane_engine import Membrane

    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    req = request(bench_trust(), NOW)
    samples, ref = _timed(lambda: naive_retrieve(m, req), repeat, warmup=0)
    fast = m.retrieve(req)
    problems = same_response(fast, ref)
    out = {"naive": _stats(samples), "agrees": not problems, "problems": problems[:5],
           "peak_rss_mb": peak_rss_mb()}
    m.close()
    return out


def _in_worker(kind: str, url: str, repeat: int, seed: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.run", "--worker", kind, "--url", url, "--repeat", str(repeat), "--seed", str(seed)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- report


def _row(db: str, n: int, r: dict[str, Any]) -> str:
    e = r["engine"]

    def cell(name: str) -> str:
        s = e[name]
        return f"{s['median_ms']:.1f}/{s['p95_ms']:.1f} ({s.get('cpu_median_ms', float('nan')):.1f})"

    first = f" first {e['metrics_first']['median_ms']:.0f}" if "metrics_first" in e else ""
    return (f"| {db} | {label(n)} | {cell('retrieve')} | {cell('retrieve_by_id')} | {cell('explain')} | "
            f"{cell('reinforce')} | {cell('metrics')}{first} | {cell('prune_preview')} | {e['cold_open']['median_ms'] / 1000:.2f} s "
            f"({e['cold_open'].get('cpu_median_ms', float('nan')) / 1000:.2f}) | "
            f"{e['peak_rss_mb']:.0f} MB | {r['naive_ratio']:.0f}x | {r['floor_ratio']:.2f}x | {_import_cell(r)} | "
            f"{cell('audit_checkpoint') if 'audit_checkpoint' in e else '-'} | {_verify_cell(e)} |")


def _verify_cell(e: dict[str, Any]) -> str:
    """verify_audit over the whole store, in seconds (and whether it found anything)."""
    if "verify_audit" not in e:
        return "-"
    found = f", {len(e['verify_problems'])}+ problems" if e.get("verify_problems") else ""
    return f"{e['verify_audit']['median_ms'] / 1000:.1f} s ({e['verify_audit'].get('cpu_median_ms', float('nan')) / 1000:.1f}){found}"


def _import_cell(r: dict[str, Any]) -> str:
    """The import that made the store (when this run or an earlier one of bench.run timed it)."""
    seconds = (r.get("generation") or {}).get("import_s")
    return f"{seconds:.0f} s" if seconds is not None else "not timed"


HEADER = ("| db | N | retrieve | by id | explain | reinforce | metrics | prune preview | cold open | peak RSS | "
          "vs naive | vs floor | import | audit checkpoint | verify audit |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10k,100k,1m", help="comma-separated store sizes (10k, 100k, 1m, 2000, ...)")
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=30, help="timed runs per operation (fewer for the slow ones)")
    parser.add_argument("--naive-repeat", type=int, default=0, help="naive reference runs (default: 3, 1 from 500k)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--stores", type=Path, default=DEFAULT_STORES, help="where generated SQLite stores are cached")
    parser.add_argument("--pg-url", default=DEFAULT_PG, help="PostgreSQL URL (stores go in schemas bench_<n>_s<seed>)")
    parser.add_argument("--pg-schema-prefix", default="bench", help="schema name prefix for PostgreSQL stores")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory for the JSON results")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--worker", choices=("engine", "naive"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        result = engine_worker(args.url, args.repeat, args.seed) if args.worker == "engine" else naive_worker(args.url, args.repeat)
        print(json.dumps(result))
        return 0

    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    kinds = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    started = datetime.now(timezone.utc)
    report: dict[str, Any] = {
        "command": "python -m bench.run " + " ".join(argv if argv is not None else sys.argv[1:]),
        "started": started.isoformat(timespec="seconds"), "machine": {
            "cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()]},
        "request": {"limit": 20, "max_sensitivity": "medium", "scopes": "two", "memory_types": "all",
                    "min_salience": 0.2},
        "targets_ms": TARGETS_MS, "results": [],
    }
    print(HEADER)
    for kind in kinds:
        for n in sizes:
            gen = ensure_store(kind, n, args.seed, args.stores, args.pg_url, args.pg_schema_prefix, not args.no_progress)
            url = store_url(kind, n, args.seed, args.stores, args.pg_url, args.pg_schema_prefix)
            engine = _in_worker("engine", url, args.repeat, args.seed)
            naive_repeat = args.naive_repeat or (1 if n >= 500_000 else 3)
            naive = _in_worker("naive", url, naive_repeat, args.seed)
            r = {"db": kind, "n": n, "generation": gen, "engine": engine, "naive": naive,
                 "naive_ratio": naive["naive"]["median_ms"] / engine["retrieve"]["median_ms"],
                 "floor_ratio": engine["retrieve"]["median_ms"] / engine["numpy_floor"]["median_ms"]}
            report["results"].append(r)
            print(_row(kind, n, r), flush=True)
            if not naive["agrees"]:
                print(f"  !! fast path and naive reference disagree: {naive['problems']}", flush=True)
    report["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    report["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    name = f"{stamp(started)}-{'-'.join(kinds)}-{'-'.join(label(n) for n in sizes)}.json"
    dated = write_results(report, args.out, "latest.json", name)
    print(f"cells: wall-clock median/p95 ms (CPU-time median of this process); ratios on wall medians. "
          f"Results: {args.out / 'latest.json'} (and {dated.name}); python -m bench.tables puts them in bench/README.md")
    print(f"load average: {report['machine']['loadavg_start']} at start, {report['machine']['loadavg_end']} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
