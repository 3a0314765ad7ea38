"""bench/browser.py end to end on a generated store of 2,000 records: it starts the console, times
the simulator in Chromium and writes its JSON and screenshot (numbers printed, not asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.widgets import run_bench_tool

pytestmark = pytest.mark.e2e

N = 2000


def test_browser_benchmark_runs_end_to_end(tmp_path: Path):
    report, _ = run_bench_tool(tmp_path, "bench.browser", "--warm", "2", "--uncached", "1", records=N)
    assert report["records"] == N
    assert not report["problems"]
    for phase in ("first_visit", "cold"):
        assert report[phase]["ms"] > 0 and report[phase]["script_runs"] >= 1
    assert report["warm_stats"]["runs"] == 2 and report["uncached_stats"]["runs"] == 1
    assert report["warm_stats"]["median_ms"] > 0
    assert Path(report["screenshot"]).stat().st_size > 0
