"""`membrane-console operators add|list|set|remove|passwd`: the console's operators (SPEC 10).

Every change is audited in the store's operator log with the actor ``cli:USER`` (the account
running the command). Passwords are read from standard input (--password-stdin), never from the
command line, where other users could read them in the process list.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from membrane_engine import Membrane, Role, Sensitivity
from membrane_engine.errors import MembraneError

ROLES = [r.value for r in Role]
LEVELS = [s.value for s in Sensitivity]


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no user name in this environment
        return "cli"


def _password(args) -> str | None:
    if not args.password_stdin:
        return None
    line = sys.stdin.readline()
    return line[:-1] if line.endswith("\n") else line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="membrane-console operators", description=__doc__)
    parser.add_argument("--db", help="SQLAlchemy URL of the store (default: $MEMBRANE_DB_URL, else the default file)")
    sub = parser.add_subparsers(dest="command", required=True)

    add = sub.add_parser("add", help="add an operator")
    add.add_argument("name")
    add.add_argument("--role", choices=ROLES, required=True)
    add.add_argument("--clearance", choices=LEVELS, required=True, help="the most sensitive level seen in full")
    add.add_argument("--scopes", default="", help="comma-separated scopes (none: every scope)")
    add.add_argument("--email", default=None, help="matched against OpenID Connect / proxy identities")
    add.add_argument("--password-stdin", action="store_true", help="read the password from standard input")

    sub.add_parser("list", help="list operators")

    set_ = sub.add_parser("set", help="change an operator's role, clearance, scopes or e-mail")
    set_.add_argument("name")
    set_.add_argument("--role", choices=ROLES)
    set_.add_argument("--clearance", choices=LEVELS)
    set_.add_argument("--scopes", default=None, help="comma-separated scopes; an empty string clears them")
    set_.add_argument("--email", default=None, help="an empty string removes it")

    remove = sub.add_parser("remove", help="remove an operator (their sessions end)")
    remove.add_argument("name")

    passwd = sub.add_parser("passwd", help="set an operator's password (their sessions end)")
    passwd.add_argument("name")
    passwd.add_argument("--password-stdin", action="store_true", required=True)

    for p in sub.choices.values():  # --db after the subcommand works too
        p.add_argument("--db", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        m = Membrane.open(args.db or None, load_sample=False)
    except MembraneError as exc:
        print(f"operators: the store cannot be opened: {exc}", file=sys.stderr)
        return 2
    try:
        return _run(m, args)
    except MembraneError as exc:
        print(f"operators {args.command}: {exc}", file=sys.stderr)
        return 1
    finally:
        m.close()


def _run(m: Membrane, args) -> int:
    ops, actor = m.operators, _actor()
    if args.command == "list":
        rows = ops.list()
        if not rows:
            print("No operators yet: `membrane-console` creates the first admin.")
        for o in rows:
            print(f"{o.name}\t{o.role.value}\t{o.max_sensitivity.value}\t{','.join(o.scopes) or '*'}\t{o.email or ''}")
        return 0
    if args.command == "add":
        password = _password(args)
        o = ops.add(args.name, args.role, args.clearance, args.scopes, password=password, email=args.email,
                    actor=actor)
        print(f"added {o.name}: {o.role.value}, clearance {o.max_sensitivity.value}"
              + ("" if password is not None else " (no password yet: operators passwd NAME --password-stdin)"))
        return 0
    if args.command == "set":
        o = ops.set(args.name, actor=actor, role=args.role, max_sensitivity=args.clearance, scopes=args.scopes,
                    email=args.email)
        print(f"{o.name}: {o.role.value}, clearance {o.max_sensitivity.value}, scopes "
              f"{','.join(o.scopes) or '*'}, email {o.email or '-'}")
        return 0
    if args.command == "remove":
        ops.remove(args.name, actor=actor)
        print(f"removed {args.name}")
        return 0
    if args.command == "passwd":
        ops.passwd(args.name, _password(args) or "", actor=actor)
        print(f"password of {args.name} set; their sessions have ended")
        return 0
    raise AssertionError(args.command)
