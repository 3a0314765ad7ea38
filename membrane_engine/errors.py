"""Errors raised by the engine. Every one derives from MembraneError."""


class MembraneError(Exception):
    """Base class of every error the engine raises on purpose."""


class ValidationError(MembraneError, ValueError):
    """Input refused at the boundary. `problems` lists (location, message) pairs; `total` says
    how many problems there were in all (an import lists only its first 1,000)."""

    def __init__(self, message: str, problems: list[tuple[str, str]] | None = None, total: int | None = None):
        super().__init__(message)
        self.problems = problems or []
        self.total = total if total is not None else len(self.problems)


class NilTrustError(MembraneError):
    """A retrieval call was made without a trust context."""

    def __init__(self, message: str = "trust context is required (got None)"):
        super().__init__(message)


class NotFoundError(MembraneError, KeyError):
    def __init__(self, record_id: str):
        super().__init__(f"record {record_id!r} not found")
        self.record_id = record_id

    def __str__(self) -> str:  # KeyError would quote the whole message again
        return self.args[0]


class AccessDeniedError(MembraneError, PermissionError):
    """The trust context does not allow a full view of the record."""


class EpisodicImmutableError(MembraneError):
    """Episodic records cannot be revised (supersede, fork, merge, contest, retract)."""


class AlreadyExistsError(MembraneError):
    def __init__(self, record_id: str):
        super().__init__(f"record {record_id!r} already exists; nothing was replaced")
        self.record_id = record_id


class StoreUnavailableError(MembraneError):
    """The database is locked, read-only or unreachable."""


class AuditKeyError(MembraneError):
    """This process's ``MEMBRANE_AUDIT_KEY`` does not fit the store's audit log (a keyed store
    and no key, or another key): nothing was written."""
