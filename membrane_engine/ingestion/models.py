"""Capture's request and response (SPEC 12), and Membrane's ingest-side interpretation as it is
stored on a captured record (``record.interpretation``, Membrane's ``schema.Interpretation``)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from membrane_engine.model.records import (
    MAX_ACTOR_LENGTH,
    MAX_RECORD_BYTES,
    MAX_SCOPE_LENGTH,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    MembraneModel,
    MemoryRecord,
    MemoryType,
    Sensitivity,
    UTCDateTime,
    refused,
    text_problems,
)
from membrane_engine.retrieval.graph import GraphEdge

MAX_SOURCE_KIND_LENGTH = 64

TENTATIVE = "tentative"
RESOLVED = "resolved"


# ----------------------------------------------------------------------------- interpretation


class Mention(MembraneModel):
    """A surface form found in the capture, and the entity it resolved to."""

    surface: str = ""
    entity_kind: str = ""
    canonical_entity_id: str = ""
    confidence: float = 0.0
    aliases: list[str] = Field(default_factory=list)

    omitempty = ("entity_kind", "canonical_entity_id", "confidence", "aliases")


class RelationCandidate(MembraneModel):
    predicate: str = ""
    target_record_id: str = ""
    target_entity_id: str = ""
    confidence: float = 0.0
    resolved: bool = False

    omitempty = ("target_record_id", "target_entity_id", "confidence", "resolved")


class ReferenceCandidate(MembraneModel):
    ref: str = ""
    target_record_id: str = ""
    target_entity_id: str = ""
    confidence: float = 0.0
    resolved: bool = False

    omitempty = ("target_record_id", "target_entity_id", "confidence", "resolved")


class Interpretation(MembraneModel):
    status: str = ""
    summary: str = ""
    proposed_type: str = ""
    topical_labels: list[str] = Field(default_factory=list)
    mentions: list[Mention] = Field(default_factory=list)
    relation_candidates: list[RelationCandidate] = Field(default_factory=list)
    reference_candidates: list[ReferenceCandidate] = Field(default_factory=list)
    extraction_confidence: float = 0.0

    omitempty = ("status", "summary", "proposed_type", "topical_labels", "mentions", "relation_candidates",
                 "reference_candidates", "extraction_confidence")


# ----------------------------------------------------------------------------- the request


def _strict_json(value: Any, name: str) -> Any:
    """``value`` as JSON would carry it: no NaN or infinity, no object JSON cannot write, and no
    more than a record may hold."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"must be a JSON value ({exc})") from None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_RECORD_BYTES:
        raise ValueError(f"is more than {MAX_RECORD_BYTES} bytes of JSON")
    return value


def _column_text(value: str, name: str, limit: int | None) -> str:
    problems = text_problems(value, limit)
    if problems:  # pydantic's refusal shows the value itself
        raise ValueError(f"{name} {problems[0].rsplit(' (got ', 1)[0]}")
    return value


def _one_of(value: Any, name: str, enum: Any) -> Any:
    """"" or a value of ``enum`` (a member or its string), refused in one sentence that lists them."""
    if value == "" or isinstance(value, enum):
        return value
    if isinstance(value, str) and value in enum._value2member_map_:
        return enum(value)
    names = ", ".join(m.value for m in enum)
    raise ValueError(f"must be one of {names} or \"\"")


class CaptureMemoryRequest(BaseModel):
    """What an agent writes (Membrane's CaptureMemoryRequest). ``source_kind`` is ``event``,
    ``tool_output``, ``observation``, ``working_state`` or any other event kind (then an
    event of that kind, as Membrane); ``sensitivity`` "" means low and ``timestamp`` None the
    write time, as in Membrane. Constructing one refuses a bad field with a ValidationError
    naming it and its value; unknown fields are refused (a misspelt field would otherwise be
    lost silently)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    source_kind: str = ""
    content: Any = None
    context: Any = None
    reason_to_remember: str = ""
    proposed_type: MemoryType | Literal[""] = ""
    summary: str = ""
    tags: list[str] = Field(default_factory=list)
    scope: str = ""
    sensitivity: Sensitivity | Literal[""] = ""
    timestamp: UTCDateTime | None = None

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except PydanticValidationError as exc:
            raise refused("CaptureMemoryRequest", exc) from None

    @field_validator("sensitivity", mode="before")
    @classmethod
    def _sensitivity(cls, value: Any) -> Any:
        return _one_of(value, "sensitivity", Sensitivity)

    @field_validator("proposed_type", mode="before")
    @classmethod
    def _proposed_type(cls, value: Any) -> Any:
        return _one_of(value, "proposed_type", MemoryType)

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name who captured it")
        return _column_text(value, "source", MAX_ACTOR_LENGTH)

    @field_validator("source_kind")
    @classmethod
    def _source_kind(cls, value: str) -> str:
        return _column_text(value, "source_kind", MAX_SOURCE_KIND_LENGTH)

    @field_validator("scope")
    @classmethod
    def _scope(cls, value: str) -> str:
        return _column_text(value, "scope", MAX_SCOPE_LENGTH)

    @field_validator("tags", mode="before")
    @classmethod
    def _tag_list(cls, value: Any) -> Any:
        # One refusal naming ``tags`` (pydantic's would name "tags.0").
        if not isinstance(value, (list, tuple)):
            raise ValueError("must be a list of strings")
        for k, tag in enumerate(value):
            if not isinstance(tag, str):
                raise ValueError(f"tag {k} is not a string")
        return list(value)

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        if len(value) > MAX_TAGS:
            raise ValueError(f"{len(value)} tags; the limit is {MAX_TAGS}")
        for tag in value:
            _column_text(tag, "tag", MAX_TAG_LENGTH)
        return value

    @field_validator("content", "context")
    @classmethod
    def _json(cls, value: Any, info: Any) -> Any:
        return _strict_json(value, info.field_name)

    @field_validator("timestamp")
    @classmethod
    def _timestamp(cls, value: datetime | None) -> datetime | None:
        # Go's zero time.Time (what an unset timestamp is in Membrane's JSON) means "now".
        return None if value is not None and value.year <= 1 else value

    @property
    def level(self) -> Sensitivity:
        """The capture's sensitivity: ``low`` when none was given (Membrane's default)."""
        return self.sensitivity if isinstance(self.sensitivity, Sensitivity) else Sensitivity.LOW


# ----------------------------------------------------------------------------- the response


class MentionResolution(BaseModel):
    """One mention of the capture and the entity it was resolved to: an existing one, or one
    this capture creates."""

    surface: str
    entity_id: str
    canonical_name: str
    created: bool


class CaptureMemoryResponse(BaseModel):
    """What a capture wrote (or, from a preview, would write): the primary record, the records
    it created (entities, then the derived fact), the edges (both directions). **(deviation)**
    Beyond Membrane's response: the existing records it linked to and how each mention
    resolved; the edges carry no ``created_at`` (the stored relations do)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    primary_record: MemoryRecord
    created_records: list[MemoryRecord] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list)
    updated_records: list[MemoryRecord] = Field(default_factory=list)
    mentions: list[MentionResolution] = Field(default_factory=list)
    dry_run: bool = False

    @property
    def derived_record(self) -> MemoryRecord | None:
        """The semantic record derived from an explicit fact, if the capture made one."""
        return next((r for r in self.created_records if r.type == MemoryType.SEMANTIC), None)

    @property
    def interpretation_status(self) -> str:
        interpretation = self.primary_record.interpretation
        return str(interpretation.get("status", "")) if isinstance(interpretation, dict) else ""


__all__ = ["CaptureMemoryRequest", "CaptureMemoryResponse", "Interpretation", "Mention", "MentionResolution",
           "ReferenceCandidate", "RelationCandidate", "RESOLVED", "TENTATIVE"]
