"""bench/run.py end to end at N = 2,000 (numbers printed, not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # not from conftest: another directory's conftest may hold that name


def test_benchmark_runs_end_to_end(tmp_path: Path):
    pg = os.environ.get("MEMBRANE_TEST_POSTGRES_URL", "")
    prefix = "benchci_" + uuid.uuid4().hex[:8]
    cmd = [sys.executable, "-m", "bench.run", "--sizes", "2000", "--db", "both" if pg else "sqlite",
           "--repeat", "5", "--stores", str(tmp_path / "stores"), "--out", str(tmp_path / "results"),
           "--pg-schema-prefix", prefix, "--no-progress"]
    if pg:
        cmd += ["--pg-url", pg]
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    finally:
        if pg:
            from bench.run import drop_pg_schema

            drop_pg_schema(pg, f"{prefix}_2000_s42")
    print(done.stdout)
    print(done.stderr[-3000:], file=sys.stderr)
    assert done.returncode == 0
    report = json.loads((tmp_path / "results" / "latest.json").read_text())
    assert {r["db"] for r in report["results"]} == ({"sqlite", "postgres"} if pg else {"sqlite"})
    for r in report["results"]:
        assert r["engine"]["records"] == 2000
        assert r["naive"]["agrees"], r["naive"]["problems"]
        assert r["engine"]["floor_agrees"]
        if r["db"] == "postgres":  # a fresh PostgreSQL store is vacuumed before it is measured
            assert r["generation"]["vacuum_s"] >= 0
