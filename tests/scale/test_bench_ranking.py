"""bench/ranking.py end to end at N = 2,000 on SQLite (numbers printed, not asserted), with
its import comparison: the store made by the engine's import has a vector for every record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ranking_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    jsonl = tmp_path / "records.jsonl"
    # In a process of its own: write_jsonl forks its side processes, and a fork of a test process
    # that runs other threads (an xdist worker's) can deadlock the child.
    subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from bench.generate import write_jsonl;"
                    " write_jsonl(Path(sys.argv[1]), 2000, progress=False)", str(jsonl)],
                   cwd=ROOT, check=True, timeout=600)
    target = f"sqlite:///{tmp_path / 'imp.db'}"
    cmd = [sys.executable, "-m", "bench.ranking", "--import-file", str(jsonl), "--import-db", target,
           "--workers", "2", "--repeat", "3", "--out", str(tmp_path / "results"),
           "--db", f"sqlite:///{tmp_path / 'imp-with_vectors.db'}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(done.stdout[-3000:])
    print(done.stderr[-3000:], file=sys.stderr)
    assert done.returncode == 0
    (result,) = [json.loads(p.read_text()) for p in (tmp_path / "results").glob("*-ranking.json")]
    assert result["import"]["with_vectors"]["records"] == result["import"]["without_vectors"]["records"] == 2000
    assert result["records"] == 2000
    assert result["rows_with_vector"] == 2000  # written by the import, read in one scan
    for key in ("retrieve_task", "retrieve_no_task", "retrieve_graph"):
        assert result[key]["runs"] == 3 and result[key]["cpu_median_ms"] >= 0
    assert result["graph_nodes"] > 0
