"""Membrane: a typed, revisable memory substrate for agents (the engine; no UI in here)."""

from membrane_engine.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    EpisodicImmutableError,
    MembraneError,
    NilTrustError,
    NotFoundError,
    ValidationError,
)
from membrane_engine.retrieval.graph import GraphEdge, GraphNode, RetrieveGraphRequest, RetrieveGraphResponse
from membrane_engine.ingestion.models import CaptureMemoryRequest
from membrane_engine.membrane import Membrane
from membrane_engine.retrieval.layered import Explanation, RetrieveRequest, RetrieveResponse, Simulation
from membrane_engine.model.records import AuditEntry, MemoryRecord, MemoryType, Sensitivity, TaskState
from membrane_engine.rules.selector import SelectionResult
from membrane_engine.rules.trust import TrustContext, Verdict

# What the console may use beside the facade and the operator's view (SPEC 10, "One door"): models,
# enums and constants, and pure rules (no store). Everything that reads or writes a store on an
# operator's behalf is a method of ``Membrane.as_operator``'s view; an import contract keeps the
# console to ``membrane_engine`` and ``membrane_engine.errors``.
from membrane_engine.oversight.record_query import NO_STATUS, SORTS, Filters
from membrane_engine.oversight.exposure import Exposures, import_exposures, plan_exposures
from membrane_engine.retrieval.graph import DEFAULT_EDGE_LIMIT, DEFAULT_NODE_LIMIT, DEFAULT_ROOT_LIMIT
from membrane_engine.rules.history import kind_of
from membrane_engine.rules.labels import label
from membrane_engine.oversight.metrics import BUCKETS
from membrane_engine.accounts.operators import FIRST_RUN, SESSION, Operators
from membrane_engine.oversight.view import OperatorView
from membrane_engine.rules.roles import ACTION_ROLES, Operator, Role, permits
from membrane_engine.policy.check import (
    Offender,
    Outcome,
    Policy,
    PolicyError,
    Report,
    load_policy,
    parse_policy,
)
from membrane_engine.policy.snapshots import AccessChange
from membrane_engine.policy.snapshots import diff as diff_policy_snapshots
from membrane_engine.policy.snapshots import read as read_policy_snapshot
from membrane_engine.transfer.private_files import export_root, new_export_file
from membrane_engine.transfer.private_files import install_cleanup as install_private_cleanup
from membrane_engine.transfer.private_files import sweep_stale as sweep_stale_private
from membrane_engine.transfer.private_files import track as track_private
from membrane_engine.transfer.private_files import untrack as untrack_private
from membrane_engine.retrieval.layered import MAX_LIMIT, confidence_terms, records_returned
from membrane_engine.retrieval.layered import revision_flag, revision_reason  # group M2: pure, read the record given
from membrane_engine.oversight.clearance import ACCESS_LOG_LEVEL_ENV, access_log_level  # group M2: the environment's level, no store
from membrane_engine.rules.salience import columns_of, salience_at, time_below  # group M2: curves of in-memory profiles, no store
from membrane_engine.rules.salience import PRUNE_THRESHOLD
from membrane_engine.transfer.sample import sample_store_path
from membrane_engine.model.records import (
    CANONICAL_LAYER_ORDER,
    MAX_RATIONALE_LENGTH,
    MAX_REF_LENGTH,
    MAX_SEARCH_TEXT_LENGTH,
    MAX_TASK_LENGTH,
    AuditAction,
    RevisionStatus,
    format_time,
    parse_time,
    to_epoch,
    validate_record,
)
from membrane_engine.storage.columns import TYPE_NAMES
from membrane_engine.storage.store import default_url
from membrane_engine.rules.trust import covers, decide, narrowest, stricter

__all__ = [
    "Membrane", "MemoryRecord", "TrustContext", "RetrieveRequest", "RetrieveResponse", "SelectionResult",
    "Sensitivity", "MemoryType", "AuditEntry", "Explanation", "Simulation", "Verdict",
    "MembraneError", "NilTrustError", "AccessDeniedError", "NotFoundError", "ValidationError",
    "EpisodicImmutableError", "AlreadyExistsError",
    "RetrieveGraphRequest", "RetrieveGraphResponse", "GraphNode", "GraphEdge",
    "CaptureMemoryRequest", "TaskState",
    # the operator's view and what the console uses beside it
    "OperatorView", "Operator", "Operators", "Role", "permits", "ACTION_ROLES", "FIRST_RUN", "SESSION",
    "AuditAction", "RevisionStatus", "CANONICAL_LAYER_ORDER", "TYPE_NAMES", "format_time", "parse_time", "to_epoch",
    "validate_record", "decide", "narrowest", "stricter", "kind_of", "label", "Filters", "SORTS", "NO_STATUS",
    "Exposures", "import_exposures", "plan_exposures", "DEFAULT_ROOT_LIMIT", "DEFAULT_NODE_LIMIT",
    "DEFAULT_EDGE_LIMIT", "BUCKETS", "MAX_LIMIT", "records_returned", "confidence_terms", "revision_flag", "revision_reason",
    "ACCESS_LOG_LEVEL_ENV", "access_log_level", "columns_of", "salience_at", "time_below", "PRUNE_THRESHOLD", "sample_store_path",
    "default_url", "Policy", "PolicyError", "Report", "Outcome", "Offender", "load_policy", "parse_policy",
    "AccessChange", "diff_policy_snapshots", "read_policy_snapshot", "covers",
    "export_root", "new_export_file", "install_private_cleanup", "sweep_stale_private", "track_private",
    "untrack_private", "MAX_RATIONALE_LENGTH", "MAX_REF_LENGTH", "MAX_SEARCH_TEXT_LENGTH", "MAX_TASK_LENGTH",
]
