"""The fallback interpretation of a capture and the value helpers it is made of, after
Membrane's ``pkg/ingestion/capture.go`` (pure: nothing here reads a store).

Membrane reads a capture's ``content`` and ``context`` as Go values decoded from JSON and turns
them into text with ``fmt.Sprint``; ``go_text`` and ``go_json`` write values as Go does, so a
mention, a reference or a summary reads the same here as there. Candidate records are handled
as their stored JSON documents (dicts), as they come out of the store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from membrane_engine.ingestion.models import (
    RESOLVED,
    TENTATIVE,
    CaptureMemoryRequest,
    Interpretation,
    Mention,
    ReferenceCandidate,
)
from membrane_engine.model.records import Constraint, MemoryType, parse_time, to_epoch
from membrane_engine.rules.entity_terms import normalize_term

FALLBACK_CONFIDENCE = 0.25  # a fallback interpretation's extraction confidence (Membrane's)
INFERRED_CONFIDENCE = 0.5  # of a mention or reference read from the content's keys
SEMANTIC_CONFIDENCE = 0.7  # a derived fact's confidence when the interpretation gives none
DERIVED_FACT_SALIENCE = 0.9  # a derived fact starts at least this salient

# Membrane's schema.EntityKind -> schema.EntityType* (an entity's primary type)
ENTITY_TYPES = {"person": "Person", "tool": "Tool", "project": "Project", "file": "File", "concept": "Concept"}

# Membrane's inverseRelationPredicate pairs (both directions); any other predicate p has the
# inverse "inverse_of_p".
_INVERSE_PAIRS = (("mentions_entity", "mentioned_in"), ("references_record", "referenced_by"),
                  ("derived_semantic", "derived_from"), ("subject_entity", "fact_subject_of"),
                  ("object_entity", "fact_object_of"), ("depends_on", "dependency_of"), ("uses", "used_by"),
                  ("caused_by", "causes"), ("supports", "supported_by"), ("contradicts", "contradicted_by"))
INVERSE = {**{a: b for a, b in _INVERSE_PAIRS}, **{b: a for a, b in _INVERSE_PAIRS}}


# ----------------------------------------------------------------------------- values as Go writes them


def _digits(value: float) -> tuple[str, str, int]:
    """(sign, the shortest decimal digits, where the decimal point falls in them) of a finite,
    non-zero float."""
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    return ("-" if sign else ""), ds, len(ds) + int(exponent)


def _fixed(sign: str, ds: str, point: int) -> str:
    if point <= 0:
        return f"{sign}0.{'0' * -point}{ds}"
    if point >= len(ds):
        return sign + ds + "0" * (point - len(ds))
    return f"{sign}{ds[:point]}.{ds[point:]}"


def _scientific(sign: str, ds: str, point: int) -> str:
    x = point - 1
    return f"{sign}{ds[0]}{'.' + ds[1:] if len(ds) > 1 else ''}e{'+' if x >= 0 else '-'}{abs(x):02d}"


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    return None


def _go_float(value: float) -> str:
    """``fmt.Sprint`` of a float64 (%v: the shortest digits, in exponent form from 1e+06 and
    below 1e-04)."""
    special = _special(value)
    if special is not None:
        return special
    sign, ds, point = _digits(value)
    return _scientific(sign, ds, point) if not -4 <= point - 1 < 6 else _fixed(sign, ds, point)


def go_text(value: Any) -> str:
    """``fmt.Sprint(value)`` for a value decoded from JSON: lists as ``[a b]``, objects as
    ``map[k:v]`` (keys sorted), floats as %v. **(deviation)** Integers are written in full:
    Go decodes every JSON number as a float64, so ``12345678`` would read "1.2345678e+07"."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(go_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_text(value[k])}" for k in sorted(value, key=str)) + "]"
    return str(value)


def _go_json_float(value: float) -> str:
    """encoding/json's float64: the shortest digits, fixed unless below 1e-6 or from 1e21
    (then an exponent without a leading zero: "1e-7")."""
    special = _special(value)
    if special is not None:
        return special
    sign, ds, point = _digits(value)
    if 1e-6 <= abs(value) < 1e21:
        return _fixed(sign, ds, point)
    text = _scientific(sign, ds, point)
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{exponent[0]}{exponent[1:].lstrip('0') or '0'}"


def go_json(value: Any) -> str:
    """``json.Marshal`` of a value decoded from JSON: compact, object keys sorted, <, > and &
    escaped (and U+2028, U+2029), floats as encoding/json writes them."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_json_float(value)
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                        ("\u2029", "\\u2029")):
            text = text.replace(ch, esc)
        return text
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(go_json(str(k)) + ":" + go_json(value[k]) for k in sorted(value, key=str)) + "}"
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def summarize_content(content: Any) -> str:
    """A string as it is; anything else as Go's JSON of it ("" when it has none)."""
    if isinstance(content, str):
        return content
    try:
        return go_json(content)
    except TypeError:
        return ""


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _text_of(value: Any) -> str:
    """A field's text, trimmed. **(deviation)** A JSON null is no text: Go's ``fmt.Sprint(nil)``
    is "<nil>", which Membrane would take as a reference, a mention or a thread id."""
    return "" if value is None else go_text(value).strip()


def string_value(obj: dict[str, Any], *keys: str) -> str:
    """The first of ``keys`` whose value has text (trimmed)."""
    for key in keys:
        if key in obj:
            text = _text_of(obj[key])
            if text:
                return text
    return ""


def unique_strings(items: Iterable[str]) -> list[str]:
    """Trimmed, non-empty, each once regardless of case (the first spelling kept)."""
    seen: set[str] = set()
    out = []
    for item in items:
        trimmed = item.strip()
        if not trimmed or trimmed.lower() in seen:
            continue
        seen.add(trimmed.lower())
        out.append(trimmed)
    return out


def string_list(value: Any) -> list[str]:
    """A JSON array's items as text (trimmed, each once); [] for anything else."""
    if not isinstance(value, (list, tuple)):
        return []
    return unique_strings(_text_of(item) for item in value)


def constraint_list(value: Any) -> list[Constraint]:
    """A JSON array's objects as working-memory constraints; other items are skipped."""
    if not isinstance(value, (list, tuple)):
        return []
    out = []
    for item in value:
        if isinstance(item, Constraint):
            out.append(item)
        elif isinstance(item, dict):
            out.append(Constraint(type=string_value(item, "type"), key=string_value(item, "key"),
                                  value=item.get("value"), required=item.get("required") is True))
    return out


def first_non_empty(*values: str) -> str:
    return next((v for v in values if v.strip()), "")


def clamp01(value: float) -> float:
    return min(max(value, 0.0), 1.0)


# ----------------------------------------------------------------------------- the fallback interpretation


def infer_entity_kind(key: str) -> str:
    lower = key.lower()
    if "tool" in lower:
        return "tool"
    if "project" in lower:
        return "project"
    if "file" in lower or "path" in lower:
        return "file"
    if any(word in lower for word in ("person", "user", "agent", "subject")):
        return "person"
    return "concept"


def entity_type(kind: str) -> str:
    """The primary type of an entity created for a mention of ``kind``."""
    return ENTITY_TYPES.get(kind, "Other")


def infer_proposed_type(source_kind: str) -> str:
    if source_kind == "working_state":
        return MemoryType.WORKING.value
    if source_kind == "observation":
        return MemoryType.SEMANTIC.value
    return MemoryType.EPISODIC.value


def unique_mentions(mentions: Iterable[Mention]) -> list[Mention]:
    seen: set[str] = set()
    out = []
    for m in mentions:
        key = m.surface.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(m)
    return out


def infer_mentions(content: Any) -> list[Mention]:
    """Mentions from the content's keys: any key containing "entity", and subject, tool_name,
    project and file (Membrane's), each value's text one surface."""
    found = []
    for key, value in as_object(content).items():
        if "entity" not in key and key not in ("subject", "tool_name", "project", "file"):
            continue
        text = _text_of(value)
        if text:
            found.append(Mention(surface=text, entity_kind=infer_entity_kind(key), confidence=INFERRED_CONFIDENCE))
    return unique_mentions(found)


def infer_reference_candidates(content: Any, context: Any) -> list[ReferenceCandidate]:
    """References from keys containing "ref" or "record_id", and the key "id", in the content
    and then the context."""
    refs = []
    for source in (content, context):
        for key, value in as_object(source).items():
            if "ref" not in key and "record_id" not in key and key != "id":
                continue
            text = _text_of(value)
            if text:
                refs.append(ReferenceCandidate(ref=text, confidence=INFERRED_CONFIDENCE))
    return refs


def fallback_interpretation(req: CaptureMemoryRequest) -> Interpretation:
    """Membrane's buildFallbackInterpretation: tentative, the summary, the tags as labels, the
    mentions and references read from the content, the type proposed (or inferred from the
    source kind)."""
    return Interpretation(
        status=TENTATIVE,
        summary=first_non_empty(req.summary, req.reason_to_remember, summarize_content(req.content)),
        proposed_type=(req.proposed_type.value if req.proposed_type else "") or infer_proposed_type(req.source_kind),
        topical_labels=unique_strings(req.tags),
        mentions=infer_mentions(req.content),
        reference_candidates=infer_reference_candidates(req.content, req.context),
        extraction_confidence=FALLBACK_CONFIDENCE,
    )


def merge_interpretations(base: Interpretation | None, override: Interpretation | None) -> Interpretation | None:
    """An interpreter's answer over the fallback: its scalars when set, its lists when not
    empty (labels are joined)."""
    if base is None:
        return override
    if override is None:
        return base
    out = base.model_copy(deep=True)
    for name in ("status", "summary", "proposed_type"):
        if getattr(override, name):
            setattr(out, name, getattr(override, name))
    if override.topical_labels:
        out.topical_labels = unique_strings([*out.topical_labels, *override.topical_labels])
    for name in ("mentions", "relation_candidates", "reference_candidates"):
        if getattr(override, name):
            setattr(out, name, [item.model_copy() for item in getattr(override, name)])
    if override.extraction_confidence > 0:
        out.extraction_confidence = override.extraction_confidence
    return out


def final_status(interpretation: Interpretation | None) -> str:
    """``resolved`` once every mention has an entity and every reference and relation
    candidate is resolved; ``tentative`` otherwise."""
    if interpretation is None:
        return TENTATIVE
    if any(m.surface.strip() and not m.canonical_entity_id for m in interpretation.mentions):
        return TENTATIVE
    if any(r.ref.strip() and not r.resolved for r in interpretation.reference_candidates):
        return TENTATIVE
    if any(r.predicate.strip() and not r.resolved for r in interpretation.relation_candidates):
        return TENTATIVE
    return RESOLVED


def interpretation_confidence(interpretation: Interpretation | None, fallback: float) -> float:
    if interpretation is None or interpretation.extraction_confidence <= 0:
        return fallback
    return interpretation.extraction_confidence


# ----------------------------------------------------------------------------- relations


def normalize_predicate(value: str) -> str:
    return value.strip().lower()


def inverse_predicate(predicate: str) -> str:
    return INVERSE.get(normalize_predicate(predicate), "inverse_of_" + predicate)


# ----------------------------------------------------------------------------- the explicit fact


def extract_fact(content: Any) -> tuple[str, str, Any] | None:
    """(subject, predicate, object) of a content that states a fact, at its top level or under
    ``fact``; None when one of the three is missing (an object that is null still counts)."""
    obj = as_object(content)
    fact = as_object(obj.get("fact"))
    if fact:
        obj = fact
    subject, predicate = string_value(obj, "subject"), string_value(obj, "predicate")
    if not subject or not predicate or "object" not in obj:
        return None
    return subject, predicate, obj["object"]


def _fold(value: str) -> str:
    return value.casefold()


def canonical_side(value: str, interpretation: Interpretation | None) -> str:
    """A fact's subject (or string object) replaced by the id of the entity a mention of it
    resolved to (by surface or alias, ignoring case)."""
    if interpretation is None:
        return value
    for mention in interpretation.mentions:
        if not mention.canonical_entity_id:
            continue
        if _fold(mention.surface) == _fold(value) or any(_fold(a) == _fold(value) for a in mention.aliases):
            return mention.canonical_entity_id
    return value


def canonical_object(value: Any, interpretation: Interpretation | None) -> Any:
    return canonical_side(value, interpretation) if isinstance(value, str) else value


def looks_like_entity_id(value: str) -> bool:
    """Membrane's looksLikeCanonicalEntityID: "entity-..." or a UUID-like id (four dashes)."""
    value = value.strip()
    return bool(value) and (value.startswith("entity-") or value.count("-") >= 4)


def semantic_entity_links(payload: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """(entity id, predicate, inverse) for a fact's subject and object that look like entity ids."""
    if not isinstance(payload, dict) or payload.get("kind") != "semantic":
        return []
    links = []
    subject = payload.get("subject")
    if isinstance(subject, str) and looks_like_entity_id(subject):
        links.append((subject, "subject_entity", "fact_subject_of"))
    obj = payload.get("object")
    if isinstance(obj, str) and looks_like_entity_id(obj):
        links.append((obj, "object_entity", "fact_object_of"))
    return links


def semantic_entity_ids(payload: dict[str, Any] | None) -> list[str]:
    return unique_strings(link[0] for link in semantic_entity_links(payload))


def derive_semantic_interpretation(source: Interpretation | None, payload: dict[str, Any] | None
                                   ) -> Interpretation | None:
    """A derived fact's own interpretation: resolved, its entities as mentions; None when it
    would say nothing."""
    if payload is None:
        return None
    derived = Interpretation(status=RESOLVED, proposed_type=MemoryType.SEMANTIC.value,
                             extraction_confidence=interpretation_confidence(source, SEMANTIC_CONFIDENCE))
    if source is not None:
        derived.summary = source.summary
        derived.topical_labels = list(source.topical_labels)
    derived.mentions = [Mention(surface=eid, canonical_entity_id=eid, confidence=derived.extraction_confidence)
                        for eid in semantic_entity_ids(payload)]
    if not derived.mentions and not derived.summary and not derived.topical_labels:
        return None
    return derived


# ----------------------------------------------------------------------------- candidate records (stored JSON)


def normalize_match(value: str) -> str:
    return value.strip().lower()


def _contains_token(haystack: str, needle: str) -> bool:
    return needle in haystack.split()


def contains_normalized(candidate: str, needle: str) -> bool:
    value = normalize_match(candidate)
    return bool(value) and (value == needle or needle in value or _contains_token(needle, value))


def _alias_values(aliases: Any) -> list[str]:
    out = []
    for item in aliases or []:
        value = item.get("value") if isinstance(item, dict) else item
        if isinstance(value, str):
            out.append(value)
    return out


def _texts(values: Any) -> list[str]:
    return [v for v in values or [] if isinstance(v, str)]


def record_search_terms(doc: dict[str, Any]) -> list[str]:
    """What a candidate record is searched by: id, scope, tags, its interpretation and the
    names of its payload (Membrane's recordSearchTerms)."""
    terms = [str(doc.get("id") or ""), str(doc.get("scope") or ""), *_texts(doc.get("tags"))]
    interpretation = doc.get("interpretation")
    if isinstance(interpretation, dict):
        if isinstance(interpretation.get("summary"), str):
            terms.append(interpretation["summary"])
        terms += _texts(interpretation.get("topical_labels"))
        for mention in interpretation.get("mentions") or []:
            if isinstance(mention, dict):
                terms += _texts([mention.get("surface")]) + _texts(mention.get("aliases"))
    payload = doc.get("payload")
    if isinstance(payload, dict):
        kind = payload.get("kind")
        if kind == "entity":
            terms += _texts([payload.get("canonical_name"), payload.get("primary_type")])
            terms += _texts(payload.get("types")) + _alias_values(payload.get("aliases"))
            terms += _texts([payload.get("summary")])
        elif kind == "semantic":
            terms += _texts([payload.get("subject"), payload.get("predicate")]) + [go_text(payload.get("object"))]
        elif kind == "episodic":
            for item in payload.get("timeline") or []:
                if isinstance(item, dict):
                    terms += _texts([item.get("ref"), item.get("event_kind"), item.get("summary")])
        elif kind == "working":
            terms += _texts([payload.get("thread_id"), payload.get("context_summary")])
            terms += _texts(payload.get("next_actions")) + _texts(payload.get("open_questions"))
        elif kind == "competence":
            terms += _texts([payload.get("skill_name")]) + _texts(payload.get("required_tools"))
        elif kind == "plan_graph":
            terms += _texts([payload.get("plan_id"), payload.get("intent")])
    return unique_strings(terms)


def record_matches_term(doc: dict[str, Any] | None, term: str) -> bool:
    needle = normalize_match(term)
    if not needle or doc is None:
        return False
    return any(contains_normalized(candidate, needle) for candidate in record_search_terms(doc))


def _matches(values: list[str], needle: str) -> bool:
    """``record_matches_term`` over a record's search terms already normalised."""
    words = needle.split()
    return any(v and (v == needle or needle in v or v in words) for v in values)


def record_contains_reference(doc: dict[str, Any] | None, ref: str) -> bool:
    """An episodic record whose timeline has an event with this ref (case and spaces aside)."""
    ref = normalize_match(ref)
    if not ref or doc is None:
        return False
    payload = doc.get("payload")
    if not isinstance(payload, dict) or payload.get("kind") != "episodic":
        return False
    return any(isinstance(item, dict) and normalize_match(str(item.get("ref") or "")) == ref
               for item in payload.get("timeline") or [])


def candidate_terms(req: CaptureMemoryRequest, interpretation: Interpretation | None) -> list[str]:
    terms = [*req.tags, *string_list(as_object(req.context).get("active_entities")),
             string_value(as_object(req.content), "subject", "project", "tool_name", "file")]
    if interpretation is not None:
        terms += interpretation.topical_labels
        for mention in interpretation.mentions:
            terms += [mention.surface, *mention.aliases]
        terms += [ref.ref for ref in interpretation.reference_candidates]
    return unique_strings(terms)


def _created_epoch(doc: dict[str, Any]) -> float | None:
    value = doc.get("created_at")
    if isinstance(value, datetime):
        return to_epoch(value)
    if isinstance(value, str) and value:
        try:
            when = parse_time(value)
        except ValueError:
            return None
        return None if when.year <= 1 else to_epoch(when)
    return None


def candidate_score(doc: dict[str, Any], req: CaptureMemoryRequest, interpretation: Interpretation | None,
                    now: float, terms: Sequence[str] | None = None, created: float | None | bool = False) -> float:
    """Membrane's captureCandidateScore: the capture's scope (100), an entity (15), the proposed
    type (10), each shared tag (8), each query term it matches (25), and recency (up to 1)."""
    score = 0.0
    if req.scope and doc.get("scope", "") == req.scope:
        score += 100
    if doc.get("type") == "entity":
        score += 15
    if interpretation is not None and interpretation.proposed_type and doc.get("type") == interpretation.proposed_type:
        score += 10
    tags = [t.casefold() for t in _texts(doc.get("tags"))]
    score += 8 * sum(1 for tag in req.tags if tag.casefold() in tags)
    values = [normalize_match(v) for v in record_search_terms(doc)]  # once, not once per term
    for term in candidate_terms(req, interpretation) if terms is None else terms:
        needle = normalize_match(term)
        if needle and _matches(values, needle):
            score += 25
    if created is False:
        created = _created_epoch(doc)
    if created is not None:
        hours = max(0.0, (now - created) / 3600.0)
        score += 1.0 / (1.0 + hours / 24.0)
    return score


def rank_candidates(docs: Iterable[dict[str, Any]], req: CaptureMemoryRequest, interpretation: Interpretation | None,
                    now: float, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` best-scoring documents, each once, newest first among equals."""
    seen: set[str] = set()
    terms = candidate_terms(req, interpretation)
    scored = []
    for doc in docs:
        if doc is None or doc.get("id") in seen:
            continue
        seen.add(doc.get("id"))
        created = _created_epoch(doc)
        scored.append((candidate_score(doc, req, interpretation, now, terms, created),
                       -math.inf if created is None else created, doc))
    scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [doc for _, _, doc in scored[:limit]]


def entity_names(doc: dict[str, Any]) -> list[str]:
    """An entity document's canonical name and aliases."""
    payload = doc.get("payload")
    if not isinstance(payload, dict) or payload.get("kind") != "entity":
        return []
    return _texts([payload.get("canonical_name")]) + _alias_values(payload.get("aliases"))


def find_matching_entity(mention: Mention, candidates: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The first entity among ``candidates`` one of whose names is the mention's surface or
    one of its aliases. **(deviation)** Names are compared normalised (case, and runs of
    spaces, SPEC 12), where Membrane compares them ignoring case only."""
    wanted = {normalize_term(t) for t in unique_strings([mention.surface, *mention.aliases])}
    wanted.discard("")
    if not wanted:
        return None
    for doc in candidates:
        if any(normalize_term(name) in wanted for name in entity_names(doc)):
            return doc
    return None


__all__ = ["ENTITY_TYPES", "INVERSE", "candidate_score", "canonical_object", "canonical_side", "clamp01",
           "constraint_list", "derive_semantic_interpretation", "entity_type", "extract_fact", "fallback_interpretation",
           "final_status", "find_matching_entity", "first_non_empty", "go_json", "go_text", "infer_entity_kind",
           "infer_mentions", "infer_proposed_type", "infer_reference_candidates", "inverse_predicate",
           "looks_like_entity_id", "merge_interpretations", "rank_candidates", "record_contains_reference",
           "record_matches_term", "record_search_terms", "semantic_entity_ids", "semantic_entity_links",
           "string_list", "string_value", "summarize_content", "unique_mentions", "unique_strings"]
