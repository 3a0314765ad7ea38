"""bench/pages.py end to end on a generated store of 2,000 records: every page of the
navigation visited and timed, problems none (numbers printed, not asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.widgets import run_bench_tool

pytestmark = pytest.mark.e2e

N = 2000


def test_pages_benchmark_visits_every_page(tmp_path: Path):
    report, out = run_bench_tool(tmp_path, "bench.pages", "--visits", "1", records=N)
    from bench.pages import console_pages

    pages = console_pages()
    assert len(pages) == 14 and pages[0] == "overview"
    assert {"selector", "policies", "graph", "review", "capture", "operators"} <= set(pages)
    assert report["records"] == N and report["pages"] == pages and report["problems"] == []
    assert list(report["visits"]) == pages and all(len(v) == 1 and v[0]["s"] > 0 for v in report["visits"].values())
    assert all((out / f"pages-{page}.png").stat().st_size > 0 for page in pages)
    again = report["restart_open"]  # the first page after a restart, the browser's cache kept
    assert again["problems"] == [] and 0 < again["s"] < again["from_start_s"]
