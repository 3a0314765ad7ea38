"""A record named by what it says: the words an operator recognises a record by.

semantic "subject predicate object", competence the skill name, plan_graph the intent, entity
the canonical name, episodic the first timeline summary, working its state and context summary.
A redacted record says only that it is redacted and its type: its name is payload, and SPEC 3
withholds every byte of that.

``label`` takes a record already gated (a redacted view has no payload, so it cannot name
itself by content); ``labels_of_docs`` names stored documents, deciding each one's verdict on
the labels read with its content (SPEC 4, "the gate decides on what it returns"), so a record
relabelled in between is named as its new labels allow. Reading those documents is the
caller's (``retrieval.labels``); nothing here touches the store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import orjson

from membrane_engine.model.records import MemoryRecord
from membrane_engine.rules.trust import TrustContext, Verdict, verdict_as_read

LIMIT = 80
MAX_LABEL = 10_000  # characters of one label


def _text(value: Any) -> str:
    """A payload value as words: an object as "key: value" pairs separated by "; " (nested ones
    in parentheses), a list as its items separated by ", "; never JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "; ".join(f"{k}: ({_text(v)})" if isinstance(v, dict) and len(v) > 1 else f"{k}: {_text(v)}"
                         for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, (int, float)) else str(value)


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


def _from_payload(kind: str, p: dict[str, Any]) -> str:
    if kind == "semantic":
        return " ".join(s for s in (_text(p.get("subject")), _text(p.get("predicate")), _text(p.get("object"))) if s)
    if kind == "competence":
        return _text(p.get("skill_name"))
    if kind == "plan_graph":
        return _text(p.get("intent")) or _text(p.get("plan_id"))
    if kind == "entity":
        return _text(p.get("canonical_name"))
    if kind == "episodic":
        for event in p.get("timeline") or []:
            if isinstance(event, dict) and event.get("summary"):
                return _text(event["summary"])
        return ""
    if kind == "working":
        state, summary = _text(p.get("state")), _text(p.get("context_summary"))
        return f"{state}: {summary}" if state and summary else (summary or state or _text(p.get("thread_id")))
    return ""


def redacted_label(memory_type: str) -> str:
    return f"redacted {memory_type} record"


def label(record: MemoryRecord, limit: int = LIMIT) -> str:
    """What ``record`` says, in one line of at most ``limit`` characters; for a redacted view,
    "redacted <type> record"; the id when the payload names nothing."""
    kind = record.type.value
    if record.payload is None:
        return redacted_label(kind) if record.redacted else _cut(record.id, limit)
    payload = record.payload.model_dump(mode="json", by_alias=True)
    return _cut(_from_payload(kind, payload) or record.id, limit)


def label_of_doc(doc: dict[str, Any], limit: int = LIMIT) -> str:
    """``label`` for a stored record's JSON (no gate: the caller has decided the verdict)."""
    payload = doc.get("payload") if isinstance(doc.get("payload"), dict) else {}
    return _cut(_from_payload(str(doc.get("type", "")), payload) or str(doc.get("id", "")), limit)


def labels_of_docs(docs: Mapping[str, dict[str, Any]], clearance: TrustContext, limit: int = LIMIT) -> dict[str, str]:
    """Labels of stored records' JSON (by id) that ``clearance`` sees: what a fully visible one
    says, "redacted <type> record" for a redacted one. Records it does not see are absent, so
    the caller cannot tell them from ids not in the store."""
    out: dict[str, str] = {}
    for rid, doc in docs.items():
        verdict = verdict_as_read(doc.get("sensitivity"), str(doc.get("scope") or ""), clearance)
        if verdict is Verdict.FULL:
            out[rid] = label_of_doc(doc, limit)
        elif verdict is Verdict.REDACTED:
            out[rid] = redacted_label(str(doc.get("type", "record")))
    return out


# --------------------------------------------------------------------------- finding records by label
# A page shows a record by its label, so the text a search is given may be any part of one:
# "alice works_at ac" spans the subject, predicate and object of a semantic record, which no
# substring of its stored JSON holds. Finding it without reading every document: each word of
# the text (split where a label joins payload values: spaces, ": ", "; ", ", ", parentheses)
# lies within one payload value, so the documents holding every word in one of its
# ``word_forms`` (SQL LIKE in ``storage.record_queries``, the same scan the JSON search already
# costs) are the only candidates, and only they are labelled, with ``label_contains``.

_JOINS = re.compile(r"[\s:;,()]+")
NO_CUT = 1 << 62


def _squeezed(text: str) -> str:
    return " ".join(str(text).split())


def label_words(text: str) -> list[str]:
    """The pieces of ``text`` that each lie within one payload value when ``text`` is part of a label."""
    return [w for w in _JOINS.split(text) if w]


def spans_values(text: str) -> bool:
    """Whether ``text`` may be found in a label but not, as it is, in the stored JSON (it joins
    values, or a character of it is written escaped in the JSON)."""
    words = label_words(text)
    return words != [_squeezed(text)] or json.dumps(text)[1:-1] != text


def word_forms(word: str) -> tuple[str, ...]:
    """The ways one word of a label may be written in the stored JSON: as it is, JSON-escaped
    keeping non-ASCII, and JSON-escaped to ASCII."""
    return tuple(dict.fromkeys((word, json.dumps(word, ensure_ascii=False)[1:-1], json.dumps(word)[1:-1])))


def label_contains(doc: dict[str, Any] | str | bytes, text: str) -> bool:
    """Whether the label of a stored record's JSON (parsed, or its text) contains ``text``
    (case-insensitive, runs of whitespace as one space), the whole label, not the cut one a
    table shows."""
    if isinstance(doc, (str, bytes)):
        try:
            doc = orjson.loads(doc)
        except orjson.JSONDecodeError:  # e.g. a NaN inside a free-form field, which only json reads
            doc = json.loads(doc)
    needle = _squeezed(text).casefold()
    return bool(needle) and needle in label_of_doc(doc, NO_CUT).casefold()
