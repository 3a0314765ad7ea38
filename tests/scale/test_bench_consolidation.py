"""bench/consolidation.py end to end on a small generated store (figures printed, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_consolidation_benchmark_runs_end_to_end(tmp_path: Path):
    out = tmp_path / "consolidation.json"
    cmd = [sys.executable, "-m", "bench.consolidation", "--episodes", "400", "--db", "sqlite", "--repeat", "2",
           "--stores", str(tmp_path / "stores"), "--out", str(out), "--no-progress"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(done.stdout)
    print(done.stderr[-3000:], file=sys.stderr)
    assert done.returncode == 0
    [result] = json.loads(out.read_text())["results"]
    dry, run = result["dry_run"], result["run"]
    assert len(dry["wall_s"]) == 2 and len(run["wall_s"]) == 1
    assert run["verify_problems"] == 0
    # a dry run tells what the run then does (on a copy of the same store)
    assert dry["counts"] == run["counts"] and run["created"] > 0 and run["compressed"] > 0
