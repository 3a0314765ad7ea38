"""The public surface (SPEC 8 and the console's one door) is pinned: ``membrane_engine.__all__``
changes only on purpose, every name in it imports, and every public method of the facade and of
the operator's view appears in the API reference (docs/python-api.md)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import membrane_engine
from membrane_engine import Membrane, OperatorView

ROOT = Path(__file__).resolve().parent.parent
API_REFERENCE = ROOT / "docs" / "python-api.md"

PUBLIC = [
    'ACCESS_LOG_LEVEL_ENV', 'ACTION_ROLES', 'AccessChange', 'AccessDeniedError', 'AlreadyExistsError',
    'AuditAction', 'AuditEntry', 'BUCKETS', 'CANONICAL_LAYER_ORDER', 'CaptureMemoryRequest', 'DEFAULT_EDGE_LIMIT',
    'DEFAULT_NODE_LIMIT', 'DEFAULT_ROOT_LIMIT', 'EpisodicImmutableError', 'Explanation', 'Exposures',
    'FIRST_RUN', 'Filters', 'GraphEdge', 'GraphNode', 'MAX_LIMIT', 'MAX_RATIONALE_LENGTH',
    'MAX_REF_LENGTH', 'MAX_SEARCH_TEXT_LENGTH', 'MAX_TASK_LENGTH', 'Membrane', 'MembraneError',
    'MemoryRecord', 'MemoryType', 'NO_STATUS', 'NilTrustError', 'NotFoundError', 'Offender', 'Operator',
    'OperatorView', 'Operators', 'Outcome', 'PRUNE_THRESHOLD', 'Policy', 'PolicyError', 'Report',
    'RetrieveGraphRequest', 'RetrieveGraphResponse', 'RetrieveRequest', 'RetrieveResponse',
    'RevisionStatus', 'Role', 'SESSION', 'SORTS', 'SelectionResult', 'Sensitivity', 'Simulation',
    'TYPE_NAMES', 'TaskState', 'TrustContext', 'ValidationError', 'Verdict', 'access_log_level', 'columns_of',
    'confidence_terms', 'covers', 'decide', 'default_url', 'diff_policy_snapshots', 'export_root',
    'format_time', 'import_exposures', 'install_private_cleanup', 'kind_of', 'label', 'load_policy',
    'narrowest', 'new_export_file', 'parse_policy', 'parse_time', 'permits', 'plan_exposures',
    'read_policy_snapshot', 'records_returned', 'revision_flag', 'revision_reason', 'salience_at',
    'sample_store_path', 'stricter', 'sweep_stale_private', 'time_below', 'to_epoch', 'track_private',
    'untrack_private', 'validate_record'
]

# SPEC 8: what tests and tools outside the project call.
SPEC_8_METHODS = [
    "open", "import_records", "import_file", "export_file", "get", "retrieve", "retrieve_by_id",
    "retrieve_by_type", "explain", "salience_at", "reinforce", "penalize", "retract", "contest",
    "supersede", "fork", "merge", "pin", "unpin", "reclassify", "delete", "restore", "prune",
    "audit_log", "verify_audit", "audit_checkpoint", "retrieve_graph", "metrics", "as_operator",
]


def _public_methods(cls: type) -> list[str]:
    return sorted(name for name, _ in inspect.getmembers(cls) if not name.startswith("_"))


def test_all_is_pinned() -> None:
    assert sorted(membrane_engine.__all__) == PUBLIC


def test_every_public_name_imports() -> None:
    missing = [name for name in membrane_engine.__all__ if not hasattr(membrane_engine, name)]
    assert missing == []


def test_the_facade_keeps_every_spec_8_method() -> None:
    assert [name for name in SPEC_8_METHODS if not callable(getattr(Membrane, name, None))] == []


def test_every_public_method_is_in_the_api_reference() -> None:
    text = API_REFERENCE.read_text(encoding="utf-8")
    documented = set(re.findall(r"`(?:[\w.]+\.)?(\w+)(?:\(|`)", text))
    for cls in (Membrane, OperatorView):
        missing = [name for name in _public_methods(cls) if name not in documented]
        assert missing == [], f"{cls.__name__} methods missing from docs/python-api.md: {missing}"
