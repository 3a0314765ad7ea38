"""bench/browser.py end to end on a generated store of 2,000 records: it starts the console, times
the simulator in Chromium and writes its JSON and screenshot (numbers printed, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import CHROMIUM, ROOT

pytestmark = pytest.mark.e2e

N = 2000


def test_browser_benchmark_runs_end_to_end(tmp_path: Path):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the browser benchmark needs Debian's chromium "
                    "(apt-get install chromium; .ci/run installs it)", pytrace=False)
    if str(ROOT) not in sys.path:  # the bench package lives at the repository root
        sys.path.insert(0, str(ROOT))
    from bench.generate import generate

    url = f"sqlite:///{tmp_path / 'store.db'}"
    generate(url, N, progress=False)
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.browser", "--db", url, "--warm", "2", "--uncached", "1", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(done.stdout)
    print(done.stderr[-3000:], file=sys.stderr)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads((out / "browser-latest.json").read_text())
    assert report["records"] == N
    assert not report["problems"]
    for phase in ("first_visit", "cold"):
        assert report[phase]["ms"] > 0 and report[phase]["script_runs"] >= 1
    assert report["warm_stats"]["runs"] == 2 and report["uncached_stats"]["runs"] == 1
    assert report["warm_stats"]["median_ms"] > 0
    assert Path(report["screenshot"]).stat().st_size > 0
