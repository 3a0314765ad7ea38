"""Task-aware ranking and graph retrieval at scale (SPEC 9), on a store bench.generate made:

    python -m bench.ranking --db sqlite:////work/stores/vec-sqlite-1m.db
    python -m bench.ranking --db URL --import-file records-1000000-s42.jsonl --import-db URL2

In one fresh process, with the Membrane's clock at the generated stores' NOW and bench.run's
trust context (max medium, two scopes, min_salience 0.2):

- cold open (the column cache's load), then the first request with a task descriptor and the
  first graph request with one, as a process that never warmed meets them (they load every
  stored vector, and the entities' names)
- the same on a second Membrane after ``Membrane.warm()`` (what a console server does as it
  starts: the column cache, the vectors and the entity names in one go), each part timed
- retrieve with a task descriptor (limit 20; eight operator-like tasks in turn): target
  <= 100 ms at 1M; and the same retrieve without a task, for comparison
- retrieve_graph, 10 roots / 25 nodes / 2 hops, same tasks: target <= 150 ms at 1M

``--graph-page``: the console (``membrane-console``, which warms the store as it starts) on
``--db`` in headless Chromium: the Graph page opened (a fresh session each time, timed from
navigation until the page is idle), then a task typed into it and the graph drawn (timed from
Enter until the page is idle with the graph on it), ``--visits`` times; the first visit is
right after the server started. Target: the page with a task's graph drawn in <= 3 s.

``--import-file``: also imports that JSON Lines file into two new stores at ``--import-db``
(a SQLite path ending in .db or a PostgreSQL URL, whose schemas ``<prefix>_vec`` and
``<prefix>_novec`` are made anew), once with the default ranking provider and once without one
(``embedder=None``), on ``--workers`` processes; wall and CPU seconds (this process and its
workers) of each.

Prints one JSON object (medians and p95 in ms, CPU medians beside them, the load average) and
writes it under ``--out`` (bench/results by default) as a dated file git ignores, and each kind
of measurement it made as the latest of its kind, which git keeps and bench/README.md's tables
show: ``ranking-engine-<db>-latest.json``, ``ranking-graph-page-<db>-latest.json``,
``ranking-import-<db>-latest.json`` (``<db>``: sqlite or postgres).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.run import DEFAULT_OUT, _stats, _timed, bench_trust, db_kind, peak_rss_mb, stamp, write_json

TASKS = ["rollback a failed canary release", "renew the gateway certificate before it expires",
         "restore the database from a snapshot backup", "latency alert on the queue worker",
         "rotate the vault secret token", "upgrade the cluster node pool", "postmortem for the dns outage",
         "migrate the schema and rebuild the search index"]


def _once(fn) -> tuple[dict, object]:
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return {"s": round(time.perf_counter() - t0, 3), "cpu_s": round(time.process_time() - c0, 3)}, out


def measure(url: str, repeat: int) -> dict:
    from bench.generate import NOW
    from membrane_engine import Membrane, RetrieveGraphRequest, RetrieveRequest

    trust = bench_trust()

    def request(i: int, task: bool = True) -> RetrieveRequest:
        return RetrieveRequest(trust=trust, task_descriptor=TASKS[i % len(TASKS)] if task else "", limit=20,
                               min_salience=0.2, as_of=NOW)

    def graph_request(i: int) -> RetrieveGraphRequest:
        return RetrieveGraphRequest(trust=trust, task_descriptor=TASKS[i % len(TASKS)], min_salience=0.2,
                                    root_limit=10, node_limit=25, max_hops=2, as_of=NOW)

    out: dict = {}
    # 1. a process that never warmed: the first ranked request and the first graph request load
    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    out["cold_open"], snap = _once(m.columns.current)
    out["records"] = len(snap)
    del snap
    out["first_ranked_retrieve_unwarmed"], _ = _once(lambda: m.retrieve(request(0)))
    out["first_graph_unwarmed"], _ = _once(lambda: m.retrieve_graph(graph_request(1)))
    m.close()
    del m
    gc.collect()

    # 2. a warmed one, as a console server is
    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    out["warm_column_cache"], warm = _once(m.columns.current)
    out["warm_vectors"], _ = _once(lambda: m.vectors.load(warm))
    out["warm_entity_names"], _ = _once(lambda: m.entity_terms.load(warm))
    out["vector_matrix_mb"] = round(m.vectors._matrix.nbytes / 2**20, 1)
    out["vector_dim"] = int(m.vectors._matrix.shape[1])
    out["rows_with_vector"] = int(m.vectors._has.sum())
    warm = None  # the column snapshot is not needed for the timings below
    out["first_ranked_retrieve"], _ = _once(lambda: m.retrieve(request(0)))
    out["first_graph"], _ = _once(lambda: m.retrieve_graph(graph_request(1)))
    counter = iter(range(10**9))
    samples, _ = _timed(lambda: m.retrieve(request(next(counter))), repeat, warmup=1)
    out["retrieve_task"] = _stats(samples)
    samples, _ = _timed(lambda: m.retrieve(request(0, task=False)), repeat, warmup=1)
    out["retrieve_no_task"] = _stats(samples)
    counter = iter(range(10**9))
    samples, g = _timed(lambda: m.retrieve_graph(graph_request(next(counter))), repeat, warmup=1)
    out["retrieve_graph"] = _stats(samples)
    out["graph_nodes"], out["graph_edges"] = len(g.nodes), len(g.edges)
    out["peak_rss_mb"] = peak_rss_mb()
    m.close()
    return out


def graph_page(db: str, visits: int, shots: Path | None) -> dict:
    from bench.browser import console_and_chromium
    from tests.support.browser import Console

    plot = ".js-plotly-plot"
    out: dict = {"visits": []}
    with console_and_chromium(db, "bench-graph", launcher="cli") as (server, launch):
        t0 = time.perf_counter()
        server.start(timeout=300)
        out["server_start_s"] = round(time.perf_counter() - t0, 2)
        con = Console.new(launch(), server)
        for k in range(visits + 1):
            t0 = time.perf_counter()
            con.open("graph", timeout=300)
            opened = time.perf_counter() - t0
            box = con.widget("stTextInput", "Task descriptor").locator("input")
            t0 = time.perf_counter()
            con.act(lambda: (box.fill(TASKS[k % len(TASKS)]), box.press("Enter")), timeout=300)
            con.page.locator(plot).first.wait_for(timeout=60_000)
            drawn = time.perf_counter() - t0
            problems = con.exceptions() + con.alerts()
            visit = {"page_s": round(opened, 2), "task_s": round(drawn, 2), "total_s": round(opened + drawn, 2),
                     "problems": problems}
            if k == 0:
                out["first_visit"] = visit
            else:
                out["visits"].append(visit)
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            out["screenshot"] = str(con.screenshot("bench-ranking-graph"))
            import shutil

            shutil.copy(out["screenshot"], shots / "graph-1m.png")
        con.close()
    totals = sorted(v["total_s"] for v in out["visits"])
    out["median_total_s"] = totals[len(totals) // 2] if totals else None
    out["median_page_s"] = sorted(v["page_s"] for v in out["visits"])[len(totals) // 2] if totals else None
    out["median_task_s"] = sorted(v["task_s"] for v in out["visits"])[len(totals) // 2] if totals else None
    return out


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def import_runs(path: Path, target: str, workers: int) -> dict:
    """The file imported into a new store with the default provider, then into another
    without one: wall and CPU seconds (this process, and its workers once they ended)."""
    from membrane_engine import Membrane

    out: dict = {}
    for label, options in (("with_vectors", {}), ("without_vectors", {"embedder": None})):
        url = _fresh_store(target, label)
        m = Membrane.open(url, load_sample=False, **options)
        c0, k0, t0 = time.process_time(), _children_cpu(), time.perf_counter()
        n = m.import_file(path, workers=workers)
        wall = time.perf_counter() - t0
        out[label] = {"records": n, "s": round(wall, 1), "cpu_s": round(time.process_time() - c0, 1),
                      "workers_cpu_s": round(_children_cpu() - k0, 1), "url": url,
                      "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
        m.close()
        print(json.dumps({label: out[label]}), file=sys.stderr, flush=True)
    out["ratio_wall"] = round(out["with_vectors"]["s"] / out["without_vectors"]["s"], 2)
    cpu = {k: out[k]["cpu_s"] + out[k]["workers_cpu_s"] for k in ("with_vectors", "without_vectors")}
    out["ratio_cpu"] = round(cpu["with_vectors"] / cpu["without_vectors"], 2)
    return out


def _fresh_store(target: str, label: str) -> str:
    """A new, empty store for one import run: ``target`` with the label in its file name, or a
    schema ``<prefix>_<label>`` made anew in the PostgreSQL database of ``target`` (its
    ``options=-csearch_path`` names the prefix)."""
    if not target.startswith("postgresql"):
        base = Path(target.removeprefix("sqlite:///"))
        path = base.with_name(f"{base.stem}-{label}{base.suffix}")
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        return f"sqlite:///{path}"
    from urllib.parse import unquote

    from sqlalchemy import create_engine, text

    base, _, query = target.partition("?")
    prefix = unquote(query).split("search_path=")[-1].split("&")[0] if "search_path" in query else "vec_import"
    schema = f"{prefix}_{label}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    return f"{base}?options=-csearch_path%3D{schema}"


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "")
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ranking", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="a store bench.generate made")
    parser.add_argument("--repeat", type=int, default=24)
    parser.add_argument("--import-file", type=Path, help="also time importing this .jsonl file, with and without vectors")
    parser.add_argument("--import-db", help="where those imports go (a SQLite file URL, or a PostgreSQL URL with a "
                                            "search_path naming the schema prefix)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--label", default="", help="added to the result file's name")
    parser.add_argument("--graph-page", action="store_true", help="the Graph page in a real browser (see above)")
    parser.add_argument("--visits", type=int, default=5)
    parser.add_argument("--shots", type=Path, default=None, help="where the Graph page's screenshot goes")
    parser.add_argument("--no-engine", action="store_true", help="skip the engine measurements of --db")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    started = datetime.now(timezone.utc)
    result = {"command": "python -m bench.ranking " + " ".join(argv if argv is not None else sys.argv[1:]),
              "started": started.isoformat(timespec="seconds"), "machine": machine(),
              "loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    if args.import_file:
        result["import"] = import_runs(args.import_file, args.import_db, args.workers)
    if args.db:
        result["db"] = args.db
        if not args.no_engine:
            result.update(measure(args.db, args.repeat))
        if args.graph_page:
            result["graph_page"] = graph_page(args.db, args.visits, args.shots)
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=1))
    name = f"{stamp(started)}-ranking{'-' + args.label if args.label else ''}.json"
    head = {k: result[k] for k in ("command", "started", "machine", "loadavg_start", "loadavg_end")}
    engine = {k: v for k, v in result.items() if k not in head and k not in ("import", "graph_page")}
    # One latest file per kind of measurement and database: each is often run on its own, and a
    # run of one kind leaves the latest figures of the others in place.
    parts = []
    if "import" in result:
        parts.append((f"import-{db_kind(args.import_db)}", {"import_db": args.import_db, "import": result["import"]}))
    if "graph_page" in result:
        parts.append((f"graph-page-{db_kind(args.db)}", {"db": args.db, "graph_page": result["graph_page"]}))
    if args.db and not args.no_engine:
        parts.append((f"engine-{db_kind(args.db)}", engine))
    write_json(args.out / name, result)
    for kind, part in parts:
        write_json(args.out / f"ranking-{kind}-latest.json", {**head, **part})
    print(f"wrote {args.out / name}" + "".join(f", ranking-{kind}-latest.json" for kind, _ in parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
