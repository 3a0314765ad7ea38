"""Membrane: a typed, revisable memory substrate for agents (the engine; no UI in here)."""

from .errors import (
    AccessDeniedError,
    AlreadyExistsError,
    EpisodicImmutableError,
    MembraneError,
    NilTrustError,
    NotFoundError,
    ValidationError,
)
from .graph import GraphEdge, GraphNode, RetrieveGraphRequest, RetrieveGraphResponse
from .membrane import Membrane
from .retrieval import Explanation, RetrieveRequest, RetrieveResponse, Simulation
from .schema import AuditEntry, MemoryRecord, MemoryType, Sensitivity
from .selector import SelectionResult
from .trust import TrustContext, Verdict

__all__ = [
    "Membrane", "MemoryRecord", "TrustContext", "RetrieveRequest", "RetrieveResponse", "SelectionResult",
    "Sensitivity", "MemoryType", "AuditEntry", "Explanation", "Simulation", "Verdict",
    "MembraneError", "NilTrustError", "AccessDeniedError", "NotFoundError", "ValidationError",
    "EpisodicImmutableError", "AlreadyExistsError",
    "RetrieveGraphRequest", "RetrieveGraphResponse", "GraphNode", "GraphEdge",
]
