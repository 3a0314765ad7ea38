"""Operators kept in the store (SPEC 10): who they are, their passwords, sign-in tokens, and an
append-only, hash-linked log of every change made to them.

Passwords are kept only as scrypt hashes (memory-hard, from the standard library) and compared
in constant time. Tokens (a first-run link, a browser session) are random, handed out once, and
kept only as their sha256: a copy of the store does not let anyone sign in.

Operator and token rows carry a MAC and the log is a chain under the store's audit key
(row_seal.py): a row written outside the engine signs no one in, and a process without the key
cannot change a keyed store's operators. Browser sessions started and ended are entries of the
log too (rules/sessions.py), so a session row deleted outside the engine is named as well.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from membrane_engine.audit import row_seal
from membrane_engine.errors import AlreadyExistsError, MembraneError, NotFoundError, ValidationError
from membrane_engine.model.records import Sensitivity, format_time
from membrane_engine.rules import sessions
from membrane_engine.rules.roles import Operator, Role
from membrane_engine.storage import accounts as rows
from membrane_engine.storage.store import Store

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
MIN_PASSWORD = 12
MAX_PASSWORD = 1024
# scrypt at n=2**15, r=8: 32 MiB per hash (128 * n * r bytes), OWASP's floor for scrypt.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2 ** 15, 8, 1
_SCRYPT_MAXMEM = 64 * 1024 * 1024
FIRST_RUN = "first_run"
SESSION = sessions.SESSION
EXPIRY_ACTOR = "membrane-engine:session-expiry"  # who ends the sessions a sweep finds expired
GENESIS = "0" * 64


class OperatorNotFoundError(NotFoundError):
    def __init__(self, name: str):
        MembraneError.__init__(self, f"no operator named {name!r}")


class OperatorExistsError(AlreadyExistsError):
    def __init__(self, message: str):
        MembraneError.__init__(self, message)


# ----------------------------------------------------------------------------- passwords


def hash_password(password: str) -> str:
    """``scrypt$n$r$p$salt$hash`` (base64): the only form a password is ever stored in."""
    check_password(password)
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P,
                            maxmem=_SCRYPT_MAXMEM, dklen=32)
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${b64(salt)}${b64(digest)}"


# A hash no password matches, checked when the name is unknown so that a wrong name costs the
# same time as a wrong password (no user enumeration by timing).
_DUMMY_HASH: str | None = None


def password_matches(password: str, stored: str | None) -> bool:
    global _DUMMY_HASH
    if not stored:
        if _DUMMY_HASH is None:
            _DUMMY_HASH = hash_password(secrets.token_urlsafe(16))
        stored, password = _DUMMY_HASH, password + "\0never"
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p),
                             maxmem=_SCRYPT_MAXMEM, dklen=len(expected))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


def check_password(password: Any) -> str:
    if not isinstance(password, str) or not (MIN_PASSWORD <= len(password) <= MAX_PASSWORD):
        size = len(password) if isinstance(password, str) else type(password).__name__
        raise ValidationError(f"password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters (got {size})",
                              [("password", "length")])  # never the password itself
    return password


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# ----------------------------------------------------------------------------- the log


def _event_hash(prev: str, seq: int, timestamp: str, actor: str, action: str, operator: str, details: str,
                seal: row_seal.Seal) -> str:
    # The hash of the record audit chain (HMAC under the store's audit key when it is keyed),
    # over this log's own fields: the record id slot names the operator, the position is the seq.
    return seal.make(row_seal.event_fields(prev, seq, timestamp, actor, action, operator, details))


@dataclass(frozen=True)
class OperatorEvent:
    seq: int
    timestamp: str
    actor: str
    action: str
    operator: str
    details: dict[str, Any]
    hash: str


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ValidationError(f"operator name {name!r} must be 1-64 letters, digits or _.@- (starting with a "
                              "letter or digit)", [("name", repr(name)[:80])])
    return name


def _check_scopes(scopes: Any) -> list[str]:
    if scopes is None:
        return []
    if isinstance(scopes, str):
        scopes = scopes.split(",")
    if not all(isinstance(s, str) for s in scopes):
        raise ValidationError(f"scopes must be strings (got {scopes!r})", [("scopes", repr(scopes)[:80])])
    return sorted({s.strip() for s in scopes if s.strip()})


def _enum(kind: type, value: Any, field: str):
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(v.value for v in kind)
        raise ValidationError(f"{field} must be one of {allowed} (got {value!r})", [(field, repr(value)[:80])]) from None


class Operators:
    """``m.operators``: add, list, get, set, remove, passwd, verify_password, and sign-in tokens.
    Every change is one transaction that also appends to operator_events."""

    def __init__(self, store: Store, clock=time.time):
        self.store = store
        self._clock = clock

    # reading -----------------------------------------------------------------------

    @staticmethod
    def _operator(row) -> Operator:
        return Operator(name=row.name, role=Role(row.role), max_sensitivity=Sensitivity(row.max_sensitivity),
                        scopes=json.loads(row.scopes or "[]"), email=row.email)

    def list(self) -> list[Operator]:
        with self.store.read() as conn:
            return [self._operator(r) for r in rows.operator_rows(conn)]

    def count(self) -> int:
        with self.store.read() as conn:
            return rows.operator_count(conn)

    def get(self, name: str) -> Operator:
        """The operator named ``name``; OperatorNotFoundError when there is none, or when its row
        does not verify (written outside the engine: row_seal.py), so no role check trusts it."""
        with self.store.read() as conn:
            row = rows.operator_row(conn, name)
            honoured = row is not None and row_seal.operator_holds(conn, row)
        if not honoured:
            raise OperatorNotFoundError(name)
        return self._operator(row)

    def by_email(self, email: str | None) -> Operator | None:
        """The operator whose e-mail is ``email`` (case-insensitive), or None: how an OpenID
        Connect or proxy identity becomes an operator. An unknown e-mail gets no access."""
        if not isinstance(email, str) or "@" not in email:
            return None
        with self.store.read() as conn:
            row = rows.operator_by_email(conn, email.strip().lower())
            honoured = row is not None and row_seal.operator_holds(conn, row)
        return self._operator(row) if honoured else None

    def has_password(self) -> bool:
        """Does any operator have a password (local sign-in is possible)?"""
        with self.store.read() as conn:
            return rows.any_password(conn)

    def roster(self) -> list[tuple[Operator, bool, bool]]:
        """Every operator with whether a password is set and whether the row verifies (one
        written or changed outside the engine does not: row_seal.py), by name. For the admins'
        page; never the password or its hash."""
        with self.store.read() as conn:
            seal = row_seal.reading(conn)
            return [(self._operator(r), r.password_hash is not None, row_seal.operator_holds(conn, r, seal))
                    for r in rows.operator_rows(conn)]

    def events(self, operator: str | None = None) -> list[OperatorEvent]:
        with self.store.read() as conn:
            return [OperatorEvent(r.seq, r.timestamp, r.actor, r.action, r.operator, json.loads(r.details), r.hash)
                    for r in rows.event_rows(conn, operator)]

    def verify_events(self) -> list[str]:
        """Problems of the operator log's hash chain (an edited, removed or reordered entry)."""
        with self.store.read() as conn:
            return [f"operator {where}: {text}" for where, text in row_seal.event_problems(conn)]

    # writing -----------------------------------------------------------------------

    def _log(self, conn, actor: str, action: str, name: str, details: dict[str, Any]) -> None:
        if not isinstance(actor, str) or not actor.strip():
            raise ValidationError(f"actor must be a non-empty string (got {actor!r})", [("actor", repr(actor))])
        # The newest entry, read inside this write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL:
        # the log locked), so two writers cannot both link to it.
        rows.lock_event_log(conn)
        # Refuses a process without the key of a keyed store (AuditKeyError names
        # MEMBRANE_AUDIT_KEY), before anything of this transaction is committed.
        seal = row_seal.writing(conn)
        seq, prev = row_seal.event_tail(conn)
        stamp = format_time(datetime.now(timezone.utc))
        text = json.dumps(details, sort_keys=True)
        hashed = _event_hash(prev, seq, stamp, actor, action, name, text, seal)
        rows.insert_event(conn, {"seq": seq, "timestamp": stamp, "actor": actor, "action": action, "operator": name,
                                 "details": text, "prev_hash": prev, "hash": hashed})
        row_seal.put_head(conn, seal, row_seal.EVENTS_HEAD, seq, hashed)
        if action in row_seal.ROW_WRITING:
            row_seal.seal_operator(conn, seal, name)  # its MAC covers this event: an older copy does not verify

    def _log_session(self, conn, actor: str, action: str, name: str, details: dict[str, Any]) -> None:
        """A session started or ended (rules/sessions.py). The log's first such entry also lists
        the session rows the store holds from before sessions were logged, whose MAC holds: from
        then on every session row is accounted for by the log."""
        rows.lock_event_log(conn)  # before looking for that first entry: two writers cannot both add it
        if not rows.has_event(conn, sessions.ACTIONS):
            seal = row_seal.writing(conn)
            details = sessions.with_adopted(details, [r for r in rows.token_rows(conn, SESSION)
                                                      if row_seal.token_holds(r, seal)])
        self._log(conn, actor, action, name, details)

    def _log_ended(self, conn, actor: str, ended: list, why: str) -> None:
        """One ``session_end`` per operator for the session rows among ``ended`` (deleted rows)."""
        hashes: dict[str, list[str]] = {}
        for r in ended:
            if r.kind == SESSION:
                hashes.setdefault(r.operator, []).append(r.token_hash)
        for name, of_operator in sorted(hashes.items()):
            self._log_session(conn, actor, sessions.END, name, sessions.end_details(of_operator, why))

    def add(self, name: str, role: Role | str, max_sensitivity: Sensitivity | str, scopes: Any = None,
            password: str | None = None, email: str | None = None, *, actor: str) -> Operator:
        _check_name(name)
        role = _enum(Role, role, "role")
        sens = _enum(Sensitivity, max_sensitivity, "clearance")
        scopes = _check_scopes(scopes)
        email = self._check_email(email)
        stored = hash_password(password) if password is not None else None
        now = self._clock()
        with self.store.write() as conn:
            if rows.operator_exists(conn, name):
                raise OperatorExistsError(f"operator {name!r} already exists")
            self._email_free(conn, email, name)
            rows.insert_operator(conn, {"name": name, "role": role.value, "max_sensitivity": sens.value,
                                        "scopes": json.dumps(scopes), "email": email, "password_hash": stored,
                                        "created_at": now, "updated_at": now})
            self._log(conn, actor, "add", name, {"role": role.value, "clearance": sens.value, "scopes": scopes,
                                                 "email": email, "password": stored is not None})
        return self.get(name)

    def set(self, name: str, *, actor: str, role: Role | str | None = None,
            max_sensitivity: Sensitivity | str | None = None, scopes: Any = None,
            email: str | None = None) -> Operator:
        """Change role, clearance, scopes or e-mail (None leaves a field as it is; scopes=[]
        clears them, email="" removes it)."""
        values: dict[str, Any] = {}
        if role is not None:
            values["role"] = _enum(Role, role, "role").value
        if max_sensitivity is not None:
            values["max_sensitivity"] = _enum(Sensitivity, max_sensitivity, "clearance").value
        if scopes is not None:
            values["scopes"] = json.dumps(_check_scopes(scopes))
        if email is not None:
            values["email"] = self._check_email(email) if email else None
        if not values:
            raise ValidationError(f"nothing to change for operator {name!r}", [("operator", name)])
        with self.store.write() as conn:
            self._existing(conn, name)
            if values.get("email"):
                self._email_free(conn, values["email"], name)
            if "role" in values and values["role"] != Role.ADMIN.value:
                self._keep_an_admin(conn, name)
            rows.update_operator(conn, name, {**values, "updated_at": self._clock()})
            shown = {("clearance" if k == "max_sensitivity" else k): (json.loads(v) if k == "scopes" else v)
                     for k, v in values.items()}
            self._log(conn, actor, "set", name, shown)
            if "role" in values or "max_sensitivity" in values or "scopes" in values:
                # A changed role or clearance applies from the next sign-in.
                self._end_sessions(conn, actor, name, sessions.ACCESS_CHANGED)
        return self.get(name)

    def remove(self, name: str, *, actor: str) -> None:
        with self.store.write() as conn:
            self._existing(conn, name)
            self._keep_an_admin(conn, name)
            rows.delete_operator(conn, name)
            self._log_ended(conn, actor, rows.delete_operator_tokens(conn, name), sessions.OPERATOR_REMOVED)
            self._log(conn, actor, "remove", name, {})

    def passwd(self, name: str, password: str, *, actor: str) -> None:
        stored = hash_password(password)
        with self.store.write() as conn:
            self._existing(conn, name)
            rows.update_operator(conn, name, {"password_hash": stored, "updated_at": self._clock()})
            self._end_sessions(conn, actor, name, sessions.PASSWORD_CHANGED)
            # A first-run link exists to give an operator without a password a way in: once they
            # have one, an outstanding link would only be a second key lying around.
            rows.delete_operator_tokens(conn, name, FIRST_RUN)
            self._log(conn, actor, "passwd", name, {})

    def verify_password(self, name: str, password: str) -> Operator | None:
        """The operator if ``password`` is theirs, else None (same work either way)."""
        row = None
        if isinstance(name, str) and NAME_PATTERN.match(name):
            with self.store.read() as conn:
                row = rows.operator_row(conn, name)
                if row is not None and not row_seal.operator_holds(conn, row):
                    row = None  # written outside the engine: as if unknown (same work either way)
        ok = password_matches(password if isinstance(password, str) else "", row.password_hash if row else None)
        return self._operator(row) if ok and row is not None else None

    # tokens ---------------------------------------------------------------------------

    def issue_token(self, name: str, kind: str, ttl: float, *, actor: str | None = None) -> str:
        """A new random token for ``name``; only its hash is stored. A first-run link is logged,
        and so is a session (its actor by default the operator signing in), and the expired
        sessions swept away meanwhile."""
        token = secrets.token_urlsafe(32)
        now = self._clock()
        with self.store.write() as conn:
            self._existing(conn, name)
            seal = row_seal.writing(conn)  # a keyed store's tokens only from a process with its key
            self._log_ended(conn, EXPIRY_ACTOR, rows.delete_expired_tokens(conn, now), sessions.EXPIRED)
            row = {"token_hash": token_hash(token), "kind": kind, "operator": name, "expires_at": now + ttl,
                   "used_at": None}
            rows.insert_token(conn, {**row, "mac": seal.make(row_seal.token_fields(row))})
            if kind == SESSION:
                self._log_session(conn, actor or f"operator:{name}", sessions.START, name,
                                  sessions.start_details(row["token_hash"], row["expires_at"]))
            elif kind == FIRST_RUN:
                self._log(conn, actor or "membrane-console", "first_run_link", name, {"expires_in_s": int(ttl)})
        return token

    def redeem(self, token: str, kind: str) -> Operator | None:
        """The operator a live token of ``kind`` belongs to, or None. A first-run token works once
        (it is marked used in the same statement that checks it) and only while its operator has
        no password."""
        if not isinstance(token, str) or not 16 <= len(token) <= 200:
            return None
        h, now = token_hash(token), self._clock()
        with self.store.write() as conn:
            row = rows.live_token(conn, h, kind, now)
            if row is None:
                return None
            op = rows.operator_row(conn, row.operator)
            seal = row_seal.reading(conn)
            if op is None or not row_seal.token_holds(row, seal) or not row_seal.operator_holds(conn, op, seal):
                return None  # minted or changed outside the engine (row_seal.py)
            if kind == FIRST_RUN:
                # Only for an operator who still has no password (however the password was set:
                # passwd ends the links, and this holds for a store changed by other means too).
                if op.password_hash is not None:
                    return None
                seal = row_seal.writing(conn)
                used = row_seal.token_fields({**rows.token_values(row), "used_at": now})
                if not rows.use_token(conn, h, kind, now, seal.make(used)):
                    return None
                self._log(conn, f"operator:{row.operator}", "first_run_used", row.operator, {})
        return self._operator(op)

    def session(self, token: str) -> tuple[Operator, float] | None:
        """(operator, expires_at) of a live browser session token, else None. Read-only."""
        if not isinstance(token, str) or not 16 <= len(token) <= 200:
            return None
        with self.store.read() as conn:
            row = rows.live_token(conn, token_hash(token), SESSION, self._clock())
            op = None if row is None else rows.operator_row(conn, row.operator)
            seal = row_seal.reading(conn)
            # A token row or operator row written outside the engine (its MAC does not hold) signs no one in.
            if op is None or not row_seal.token_holds(row, seal) or not row_seal.operator_holds(conn, op, seal):
                return None
        return self._operator(op), row.expires_at

    def end_session(self, token: str, *, actor: str | None = None) -> None:
        """Sign out: the session's row is deleted and the log says so (its actor by default the
        operator signing out). An unknown or already ended token changes nothing."""
        if isinstance(token, str) and token:
            with self.store.write() as conn:
                for row in rows.delete_token(conn, token_hash(token)):
                    self._log_ended(conn, actor or f"operator:{row.operator}", [row], sessions.SIGNED_OUT)

    # helpers -----------------------------------------------------------------------------

    @staticmethod
    def _check_email(email: Any) -> str | None:
        if email is None or email == "":
            return None
        if not isinstance(email, str) or not re.fullmatch(r"[^@\s]{1,128}@[^@\s]{1,127}", email.strip()):
            raise ValidationError(f"email {email!r} is not an e-mail address", [("email", repr(email)[:80])])
        return email.strip().lower()

    @staticmethod
    def _existing(conn, name: str) -> None:
        if not rows.operator_exists(conn, name):
            raise OperatorNotFoundError(name)

    @staticmethod
    def _email_free(conn, email: str | None, name: str) -> None:
        if email is None:
            return
        other = rows.email_owner(conn, email, name)
        if other is not None:
            raise OperatorExistsError(f"email {email!r} already belongs to operator {other!r}")

    @staticmethod
    def _keep_an_admin(conn, name: str) -> None:
        """Refuse to remove or demote the last admin: nobody could manage operators afterwards
        except through the command line on the store itself."""
        if rows.names_with_role(conn, Role.ADMIN.value) == [name]:
            raise ValidationError(f"{name!r} is the last admin; add another admin first", [("role", name)])

    def _end_sessions(self, conn, actor: str, name: str, why: str) -> None:
        self._log_ended(conn, actor, rows.delete_operator_tokens(conn, name, SESSION), why)

