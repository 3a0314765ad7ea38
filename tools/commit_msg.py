"""The commit-msg hook: a subject line of at most 72 characters, and a blank line before any body.

Run by pre-commit at the commit-msg stage (see CONTRIBUTING.md) with the message file's path.
"""

from __future__ import annotations

import sys
from pathlib import Path

MAX_SUBJECT = 72


def problems(message: str) -> list[str]:
    """What is wrong with a commit message, as git will record it (comment lines dropped)."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return ["the message is empty"]
    subject, found = lines[0], []
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject is {len(subject)} characters; at most {MAX_SUBJECT}: {subject!r}")
    if len(lines) > 1 and lines[1].strip():
        found.append("leave a blank line between the subject and the body")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: commit_msg.py MESSAGE_FILE", file=sys.stderr)
        return 2
    found = problems(Path(argv[1]).read_text(encoding="utf-8", errors="replace"))
    for problem in found:
        print(f"commit-msg: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
