"""Policy files, SPEC 11: the TOML format, its pydantic models, and reading it.

A file names agent profiles (trust contexts) and assertions about what each may see. Every
problem in it names the line and the key at fault: tomllib reports lines only for syntax
errors, so ``_KeyLines`` finds the lines of keys and tables by reading the text.
Evaluation is in membrane_engine.policies.
"""

from __future__ import annotations

import re
import tomllib
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from .errors import ValidationError
from .schema import MemoryType, Sensitivity
from .trust import TrustContext, Verdict


class Expect(str, Enum):
    """What every matching record must get: a verdict, or one of two unions of verdicts."""

    FULL = "full"
    REDACTED = "redacted"
    HIDDEN = "hidden"
    NOT_FULL = "not-full"  # redacted or hidden
    VISIBLE = "visible"  # full or redacted

    @property
    def codes(self) -> tuple[int, ...]:
        return {"full": (2,), "redacted": (1,), "hidden": (0,), "not-full": (0, 1), "visible": (1, 2)}[self.value]


class PolicyError(ValidationError):
    """A policy file that cannot be used. ``problems`` are (where, message) pairs, where =
    ``LINE: KEY`` (``FILE:LINE: KEY`` in ``str``)."""

    def __init__(self, source: str, problems: list[tuple[int | None, str, str]]):
        self.source = source
        self.located = problems  # (line or None, key, message)
        lines = [f"{source}:{line or '?'}: {key}: {message}" for line, key, message in problems]
        super().__init__("\n".join(lines), [(f"line {line or '?'}: {key}", message) for line, key, message in problems])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Profile(_Strict):
    """An agent's trust context (SPEC 3) under a name."""

    max_sensitivity: Sensitivity
    scopes: tuple[str, ...] = ()
    actor_id: str = ""
    authenticated: bool = True
    description: str = ""

    def trust(self, name: str) -> TrustContext:
        return TrustContext(max_sensitivity=self.max_sensitivity, authenticated=self.authenticated,
                            actor_id=self.actor_id or name, scopes=list(self.scopes))


class Selection(_Strict):
    """Which records an assertion is about. Fields combine with AND; the values of one field
    with OR (``sensitivity = ["high", "hyper"]`` is either). An empty selection is every record.
    ``scopes = [""]`` names unscoped records."""

    ids: tuple[str, ...] = ()
    types: tuple[MemoryType, ...] = ()
    scopes: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    sensitivity: tuple[Sensitivity, ...] = ()

    def key(self) -> tuple:
        return (self.ids, tuple(t.value for t in self.types), self.scopes, self.tags,
                tuple(s.value for s in self.sensitivity))

    def describe(self) -> str:
        parts = [f"{name} {', '.join(str(getattr(v, 'value', v)) or '(unscoped)' for v in values)}"
                 for name, values in (("ids", self.ids), ("types", self.types), ("scopes", self.scopes),
                                      ("tags", self.tags), ("sensitivity", self.sensitivity)) if values]
        return "; ".join(parts) if parts else "every record"


class Assertion(_Strict):
    """Either ``expect`` (every matching record has that verdict) or ``verdict`` with ``min``
    and/or ``max`` (how many matching records get it)."""

    profile: str
    records: Selection = Field(default_factory=Selection)
    expect: Expect | None = None
    verdict: Verdict | None = None
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)
    name: str = ""

    @model_validator(mode="after")
    def _one_form(self) -> "Assertion":
        if self.expect is not None and (self.verdict is not None or self.min is not None or self.max is not None):
            raise ValueError("give either expect, or verdict with min/max, not both")
        if self.expect is None:
            if self.verdict is None:
                raise ValueError("needs expect (full | redacted | hidden | not-full | visible) or verdict with min/max")
            if self.min is None and self.max is None:
                raise ValueError("verdict needs min and/or max")
            if self.min is not None and self.max is not None and self.min > self.max:
                raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def title(self, index: int) -> str:
        if self.name:
            return self.name
        if self.expect is not None:
            rule = f"expect {self.expect.value}"
        else:
            bounds = [f"min {self.min}"] * (self.min is not None) + [f"max {self.max}"] * (self.max is not None)
            rule = f"{self.verdict.value} {' '.join(bounds)}"
        return f"assert[{index}] {self.profile}: {self.records.describe()}: {rule}"


class Policy(_Strict):
    profiles: dict[str, Profile] = Field(default_factory=dict)
    assertions: tuple[Assertion, ...] = Field(default=(), alias="assert")
    source: str = Field(default="", exclude=True)  # the file's name, for messages
    lines: tuple[int | None, ...] = Field(default=(), exclude=True)  # each assertion's line in it

    @field_validator("profiles")
    @classmethod
    def _names(cls, value: dict[str, Profile]) -> dict[str, Profile]:
        for name in value:
            if not name.strip():
                raise ValueError("a profile needs a non-empty name")
        return value

    def trust(self, profile: str) -> TrustContext:
        return self.profiles[profile].trust(profile)


# ----------------------------------------------------------------------------- reading files

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=""")
_PART = re.compile(r"""\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*""")


def _parts(dotted: str) -> list[str]:
    return [p.strip("\"'") for p in _PART.findall(dotted)]


class _KeyLines:
    """Line numbers of a TOML text's tables and keys, by path (``("assert", 2, "expect")``).
    A reading of the common layout (headers, ``key = value`` lines, dotted keys), enough to point
    at the line of a key that validation refuses; a value spanning lines is found at its first."""

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        arrays: dict[tuple, int] = {}
        table: tuple = ()
        depth = 0  # open brackets/braces of a multi-line value: its lines hold no keys
        for number, line in enumerate(text.splitlines(), start=1):
            if depth == 0:
                header = _HEADER.match(line)
                if header:
                    path: tuple = ()
                    parts = _parts(header.group(2))
                    new_item = header.group(1) == "[["
                    for k, part in enumerate(parts):
                        path += (part,)
                        if new_item and k == len(parts) - 1:  # [[a]]: the next item of array a
                            arrays[path] = arrays.get(path, -1) + 1
                            path += (arrays[path],)
                        elif path in arrays:  # [a.b] under [[a]]: inside a's last item
                            path += (arrays[path],)
                    table = path
                    self.lines.setdefault(table, number)
                    continue
                key = _KEY.match(line)
                if key:
                    self.lines.setdefault(table + tuple(_parts(key.group(1))), number)
            depth = max(0, depth + _balance(line))

    def line(self, path: tuple) -> int | None:
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def _balance(line: str) -> int:
    """Net open brackets of a line outside strings and comments."""
    n, quote = 0, ""
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        elif ch in "[{":
            n += 1
        elif ch in "]}":
            n -= 1
    return n


def _key_name(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    """A Policy from TOML text; PolicyError naming line and key for anything wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        raise PolicyError(source, [(int(found.group(1)) if found else None, "(syntax)", str(exc))]) from None
    where = _KeyLines(text)
    problems: list[tuple[int | None, str, str]] = [
        (where.line((key,)), key, f"unknown key {key!r} (a policy file has [profiles.NAME] tables and [[assert]] entries)")
        for key in data if key not in ("profiles", "assert")]
    if problems:
        raise PolicyError(source, problems)
    try:
        policy = Policy.model_validate(data)
    except PydanticValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            message = err["msg"]
            if err["type"] == "extra_forbidden":
                message = f"unknown key {loc[-1]!r}"
            elif err["type"] == "enum":
                message = f"{err.get('input')!r} is not one of {err['ctx'].get('expected', '')}"
            elif "input" in err and not isinstance(err["input"], (dict, list)):
                message = f"{message} (got {err['input']!r})"
            problems.append((where.line(loc), _key_name(loc), message))
        raise PolicyError(source, problems) from None
    for k, a in enumerate(policy.assertions):
        if a.profile not in policy.profiles:
            known = ", ".join(sorted(policy.profiles)) or "none defined"
            problems.append((where.line(("assert", k, "profile")), f"assert[{k}].profile",
                             f"unknown profile {a.profile!r} (profiles: {known})"))
    if problems:
        raise PolicyError(source, problems)
    lines = tuple(where.line(("assert", k)) for k in range(len(policy.assertions)))
    return policy.model_copy(update={"source": source, "lines": lines})


def load_policy(path: str | Path) -> Policy:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(str(path), [(None, "(file)", f"cannot be read: {exc}")]) from None
    return parse_policy(text, str(path))


__all__ = ["Policy", "Profile", "Assertion", "Selection", "Expect", "PolicyError", "parse_policy", "load_policy"]
