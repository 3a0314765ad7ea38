"""`membrane-console check` (SPEC 11): exit codes, failures with their records and reasons,
JUnit XML read back, snapshots and --against, exports, and that a check writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from console.commands import check
from membrane_engine import Membrane
from membrane_engine.rules.policy_file import MAX_POLICY_BYTES

SAMPLE_POLICY = Path(__file__).resolve().parents[2] / "sample_data" / "policies.toml"
AWS_KEY = "4bd4e60f-41ba-508a-b7d1-a8b178a6aa8b"  # hyper, infra-ops, tagged secret


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sample") / "sample.db"
    Membrane.open(f"sqlite:///{path}", load_sample=True).close()
    return path


@pytest.fixture
def db(sample_db: Path, tmp_path: Path) -> str:
    copy = tmp_path / "store.db"
    copy.write_bytes(sample_db.read_bytes())
    return f"sqlite:///{copy}"


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = check.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_sample_policy_holds_and_a_breaking_reclassify_fails_it(db: str, capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, str(SAMPLE_POLICY), "--db", db)
    assert code == 0 and "13 passed, 0 failed" in out
    m = Membrane.open(db)
    m.reclassify(AWS_KEY, "tester", "oops", sensitivity="low", scope="")
    entries = m.metrics()["total_audit_entries"]
    m.close()

    code, out, _ = run(capsys, str(SAMPLE_POLICY), "--db", db)
    assert code == 1
    fail = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert any("no secret reaches docs-bot in any form (line 48)" in line for line in fail)
    assert f"{AWS_KEY}  semantic low scope (unscoped) tags [secret, aws, ci]: redacted" in out
    assert "because: sensitivity low is one level above max public: redacted; no scopes given: all scopes allowed" in out
    assert "FAKE" not in out.upper().replace("FAIL", "")  # no payload (the sample's canaries) ever
    m = Membrane.open(db)
    assert m.metrics()["total_audit_entries"] == entries and m.verify_audit() == []  # the check wrote nothing
    m.close()


def test_the_installed_command_runs_the_check(db: str) -> None:
    done = subprocess.run([sys.executable, "-m", "console.cli", "check", str(SAMPLE_POLICY), "--db", db],
                          capture_output=True, text=True, env=os.environ | {"PYTHONPATH": os.getcwd()}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "13 passed" in done.stdout


INVALID = [
    ("syntax", '[profiles.a]\nmax_sensitivity = "low"\n\n[[assert]]\nprofile = "a"\nexpect = hidden\n', 6, "(syntax)"),
    ("unknown profile", '[profiles.a]\nmax_sensitivity = "low"\n\n[[assert]]\nprofile = "b"\nexpect = "hidden"\n', 5,
     "assert[0].profile"),
    ("unknown verdict", '[profiles.a]\nmax_sensitivity = "low"\n\n[[assert]]\nprofile = "a"\nexpect = "secret"\n', 6,
     "assert[0].expect"),
    ("unknown key", '[profiles.a]\nmax_sensitivity = "low"\nscope = ["x"]\n', 3, "profiles.a.scope"),
    ("deep nesting", '[profiles.a]\nmax_sensitivity = "low"\n\n[[assert]]\nprofile = "a"\nexpect = "hidden"\n'
     'records = { ids = ' + "[" * 1_000 + "]" * 1_000 + " }\n", 7, "assert[0].records.ids"),
]
DEEP = INVALID[-1][1]


@pytest.mark.parametrize("case,text,line,key", INVALID, ids=[c[0] for c in INVALID])
def test_an_invalid_file_exits_2_naming_line_and_key(case: str, text: str, line: int, key: str, db: str,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    code, out, err = run(capsys, str(path), "--db", db)
    assert code == 2 and out == ""
    assert f"{path}:{line}: {key}:" in err


BAD_BYTES = [
    ("not UTF-8", b'[profiles.a]\nmax_sensitivity = "l\xffow"\n', 2, "not UTF-8: byte 0xff at line 2, column 21"),
    ("too big", b"[profiles.a]\n" + b"#" * MAX_POLICY_BYTES + b"\n", 2,
     f"the file is {MAX_POLICY_BYTES + 14:,} bytes; a policy file may be at most {MAX_POLICY_BYTES:,} bytes"),
]


@pytest.mark.parametrize("case,data,line,message", BAD_BYTES, ids=[c[0] for c in BAD_BYTES])
def test_a_file_that_cannot_be_read_as_policy_exits_2_naming_the_line(
        case: str, data: bytes, line: int, message: str, db: str, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(data)
    code, out, err = run(capsys, str(path), "--db", db)
    assert code == 2 and out == ""
    assert f"{path}:{line}: (file): {message}" in err


def test_the_installed_command_exits_2_on_deep_nesting_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(DEEP)
    done = subprocess.run([sys.executable, "-m", "console.cli", "check", str(path), "--db",
                           f"sqlite:///{tmp_path / 'none.db'}"], capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": os.getcwd()}, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and f"{path}:7: assert[0].records.ids: nested more than" in done.stderr


def test_a_snapshot_nested_too_deeply_exits_2(db: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    snap = tmp_path / "seen.jsonl"
    assert run(capsys, str(SAMPLE_POLICY), "--db", db, "--snapshot", str(snap))[0] == 0
    with snap.open("a") as fh:
        fh.write("[" * 100_000 + "\n")
    lines = snap.read_text().count("\n")
    code, out, err = run(capsys, str(SAMPLE_POLICY), "--db", db, "--against", str(snap))
    assert code == 2 and f"{snap}:{lines}: nested too deeply" in err


def test_a_store_that_is_not_there_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, _, err = run(capsys, str(SAMPLE_POLICY), "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert code == 2 and "no store at" in err and not (tmp_path / "none.db").exists()


def test_junit_output_reads_back(db: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    m = Membrane.open(db)
    m.reclassify(AWS_KEY, "tester", "oops", sensitivity="low", scope="")
    m.close()
    out = tmp_path / "junit.xml"
    code, _, _ = run(capsys, str(SAMPLE_POLICY), "--db", db, "--junit", str(out))
    assert code == 1
    root = ET.parse(out).getroot()
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(cases) == 13 and int(suite.get("tests")) == 13
    assert int(suite.get("failures")) == len(failed) >= 1
    names = {c.get("name") for c in failed}
    assert "no secret reaches docs-bot in any form" in names
    docs = next(c for c in failed if c.get("name") == "no secret reaches docs-bot in any form")
    assert docs.get("classname") == "profile.docs-bot"
    assert AWS_KEY in docs.find("failure").text and "redacted" in docs.find("failure").get("message")


def test_snapshot_and_against_fail_on_a_gain_only(db: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    snap = tmp_path / "seen.jsonl"
    assert run(capsys, str(SAMPLE_POLICY), "--db", db, "--snapshot", str(snap))[0] == 0
    assert run(capsys, str(SAMPLE_POLICY), "--db", db, "--against", str(snap))[0] == 0

    m = Membrane.open(db)
    # Narrowing: a public alpha record becomes high. Every assertion still holds; only losses.
    narrowed = next(r for r in m.retrieve_by_type("semantic", {"max_sensitivity": "hyper"})
                    if r.scope == "project-alpha" and r.sensitivity.value == "public")
    m.reclassify(narrowed.id, "tester", "narrow", sensitivity="high")
    m.close()
    code, out, _ = run(capsys, str(SAMPLE_POLICY), "--db", db, "--against", str(snap))
    assert code == 0 and "0 gain(s)" in out and f"loss docs-bot: {narrowed.id} full -> hidden" in out

    m = Membrane.open(db)
    # Widening that no assertion catches: an orion low record moves to the unscoped pool.
    widened = next(r for r in m.retrieve_by_type("semantic", {"max_sensitivity": "hyper"})
                   if r.scope == "project-orion" and r.sensitivity.value == "low")
    m.reclassify(widened.id, "tester", "widen", scope="")
    m.close()
    junit = tmp_path / "j.xml"
    code, out, _ = run(capsys, str(SAMPLE_POLICY), "--db", db, "--against", str(snap), "--junit", str(junit))
    lines = out.splitlines()
    assert code == 1 and "13 passed, 0 failed" in out and "a profile gained access" in out
    changes = [line.strip() for line in lines if line.startswith("  GAIN") or line.startswith("  loss")]
    assert changes[0].startswith("GAIN")  # gains first
    assert f"GAIN alpha-agent: {widened.id} hidden -> full" in changes
    assert not any(c.startswith("GAIN") for c in changes[changes.index(next(c for c in changes if c.startswith("loss"))):])
    gained = ET.parse(junit).getroot().find("testsuite/testcase[@classname='snapshot']/failure")
    assert gained is not None and widened.id in gained.text


def test_a_check_against_an_export(db: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    m = Membrane.open(db)
    export = tmp_path / "export.jsonl"
    m.export_file(export)
    m.close()
    code, out, _ = run(capsys, str(SAMPLE_POLICY), "--records", str(export))
    assert code == 0 and "221 of 221 records" in out


def test_the_console_hands_its_policy_file_to_the_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.web import cli as stcli

    from console import cli
    from console.components import policy_source

    monkeypatch.setattr(sys, "argv", ["membrane-console"])
    monkeypatch.setattr(stcli, "main", lambda: 0)
    monkeypatch.delenv("MEMBRANE_POLICIES", raising=False)
    assert cli.serve(["--db", "sqlite:///x.db", "--policies", "team.toml", "--no-prewarm"]) == 0
    assert sys.argv[-5:] == ["--", "--db", "sqlite:///x.db", "--policies", "team.toml"]
    script_args = sys.argv[sys.argv.index("--") + 1:]
    monkeypatch.setattr(sys, "argv", ["console/app.py", *script_args])  # what `streamlit run` gives the pages
    assert policy_source.configured_path() == "team.toml"
