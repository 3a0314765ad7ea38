"""The engine context: what every service of one open store shares.

The facade (``Membrane``) builds one when a store is opened and hands it to the services it
delegates to; the operator's view holds the same one. A service reads the store, the caches,
the ranking provider and the clock from here, never from the facade, so nothing below the
facade needs to import it.

The caches built above this layer (the audit action counts, the operators, the entity names
graph roots are matched by) are built by the facade and carried here untyped: naming their
classes would make this module import the services that use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from membrane_engine.model.records import UTC, as_utc
from membrane_engine.rules.ranking import Embedder
from membrane_engine.rules.selector import DEFAULT_THRESHOLD
from membrane_engine.storage.columns import ColumnCache
from membrane_engine.storage.store import Store
from membrane_engine.storage.vectors import VectorIndex


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False)  # one per open store, compared and hashed by identity (a weak-dict key)
class EngineContext:
    """One open store and what is kept beside it. ``now()`` is the engine's clock: every
    default instant (a read's ``as_of``, an operation's time) is taken from it."""

    store: Store
    columns: ColumnCache
    embedder: Embedder | None = None  # the ranking provider (SPEC 9); None: ranking off
    vectors: VectorIndex | None = None  # the provider's stored vectors, loaded as asked
    selector_threshold: float = DEFAULT_THRESHOLD  # SPEC 5's needs_more threshold
    clock: Callable[[], datetime] = _utc_now
    action_counts: Any = None  # oversight.metrics.ActionCounts: audit entries by action
    operators: Any = None  # accounts.operators.Operators: the console's people (SPEC 10)
    entity_terms: Any = None  # retrieval.graph.EntityTerms: names graph roots are matched by

    def now(self) -> datetime:
        return as_utc(self.clock())

    @property
    def url(self) -> str:
        """The store's URL as shown (a password masked)."""
        return self.store.display_url


__all__ = ["EngineContext"]
