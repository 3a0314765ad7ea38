"""`membrane-console consolidate [--db URL] [--dry-run] [--as-of T] [--actor NAME] [--json]`:
run Membrane's consolidators over a store (SPEC 12): episodic compression, semantic, competence
and plan graph extraction, each linking what it creates to the entities it names.

Prints what was (with --dry-run: what would be) created, reinforced and compressed, consolidator
by consolidator, one record a line; --json prints the same as one JSON object. Without --actor
the audit entries name Membrane's actors (consolidation/episodic, consolidation/semantic, ...).

Exit status: 0 done, 1 a consolidator failed (the ones before it were written, and are
printed), 2 a bad argument or a store that cannot be opened."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from membrane_engine import Membrane, parse_time
from membrane_engine.errors import MembraneError

DONE, FAILED, BAD_INPUT = 0, 1, 2
TITLES = {"episodic": "episodic compression", "semantic": "semantic", "competence": "competence",
          "plangraph": "plan graph"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="membrane-console consolidate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", help="SQLAlchemy URL of the store (default: $MEMBRANE_DB_URL, else ~/.membrane/membrane.db)")
    p.add_argument("--dry-run", action="store_true", help="print what would be written; write nothing")
    p.add_argument("--as-of", help="the instant the store is read at (ISO 8601; default now): which episodes exist, "
                                   "their age and salience")
    p.add_argument("--actor", help="the actor the audit entries name (default: Membrane's consolidation/<kind>)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return p


def _fail(message: str) -> int:
    print(f"membrane-console consolidate: {message}", file=sys.stderr)
    return BAD_INPUT


def _sources(sources: tuple[str, ...]) -> str:
    if not sources:
        return ""
    if len(sources) == 1:
        return f" from {sources[0]}"
    return f" from {len(sources)} episodes ({sources[0]}, ...)"


def _salience(item: Any) -> str:
    if item.salience_before is None:
        return ""
    return f", salience {item.salience_before:.3g} -> {item.salience_after:.3g}"


def print_report(report: Any, out: TextIO) -> None:
    """The report in words: a heading per consolidator, then one line per record."""
    verb = "would be" if report.dry_run else "were"
    print(f"consolidation as of {report.as_of.isoformat()}" + (" (dry run: nothing written)" if report.dry_run else ""),
          file=out)
    for kind, title in TITLES.items():
        items = report.of(kind)
        counts = {a: sum(1 for i in items if i.action == a) for a in ("created", "reinforced", "compressed")}
        said = ", ".join(f"{n} {a}" for a, n in counts.items() if n) or "nothing"
        print(f"{title}: {said}", file=out)
        for item in items:
            print(f"  {item.action} {item.record_id} ({item.record_type}){_sources(item.sources)}{_salience(item)}",
                  file=out)
    links = len(report.links)
    print(f"entity links: {links} {verb} written" if links else "entity links: none", file=out)
    print(f"{len(report.created)} created, {len(report.reinforced)} reinforced, {len(report.compressed)} compressed "
          f"({verb} written)", file=out)


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed why (or the help)
        return BAD_INPUT if exc.code else DONE
    try:
        as_of = parse_time(args.as_of) if args.as_of else None
    except (ValueError, MembraneError):
        return _fail(f"--as-of {args.as_of!r} is not an ISO 8601 time")
    if args.db and args.db.startswith("sqlite:///"):
        path = args.db.split("///", 1)[1].split("?", 1)[0]
        if path not in ("", ":memory:") and not Path(path).exists():  # a mistyped path is not a new empty store
            return _fail(f"--db {args.db}: no store at {path}")
    try:
        m = Membrane.open(args.db or None, load_sample=False)
    except MembraneError as exc:
        return _fail(str(exc))
    try:
        try:
            report = m.consolidate(actor=args.actor, as_of=as_of, dry_run=args.dry_run)
            status = DONE
        except MembraneError as exc:
            report = getattr(exc, "consolidation_report", None)
            if report is None:
                return _fail(str(exc))
            notes = "; ".join(getattr(exc, "__notes__", []))
            print(f"membrane-console consolidate: {exc} ({notes})", file=sys.stderr)
            status = FAILED
    finally:
        m.close()
    if args.json:
        print(json.dumps(report.summary(), indent=2), file=out)
    else:
        print_report(report, out)
    return status
