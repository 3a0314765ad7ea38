"""Task-aware ranking, SPEC 9: the embedder interface, the default provider, and the text a
record is ranked by (the vectors kept with the store are ``storage.vectors``'s).

A provider turns texts into vectors. Each record's vector is computed from its text (the fields
SPEC 9 names per type) when it is imported, and for any record without one (created by
curation, or in a store written before vectors existed) the first time a task descriptor asks
for it; vectors live in the store's ``record_vectors`` table and, for queries, in a matrix
aligned with the column cache's rows.

The default provider needs no network and no configuration: ``tokenlearn-static-model`` ships
a Model2Vec-style static model (10k-token vocabulary, 64 dimensions, int8) inside its wheel and
encodes with a Rust tokenizer, and a hashed bag of word stems, each word weighted by its rarity
in the model's own vocabulary, adds the exact-term signal a 64-dimension static model lacks (a
skill named "EKS" or "JWT" is found by that word). README, "Task-aware ranking", has the
measurements behind the choice.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import zlib
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from membrane_engine.model.records import MemoryRecord

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: ``embed(texts)`` returns an (n, dim) float array, one row per
    text (a row of zeros means "no vector"). ``name`` identifies the vectors it makes: a store
    whose vectors were made by another name has them recomputed."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


# --------------------------------------------------------------------------- what a record says


def _join(*parts: Any) -> str:
    out = []
    for p in parts:
        if p is None or p == "" or p == [] or p == {}:
            continue
        out.append(p if isinstance(p, str) else json.dumps(p, ensure_ascii=False, sort_keys=True, default=str))
    return " ".join(out)


def record_parts(record: MemoryRecord) -> tuple[str, str]:
    """The text a record's vector is computed from (SPEC 9's fields per type), as (what the
    record is called, the rest): a skill's name, a plan's intent, a fact's subject and
    predicate, an entity's canonical name head it; triggers, steps, node ops, the object and
    aliases follow. ("", "") for a redacted view, which has no payload."""
    p = record.payload
    if p is None:
        return "", ""
    kind = record.type.value if hasattr(record.type, "value") else str(record.type)
    if kind == "semantic":
        return _join(p.subject, p.predicate), _join(p.object)
    if kind == "competence":
        return _join(p.skill_name), _join(*[_join(t.signal, t.conditions) for t in p.triggers or []],
                                          *[_join(s.step, s.tool) for s in p.recipe or []])
    if kind == "plan_graph":
        return _join(p.intent), _join(*[n.op for n in p.nodes or []])
    if kind == "episodic":
        return "", _join(*[e.summary for e in p.timeline or []])
    if kind == "working":
        return _join(p.context_summary), _join(getattr(p.state, "value", p.state))
    if kind == "entity":
        return _join(p.canonical_name), _join(*p.alias_values)
    return "", ""


def record_text(record: MemoryRecord) -> str:
    """A record's ranking text in one string (what a provider sees when asked for one text)."""
    return _join(*record_parts(record))


HEAD_WEIGHT = 3.0  # what a record is called counts three times its details


# --------------------------------------------------------------------------- the default provider

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the to of in on for with and or is are be by from at it its this that into when then "
                  "than as was were has have had do does not no".split())
LEXICAL_DIM = 128
STEM = 6  # "upgrade", "upgrades", "upgrading" share a bucket; "rotate" and "rotation" do not
RARE = 14.0  # -log p of a word the model's vocabulary has no piece for: rare, so telling
COMMON = 6.0  # words more frequent than this (-log p) count as much as the most frequent
WORDS_KEPT = 200_000  # words whose bucket and weight are remembered between calls


class StaticLexicalEmbedder:
    """The default provider: the packaged static model's 64 dimensions, next to 128 hashed
    word-stem dimensions in which each word counts by how rare it is (each half unit length,
    the lexical half weighted 0.85; README, "Task-aware ranking", has the measurements).

    A word's weight is its surprisal in the model's own tokenizer (the unigram log-probability
    of the word as one piece, clipped to [COMMON, RARE], minus 5): "new" counts 5.6, "state" 6.5,
    "upgrade" 8.5, "terraform" or "crashloopbackoff" (no single piece) 9. The table is the model's, so
    the vectors do not depend on the store being ranked and stay stable as it grows."""

    name = "static-lexical-v2"
    lexical_weight = 0.85

    def __init__(self) -> None:
        import static_model  # the wheel carries the model files; importing reads nothing yet
        from static_model._static_model import encode_batch

        self._encode = encode_batch
        self._model_dir = static_model._model_dir()
        self._words: dict[str, tuple[int, float]] = {}
        self._surprisal: dict[str, float] | None = None
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        """Pickled as "a new one": a worker process gets its own encoder, lock and tables."""
        return (type(self), ())

    def _word_surprisal(self) -> dict[str, float]:
        """-log p of each whole word the model's unigram tokenizer has as one piece."""
        if self._surprisal is None:
            with self._lock:
                if self._surprisal is None:
                    import os

                    with open(os.path.join(self._model_dir, "tokenizer.json"), encoding="utf-8") as f:
                        vocab = json.load(f)["model"]["vocab"]
                    self._surprisal = {piece[1:]: -score for piece, score in vocab  # rarer ones are RARE
                                       if piece.startswith("\u2581") and len(piece) > 1 and -score < RARE}
        return self._surprisal

    def _lexical(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), LEXICAL_DIM), dtype=np.float32)
        if len(self._words) > WORDS_KEPT:  # ids and numbers in a large import: keep memory bounded
            self._words = {}
        words = self._words
        surprisal = None
        for i, text in enumerate(texts):
            row = out[i]
            for word in _WORD.findall(text.lower()):
                known = words.get(word)
                if known is None:
                    if word in _STOP:
                        known = (-1, 0.0)
                    else:
                        surprisal = surprisal or self._word_surprisal()
                        weight = min(max(surprisal.get(word, RARE), COMMON), RARE) - 5.0
                        known = (zlib.crc32(word[:STEM].encode()) % LEXICAL_DIM, weight)
                    words[word] = known
                if known[0] >= 0:
                    row[known[0]] += known[1]
        return _unit(out)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        if not texts:
            return np.zeros((0, 64 + LEXICAL_DIM), dtype=np.float32)
        # Identical texts (templated records) are encoded once.
        unique = list(dict.fromkeys(texts))
        with self._lock:  # the Rust encoder's model load is not meant to race
            static = np.asarray(self._encode(self._model_dir, unique, 512), dtype=np.float32)
        w = self.lexical_weight
        both = np.hstack([_unit(static) * np.float32(np.sqrt(1 - w)), self._lexical(unique) * np.float32(np.sqrt(w))])
        empty = np.array([not t.strip() for t in unique])
        both[empty] = 0.0
        if len(unique) == len(texts):
            return both
        where = {t: i for i, t in enumerate(unique)}
        return both[[where[t] for t in texts]]


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32, copy=False)


_DEFAULT: list[Embedder | None] = []


def default_embedder() -> Embedder | None:
    """The provider a fresh install brings (one per process); None when its package is missing."""
    if not _DEFAULT:
        try:
            _DEFAULT.append(StaticLexicalEmbedder())
        except ImportError:  # pragma: no cover - the package is a dependency
            _DEFAULT.append(None)
    return _DEFAULT[0]


def embed_records(embedder: Embedder, records: Sequence[MemoryRecord]) -> np.ndarray:
    """Unit vectors (rows of zeros for records with no text) of ``records``, float32: the
    head's and the rest's vectors, each of unit length, summed with the head counting
    HEAD_WEIGHT times (a long recipe does not drown the skill's name)."""
    parts = [record_parts(r) for r in records]
    n = len(parts)
    vectors = _unit(np.asarray(embedder.embed([h for h, _ in parts] + [b for _, b in parts]), dtype=np.float32))
    return _unit(HEAD_WEIGHT * vectors[:n] + vectors[n:])


def query_vector(embedder: Embedder | None, task_descriptor: str) -> np.ndarray | None:
    """The task descriptor's unit vector; None for an empty descriptor or no provider (as
    Membrane: a query vector exists only for a non-empty task descriptor)."""
    if embedder is None or not task_descriptor or not task_descriptor.strip():
        return None
    try:
        v = _unit(np.asarray(embedder.embed([task_descriptor]), dtype=np.float32))[0]
    except Exception as exc:  # as Membrane: a failing provider means no query vector, not a failed read
        log.warning("ranking provider %s failed on a task descriptor (%s): order by salience", embedder.name, exc)
        return None
    return v if np.any(v) else None


def try_embed_records(embedder: Embedder, records: Sequence[MemoryRecord]) -> np.ndarray | None:
    """``embed_records``, or None when the provider fails (the records then get their vectors
    when a task first asks; an import never fails for its ranking provider)."""
    try:
        return embed_records(embedder, records)
    except Exception as exc:
        log.warning("ranking provider %s failed on %d records (%s): vectors left for later",
                    embedder.name, len(records), exc)
        return None
