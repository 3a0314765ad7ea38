"""How an entity's names are compared (SPEC 12, capture's entity resolution): Membrane's
NormalizeEntityTerm, and the key under which a normalised term is indexed by storage.

Pure functions: storage keeps the index (``storage.entity_index``), ingestion asks it.
"""

from __future__ import annotations

import re
from hashlib import sha256

_SPACES = re.compile(r"\s+")

# A term longer than this (in UTF-8 bytes) is indexed by its digest: PostgreSQL's b-tree refuses
# keys of a few kilobytes, and a name that long is matched whole or not at all anyway.
MAX_TERM_BYTES = 256
DIGEST_PREFIX = "#sha256:"


def normalize_term(text: str) -> str:
    """Lower case, trimmed, inner runs of whitespace collapsed to one space.
    **(deviation)** Membrane lower-cases and trims but does not collapse ("Maya  Chen" and
    "Maya Chen" are two terms there, one here; SPEC 12)."""
    return _SPACES.sub(" ", str(text).strip().lower())


def term_key(text: str) -> str:
    """The index key of a term: its normalised form, or a digest of it when it is long. ""
    for a term that is empty once normalised (never indexed, never matched)."""
    term = normalize_term(text)
    if not term:
        return ""
    encoded = term.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_TERM_BYTES:
        return term
    return DIGEST_PREFIX + sha256(encoded).hexdigest()


__all__ = ["MAX_TERM_BYTES", "normalize_term", "term_key"]
