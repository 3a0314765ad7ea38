"""Task-aware ranking and graph retrieval at scale (SPEC 9), on a store bench.generate made:

    python -m bench.ranking --db sqlite:////tmp/membrane-bench/sqlite-1000000-s42.db

In one fresh process, with the Membrane's clock at the generated stores' NOW and bench.run's
trust context (max medium, two scopes, min_salience 0.2):

- first ranked retrieve: the first request with a task descriptor in the process, which loads
  (or, for a store imported before vectors existed, computes and writes) the record vectors
- retrieve with a task descriptor (limit 20; five tasks in turn): target <= 100 ms at 1M
- retrieve_graph, 10 roots / 25 nodes / 2 hops, same tasks: target <= 150 ms at 1M
- the same retrieve without a task, for comparison

Prints one JSON object (medians and p95 in ms) and writes it under bench/results/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.run import DEFAULT_OUT, Samples, _stats, _timed, bench_trust, peak_rss_mb

TASKS = ["fix flaky pytest test in CI", "rotate the signing key of the gateway", "postgres upgrade runbook",
         "why did the deploy fail", "terraform plan review"]


def measure(url: str, repeat: int) -> dict:
    from bench.generate import NOW
    from membrane_engine import Membrane, RetrieveGraphRequest, RetrieveRequest

    t0 = time.perf_counter()
    m = Membrane.open(url, load_sample=False, clock=lambda: NOW)
    snap = m.columns.current()
    out: dict = {"records": len(snap), "cold_open_s": round(time.perf_counter() - t0, 2)}
    trust = bench_trust()

    def request(i: int, task: bool = True) -> RetrieveRequest:
        return RetrieveRequest(trust=trust, task_descriptor=TASKS[i % len(TASKS)] if task else "", limit=20,
                               min_salience=0.2, as_of=NOW)

    c0, t0 = time.process_time(), time.perf_counter()
    m.retrieve(request(0))
    out["first_ranked_retrieve"] = _stats(Samples([time.perf_counter() - t0], [time.process_time() - c0]))
    counter = iter(range(10**9))
    samples, _ = _timed(lambda: m.retrieve(request(next(counter))), repeat, warmup=1)
    out["retrieve_task"] = _stats(samples)
    samples, _ = _timed(lambda: m.retrieve(request(0, task=False)), repeat, warmup=1)
    out["retrieve_no_task"] = _stats(samples)
    counter = iter(range(10**9))

    def graph():
        return m.retrieve_graph(RetrieveGraphRequest(trust=trust, task_descriptor=TASKS[next(counter) % len(TASKS)],
                                                     min_salience=0.2, root_limit=10, node_limit=25, max_hops=2,
                                                     as_of=NOW))

    c0, t0 = time.process_time(), time.perf_counter()
    g = graph()
    out["first_graph"] = _stats(Samples([time.perf_counter() - t0], [time.process_time() - c0]))
    samples, g = _timed(graph, repeat, warmup=1)
    out["retrieve_graph"] = _stats(samples)
    out["graph_nodes"], out["graph_edges"] = len(g.nodes), len(g.edges)
    out["peak_rss_mb"] = peak_rss_mb()
    m.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ranking", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="a store bench.generate made")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    started = datetime.now(timezone.utc)
    import os

    result = {"command": "python -m bench.ranking " + " ".join(argv if argv is not None else sys.argv[1:]),
              "started": started.isoformat(timespec="seconds"), "loadavg_start": os.getloadavg(),
              **measure(args.db, args.repeat), "loadavg_end": os.getloadavg()}
    print(json.dumps(result, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{started.strftime('%Y%m%dT%H%M%SZ')}-ranking.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
