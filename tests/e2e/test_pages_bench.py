"""bench/pages.py end to end on a generated store of 2,000 records: every page of the
navigation visited and timed, problems none (numbers printed, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import CHROMIUM, ROOT

pytestmark = pytest.mark.e2e

N = 2000


def test_pages_benchmark_visits_every_page(tmp_path: Path):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the pages benchmark needs Debian's chromium "
                    "(apt-get install chromium; .ci/run installs it)", pytrace=False)
    if str(ROOT) not in sys.path:  # the bench package lives at the repository root
        sys.path.insert(0, str(ROOT))
    from bench.generate import generate
    from bench.pages import console_pages

    url = f"sqlite:///{tmp_path / 'store.db'}"
    generate(url, N, progress=False)
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.pages", "--db", url, "--visits", "1", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(done.stdout)
    print(done.stderr[-3000:], file=sys.stderr)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads((out / "pages-latest.json").read_text())
    pages = console_pages()
    assert len(pages) == 9 and pages[0] == "overview" and "selector" in pages
    assert report["records"] == N and report["pages"] == pages and report["problems"] == []
    assert list(report["visits"]) == pages and all(len(v) == 1 and v[0]["s"] > 0 for v in report["visits"].values())
    assert all((out / f"pages-{page}.png").stat().st_size > 0 for page in pages)
