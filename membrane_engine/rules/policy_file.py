"""Policy files, SPEC 11: the TOML format, its pydantic models, and reading it.

A file names agent profiles (trust contexts) and assertions about what each may see. Every
problem in it names the line and the key at fault: tomllib reports lines only for syntax
errors, so ``_KeyLines`` finds the lines of keys and tables by reading the text, in one pass
linear in its size that also refuses nesting beyond MAX_NESTING before tomllib (which recurses)
reads it. Files over MAX_POLICY_BYTES are refused unread.
Evaluation is in membrane_engine.policy.check.
"""

from __future__ import annotations

import os
import re
import tomllib
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from membrane_engine.errors import ValidationError
from membrane_engine.model.records import MemoryType, Sensitivity
from membrane_engine.rules.trust import TrustContext, Verdict


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

# A policy file worth the name is a few KB (the bundled one is 3): the limits refuse hostile
# files before tomllib or pydantic see them. MAX_NESTING bounds how deep a value may sit
# (tables, dotted keys and brackets together; a useful file goes about 5 deep), which also keeps
# tomllib's recursion over nested arrays far from Python's recursion limit.
MAX_POLICY_BYTES = 2 * 1024 * 1024
MAX_NESTING = 32
MAX_PROBLEMS = 100  # listed in one error: the first ones; the rest after these are fixed

# Each pattern is one character class matched at a position with nothing after it to backtrack
# into: a match costs what it consumes and the scanner never goes back, so reading a file is
# linear in its size (the patterns these replace were cubic on a long line of blanks).
_BLANK = re.compile(r"[ \t]*")
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_PLAIN = re.compile(r"[^\"'\[\]{},#\n]+")  # the inert part of a value
_BASIC = re.compile(r'[^"\\\n]+')  # the inert part of a "basic" string
_LITERAL = re.compile(r"[^'\n]*")  # a 'literal' string up to its quote
_REST = re.compile(r"[^\n]*")  # the rest of a line
_ML_LITERAL = "'" * 3


class _KeyLines:
    """Line numbers of a TOML text's tables and keys, by path (``("assert", 2, "expect")``), in
    one forward pass over the text. Strings (multi-line ones too) and comments are skipped as
    TOML reads them, so a bracket or a ``[header]`` inside a string is not taken for structure;
    a value spanning lines is found at its first, the keys of an inline table at its key's.
    ``problem`` is set, and the pass stops, at the first table, key or bracket nested deeper
    than MAX_NESTING: tomllib is not asked to read such a file."""

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        self.problem: tuple[int | None, str, str] | None = None
        self._text, self._i, self._line = text, 0, 1
        arrays: dict[tuple, int] = {}
        table: tuple = ()
        t, n = text, len(text)
        while self._i < n and self.problem is None:
            self._i = _BLANK.match(t, self._i).end()
            if self._i >= n:
                break
            c = t[self._i]
            if c == "\n":
                self._line += 1
                self._i += 1
            elif c == "#":
                self._skip_line()
            elif c == "[":
                number = self._line
                new_item = t.startswith("[[", self._i)
                self._i += 2 if new_item else 1
                parts = self._key() or []
                path: tuple = ()
                for k, part in enumerate(parts):
                    path += (part,)
                    if new_item and k == len(parts) - 1:  # [[a]]: the next item of array a
                        arrays[path] = arrays.get(path, -1) + 1
                        path += (arrays[path],)
                    elif path in arrays:  # [a.b] under [[a]]: inside a's last item
                        path += (arrays[path],)
                table = path
                if not self._too_deep(len(table), table):
                    self.lines.setdefault(table, number)
                    self._skip_line()  # the closing bracket(s) and a comment; tomllib judges the rest
            else:
                number = self._line
                parts = self._key()
                if parts is None:  # not a key: tomllib says what is wrong with the line
                    self._skip_line()
                    continue
                path = table + tuple(parts)
                if self._too_deep(len(path), path):
                    break
                self.lines.setdefault(path, number)
                self._i = _BLANK.match(t, self._i).end()
                if t.startswith("=", self._i):
                    self._i += 1
                    self._value(path)
                else:
                    self._skip_line()

    def line(self, path: tuple) -> int | None:
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def _too_deep(self, depth: int, path: tuple) -> bool:
        if depth <= MAX_NESTING:
            return False
        self.problem = (self._line, _key_name(path[:MAX_NESTING + 1]), _nesting_message())
        return True

    def _skip_line(self) -> None:
        self._i = _REST.match(self._text, self._i).end()

    def _key(self) -> list[str] | None:
        """A dotted key's parts (at most one beyond MAX_NESTING: the caller refuses those), or
        None when the text here is not a key."""
        t, parts = self._text, []
        while len(parts) <= MAX_NESTING:
            self._i = _BLANK.match(t, self._i).end()
            start = self._i
            if t.startswith('"', start):
                self._i += 1
                self._basic(multi=False)
                raw = t[start:self._i]
                part = raw[1:-1] if raw.endswith('"') and len(raw) > 1 else raw[1:]
                if "\\" in raw:  # escapes: tomllib decodes the one string
                    try:
                        part = tomllib.loads(f"k = {raw}")["k"]
                    except tomllib.TOMLDecodeError:
                        pass
            elif t.startswith("'", start):
                self._i = _LITERAL.match(t, start + 1).end()
                part = t[start + 1:self._i]
                self._i += t.startswith("'", self._i)
            else:
                bare = _BARE.match(t, start)
                if bare is None:
                    return parts or None
                self._i = bare.end()
                part = bare.group()
            parts.append(part)
            self._i = _BLANK.match(t, self._i).end()
            if not t.startswith(".", self._i):
                break
            self._i += 1
        return parts

    def _value(self, path: tuple) -> None:
        """Past the value after ``=``: to the end of its line, or of its last line when brackets
        keep it open. Depth counts as in the data: an array's items are one below it, an inline
        table's ``a.b = ...`` two."""
        t, n = self._text, len(self._text)
        depth, here = len(path), path  # of the value being read
        opened: list[tuple[str, int, tuple]] = []  # each open bracket, its value's depth and key
        while self._i < n:
            plain = _PLAIN.match(t, self._i)
            if plain is not None:
                self._i = plain.end()
                continue
            c = t[self._i]
            if c == "\n":
                if not opened:
                    return
                self._line += 1
                self._i += 1
            elif c == "#":
                self._skip_line()
            elif c in "[{,":
                self._i += 1
                if c != ",":
                    opened.append((c, depth, here))
                elif not opened:
                    continue
                depth, here = opened[-1][1] + 1, opened[-1][2]
                if opened[-1][0] == "{":  # a key comes next
                    parts = self._key() or []
                    depth += max(0, len(parts) - 1)
                    here += tuple(parts)
                if self._too_deep(depth, here):
                    return
            elif c in "]}":
                if opened:
                    _, depth, here = opened.pop()
                self._i += 1
            elif t.startswith(c * 3, self._i):  # a multi-line string
                self._i += 3
                if c == '"':
                    self._basic(multi=True)
                else:
                    end = t.find(_ML_LITERAL, self._i)
                    end = n if end < 0 else end + 3
                    self._line += t.count("\n", self._i, end)
                    self._i = end
                for _ in range(2):  # up to two quotes just before the closing three are text
                    self._i += t.startswith(c, self._i)
            elif c == '"':
                self._i += 1
                self._basic(multi=False)
            else:
                self._i = _LITERAL.match(t, self._i + 1).end()
                self._i += t.startswith("'", self._i)

    def _basic(self, multi: bool) -> None:
        """Past a "basic" string, from just after its opening quote(s): through its closing
        quote(s), or to the end of the line when a one-line string never closes."""
        t, n = self._text, len(self._text)
        while self._i < n:
            run = _BASIC.match(t, self._i)
            if run is not None:
                self._i = run.end()
                continue
            c = t[self._i]
            if c == "\\":
                self._line += t.startswith("\n", self._i + 1)
                self._i += 2
            elif c == "\n":
                if not multi:
                    return
                self._line += 1
                self._i += 1
            elif not multi:
                self._i += 1
                return
            elif t.startswith('"""', self._i):
                self._i += 3
                return
            else:
                self._i += 1


def _nesting_message() -> str:
    return f"nested more than {MAX_NESTING} levels deep (tables, dotted keys and brackets together)"


def _deepest(data: dict) -> tuple | None:
    """The path of a value nested deeper than MAX_NESTING, or None. Without recursion; it covers
    what the scan before tomllib does not follow (dotted keys inside inline tables)."""
    stack: list[tuple[Any, tuple]] = [(data, ())]
    while stack:
        node, path = stack.pop()
        for key, value in (node.items() if isinstance(node, dict) else enumerate(node)):
            inner = path + (key,)
            if len(inner) > MAX_NESTING:
                return inner
            if isinstance(value, (dict, list)):
                stack.append((value, inner))
    return None


def _key_name(loc: tuple) -> str:
    out = ""
    for part in loc:
        part = part if isinstance(part, int) else _shown(str(part), 80)[1:-1]
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(file)"


def _shown(value: Any, limit: int = 80) -> str:
    """``repr`` of a value from the file, cut short: a message names it, it does not echo it."""
    if len(str(value)) <= limit:
        return repr(value)
    cut = repr(str(value)[:limit])
    return cut[:-1] + "..." + cut[-1]


def _listed(problems: list[tuple[int | None, str, str]]) -> list[tuple[int | None, str, str]]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    more = (None, "(file)", f"more problems than the {MAX_PROBLEMS} listed: fix these first")
    return problems[:MAX_PROBLEMS] + [more]


def parse_policy(text: str | bytes, source: str = "<policy>") -> Policy:
    """A Policy from TOML text, or a file's bytes (UTF-8); PolicyError naming line and key for
    anything wrong. Linear in the text's size; refuses more than MAX_POLICY_BYTES (in UTF-8)
    and values nested deeper than MAX_NESTING."""
    if isinstance(text, (bytes, bytearray)):
        text = _decode(bytes(text), source)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_POLICY_BYTES:
        raise _too_big(source, size, MAX_POLICY_BYTES, text[:MAX_POLICY_BYTES].count("\n") + 1)
    where = _KeyLines(text)
    if where.problem is not None:
        raise PolicyError(source, [where.problem])
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        line = int(found.group(1)) if found else (text.count("\n") + 1 if "end of document" in str(exc) else None)
        raise PolicyError(source, [(line, "(syntax)", str(exc))]) from None
    except RecursionError:  # the scan bounds nesting first; this is the net under it
        raise PolicyError(source, [(None, "(file)", _nesting_message())]) from None
    deep = _deepest(data)
    if deep is not None:
        raise PolicyError(source, [(where.line(deep), _key_name(deep), _nesting_message())])
    problems: list[tuple[int | None, str, str]] = [
        (where.line((key,)), _key_name((key,)),
         f"unknown key {_shown(key)} (a policy file has [profiles.NAME] tables and [[assert]] entries)")
        for key in data if key not in ("profiles", "assert")]
    if problems:
        raise PolicyError(source, _listed(problems))
    try:
        policy = Policy.model_validate(data)
    except PydanticValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            message = err["msg"]
            if err["type"] == "extra_forbidden":
                message = f"unknown key {_shown(loc[-1])}"
            elif err["type"] == "enum":
                message = f"{_shown(err.get('input'))} is not one of {err['ctx'].get('expected', '')}"
            elif "input" in err and not isinstance(err["input"], (dict, list)):
                message = f"{message} (got {_shown(err['input'])})"
            problems.append((where.line(loc), _key_name(loc), message))
            if len(problems) > MAX_PROBLEMS:
                break
        raise PolicyError(source, _listed(problems)) from None
    names = sorted(policy.profiles)
    known = ", ".join(_shown(n, 40)[1:-1] for n in names[:10]) or "none defined"
    known += f" and {len(names) - 10} more" if len(names) > 10 else ""
    for k, a in enumerate(policy.assertions):
        if a.profile not in policy.profiles:
            problems.append((where.line(("assert", k, "profile")), f"assert[{k}].profile",
                             f"unknown profile {_shown(a.profile)} (profiles: {known})"))
    if problems:
        raise PolicyError(source, _listed(problems))
    lines = tuple(where.line(("assert", k)) for k in range(len(policy.assertions)))
    return policy.model_copy(update={"source": source, "lines": lines})


def _too_big(source: str, size: int, limit: int, line: int) -> PolicyError:
    return PolicyError(source, [(line, "(file)", f"the file is {size:,} bytes; a policy file may be at most {limit:,} "
                                                 f"bytes (the limit falls on line {line})")])


def _decode(data: bytes, source: str, size: int | None = None) -> str:
    """A file's text from its bytes (``size``: the file's whole size when ``data`` is only its
    start); PolicyError naming the line for a file too big or not UTF-8."""
    size = max(len(data), size or 0)
    if size > MAX_POLICY_BYTES:
        raise _too_big(source, size, MAX_POLICY_BYTES, data.count(b"\n", 0, MAX_POLICY_BYTES) + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise PolicyError(source, [(line, "(file)", f"not UTF-8: byte 0x{data[exc.start]:02x} at line {line}, "
                                                    f"column {column}")]) from None
    return text


def load_policy(path: str | Path) -> Policy:
    """The policy file at ``path``: no more than MAX_POLICY_BYTES + 1 of it is read."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise PolicyError(str(path), [(None, "(file)", f"cannot be read: {exc}")]) from None
    return parse_policy(_decode(data, str(path), size), str(path))


__all__ = ["Policy", "Profile", "Assertion", "Selection", "Expect", "PolicyError", "parse_policy", "load_policy",
           "MAX_POLICY_BYTES", "MAX_NESTING"]
