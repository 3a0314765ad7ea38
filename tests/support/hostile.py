"""Hostile content: records whose strings are markup, scripts, URLs, huge, deeply nested,
unicode edge cases and control characters. The engine must store, retrieve and round-trip them
unchanged; the console must show them as inert text.

Shared by the engine suite (tests/security) and the browser suite (tests/e2e): import it with
``from tests.support import hostile``.

- ``build_hostile_records()`` -> Membrane-JSON records (deterministic), every type, with
  hostile strings in ids, scopes, tags, payload fields, provenance, relations, audit entries
  and extra fields.
- ``HOSTILE_STRINGS``: name -> string, for tests that want to look for one.
- ``XSS_MARKERS``: substrings that, if they ever ran, would call ``alert``; a page that
  renders one as live markup is a defect.

Lone UTF-16 surrogates are not valid Unicode text, and NUL cannot be stored in the columns
that hold ids, scopes, audit actors and rationales; neither is in those places here (the
engine refuses them, see tests/security/test_bad_input.py). NUL does appear in payloads,
provenance and tags. Everything here is valid JSON.
"""

from __future__ import annotations

import copy
from typing import Any

CREATED = "2026-05-01T12:00:00Z"
LONG = 100_000
DEPTH = 200

HOSTILE_STRINGS: dict[str, str] = {
    "html": "<b>bold</b><i>italic</i><div style=\"position:fixed;top:0;left:0;width:100%;height:100%;background:red\">overlay</div>",
    "script": "<script>alert(1)</script>",
    "img_onerror": "<img src=x onerror=alert(1)>",
    "svg_onload": "<svg/onload=alert(1)>",
    "iframe": "<iframe src=\"javascript:alert(1)\"></iframe>",
    "style_break": "</style><script>alert(1)</script>",
    "attr_break": "\"><script>alert(1)</script><a x=\"",
    "md_link": "[click me](javascript:alert(1))",
    "md_image": "![pixel](https://tracker.invalid/p.png?leak=1)",
    "md_autolink": "<javascript:alert(1)>",
    "md_markup": "# Heading\n**bold** _italic_ `code` > quote\n- list\n| a | b |\n|---|---|\n| 1 | 2 |",
    "md_html_comment": "<!-- hidden --> visible",
    "latex": "$$\\begin{pmatrix}1\\end{pmatrix}$$ :red[colored] :material/warning:",
    "js_url": "javascript:alert(document.cookie)",
    "data_url": "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "rtl_override": "file\u202etxt.exe \u202bembedded\u202c \u2066isolate\u2069",
    "zero_width": "zero\u200bwidth\u200cnon\u200djoiner\u2060word\ufeffbom",
    "emoji_zwj": "\U0001F469\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 \U0001F3F3\ufe0f\u200d\U0001F308 \U0001F44D\U0001F3FD",
    "combining": "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357",
    "astral": "\U0001D54F\U0001D518\U0001F600\U00010348",
    "line_separators": "line\u2028separator\u2029paragraph\u0085next",
    "nul_and_controls": "nul\x00bell\x07backspace\x08escape\x1b[31mred\x1b[0m\x7fdel\r\ncrlf\ttab\x0bvt\x0cff",
    "controls": "bell\x07backspace\x08escape\x1b[31mred\x1b[0m\x7fdel\r\ncrlf\ttab\x0bvt\x0cff\x85nel\u009bcsi",
    "sql": "'; DROP TABLE records; --",
    "template": "{{7*7}} ${7*7} <%= 7*7 %> {% raw %}",
    "path": "../../../../etc/passwd",
    "long": "A" * (LONG - 9) + "<script>x",
    "long_unicode": ("\u202e\U0001F469\u200d\U0001F467" * (LONG // 4))[:LONG],
}

XSS_MARKERS = ("alert(1)", "alert(document.cookie)", "onerror=", "onload=", "javascript:")


def nested(depth: int = DEPTH) -> Any:
    """A JSON value ``depth`` levels deep, alternating objects and arrays."""
    value: Any = HOSTILE_STRINGS["script"]
    for level in range(depth):
        value = {"d": value, "n": level} if level % 2 else [value, level]
    return value


def _payload(type_: str, s: dict[str, str]) -> dict[str, Any]:
    if type_ == "episodic":
        return {"kind": "episodic",
                "timeline": [{"t": CREATED, "event_kind": s["html"], "ref": s["js_url"], "summary": s["script"]}],
                "tool_graph": [{"id": s["img_onerror"], "tool": s["md_link"], "args": {s["script"]: s["long"]},
                                "result": nested(20), "depends_on": [s["rtl_override"]]}],
                "environment": {"os": s["nul_and_controls"], "os_version": s["emoji_zwj"],
                                "tool_versions": {s["md_image"]: s["zero_width"]},
                                "working_directory": s["path"], "context": {"html": s["html"]}},
                "outcome": "failure", "artifacts": [s["data_url"], s["md_autolink"]], "tool_graph_ref": s["iframe"]}
    if type_ == "working":
        return {"kind": "working", "thread_id": s["attr_break"], "state": "blocked",
                "active_constraints": [{"type": s["style_break"], "key": s["template"], "value": nested(30),
                                        "required": True}],
                "next_actions": [s["md_markup"], s["latex"]], "open_questions": [s["line_separators"]],
                "context_summary": s["long_unicode"]}
    if type_ == "semantic":
        return {"kind": "semantic", "subject": s["script"], "predicate": s["md_link"], "object": nested(DEPTH),
                "validity": {"mode": "conditional", "conditions": {"if": s["js_url"]}},
                "evidence": [{"source_type": s["html"], "source_id": s["img_onerror"]}],
                "revision_policy": s["md_html_comment"]}
    if type_ == "competence":
        return {"kind": "competence", "skill_name": s["svg_onload"],
                "triggers": [{"signal": s["md_image"], "conditions": {"x": s["combining"]}}],
                "recipe": [{"step": s["md_markup"], "tool": s["sql"], "args_schema": {"$ref": s["js_url"]},
                            "validation": s["astral"]}],
                "required_tools": [s["iframe"]], "failure_modes": [s["long"]], "fallbacks": [s["nul_and_controls"]],
                "performance": {"success_count": 2, "failure_count": 1, "success_rate": 0.66, "avg_latency_ms": 1.5},
                "version": s["template"]}
    if type_ == "plan_graph":
        return {"kind": "plan_graph", "plan_id": s["script"], "version": s["rtl_override"], "intent": s["md_markup"],
                "constraints": {s["html"]: s["img_onerror"]}, "inputs_schema": {"deep": nested(50)},
                "outputs_schema": {"x": s["latex"]},
                "nodes": [{"id": "<a>", "op": s["img_onerror"], "params": {"p": s["long"]}, "guards": [s["js_url"]]},
                          {"id": "</a>", "op": s["md_link"]}],
                "edges": [{"from": "<a>", "to": "</a>", "kind": "data"}],
                "metrics": {"avg_latency_ms": 3.0, "failure_rate": 0.25, "execution_count": 4}}
    if type_ == "entity":
        return {"kind": "entity", "canonical_name": s["emoji_zwj"], "primary_type": s["script"],
                "types": [s["html"], s["md_image"]], "aliases": [s["rtl_override"], {"value": s["script"], "kind": s["md_image"], "x_nested": nested(10)},
                                                      {"value": s["html"], "locale": s["zero_width"]}],
                "identifiers": [{"namespace": s["js_url"], "value": s["zero_width"]}], "summary": s["long"]}
    raise ValueError(type_)


# Ids and scopes are bounded (128 and 256 characters) and free of control characters, but
# otherwise any text: markup included.
_IDS = {
    "episodic": "<script>alert(1)</script>",
    "working": "<img src=x onerror=alert(1)>",
    "semantic": "[semantic](javascript:alert(1))",
    "competence": "comp\u202eetence \U0001F469\u200d\U0001F467",
    "plan_graph": "plan **graph** `x` ![i](https://tracker.invalid/p.png)",
    "entity": "entity \"'><svg/onload=alert(1)>",
}
_SCOPES = {
    "episodic": "<b>scope</b>",
    "working": "javascript:alert(1)",
    "semantic": "",
    "competence": "scope \u200d\u202e",
    "plan_graph": "[s](javascript:alert(1))",
    "entity": "**bold-scope**",
}


def build_hostile_records() -> list[dict[str, Any]]:
    s = HOSTILE_STRINGS
    out = []
    for type_ in ("episodic", "working", "semantic", "competence", "plan_graph", "entity"):
        rid = _IDS[type_]
        out.append({
            "id": rid, "type": type_, "sensitivity": "low", "confidence": 0.7, "salience": 0.9,
            "scope": _SCOPES[type_],
            "tags": [s["script"], s["md_link"], s["rtl_override"], s["emoji_zwj"], s["html"], s["nul_and_controls"]],
            "created_at": CREATED, "updated_at": CREATED,
            "lifecycle": {"decay": {"curve": "exponential", "half_life_seconds": 10 ** 9, "min_salience": 0.0,
                                    "max_age_seconds": 0, "reinforcement_gain": 0.1},
                          "pinned": False, "deletion_policy": "auto_prune"},
            "provenance": {"sources": [{"kind": "artifact", "ref": s["js_url"], "hash": s["nul_and_controls"],
                                        "created_by": s["script"], "timestamp": CREATED}],
                           "created_by": s["md_image"]},
            "relations": [{"predicate": s["html"], "target_id": _IDS["semantic"], "weight": 0.5,
                           "created_at": CREATED}],
            "payload": _payload(type_, s),
            "audit_log": [
                {"action": "create", "actor": s["script"], "timestamp": CREATED, "rationale": s["md_markup"]},
                # Audit actors and rationales are stored as text columns: every control character
                # but NUL (which PostgreSQL text cannot hold; the engine refuses it there).
                {"action": "revise", "actor": s["rtl_override"], "timestamp": "2026-05-02T12:00:00Z",
                 "rationale": s["controls"] + s["long"]},
            ],
            "x_hostile_extra": {s["script"]: [s["img_onerror"], s["emoji_zwj"], nested(40)]},
        })
    return out


def copy_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return copy.deepcopy(records)
