"""`membrane-console consolidate [--dry-run] [--as-of T]` (SPEC 12) on the sample store: what is
(or would be) created, reinforced and compressed is printed, a dry run writes nothing, and the
exit status says how it went (0 done, 1 a consolidator failed, 2 a bad argument)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console import cli
from membrane_engine import Membrane

from tests.conftest import SAMPLE, SAMPLE_NOW

AS_OF = SAMPLE_NOW.isoformat()


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'membrane.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_file(SAMPLE)
    m.close()
    return url


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["consolidate", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def state(url: str) -> tuple[int, int]:
    m = Membrane.open(url, load_sample=False)
    try:
        return m.count(), m.audit_query(limit=0)[0]
    finally:
        m.close()


def test_dry_run_prints_what_would_be_written_and_writes_nothing(store, capsys):
    before = state(store)
    code, out, _ = run(capsys, "--db", store, "--dry-run", "--as-of", AS_OF)
    assert code == 0
    assert "dry run: nothing written" in out and "(would be written)" in out
    assert "episodic compression: 5 compressed" in out
    assert "semantic: " in out and " created" in out and "plan graph: " in out
    assert state(store) == before


def test_run_writes_what_it_prints(store, capsys):
    before = state(store)
    code, out, _ = run(capsys, "--db", store, "--as-of", AS_OF, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["dry_run"] is False and report["actor"] is None
    assert report["counts"]["episodic_compressed"] == len(report["compressed"]) == 5
    count, entries = state(store)
    assert count == before[0] + len(report["created"])
    assert entries > before[1]
    m = Membrane.open(store, load_sample=False)
    try:
        created = m.get(report["created"][0])
        assert m.audit_log(created.id)[-1].actor.startswith("consolidation/")
        assert m.verify_audit() == []
    finally:
        m.close()


def test_actor_names_the_entries(store, capsys):
    code, out, _ = run(capsys, "--db", store, "--as-of", AS_OF, "--actor", "nightly", "--json")
    assert code == 0
    report = json.loads(out)
    m = Membrane.open(store, load_sample=False)
    try:
        assert {e.actor for e in m.audit_log(report["created"][0])} == {"nightly"}
    finally:
        m.close()


def test_bad_arguments_exit_2(store, tmp_path, capsys):
    code, _, err = run(capsys, "--db", store, "--as-of", "yesterday")
    assert code == 2 and "ISO 8601" in err
    code, _, err = run(capsys, "--db", f"sqlite:///{tmp_path / 'missing.db'}")
    assert code == 2 and "no store" in err
    assert not (tmp_path / "missing.db").exists()
    code, _, err = run(capsys, "--db", store, "--actor", " ")
    assert code == 2 and "actor" in err
