"""Membrane's record model (SPEC 1) as pydantic v2 models, read and written in Membrane's JSON shape.

Every model keeps unknown JSON fields (``extra="allow"``) so a record exported from a Membrane
deployment comes back out byte-for-byte in meaning. Timestamps are aware UTC datetimes and are
written as RFC 3339 with a trailing ``Z``.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import sys
from datetime import datetime, timezone
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal, Union

import orjson
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WrapValidator,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError

from membrane_engine.errors import ValidationError

UTC = timezone.utc
# Bounds the storage columns impose (PostgreSQL enforces them; SQLite would not), checked here
# so both databases refuse the same records with an error naming the field.
MAX_ID_LENGTH = 128
MAX_SCOPE_LENGTH = 256
MAX_ACTOR_LENGTH = 256
MAX_RECORD_BYTES = 8 * 1024 * 1024  # one record's JSON (UTF-8); larger ones are refused, not stored
# Bounds of free text passed to public calls (the one place they are written down). They bound
# what one call can push into the audit log, a URL or a LIKE scan; records imported in
# Membrane's JSON are not held to them (their audit logs are history written elsewhere, bounded
# by MAX_RECORD_BYTES), so any Membrane export still imports.
MAX_RATIONALE_LENGTH = 4000  # a curation rationale
MAX_TASK_LENGTH = 2000  # a retrieval's task descriptor
MAX_SEARCH_TEXT_LENGTH = 1000  # a search's free text
MAX_TAG_LENGTH = 256  # one tag set by reclassify
MAX_TAGS = 256  # tags set by one reclassify
MAX_REF_LENGTH = 1024  # a contest's reference (a record id or an outside reference)
MAX_OFFSET = 2 ** 63 - 1  # a page offset: a database integer
INT64_MAX = 2 ** 63 - 1  # Membrane's (Go) integer fields are int64
ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)  # Go's zero time.Time, used by the redacted view


# --------------------------------------------------------------------------- time


def as_utc(value: datetime) -> datetime:
    """Aware UTC datetime; naive values are taken as UTC (SPEC 8)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def format_time(value: datetime) -> str:
    if value.tzinfo is UTC and type(value) is datetime:  # the common case, same text: "...+00:00" -> "...Z"
        return value.isoformat()[:-6] + "Z"
    return as_utc(value).replace(tzinfo=None).isoformat() + "Z"


def parse_time(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        return as_utc(value)
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return as_utc(datetime.fromisoformat(text))


def to_epoch(value: datetime | None) -> float:
    """Seconds since 1970 as a float; NaN for "unset" so numpy code can test it."""
    if value is None:
        return math.nan
    if value.tzinfo is UTC:  # as_utc would return it unchanged
        return value.timestamp()
    return as_utc(value).timestamp()


# The common shape of a timestamp in Membrane JSON: second precision, UTC ("Z"), an hour below
# 24 (Python 3.12 reads "T24:00:00" as the next midnight; pydantic may not).
_PLAIN_UTC_STAMP = re.compile(r"\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\dZ", re.ASCII)
_from_iso = datetime.fromisoformat


def _utc_datetime(value: Any, handler: Any) -> datetime:
    """A timestamp field: pydantic's datetime validation, then ``as_utc``. A string of the plain
    shape above is read by ``datetime.fromisoformat``, which gives the same aware UTC datetime
    without the two conversions (it refuses what pydantic would too, e.g. a 30th of February:
    those go the general way and get pydantic's error)."""
    if type(value) is str and len(value) == 20 and _PLAIN_UTC_STAMP.fullmatch(value) is not None:
        try:
            return _from_iso(value)
        except ValueError:
            pass
    return as_utc(handler(value))


UTCDateTime = Annotated[
    datetime,
    WrapValidator(_utc_datetime),
    PlainSerializer(format_time, return_type=str, when_used="json"),
]


# --------------------------------------------------------------------------- enums


class MemoryType(str, Enum):
    EPISODIC = "episodic"
    WORKING = "working"
    SEMANTIC = "semantic"
    COMPETENCE = "competence"
    PLAN_GRAPH = "plan_graph"
    ENTITY = "entity"

    def __str__(self) -> str:
        return self.value


# Layer order of SPEC 4 (entity right after working).
CANONICAL_LAYER_ORDER: tuple[MemoryType, ...] = (
    MemoryType.WORKING,
    MemoryType.ENTITY,
    MemoryType.SEMANTIC,
    MemoryType.COMPETENCE,
    MemoryType.PLAN_GRAPH,
    MemoryType.EPISODIC,
)
LAYER_RANK: dict[str, int] = {t.value: i for i, t in enumerate(CANONICAL_LAYER_ORDER)}
SELECTOR_TYPES = frozenset({MemoryType.COMPETENCE.value, MemoryType.PLAN_GRAPH.value})


class Sensitivity(str, Enum):
    PUBLIC = "public"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    HYPER = "hyper"

    @property
    def level(self) -> int:
        return SENSITIVITY_LEVELS[self.value]

    def __str__(self) -> str:
        return self.value


SENSITIVITY_LEVELS: dict[str, int] = {s.value: i for i, s in enumerate(Sensitivity)}


def sensitivity_level(value: Any) -> int:
    """Level 0..4 of a sensitivity, or -1 for a value that is not one (always hidden)."""
    key = value.value if isinstance(value, Enum) else value
    return SENSITIVITY_LEVELS.get(key, -1) if isinstance(key, str) else -1


class DecayCurve(str, Enum):
    EXPONENTIAL = "exponential"
    LINEAR = "linear"
    CUSTOM = "custom"


class DeletionPolicy(str, Enum):
    AUTO_PRUNE = "auto_prune"
    MANUAL_ONLY = "manual_only"
    NEVER = "never"


class RevisionStatus(str, Enum):
    ACTIVE = "active"
    CONTESTED = "contested"
    RETRACTED = "retracted"


class ValidityMode(str, Enum):
    GLOBAL = "global"
    CONDITIONAL = "conditional"
    TIMEBOXED = "timeboxed"


class TaskState(str, Enum):
    PLANNING = "planning"
    EXECUTING = "executing"
    BLOCKED = "blocked"
    WAITING = "waiting"
    DONE = "done"


class OutcomeStatus(str, Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    PARTIAL = "partial"


class AuditAction(str, Enum):
    CREATE = "create"
    REVISE = "revise"
    FORK = "fork"
    MERGE = "merge"
    DELETE = "delete"
    REINFORCE = "reinforce"
    DECAY = "decay"


class ProvenanceKind(str, Enum):
    EVENT = "event"
    ARTIFACT = "artifact"
    TOOL_CALL = "tool_call"
    OBSERVATION = "observation"
    OUTCOME = "outcome"


class EdgeKind(str, Enum):
    DATA = "data"
    CONTROL = "control"


# --------------------------------------------------------------------------- base


def go_empty(value: Any) -> bool:
    """Go's encoding/json "empty value" (what ``omitempty`` leaves out): false, 0, "", a nil
    pointer or interface (None), an empty list or map."""
    if value is None or value is False:
        return True
    if isinstance(value, (int, float)):
        return value == 0
    if isinstance(value, (str, list, dict, tuple)):
        return len(value) == 0
    return False


class NullList(list):
    """An empty list that was ``null`` in the JSON read: Go's nil slice. It reads as an empty
    list, and a field Membrane always writes is written back as ``null`` while it stays empty
    (so a record Membrane wrote comes back out with the same bytes)."""

    __slots__ = ()


def _list_or_null(value: Any, handler: Any) -> list:
    return NullList() if value is None else handler(value)


def _dict_or_null(value: Any, handler: Any) -> dict:
    # Every map of Membrane's schema is omitempty, so a nil map is simply left out again.
    return {} if value is None else handler(value)


OrNull = WrapValidator(_list_or_null)  # a list field that reads ``null`` as empty (SPEC 1)
MapOrNull = WrapValidator(_dict_or_null)


class MembraneModel(BaseModel):
    """Base of the record's models. Each class names, in Membrane's struct tags' terms, the
    fields written only when not empty (``omitempty``), the pointer fields written only when
    set (``omitnil``), and the list fields written as ``null`` when unset (``null_lists``)."""

    model_config = ConfigDict(extra="allow", use_enum_values=False, validate_assignment=False)
    omitempty: ClassVar[tuple[str, ...]] = ()
    omitnil: ClassVar[tuple[str, ...]] = ()
    null_lists: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _membrane_shape(self, handler):
        return membrane_shape(self, handler(self))


def membrane_shape(obj: MembraneModel, data: dict[str, Any]) -> Any:
    """``data`` (the fields of ``obj``, dumped or raw, keyed by their JSON names) shaped as Go's
    encoding/json writes Membrane's struct: empty omitempty fields and unset pointers left
    out, nil lists written as null. The one rule for pydantic's dump and the store's fast
    path (store._plain_dump). Changes ``data`` in place; callers pass a copy."""
    cls = type(obj)
    for name in cls.omitempty:
        if go_empty(data.get(name, 1)):
            del data[name]
    for name in cls.omitnil:
        if name in data and data[name] is None:
            del data[name]
    for name in cls.null_lists:
        if type(obj.__dict__.get(name)) is NullList and not data.get(name):
            data[name] = None
    if cls is EntityAlias and len(data) == 1 and "value" in data:
        return data["value"]  # Membrane's EntityAlias.MarshalJSON: a plain alias is a string
    return data


FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


# --------------------------------------------------------------------------- lifecycle


class DecayProfile(MembraneModel):
    curve: DecayCurve = DecayCurve.EXPONENTIAL
    half_life_seconds: int = Field(default=86400, ge=0, le=INT64_MAX)
    min_salience: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    max_age_seconds: int = Field(default=0, ge=0, le=INT64_MAX)
    # Absent in Membrane JSON means Go's zero value (SPEC 1): no gain, not a default one.
    reinforcement_gain: float = Field(default=0.0, allow_inf_nan=False)
    # Extension (SPEC 2): piecewise-linear factor curve of a custom profile.
    points: list[tuple[float, float]] | None = None

    omitempty = ("min_salience", "max_age_seconds", "reinforcement_gain")
    omitnil = ("points",)

    @field_validator("points")
    @classmethod
    def _check_points(cls, points: list[tuple[float, float]] | None):
        if points is None:
            return None
        if not points or list(points[0]) != [0, 1]:
            raise ValueError("custom decay points must start at [0, 1]")
        for (t0, f0), (t1, f1) in zip(points, points[1:]):
            if not t1 > t0:
                raise ValueError(f"custom decay point times must increase ({t0} then {t1})")
            if f1 > f0:
                raise ValueError(f"custom decay factors must not increase ({f0} then {f1})")
        for t, f in points:
            if not (math.isfinite(t) and math.isfinite(f) and 0 <= f <= 1):
                raise ValueError(f"custom decay point [{t}, {f}] is out of range")
        return points


class Lifecycle(MembraneModel):
    decay: DecayProfile = Field(default_factory=DecayProfile)
    last_reinforced_at: UTCDateTime | None = None
    pinned: bool = False
    # None is Membrane's empty policy (the field left out): never auto-pruned, deletable by hand.
    deletion_policy: DeletionPolicy | None = None
    # Extension fields (SPEC 2): the salience anchor, kept exactly through export/import.
    anchor_salience: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    anchor_at: UTCDateTime | None = None

    omitempty = ("pinned", "deletion_policy")
    omitnil = ("anchor_salience", "anchor_at")


# --------------------------------------------------------------------------- provenance, relations, audit


class ProvenanceSource(MembraneModel):
    kind: ProvenanceKind
    ref: str
    hash: str | None = None
    created_by: str | None = None
    timestamp: UTCDateTime | None = None

    omitempty = ("hash", "created_by")
    omitnil = ("timestamp",)


class Provenance(MembraneModel):
    sources: Annotated[list[ProvenanceSource], OrNull] = Field(default_factory=list)
    created_by: str | None = None

    omitempty = ("created_by",)
    null_lists = ("sources",)


class Relation(MembraneModel):
    predicate: str
    target_id: str
    weight: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)  # absent: Go's zero
    created_at: UTCDateTime | None = None

    omitempty = ("weight",)


class AuditEntry(MembraneModel):
    action: AuditAction
    actor: str
    timestamp: UTCDateTime
    rationale: str


# --------------------------------------------------------------------------- payloads


class TimelineEvent(MembraneModel):
    t: UTCDateTime | None = None
    event_kind: str = ""
    ref: str = ""
    summary: str = ""

    omitempty = ("summary",)


class ToolNode(MembraneModel):
    id: str
    tool: str = ""
    args: Annotated[dict[str, Any], MapOrNull] = Field(default_factory=dict)
    result: Any = None
    timestamp: UTCDateTime | None = None
    depends_on: Annotated[list[str], OrNull] = Field(default_factory=list)

    omitempty = ("args", "depends_on")
    omitnil = ("result",)


class EnvironmentSnapshot(MembraneModel):
    os: str = ""
    os_version: str = ""
    tool_versions: Annotated[dict[str, str], MapOrNull] = Field(default_factory=dict)
    working_directory: str = ""
    context: Annotated[dict[str, Any], MapOrNull] = Field(default_factory=dict)

    omitempty = ("os", "os_version", "tool_versions", "working_directory", "context")


class EpisodicPayload(MembraneModel):
    kind: Literal["episodic"]
    timeline: Annotated[list[TimelineEvent], OrNull] = Field(default_factory=list)
    tool_graph: Annotated[list[ToolNode], OrNull] = Field(default_factory=list)
    environment: EnvironmentSnapshot | None = None
    outcome: OutcomeStatus | None = None
    artifacts: Annotated[list[str], OrNull] = Field(default_factory=list)
    tool_graph_ref: str = ""

    omitempty = ("tool_graph", "outcome", "artifacts", "tool_graph_ref")
    omitnil = ("environment",)
    null_lists = ("timeline",)


class Constraint(MembraneModel):
    type: str = ""
    key: str = ""
    value: Any = None
    required: bool = False

    omitempty = ("required",)


class WorkingPayload(MembraneModel):
    kind: Literal["working"]
    thread_id: str = ""
    state: TaskState = TaskState.PLANNING
    active_constraints: Annotated[list[Constraint], OrNull] = Field(default_factory=list)
    next_actions: Annotated[list[str], OrNull] = Field(default_factory=list)
    open_questions: Annotated[list[str], OrNull] = Field(default_factory=list)
    context_summary: str = ""

    omitempty = ("active_constraints", "next_actions", "open_questions", "context_summary")


class Validity(MembraneModel):
    mode: ValidityMode = ValidityMode.GLOBAL
    conditions: Any = None
    start: UTCDateTime | None = None
    end: UTCDateTime | None = None

    omitempty = ("conditions",)
    omitnil = ("start", "end")


class EvidenceRef(MembraneModel):
    source_type: str
    source_id: str
    timestamp: UTCDateTime | None = None


class RevisionState(MembraneModel):
    supersedes: str | None = None
    superseded_by: str | None = None
    # None is Membrane's empty status (left out): neither contested nor retracted, so active.
    status: RevisionStatus | None = None

    omitempty = ("supersedes", "superseded_by", "status")


class SemanticPayload(MembraneModel):
    kind: Literal["semantic"]
    subject: str = ""
    predicate: str = ""
    object: Any = None
    validity: Validity = Field(default_factory=Validity)
    evidence: Annotated[list[EvidenceRef], OrNull] = Field(default_factory=list)
    revision_policy: str = ""
    revision: RevisionState | None = None

    omitempty = ("evidence", "revision_policy")
    omitnil = ("revision",)


class Trigger(MembraneModel):
    signal: str = ""
    conditions: Any = None

    omitempty = ("conditions",)


class RecipeStep(MembraneModel):
    step: str = ""
    tool: str = ""
    args_schema: Any = None
    validation: Any = None

    omitempty = ("tool", "args_schema", "validation")


class PerformanceStats(MembraneModel):
    success_count: int = Field(default=0, ge=0, le=INT64_MAX)
    failure_count: int = Field(default=0, ge=0, le=INT64_MAX)
    success_rate: float = Field(default=0.0, allow_inf_nan=False)
    avg_latency_ms: float = Field(default=0.0, allow_inf_nan=False)
    last_used_at: UTCDateTime | None = None

    omitempty = ("success_count", "failure_count", "success_rate", "avg_latency_ms", "last_used_at")


class CompetencePayload(MembraneModel):
    kind: Literal["competence"]
    skill_name: str = ""
    triggers: Annotated[list[Trigger], OrNull] = Field(default_factory=list)
    recipe: Annotated[list[RecipeStep], OrNull] = Field(default_factory=list)
    required_tools: Annotated[list[str], OrNull] = Field(default_factory=list)
    failure_modes: Annotated[list[str], OrNull] = Field(default_factory=list)
    fallbacks: Annotated[list[str], OrNull] = Field(default_factory=list)
    performance: PerformanceStats | None = None
    version: str = ""

    omitempty = ("required_tools", "failure_modes", "fallbacks", "version")
    omitnil = ("performance",)
    null_lists = ("triggers", "recipe")


class PlanNode(MembraneModel):
    id: str
    op: str = ""
    params: Any = None
    guards: Any = None

    omitempty = ("params", "guards")


class PlanEdge(MembraneModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)

    from_: str = Field(alias="from")
    to: str
    kind: EdgeKind = EdgeKind.CONTROL


class PlanMetrics(MembraneModel):
    avg_latency_ms: float = Field(default=0.0, allow_inf_nan=False)
    failure_rate: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    execution_count: int = Field(default=0, ge=0, le=INT64_MAX)
    last_executed_at: UTCDateTime | None = None

    omitempty = ("avg_latency_ms", "failure_rate", "execution_count", "last_executed_at")


class PlanGraphPayload(MembraneModel):
    kind: Literal["plan_graph"]
    plan_id: str = ""
    version: str = ""
    intent: str = ""
    constraints: Annotated[dict[str, Any], MapOrNull] = Field(default_factory=dict)
    inputs_schema: Annotated[dict[str, Any], MapOrNull] = Field(default_factory=dict)
    outputs_schema: Annotated[dict[str, Any], MapOrNull] = Field(default_factory=dict)
    nodes: Annotated[list[PlanNode], OrNull] = Field(default_factory=list)
    edges: Annotated[list[PlanEdge], OrNull] = Field(default_factory=list)
    metrics: PlanMetrics | None = None

    omitempty = ("intent", "constraints", "inputs_schema", "outputs_schema")
    omitnil = ("metrics",)
    null_lists = ("nodes", "edges")


class EntityIdentifier(MembraneModel):
    namespace: str = ""
    value: str = ""


def _alias_from_string(value: Any) -> Any:
    # Membrane's EntityAlias.UnmarshalJSON: a string is a plain alias (its older form).
    return {"value": value} if isinstance(value, str) else value


class EntityAlias(MembraneModel):
    """An alternate name of an entity: a string, or ``{value, kind?, locale?}`` (SPEC 1).
    Written back as Membrane writes it: a string unless it has a kind or a locale."""

    value: str
    kind: str = ""
    locale: str = ""

    omitempty = ("kind", "locale")

    def __str__(self) -> str:
        return self.value


class EntityPayload(MembraneModel):
    kind: Literal["entity"]
    canonical_name: str = ""
    primary_type: str = ""
    types: Annotated[list[str], OrNull] = Field(default_factory=list)
    aliases: Annotated[list[Annotated[EntityAlias, BeforeValidator(_alias_from_string)]], OrNull] = Field(
        default_factory=list)
    identifiers: Annotated[list[EntityIdentifier], OrNull] = Field(default_factory=list)
    summary: str = ""

    omitempty = ("primary_type", "types", "aliases", "identifiers", "summary")

    @property
    def alias_values(self) -> list[str]:
        """The non-blank alias strings (Membrane's EntityAliasValues)."""
        return [a.value.strip() for a in self.aliases if a.value.strip()]


Payload = Annotated[
    Union[
        EpisodicPayload,
        WorkingPayload,
        SemanticPayload,
        CompetencePayload,
        PlanGraphPayload,
        EntityPayload,
    ],
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------------- the record


class MemoryRecord(MembraneModel):
    id: str = Field(min_length=1)
    type: MemoryType
    sensitivity: Sensitivity
    confidence: UnitFloat = 1.0
    salience: float = Field(default=1.0, ge=0.0, allow_inf_nan=False)
    scope: str = ""
    tags: Annotated[list[str], OrNull] = Field(default_factory=list)
    created_at: UTCDateTime = Field(default_factory=lambda: datetime.now(UTC))
    updated_at: UTCDateTime | None = None
    lifecycle: Lifecycle = Field(default_factory=Lifecycle)
    provenance: Provenance = Field(default_factory=Provenance)
    relations: Annotated[list[Relation], OrNull] = Field(default_factory=list)
    payload: Payload | None
    # Membrane's ingest-side interpretation (kept as it came, written back in Membrane's place).
    interpretation: Any = None
    audit_log: Annotated[list[AuditEntry], OrNull] = Field(default_factory=list)
    # Set only on the metadata-only view that trust gating returns (SPEC 3).
    redacted: bool = False

    omitempty = ("scope", "tags", "relations", "redacted")
    omitnil = ("interpretation",)
    null_lists = ("audit_log",)

    @model_validator(mode="after")
    def _check_record(self) -> "MemoryRecord":
        if self.updated_at is None:
            self.updated_at = self.created_at
        if self.redacted:
            return self
        if self.payload is None:
            raise ValueError("payload is required")
        if self.payload.kind != self.type.value:
            raise ValueError(
                f"payload.kind {self.payload.kind!r} differs from type {self.type.value!r}"
            )
        if self.lifecycle.decay.half_life_seconds < 1:
            raise ValueError(
                "lifecycle.decay.half_life_seconds must be >= 1 "
                f"(got {self.lifecycle.decay.half_life_seconds})"
            )
        return self

    # Membrane JSON in and out -------------------------------------------------

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    @property
    def revision_status(self) -> str | None:
        if isinstance(self.payload, SemanticPayload) and self.payload.revision is not None:
            status = self.payload.revision.status
            return RevisionStatus.ACTIVE.value if status is None else status.value
        return None


# --------------------------------------------------------------------------- validation at the boundary


def _describe(error: dict[str, Any]) -> tuple[str, str]:
    loc = ".".join(str(p) for p in error.get("loc", ()) if not str(p).endswith("Payload"))
    # The discriminated union puts the payload kind in the location; drop it for readability.
    loc = loc.replace("payload.episodic", "payload").replace("payload.working", "payload")
    for kind in ("semantic", "competence", "plan_graph", "entity"):
        loc = loc.replace(f"payload.{kind}", "payload")
    message = error.get("msg", "invalid")
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if not loc:
        # A record-level rule (payload, payload.kind, half-life): its message starts with the
        # field it is about. Name that field, and never echo the whole record back.
        head = message.split(" ", 1)[0]
        if re.fullmatch(r"[a-z_]+(\.[a-z_]+)*", head):
            loc = head
        return loc or "record", message
    if "input" in error and error.get("type") not in ("missing",):
        shown = repr(error["input"])
        if len(shown) > 80:
            shown = shown[:77] + "..."
        message = f"{message} (got {shown})"
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    return loc or "record", message


def problems_of(exc: PydanticValidationError) -> list[tuple[str, str]]:
    return [_describe(e) for e in exc.errors(include_url=False)]


def refused(what: str, exc: PydanticValidationError) -> ValidationError:
    """Our ValidationError (naming each field and value) for a pydantic refusal of ``what``."""
    problems = problems_of(exc)
    return ValidationError(f"{what}: " + "; ".join(f"{loc}: {msg}" for loc, msg in problems), problems)


# --------------------------------------------------------------------------- arguments of public calls


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def text_problems(value: str, limit: int | None = None) -> list[str]:
    """What keeps a string out of a column of its own (the one rule for every such string:
    record fields at import, curation arguments): PostgreSQL refuses the NUL character and
    values over the column width, which SQLite would store. Each problem names the value
    (shortened)."""
    shown = repr(value if len(value) <= 60 else value[:57] + "...")
    problems = []
    if "\x00" in value:
        problems.append(f"must not contain the NUL character U+0000 (got {shown})")
    if limit is not None and len(value) > limit:
        problems.append(f"is {len(value)} characters; the limit is {limit} (got {shown})")
    return problems


def check_text(value: str, name: str, limit: int | None = None) -> str:
    """A string argument the store keeps in a column (or looks up by): refused, naming the
    field and the value, when ``text_problems`` finds anything."""
    problems = text_problems(value, limit)
    if problems:
        raise ValidationError(f"{name} " + "; ".join(problems), [(name, p) for p in problems])
    return value


def check_id(value: Any, name: str = "record_id") -> str:
    """A record id argument: a string without NUL, not empty or only whitespace (no record can
    have such an id)."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string (got {_shown(value)})", [(name, "not a string")])
    if not value.strip():
        raise ValidationError(f"{name} must not be empty or only whitespace (got {_shown(value)})", [(name, "blank")])
    return check_text(value, name)


def check_ids(values: Any, name: str = "ids") -> list[str]:
    """A list of record ids (any iterable but a string)."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise ValidationError(f"{name} must be a list of record ids (got {_shown(values)})", [(name, "not a list")])
    return [check_id(v, name) for v in values]


def check_instant(value: Any, name: str = "as_of") -> datetime:
    """An instant argument: a datetime (naive ones are UTC), returned as aware UTC."""
    if not isinstance(value, datetime):
        raise ValidationError(f"{name} must be a datetime (got {_shown(value)})", [(name, "not a datetime")])
    return as_utc(value)


def check_floor(value: Any, name: str = "min_salience") -> float:
    """A salience threshold argument: a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy numbers are Real too
        raise ValidationError(f"{name} must be a number (got {_shown(value)})", [(name, "not a number")])
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValidationError(f"{name} must be non-negative and finite (got {_shown(value)})", [(name, "out of range")])
    return number


def check_whole(value: Any, name: str, low: int, high: int | None = None) -> int:
    """A whole-number argument (a count, a limit, a page size) in ``low``..``high``; booleans
    and floats are refused rather than read as numbers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValidationError(f"{name} must be a whole number (got {_shown(value)})", [(name, "not a whole number")])
    number = int(value)
    if number < low or (high is not None and number > high):
        bounds = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValidationError(f"{name} must be {bounds} (got {_shown(value)})", [(name, "out of range")])
    return number


def check_string(value: Any, name: str, limit: int | None = None, optional: bool = False) -> str | None:
    """A string argument (None too when ``optional``): refused, naming the field and the value,
    when it is another type, holds NUL or is longer than ``limit`` characters."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string (got {_shown(value)})", [(name, "not a string")])
    return check_text(value, name, limit)


def check_strings(values: Any, name: str, limit: int | None = None) -> list[str]:
    """A list of strings (any iterable but a string, bytes or a mapping), each as check_string."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise ValidationError(f"{name} must be a list of strings (got {_shown(values)})", [(name, "not a list")])
    return [check_string(v, name, limit) for v in values]


def check_flag(value: Any, name: str) -> bool:
    """A yes/no argument: a real bool (``"no"`` is a non-empty string, so it would read as true)."""
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be True or False (got {_shown(value)})", [(name, "not a bool")])
    return bool(value)


def _path(parts: list[Any]) -> str:
    return ".".join(str(p) for p in parts) or "record"


def _find(value: Any, bad: Any, parts: list[Any]) -> tuple[str, Any] | None:
    """The first (path, value) under ``value`` where ``bad(x)`` holds, keys included."""
    stack = [(value, parts)]
    while stack:
        node, at = stack.pop()
        if bad(node):
            return _path(at), node
        if isinstance(node, dict):
            for k, v in reversed(list(node.items())):
                if bad(k):
                    return _path(at + [repr(k)]), k
                stack.append((v, at + [k]))
        elif isinstance(node, (list, tuple)):
            stack.extend((v, at + [i]) for i, v in reversed(list(enumerate(node))))
    return None


def _has_surrogate(x: Any) -> bool:
    return isinstance(x, str) and any("\ud800" <= ch <= "\udfff" for ch in x)


def _not_finite(x: Any) -> bool:
    return isinstance(x, float) and not math.isfinite(x)


def _json_name(x: float) -> str:
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def storage_problems(record: MemoryRecord) -> list[tuple[str, str]]:
    """What a valid record may still not be, because the store keeps these strings in columns
    of their own: PostgreSQL refuses NUL characters and values over the column width (SQLite
    would store them), so both databases refuse them here, at the boundary; and an id that is
    only whitespace. (Reads do not
    re-check: a store written before these rules stays readable.)"""
    return [] if _storable(record) else _storage_problem_list(record)


def _storage_problem_list(record: MemoryRecord) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []

    def text(loc: str, value: str, limit: int | None) -> None:
        problems.extend((loc, p) for p in text_problems(value, limit))

    if not record.id.strip():  # SPEC 1: "" is refused by the model, whitespace only here
        problems.append(("id", f"must not be empty or only whitespace (got {record.id!r})"))
    text("id", record.id, MAX_ID_LENGTH)
    text("scope", record.scope, MAX_SCOPE_LENGTH)
    for k, rel in enumerate(record.relations):
        text(f"relations.{k}.target_id", rel.target_id, MAX_ID_LENGTH)
    for k, e in enumerate(record.audit_log):
        text(f"audit_log.{k}.actor", e.actor, MAX_ACTOR_LENGTH)
        text(f"audit_log.{k}.rationale", e.rationale, None)
    return problems


def _storable(record: MemoryRecord) -> bool:
    """True when ``storage_problems`` has nothing to report (the common case, checked without
    building the problem list): no NUL character and every bounded string within its column."""
    if len(record.id) > MAX_ID_LENGTH or len(record.scope) > MAX_SCOPE_LENGTH or not record.id.strip():
        return False
    texts = [record.id, record.scope]
    for rel in record.relations:
        if len(rel.target_id) > MAX_ID_LENGTH:
            return False
        texts.append(rel.target_id)
    for e in record.audit_log:
        if len(e.actor) > MAX_ACTOR_LENGTH:
            return False
        texts.append(e.actor)
        texts.append(e.rationale)
    return "\x00" not in "".join(texts)


def check_json(data: dict[str, Any], where: str = "") -> None:
    """What a record must be before its fields are looked at: strict JSON (no NaN or Infinity,
    no lone UTF-16 surrogates, which no database can store as text), nested less deeply than the
    interpreter can walk, and at most MAX_RECORD_BYTES of UTF-8.

    Fast path: one orjson dump gives the size and refuses surrogates. orjson writes NaN as
    ``null``, so only a record whose dump has a ``null`` is scanned again for NaN."""
    try:
        dumped = orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS)
        size = len(dumped)
        maybe_nan = b"null" in dumped
    except (orjson.JSONEncodeError, TypeError, ValueError):
        # Surrogates, nesting beyond orjson's limit, integers beyond 64 bits: the json module
        # tells which (and writes the last two).
        dumped, maybe_nan = None, True
    try:
        if dumped is None:
            size = len(json.dumps(data, ensure_ascii=False, allow_nan=False, default=str,
                                  check_circular=False).encode("utf-8"))
        elif maybe_nan:
            json.dumps(data, allow_nan=False, default=str, check_circular=False)
    except RecursionError:
        raise ValidationError(f"{where}record: JSON nested too deeply (more than about "
                              f"{sys.getrecursionlimit()} levels)", [("record", "nested too deeply")]) from None
    except UnicodeEncodeError:
        found = _find(data, _has_surrogate, [])
        loc, value = found if found else ("record", "")
        shown = repr(value if len(value) <= 60 else value[:57] + "...")
        msg = f"contains a lone UTF-16 surrogate, which is not valid Unicode text (got {shown})"
        raise ValidationError(f"{where}{loc}: {msg}", [(loc, msg)]) from None
    except ValueError:  # NaN or +-Infinity somewhere
        found = _find(data, _not_finite, [])
        loc, value = found if found else ("record", math.nan)
        msg = f"{_json_name(value)} is not valid JSON (got {_json_name(value)})"
        raise ValidationError(f"{where}{loc}: {msg}", [(loc, msg)]) from None
    if size > MAX_RECORD_BYTES:
        sizes = {k: len(json.dumps(v, ensure_ascii=False, default=str).encode("utf-8")) for k, v in data.items()}
        biggest = max(sizes, key=sizes.get) if sizes else "record"
        msg = (f"record is {size} bytes of JSON, {biggest} alone {sizes.get(biggest, size)}; "
               f"the limit is {MAX_RECORD_BYTES} bytes")
        raise ValidationError(f"{where}{biggest}: {msg}", [(str(biggest), msg)])


def validate_record(data: Any, where: str = "", json_checked: bool = False) -> MemoryRecord:
    """Validate one record in Membrane's JSON shape, raising our ValidationError naming the field.
    ``json_checked``: ``data`` was just parsed by a reader that guarantees what ``check_json``
    would check (see ``jsonl_import.parser_checked``), so that check is skipped."""
    if isinstance(data, MemoryRecord):
        data = data.model_dump(mode="json", by_alias=True)
    if not isinstance(data, dict):
        raise ValidationError(
            f"{where}record must be a JSON object (got {type(data).__name__})",
            [(where.strip(": ") or "record", f"not an object (got {type(data).__name__})")],
        )
    if not json_checked:
        check_json(data, where)
    try:
        record = MemoryRecord.model_validate(data)
    except PydanticValidationError as exc:
        problems = problems_of(exc)
        text = "; ".join(f"{loc}: {msg}" for loc, msg in problems)
        raise ValidationError(f"{where}{text}", problems) from None
    problems = storage_problems(record)
    if problems:
        raise ValidationError(f"{where}" + "; ".join(f"{loc}: {msg}" for loc, msg in problems), problems)
    return record
