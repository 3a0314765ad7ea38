"""Import's fast paths give exactly what the general code gives: the hashed bytes of an audit
entry, timestamps read by the plain-UTC shortcut, the storable-record shortcut."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError as PydanticValidationError

from membrane_engine.rules import chain as audit
from membrane_engine.model.records import MemoryRecord, UTCDateTime, _storable, _storage_problem_list, as_utc

from tests.support.records import rec

# Any text, control characters, separators and astral planes included (lone surrogates are
# refused at the boundary, but the canonical form must still match json's, or fail as json does).
texts = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF))
fields = st.lists(st.one_of(texts, st.integers(-2**70, 2**70), st.none()), max_size=9)


@settings(max_examples=400, deadline=None)
@given(fields)
def test_canonical_bytes_are_jsons(values):
    try:
        expected = json.dumps(values, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: json cannot write it as UTF-8 either
        try:
            audit.canonical(values)
        except UnicodeEncodeError:
            return
        raise AssertionError("canonical form accepted text json refuses")
    assert audit.canonical(values) == expected


def test_new_chain_matches_entry_hash_and_head_seal():
    entries = [("create", "alice", "2026-01-01T00:00:00Z", 1.0, "made", None),
               ("reinforce", "bob\u2028", "2026-01-02T00:00:00Z", 2.0, "used \x00\x1f", '{"x":1}')]
    for key in (None, b"secret"):
        rows, head = audit.new_chain("r1", entries, key, "d" * 64)
        prev = audit.GENESIS
        for position, (row, (action, actor, stamp, _, rationale, extra)) in enumerate(zip(rows, entries)):
            digest = "d" * 64 if position == len(entries) - 1 else None  # the last entry binds the content
            fields = [prev, "r1", position, action, actor, stamp, rationale, None, extra, digest]
            content = json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()
            assert row[-2] == audit.digest(content, key) and row[-1] == digest
            assert row[-3] == prev
            assert row[-2] == audit.entry_hash_v2(prev, "r1", position, action, actor, stamp, rationale, None, extra,
                                                  digest, key)
            prev = row[-2]
        assert head == audit.digest(json.dumps(["head", "r1", 1, prev, "d" * 64], separators=(",", ":")).encode(), key)


_utc = TypeAdapter(UTCDateTime)
_general = TypeAdapter(datetime)


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)),
       st.sampled_from(["Z", "+00:00", "+05:30", ".5Z", ""]))
def test_timestamp_shortcut_equals_pydantic(moment, suffix):
    text = moment.replace(microsecond=0, tzinfo=None).isoformat() + suffix
    try:
        expected = as_utc(_general.validate_python(text))
    except PydanticValidationError:
        try:
            _utc.validate_python(text)
        except PydanticValidationError:
            return
        raise AssertionError(f"{text!r} accepted by the shortcut only")
    got = _utc.validate_python(text)
    assert got == expected and got.utcoffset() == expected.utcoffset()
    assert got.isoformat() == expected.isoformat()


def test_timestamp_shortcut_refuses_what_pydantic_refuses():
    for text in ("2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T23:60:00Z"):
        try:
            _utc.validate_python(text)
        except PydanticValidationError:
            continue
        raise AssertionError(f"{text!r} accepted")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=140), st.text(max_size=300), st.text(max_size=140), st.text(max_size=140),
       st.text(max_size=20))
def test_storable_shortcut_agrees_with_the_problem_list(record_id, scope, actor, target, rationale):
    doc = rec("r", "semantic")
    doc.update(id=record_id or "r", scope=scope)
    doc["audit_log"] = [{"action": "create", "actor": actor, "timestamp": "2026-01-01T00:00:00Z",
                         "rationale": rationale}]
    doc["relations"] = [{"predicate": "about", "target_id": target}]
    try:
        record = MemoryRecord.model_validate(doc)  # the fields only: storage rules not applied
    except PydanticValidationError:
        return
    assert _storable(record) == (_storage_problem_list(record) == [])
