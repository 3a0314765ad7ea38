"""bench/README.md's tables are what bench/tables.py makes of the committed latest results, so
the figures the README shows never drift from the files they come from."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import tables

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "bench" / "results"
README = ROOT / "bench" / "README.md"


def test_the_readme_section_is_what_the_committed_results_give() -> None:
    _, section, _ = tables.split(README.read_text())
    assert section == tables.render(RESULTS), "bench/README.md's tables differ from bench/results: " \
                                              "run python -m bench.tables"


def test_only_latest_results_are_tracked() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "bench/results"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert "bench/results/latest.json" in tracked
    assert [f for f in tracked if not f.endswith(("latest.json", "/.gitignore"))] == []


def test_the_tables_follow_the_files(tmp_path: Path) -> None:
    """A figure changed in a results file changes the table: nothing in it is written by hand."""
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("[0-9]*", "*.png"))
    latest = tmp_path / "results" / "latest.json"
    report = json.loads(latest.read_text())
    lite = next(r for r in report["results"] if r["db"] == "sqlite")
    lite["engine"]["retrieve"].update(median_ms=73.21, p95_ms=80.55, cpu_median_ms=70.04)
    latest.write_text(json.dumps(report))
    section = tables.render(tmp_path / "results")
    row = next(line for line in section.splitlines() if line.startswith("| retrieve |"))
    assert "73.2 / 80.5 ms (70.0)" in row
    assert row.endswith("| no: SQLite |")  # over its 50 ms target


def test_optional_results_missing_are_named_not_invented(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    shutil.copy(RESULTS / "latest.json", tmp_path / "results" / "latest.json")
    section = tables.render(tmp_path / "results")
    assert "No results file (`browser-latest.json`)" in section
    assert "No results file (`pages-sqlite-latest.json`)" in section
    assert "SQLite: sidebar" not in section


def test_a_missing_latest_file_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(tables.ResultsError, match=r"latest\.json is missing: `python -m bench\.run"):
        tables.render(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{tables.START}\nold\n{tables.END}\n")
    done = subprocess.run([sys.executable, "-m", "bench.tables", "--results", str(tmp_path), "--readme", str(readme)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"{tmp_path / 'latest.json'} is missing" in done.stderr
    assert "old" in readme.read_text()  # left as it was


def test_a_results_file_of_another_shape_fails_naming_it(tmp_path: Path) -> None:
    (tmp_path / "latest.json").write_text(json.dumps({"command": "x", "started": "2026-11-26T23:34:33+00:00"}))
    with pytest.raises(tables.ResultsError, match=r"latest\.json: not the shape of a bench\.run results file"):
        tables.render(tmp_path)
    (tmp_path / "latest.json").write_text("{not json")
    with pytest.raises(tables.ResultsError, match=r"latest\.json is not JSON"):
        tables.render(tmp_path)


def test_a_readme_without_its_markers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(tables.ResultsError, match="tables:start"):
        tables.rewritten("# no markers\n", "section\n", tmp_path / "README.md")


def test_check_reports_a_stale_section(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{tables.START}\nstale\n{tables.END}\n\nafter\n")
    args = [sys.executable, "-m", "bench.tables", "--results", str(RESULTS), "--readme", str(readme)]
    assert subprocess.run([*args, "--check"], cwd=ROOT, capture_output=True, timeout=120).returncode == 1
    assert subprocess.run(args, cwd=ROOT, capture_output=True, timeout=120).returncode == 0
    text = readme.read_text()
    assert "stale" not in text and text.endswith(f"{tables.END}\n\nafter\n") and "| retrieve |" in text
    assert subprocess.run([*args, "--check"], cwd=ROOT, capture_output=True, timeout=120).returncode == 0
