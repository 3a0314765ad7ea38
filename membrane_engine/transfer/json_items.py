"""Records read one at a time from a Membrane JSON file, in memory bounded by the largest record
rather than by the file: a ``.json`` array (or one object) or a ``.jsonl`` file.

A ``.json`` array is read in blocks of text and cut into its items with the standard library's
``json.JSONDecoder.raw_decode``, which parses one value at a given position of a string: the
same C scanner as ``json.loads`` (so the same values are accepted, with the same messages and
the same speed) over a window of the file instead of all of it. An incremental parser such as
ijson would do the same job with a dependency more, numbers as ``Decimal`` unless told
otherwise and errors of its own wording. A ``.jsonl`` file is read line by line and each line
parsed as ``jsonl_import`` does on its workers (orjson first, the strict reader for anything it
refuses), so both paths accept and refuse the same lines.

No item may span more than MAX_ITEM_CHARS of text (4 times the largest record a store takes,
``schema.MAX_RECORD_BYTES``: room for indentation and escapes): a longer one is refused without
being held whole.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from membrane_engine.errors import ValidationError
from membrane_engine.model.records import MAX_RECORD_BYTES
from membrane_engine.transfer.strict_json import parse_line, refuse_constant

BLOCK = 1 << 20  # bytes read at a time
MAX_ITEM_CHARS = 4 * MAX_RECORD_BYTES
KEY_CHARS = 64  # items this short come with their text (``Item.text``), to recognise repeated junk

_LOOKAHEAD = 16  # characters: longer than any literal or number prefix that could be cut off
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder(parse_constant=refuse_constant)

# (value, its JSON text when at most KEY_CHARS long else None, whether its JSON is checked as
# ``schema.check_json`` would: ``strict_json.parser_checked``)
Item = tuple[Any, "str | bytes | None", bool]


class FileItems:
    """The records of a file, in order, as ``Item``s; iterating raises ValidationError (naming
    line and column) where the file stops being JSON, when reading gets there."""

    def __init__(self, path: Path):
        self.path = path
        self.size = path.stat().st_size
        self._file: BinaryIO | None = None

    def __iter__(self) -> Iterator[Item]:
        with self.path.open("rb") as f:
            self._file = f
            if self.path.suffix.lower() == ".jsonl":
                yield from _lines(f, self.path.name)
            else:
                yield from _array(f, self.path.name)

    def estimate(self, done: int) -> int:
        """How many records the file holds, judged from the bytes read for the first ``done``."""
        read = self._file.tell() if self._file is not None and not self._file.closed else 0
        return max(done, round(done * self.size / read)) if read else done


# --------------------------------------------------------------------------- JSON Lines


def _lines(f: BinaryIO, name: str) -> Iterator[Item]:
    number = 0
    while True:
        line = f.readline(MAX_ITEM_CHARS + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_ITEM_CHARS and not line.endswith(b"\n"):
            raise ValidationError(f"{name} line {number}: longer than {MAX_ITEM_CHARS} bytes; a record is at most "
                                  f"{MAX_RECORD_BYTES} bytes of JSON", [(f"line {number}", "too long")])
        if line.endswith(b"\n"):  # lines end at "\n" only, as the sequential and parallel readers split
            line = line[:-1]
        if not line.strip():
            continue
        value, checked = parse_line(line, name, number)
        yield value, (line if len(line) <= KEY_CHARS else None), checked


# --------------------------------------------------------------------------- a JSON array


class _Window:
    """The part of a UTF-8 file not consumed yet, as text: ``text[pos:]`` is what comes next;
    ``line`` and ``column`` (0-based) say where ``text[0]`` is in the file."""

    def __init__(self, f: BinaryIO, name: str):
        self.f, self.name = f, name
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.text, self.pos, self.eof = "", 0, False
        self.line, self.column, self.offset = 1, 0, 0  # offset: bytes read

    def fill(self, at_least: int = 1) -> None:
        """Read on until ``at_least`` characters follow ``pos`` (or the file ends), dropping what
        was consumed."""
        if self.pos:
            newlines = self.text.count("\n", 0, self.pos)
            if newlines:
                self.line += newlines
                self.column = self.pos - self.text.rfind("\n", 0, self.pos) - 1
            else:
                self.column += self.pos
            self.text, self.pos = self.text[self.pos:], 0
        while len(self.text) < at_least and not self.eof:
            block = self.f.read(max(BLOCK, at_least - len(self.text)))
            try:
                self.text += self.utf8.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                at = self.offset + exc.start
                raise ValidationError(f"{self.name}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {at})",
                                      [("path", "not UTF-8")]) from None
            self.offset += len(block)
            self.eof = not block

    def skip_whitespace(self) -> str | None:
        """The next character after whitespace, None at the end of the file."""
        while True:
            self.pos = _WHITESPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            if self.eof:
                return None
            self.fill()

    def value(self) -> tuple[Any, str | None]:
        """The JSON value at ``pos`` and its text when at most KEY_CHARS long; ``pos`` moves past it."""
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof or not self._cut_short(exc):
                    raise self.error(exc.msg, exc.pos) from None
                self._more()
                continue
            except ValueError as exc:  # NaN or Infinity
                raise ValidationError(f"{self.name}: {exc}", [("file", str(exc))]) from None
            except RecursionError:
                raise ValidationError(f"{self.name}: JSON nested too deeply", [("file", "nested too deeply")]) from None
            if not self.eof and len(self.text) - end < _LOOKAHEAD:  # "2." of "2.5e3": a number may go on
                self._more()
                continue
            start, self.pos = self.pos, end
            return value, (self.text[start:end] if end - start <= KEY_CHARS else None)

    def _cut_short(self, exc: json.JSONDecodeError) -> bool:
        """The error may only say that the value goes on past the window: an unterminated
        string, or a failure within the last few characters (a literal or number cut off)."""
        return exc.msg.startswith("Unterminated string") or len(self.text) - exc.pos < _LOOKAHEAD

    def _more(self) -> None:
        have = len(self.text) - self.pos
        if have >= MAX_ITEM_CHARS:
            raise self.error(f"a value longer than {MAX_ITEM_CHARS} characters (a record is at most "
                             f"{MAX_RECORD_BYTES} bytes of JSON)", self.pos)
        self.fill(min(max(2 * have, have + 1), MAX_ITEM_CHARS + 1))  # doubling: a long value is parsed O(log n) times

    def error(self, message: str, pos: int) -> ValidationError:
        """Refusal at ``text[pos]``, naming its line and column in the file from 1 (as
        JSONDecodeError counts them)."""
        newlines = self.text.count("\n", 0, pos)
        line = self.line + newlines
        column = pos - self.text.rfind("\n", 0, pos) if newlines else self.column + pos + 1
        return ValidationError(f"{self.name}: not valid JSON ({message}; line {line} column {column})",
                               [(f"line {line}", message)])


def _array(f: BinaryIO, name: str) -> Iterator[Item]:
    w = _Window(f, name)
    w.fill()
    if w.text.startswith("\ufeff"):  # a byte order mark, as some editors write: not part of the JSON
        w.pos = 1
    first = w.skip_whitespace()
    if first != "[":
        value, _ = w.value()  # refuses an empty file ("Expecting value") too
        _end(w)
        if not isinstance(value, dict):
            raise ValidationError(f"{name}: expected a JSON array of records (got {type(value).__name__})",
                                  [("file", "not an array")])
        yield value, None, False
        return
    w.pos += 1
    if w.skip_whitespace() == "]":
        w.pos += 1
        _end(w)
        return
    while True:
        value, text = w.value()
        yield value, text, False
        after = w.skip_whitespace()
        if after == ",":
            w.pos += 1
            w.skip_whitespace()  # a "]" next is refused by value(), as json.loads refuses it
            continue
        if after == "]":
            w.pos += 1
            _end(w)
            return
        raise w.error("Expecting ',' delimiter", w.pos)


def _end(w: _Window) -> None:
    """Nothing but whitespace may follow the value."""
    if w.skip_whitespace() is not None:
        raise w.error("Extra data", w.pos)
