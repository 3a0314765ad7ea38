"""`membrane-console check FILE`: evaluate a policy file's assertions against a store (SPEC 11).

Exit 0 when every assertion holds, 1 when any fails (or ``--against`` finds a profile that
gained access), 2 when the policy file, the snapshot or the store cannot be used. Nothing is
written to the store.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import xml.etree.ElementTree as ET
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import TextIO

from membrane_engine import (AccessChange, Membrane, Outcome, PolicyError, Report, diff_policy_snapshots, load_policy,
                             parse_time, read_policy_snapshot)
from membrane_engine import install_private_cleanup, track_private, untrack_private
from membrane_engine.errors import MembraneError, ValidationError
from sqlalchemy.engine import make_url

SHOWN_CHANGES = 50


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="membrane-console check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="the policy file (TOML)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--db", help="SQLAlchemy URL of the store (default: $MEMBRANE_DB_URL, else the default store)")
    where.add_argument("--records", metavar="EXPORT",
                       help="check a Membrane JSON / JSONL export instead of a store (loaded into a temporary store)")
    p.add_argument("--as-of", help="evaluation instant (ISO 8601) for the salience in the reasons")
    p.add_argument("--junit", metavar="OUT.xml", help="also write the results as JUnit XML")
    p.add_argument("--snapshot", metavar="OUT", help="write what each profile sees (JSON lines, stable order)")
    p.add_argument("--against", metavar="SNAPSHOT", help="fail when a profile gained access compared to SNAPSHOT")
    return p


def _open(args: argparse.Namespace, stack: ExitStack) -> Membrane:
    if args.records:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="membrane-check-"))
        # The temporary store holds the export's records in full: removed on SIGTERM / SIGINT
        # too, not only when the block ends (private_files).
        install_private_cleanup()
        track_private(folder)
        stack.callback(untrack_private, folder)
        m = Membrane.open(f"sqlite:///{Path(folder) / 'check.db'}", load_sample=False)
        stack.callback(m.close)
        m.import_file(args.records, actor="membrane-console check")
        return m
    if args.db:
        url = make_url(args.db)
        # A check reads: a SQLite path that does not exist is a mistake, not a new empty store.
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:" \
                and not Path(url.database).exists():
            raise ValidationError(f"--db {args.db}: no store at {url.database}", [("--db", "no such file")])
    m = Membrane.open(args.db or None)
    stack.callback(m.close)
    return m


def _print_outcome(o: Outcome, line: int | None, out: TextIO) -> None:
    where = f" (line {line})" if line else ""
    print(f"{'ok  ' if o.passed else 'FAIL'} {o.title}{where}: {o.message}", file=out)
    if o.passed:
        return
    for r in o.shown:
        tags = f" tags [{', '.join(r.tags)}]" if r.tags else ""
        print(f"       {r.id}  {r.type} {r.sensitivity} scope {r.scope or '(unscoped)'}{tags}: {r.verdict}", file=out)
        print(f"         because: {'; '.join(r.reasons)}", file=out)
    if o.offending > len(o.shown):
        print(f"       ... and {o.offending - len(o.shown)} more", file=out)


def _print_changes(changes: list[AccessChange], out: TextIO) -> None:
    gains = [c for c in changes if c.gain]
    print(f"against snapshot: {len(gains)} gain(s), {len(changes) - len(gains)} loss(es)", file=out)
    for c in changes[:SHOWN_CHANGES]:
        print(f"  {'GAIN' if c.gain else 'loss'} {c.profile}: {c.id} {c.before} -> {c.after}", file=out)
    if len(changes) > SHOWN_CHANGES:
        print(f"  ... and {len(changes) - SHOWN_CHANGES} more", file=out)


def junit(report: Report, changes: list[AccessChange] | None, path: str | Path) -> None:
    """JUnit XML: one test case per assertion (class = profile), plus one for ``--against``."""
    policy = report.policy
    cases = len(report.outcomes) + (changes is not None)
    gains = [c for c in changes or [] if c.gain]
    failures = len(report.failures) + bool(gains)
    root = ET.Element("testsuites", name="membrane policy check", tests=str(cases), failures=str(failures))
    suite = ET.SubElement(root, "testsuite", name=policy.source or "policy", tests=str(cases),
                          failures=str(failures), errors="0")
    for o in report.outcomes:
        case = ET.SubElement(suite, "testcase", classname=f"profile.{o.assertion.profile}", name=o.title)
        if not o.passed:
            failure = ET.SubElement(case, "failure", message=o.message, type="AssertionFailed")
            failure.text = "\n".join(f"{r.id} {r.type} {r.sensitivity} {r.scope or '(unscoped)'}: {r.verdict}: "
                                     f"{'; '.join(r.reasons)}" for r in o.shown)
    if changes is not None:
        case = ET.SubElement(suite, "testcase", classname="snapshot", name="no profile gains access")
        if gains:
            failure = ET.SubElement(case, "failure", message=f"{len(gains)} record(s) newly visible", type="AccessGained")
            failure.text = "\n".join(f"{c.profile}: {c.id} {c.before} -> {c.after}" for c in gains[:1000])
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    try:
        policy = load_policy(args.file)
    except PolicyError as exc:
        print(f"invalid policy file:\n{exc}", file=sys.stderr)
        return 2
    try:
        as_of: datetime | None = parse_time(args.as_of) if args.as_of else None
    except ValueError:
        print(f"--as-of {args.as_of!r} is not an ISO 8601 time", file=sys.stderr)
        return 2
    with ExitStack() as stack:
        try:
            m = _open(args, stack)
            previous = read_policy_snapshot(args.against) if args.against else None
            report = m.check_policy(policy, as_of=as_of)
            changes = diff_policy_snapshots(previous, m.policy_snapshot(policy)) if previous is not None else None
            if args.snapshot:
                m.write_policy_snapshot(policy, args.snapshot)
        except (MembraneError, OSError) as exc:
            print(f"cannot check: {exc}", file=sys.stderr)
            return 2
    for o in report.outcomes:
        _print_outcome(o, policy.lines[o.index] if o.index < len(policy.lines) else None, out)
    if changes is not None:
        _print_changes(changes, out)
    if args.junit:
        junit(report, changes, args.junit)
    failed = len(report.failures)
    gained = any(c.gain for c in changes or [])
    print(f"{len(report.outcomes) - failed} passed, {failed} failed; {report.covered} of {report.total} records "
          f"covered by an assertion" + ("; a profile gained access" if gained else ""), file=out)
    return 1 if failed or gained else 0


__all__ = ["main", "junit"]
