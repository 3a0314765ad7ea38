"""JSON read strictly, as JSON (and Membrane) defines it: the one parser every import reader
shares (``imports.parse_text``, ``json_items.FileItems``, ``jsonl_import``'s workers), so each
accepts and refuses the same values with the same messages."""

from __future__ import annotations

import json
from typing import Any

import orjson

from membrane_engine.errors import ValidationError
from membrane_engine.model.records import MAX_RECORD_BYTES


def refuse_constant(name: str) -> Any:
    # Python's json reads NaN and +-Infinity; JSON (and Membrane) does not.
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str, name: str, where: str) -> Any:
    """``text`` as JSON, refused with a ValidationError naming ``name`` and ``where`` in it
    (" line 7" for a line of a JSON Lines file, "" for a whole file)."""
    try:
        return json.loads(text, parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno} column {exc.colno}" if not where else f"column {exc.colno}"
        raise ValidationError(f"{name}{where}: not valid JSON ({exc.msg}; {at})",
                              [(f"line {exc.lineno}" if not where else where.strip(), exc.msg)]) from None
    except ValueError as exc:
        raise ValidationError(f"{name}{where}: {exc}", [(where.strip() or "file", str(exc))]) from None
    except RecursionError:
        raise ValidationError(f"{name}{where}: JSON nested too deeply", [(where.strip() or "file", "nested too deeply")]) from None


_CHECKED_BRACKETS = 200  # far below any recursion limit on the way (json, orjson's 255, pydantic)


def parser_checked(line: bytes) -> bool:
    """Whether orjson having parsed ``line`` guarantees what ``schema.check_json`` checks, so
    validation may skip it: orjson refuses NaN and Infinity, lone surrogates and invalid UTF-8;
    the record re-encoded is at most 4.5 times the line (a 4-byte number such as ``1e15`` comes
    out as ``1000000000000000.0``, strings and whitespace only shrink), so a line of a fifth of
    the limit is within it; and a value nests no deeper than its brackets number."""
    return len(line) * 5 <= MAX_RECORD_BYTES and line.count(b"{") + line.count(b"[") <= _CHECKED_BRACKETS


def parse_line(line: bytes, name: str, number: int) -> tuple[Any, bool]:
    """One line as JSON, strictly, and whether its JSON is checked (``parser_checked``): orjson
    for the common case; anything it refuses goes through the sequential reader's own parser,
    so the accepted values and the errors are the same."""
    try:
        return orjson.loads(line), parser_checked(line)
    except orjson.JSONDecodeError:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{name} line {number}: not UTF-8 text (byte {exc.object[exc.start]:#04x} "
                                  f"at column {exc.start + 1})", [(f"line {number}", "not UTF-8")]) from None
        return loads(text, name, f" line {number}"), False
