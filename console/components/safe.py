"""Record content is data, never markup: helpers that keep it inert on every page.

Rule for page authors: record strings (payloads, tags, scopes, actors, rationales, ids) go
through st.text, st.code, st.json, st.dataframe, or `md()` below; never straight into
st.markdown, st.caption, st.write or a label that interprets Markdown.
"""

from __future__ import annotations

import re

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~<$&:@=\"'])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# Bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): one left open in record
# text would reorder the console's own words after it ("confidence 0.70" read backwards).
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def clean(text: object, limit: int = 2000) -> str:
    """Printable, bounded text: control characters and bidi embedding/override/isolate controls
    shown as U+FFFD, long strings cut with a note."""
    value = _BIDI.sub("\ufffd", _CONTROL.sub("\ufffd", str(text)))
    if len(value) > limit:
        value = value[:limit] + f"… ({len(value) - limit:,} more characters)"
    return value


def md(text: object, limit: int = 2000) -> str:
    """Text escaped for use inside a Markdown string (so `**x**`, links and HTML stay literal)."""
    return _MD_SPECIAL.sub(r"\\\1", clean(text, limit)).replace("\n", " ")
