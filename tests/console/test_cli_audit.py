"""`membrane-console audit checkpoint|verify` (SPEC 6): the checkpoint workflow on the command
line, with its exit status: 0 intact, 1 problems, 2 a bad argument or checkpoint file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from console import cli
from membrane_engine import Membrane


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'membrane.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_records([{"id": f"r{k}", "type": "semantic", "sensitivity": "low", "confidence": 0.9, "salience": 0.5,
                       "payload": {"kind": "semantic", "subject": "s", "predicate": "p", "object": k,
                                   "evidence": [{"source_type": "doc", "source_id": "d"}]}} for k in range(3)])
    m.close()
    return url


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["audit", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_checkpoint_then_verify_against_it(store, tmp_path, capsys):
    code, out, _ = run(capsys, "checkpoint", "--db", store)
    assert code == 0
    cp = json.loads(out)
    assert cp["kind"] == "membrane-audit-checkpoint" and cp["position"] == 2
    path = tmp_path / "cp.json"
    path.write_text(out)
    code, out, _ = run(capsys, "verify", "--db", store, "--checkpoint", str(path))
    assert code == 0 and "intact" in out and cp["taken_at"] in out
    code, out, _ = run(capsys, "verify", "--db", store)
    assert code == 0 and "intact" in out


def test_problems_exit_1_and_are_printed(store, tmp_path, capsys):
    run(capsys, "checkpoint", "--db", store)
    con = sqlite3.connect(store.split("///", 1)[1])
    con.execute("UPDATE records SET sensitivity = 'public', sens_level = 0 WHERE id = 'r1'")
    con.commit()
    con.close()
    code, out, _ = run(capsys, "verify", "--db", store)
    assert code == 1
    assert "1 problem(s)" in out and "record r1" in out and "outside the engine" in out


def test_a_rolled_back_store_fails_against_its_checkpoint(store, tmp_path, capsys):
    _, out, _ = run(capsys, "checkpoint", "--db", store)
    (tmp_path / "cp.json").write_text(out)
    con = sqlite3.connect(store.split("///", 1)[1])
    con.execute("DELETE FROM records WHERE id = 'r2'")
    con.execute("DELETE FROM audit_entries WHERE record_id = 'r2'")
    con.commit()
    con.close()
    assert run(capsys, "verify", "--db", store)[0] == 0  # the cut tail leaves nothing inside the store to see
    code, out, _ = run(capsys, "verify", "--db", store, "--checkpoint", str(tmp_path / "cp.json"))
    assert code == 1 and "rolled back" in out


@pytest.mark.parametrize("content", [None, "not json", '{"kind": "other"}', '{"kind": "membrane-audit-checkpoint"}'])
def test_a_bad_checkpoint_file_exits_2(store, tmp_path, capsys, content):
    path = tmp_path / "cp.json"
    if content is not None:
        path.write_text(content)
    code, out, err = run(capsys, "verify", "--db", store, "--checkpoint", str(path))
    assert code == 2 and out == "" and "checkpoint" in err


@pytest.mark.parametrize("argv", [(), ("bogus",), ("verify", "--no-such-flag"), ("checkpoint", "--db")])
def test_bad_arguments_exit_2(capsys, argv):
    assert run(capsys, *argv)[0] == 2


def test_a_store_that_cannot_be_opened_exits_2(capsys):
    code, _, err = run(capsys, "verify", "--db", "nonsense://")
    assert code == 2 and "cannot open store" in err
