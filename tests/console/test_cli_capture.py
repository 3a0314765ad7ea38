"""`membrane-console capture FILE.json` (SPEC 12) on the sample store: a request or an array of
them written in one transaction (all or nothing), mentions resolved to the sample's entities, a
dry run that writes nothing, and clear refusals (exit 2) naming the request, field and value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console import cli
from membrane_engine import Membrane

from tests.conftest import SAMPLE

RIPGREP = "ac84a8d5-aec4-5ed0-bd5f-458d212c948c"  # the sample's ripgrep entity (public, alias "rg")

REQUESTS = [
    {"source": "kestrel", "source_kind": "tool_output", "sensitivity": "public",
     "content": {"tool_name": "rg", "args": {"pattern": "TODO"}, "result": "3 matches"}},
    {"source": "kestrel", "source_kind": "observation", "scope": "project-alpha",
     "content": {"subject": "Dev Patel", "predicate": "reviews", "object": "auth middleware"}},
]


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'membrane.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_file(SAMPLE)
    m.close()
    return url


def write(tmp_path: Path, data, name: str = "captures.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["capture", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def state(url: str) -> tuple[int, int]:
    m = Membrane.open(url, load_sample=False)
    try:
        return m.count(), m.audit_query(limit=0)[0]
    finally:
        m.close()


def test_an_array_is_written_and_resolved_against_the_sample(store, tmp_path, capsys):
    count, _ = state(store)
    code, out, err = run(capsys, str(write(tmp_path, REQUESTS)), "--db", store)
    assert code == 0, err
    assert "capture 0: episodic" in out and f"'rg' -> {RIPGREP} (existing: ripgrep)" in out
    assert "capture 1: episodic" in out and "existing: Dev Patel" in out and "fact " in out
    assert "2 capture(s) written" in out
    m = Membrane.open(store, load_sample=False)
    try:
        assert m.count() == count + 3  # two primary records and the fact: both mentions matched
        assert m.verify_audit() == []
    finally:
        m.close()


def test_one_request_as_an_object_with_an_actor_and_json(store, tmp_path, capsys):
    code, out, _ = run(capsys, str(write(tmp_path, REQUESTS[0])), "--db", store, "--actor", "demo", "--json")
    assert code == 0
    (response,) = json.loads(out)
    assert response["mentions"][0]["entity_id"] == RIPGREP and response["dry_run"] is False
    m = Membrane.open(store, load_sample=False)
    try:
        assert [e.actor for e in m.audit_log(response["primary_record"]["id"])] == ["demo"]
    finally:
        m.close()


def test_dry_run_writes_nothing(store, tmp_path, capsys):
    before = state(store)
    code, out, _ = run(capsys, str(write(tmp_path, REQUESTS)), "--db", store, "--dry-run")
    assert code == 0 and "would be written (dry run: nothing was)" in out
    assert state(store) == before


def test_a_bad_request_refuses_the_file(store, tmp_path, capsys):
    before = state(store)
    bad = [REQUESTS[0], {**REQUESTS[1], "sensitivity": "secret"}, "not an object"]
    code, _, err = run(capsys, str(write(tmp_path, bad)), "--db", store)
    assert code == 2
    assert "request 1: sensitivity: must be one of" in err and "'secret'" in err
    assert "request 2: must be a JSON object" in err and "nothing was written" in err
    # refused by the engine, not the file check: a tool output without its tool
    code, _, err = run(capsys, str(write(tmp_path, [REQUESTS[0], {"source": "k", "source_kind": "tool_output"}])),
                       "--db", store)
    assert code == 2 and "request 1" in err and "tool_name" in err
    assert state(store) == before


@pytest.mark.parametrize("content,message", [("{not json", "is not JSON"), ("[]", "holds no capture request")])
def test_files_that_hold_no_requests(store, tmp_path, capsys, content: str, message: str):
    code, _, err = run(capsys, str(write(tmp_path, content)), "--db", store)
    assert code == 2 and message in err


def test_a_missing_file_and_bad_arguments(store, tmp_path, capsys):
    code, _, err = run(capsys, str(tmp_path / "missing.json"), "--db", store)
    assert code == 2 and "cannot read" in err
    assert run(capsys)[0] == 2
