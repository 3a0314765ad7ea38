"""`membrane-console audit checkpoint|verify`: the audit checkpoint workflow (SPEC 6) on the
command line.

- ``audit checkpoint [--db URL]`` prints a checkpoint of the store's audit sequence as JSON;
  keep it away from the database (signed when MEMBRANE_AUDIT_KEY is set).
- ``audit verify [--db URL] [--checkpoint FILE]`` prints every problem with the audit trail
  (and, with a checkpoint, whether the store still extends it).

Exit status: 0 intact, 1 problems found, 2 a bad argument or checkpoint file, or a store that
cannot be opened."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from membrane_engine import Membrane
from membrane_engine.errors import MembraneError

INTACT, PROBLEMS, BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="membrane-console audit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    db_help = "SQLAlchemy URL of the store (default: $MEMBRANE_DB_URL, else ~/.membrane/membrane.db)"
    checkpoint = sub.add_parser("checkpoint", help="print a checkpoint of the audit log as JSON")
    checkpoint.add_argument("--db", help=db_help)
    verify = sub.add_parser("verify", help="verify the audit log, optionally against a checkpoint")
    verify.add_argument("--db", help=db_help)
    verify.add_argument("--checkpoint", type=Path, help="a checkpoint file that `audit checkpoint` printed")
    return parser


def _fail(message: str) -> int:
    print(f"membrane-console audit: {message}", file=sys.stderr)
    return BAD_INPUT


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed why (or the help)
        return BAD_INPUT if exc.code else INTACT
    checkpoint = None
    if getattr(args, "checkpoint", None) is not None:
        try:
            checkpoint = json.loads(args.checkpoint.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            return _fail(f"cannot read checkpoint file {str(args.checkpoint)!r}: {exc}")
        except ValueError as exc:
            return _fail(f"checkpoint file {str(args.checkpoint)!r} is not JSON: {exc}")
    try:
        m = Membrane.open(args.db or None, load_sample=False)
    except MembraneError as exc:
        return _fail(str(exc))
    try:
        if args.action == "checkpoint":
            print(json.dumps(m.audit_checkpoint(), indent=2))
            return INTACT
        problems = m.verify_audit(checkpoint=checkpoint)
    except MembraneError as exc:  # a checkpoint the engine refuses, a key that does not fit
        return _fail(str(exc))
    finally:
        m.close()
    if not problems:
        against = f" and extends the checkpoint of {checkpoint['taken_at']}" if checkpoint else ""
        print(f"audit log intact{against}: no problem found")
        return INTACT
    print(f"{len(problems)} problem(s) found in the audit log:")
    for problem in problems:
        print(f"- {problem}")
    return PROBLEMS
