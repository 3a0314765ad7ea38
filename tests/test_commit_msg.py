"""The commit-msg hook (tools/commit_msg.py) refuses a subject over 72 characters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / "tools" / "commit_msg.py"


def _run(tmp_path: Path, message: str) -> subprocess.CompletedProcess:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message)
    return subprocess.run([sys.executable, str(HOOK), str(path)], capture_output=True, text=True, timeout=60)


def test_a_subject_of_72_characters_passes(tmp_path: Path) -> None:
    done = _run(tmp_path, "x" * 72 + "\n\nWhy, with numbers.\n# a comment git drops\n")
    assert done.returncode == 0, done.stderr


def test_a_subject_of_73_characters_is_refused_with_its_length(tmp_path: Path) -> None:
    done = _run(tmp_path, "y" * 73 + "\n")
    assert done.returncode == 1 and "73 characters" in done.stderr


def test_comment_lines_do_not_count_as_the_subject(tmp_path: Path) -> None:
    done = _run(tmp_path, "# Please enter the commit message" + "z" * 80 + "\nShort subject\n")
    assert done.returncode == 0, done.stderr


def test_an_empty_message_and_a_body_without_a_blank_line_are_refused(tmp_path: Path) -> None:
    assert _run(tmp_path, "# only comments\n\n").returncode == 1
    done = _run(tmp_path, "Subject\nbody straight after\n")
    assert done.returncode == 1 and "blank line" in done.stderr


def test_pre_commit_runs_the_hook_at_the_commit_msg_stage() -> None:
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    assert "tools/commit_msg.py" in config and "commit-msg" in config
