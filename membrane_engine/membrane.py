"""The Membrane facade: opens a store, builds its engine context and delegates every call to the
service that answers it (SPEC 8's names), each taking that context.

The services live below: ``transfer`` (import, export), ``retrieval`` (retrieve, explain,
graph, S(t)), ``audit`` (a record with its trail, verification), ``curation`` (the operations,
review, bulk work), ``policy`` (policy files), ``oversight`` (metrics, what an operator's clearance
sees, and the operator's view). Nothing but ``membrane_engine/__init__.py`` imports this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from membrane_engine.accounts.operators import Operators
from membrane_engine.audit import reads as audit_reads
from membrane_engine.audit import row_seal
from membrane_engine.audit.verify import Problem
from membrane_engine.context import EngineContext
from membrane_engine.consolidation import service as consolidation
from membrane_engine.consolidation.report import ConsolidationReport
from membrane_engine.curation import bulk, review
from membrane_engine.curation import operations as curation
from membrane_engine.curation.operations import CurationPlan
from membrane_engine.errors import ValidationError
from membrane_engine.ingestion import capture as ingestion
from membrane_engine.ingestion.models import CaptureMemoryRequest, CaptureMemoryResponse
from membrane_engine.model.records import AuditEntry, MemoryRecord, MemoryType, check_flag
from membrane_engine.oversight import clearance as gate
from membrane_engine.oversight.metrics import ActionCounts, store_metrics
from membrane_engine.oversight.view import OperatorView
from membrane_engine.policy import check as policies
from membrane_engine.policy import snapshots as policy_snapshots
from membrane_engine.retrieval import reads
from membrane_engine.retrieval.graph import EntityTerms, RetrieveGraphRequest, RetrieveGraphResponse
from membrane_engine.retrieval.layered import Explanation, RetrieveRequest, RetrieveResponse, Simulation
from membrane_engine.rules.chain import AuditRow
from membrane_engine.rules.history import Version
from membrane_engine.rules.ranking import Embedder, default_embedder
from membrane_engine.storage.vectors import VectorIndex
from membrane_engine.rules.selector import DEFAULT_THRESHOLD
from membrane_engine.rules.trust import TrustContext, Verdict
from membrane_engine.storage import audit_log, entity_index
from membrane_engine.storage.columns import TYPE_NAMES, ColumnCache
from membrane_engine.storage.store import DEFAULT_DB_PATH, Store, default_url
from membrane_engine.transfer import export, intake
from membrane_engine.transfer.imports import PreparedImport
from membrane_engine.transfer.sample import sample_records, sample_store_path

SAMPLE_STORE = sample_store_path()

_DEFAULT_EMBEDDER: Any = object()  # "the provider a fresh install brings" (None turns ranking off)


def _in_context(name: str, doc: str) -> property:
    """An attribute of the facade that is its context's (set on the facade, set there)."""
    return property(lambda self: getattr(self._ctx, name), lambda self, value: setattr(self._ctx, name, value),
                    doc=doc)


class Membrane:
    """A Membrane store. Open one with ``Membrane.open(url)``."""

    def __init__(self, store: Store, *, selector_threshold: float = DEFAULT_THRESHOLD,
                 embedder: Embedder | None = _DEFAULT_EMBEDDER, clock: Callable[[], datetime] | None = None):
        columns = ColumnCache(store)
        action_counts = ActionCounts(store)
        operators = Operators(store)  # the console's people (SPEC 10)
        embedder = default_embedder() if embedder is _DEFAULT_EMBEDDER else embedder
        if embedder is not None and not isinstance(embedder, Embedder):
            raise ValidationError(f"embedder must have a name and an embed(texts) method (got {embedder!r})",
                                  [("embedder", type(embedder).__name__)])
        vectors = VectorIndex(store, embedder) if embedder is not None else None
        self._ctx = EngineContext(store, columns, embedder=embedder, vectors=vectors,
                                  selector_threshold=selector_threshold, action_counts=action_counts,
                                  operators=operators, entity_terms=EntityTerms(store))
        if clock is not None:
            self._ctx.clock = clock

    @property
    def context(self) -> EngineContext:
        """What the services of this store share (the store, caches, ranking provider, clock)."""
        return self._ctx

    store = _in_context("store", "The store (``storage.store.Store``).")
    columns = _in_context("columns", "The column cache every query of this store reads.")
    action_counts = _in_context("action_counts", "Audit entries by action, counted as they are written.")
    operators = _in_context("operators", "The console's operators (SPEC 10).")
    embedder = _in_context("embedder", "The ranking provider (SPEC 9); None: ranking off.")
    vectors = _in_context("vectors", "The provider's stored ranking vectors, loaded as asked.")
    entity_terms = _in_context("entity_terms", "The entity names graph roots are matched by.")
    selector_threshold = _in_context("selector_threshold", "SPEC 5's needs_more threshold.")

    # opening --------------------------------------------------------------------

    @classmethod
    def open(cls, url: str | None = None, *, load_sample: bool | None = None, **options: Any) -> "Membrane":
        """Open (creating if needed) the store at ``url``: any SQLAlchemy URL. Without one, the
        ``MEMBRANE_DB_URL`` environment variable, else the embedded SQLite file
        ``~/.membrane/membrane.db``; a new default store is filled with the sample store."""
        if url is not None and not isinstance(url, str):
            raise ValidationError(f"url must be a database URL string (got {url!r:.80})", [("url", "not a string")])
        if load_sample is not None:
            load_sample = check_flag(load_sample, "load_sample")
        use_default = url is None
        store = Store(url or default_url(), create_directory=use_default)
        try:
            created = store.create(upgrade_audit=audit_log.upgrade, open_audit=row_seal.on_open,
                                   index_entities=entity_index.on_open)
        except BaseException:
            store.dispose()  # do not leave a pool of connections behind a refused open
            raise
        membrane = cls(store, **options)
        if load_sample is None:
            load_sample = use_default and created
        if load_sample and created and SAMPLE_STORE.exists():
            # The demo's "now" is the moment the store is first opened (membrane_engine.transfer.sample).
            membrane.import_records(sample_records(membrane.now()), actor="membrane-console:sample")
        return membrane

    def warm(self) -> None:
        """Load what the first requests would otherwise wait for: the column cache and its id
        index, every stored ranking vector (one scan) and the entity names graph roots are
        matched by (one scan).
        A console server does it as it starts (``membrane-console``'s prewarm)."""
        reads.warm(self._ctx)

    @property
    def url(self) -> str:
        return self._ctx.url

    def now(self) -> datetime:
        return self._ctx.now()

    def close(self) -> None:
        self._ctx.store.dispose()

    # import / export --------------------------------------------------------------

    def import_records(self, items: Iterable[dict[str, Any] | MemoryRecord], actor: str = "import",
                       progress: Callable[[int, int], None] | None = None) -> int:
        """Import records in Membrane's JSON shape, all or nothing. Refuses with a
        ValidationError listing every invalid record (index and field), or AlreadyExistsError
        when an id is already in the store. Returns how many were imported."""
        return intake.import_records(self._ctx, items, actor, progress)

    def import_prepared(self, parts: PreparedImport | Iterable[PreparedImport], expected: int | None = None,
                        progress: Callable[[int], None] | None = None) -> int:
        """The write half of ``import_records``, for what ``imports.prepare`` made (possibly in
        other processes): one part, or an iterable of parts written as they arrive, all in one
        transaction, all or nothing, with import_records's refusals. A part's relations may
        point to records of earlier parts. ``expected``: how many records the parts hold in
        all, so a large import gets the bulk settings from its start; ``progress(written)``
        after each part. A part's ranking vectors (``prepare(..., embedder=)``) are written with it;
        records of parts without them get theirs when a task first asks. Returns how many
        records were written."""
        return intake.import_prepared(self._ctx, parts, expected, progress)

    def import_file(self, path: str | Path, actor: str = "import",
                    progress: Callable[[int, int], None] | None = None, workers: int = 1) -> int:
        """Import a ``.json`` or ``.jsonl`` file, all or nothing, as ``import_records``.
        ``workers`` > 1 validates a ``.jsonl`` file's records in that many processes while this
        one writes (``jsonl_import``); ``progress(done, total)`` then counts records written."""
        return intake.import_file(self._ctx, path, actor, progress, workers)

    def iter_export(self, ids: Iterable[str] | None = None, trust: TrustContext | None = None,
                    as_of: datetime | None = None, batch: int = 2000) -> Iterator[dict[str, Any]]:
        """Records as Membrane JSON with ``salience = S(as_of)`` and the anchor extension fields.
        With ``trust``, only what that context may see: hidden records are left out and
        redacted ones are written as their metadata-only view."""
        return export.iter_export(self._ctx, ids, trust, as_of, batch)

    def export_file(self, path: str | Path, ids: Iterable[str] | None = None, trust: TrustContext | None = None,
                    as_of: datetime | None = None) -> int:
        """Write records to ``.json`` (an array) or ``.jsonl``; returns how many."""
        return export.export_file(self._ctx, path, ids, trust, as_of)

    # reads --------------------------------------------------------------------------

    def get(self, record_id: str, as_of: datetime | None = None) -> MemoryRecord:
        """Operator read, no trust gate: the record with ``salience = S(as_of)`` and its audit log."""
        return audit_reads.get(self._ctx, record_id, as_of)

    def salience_at(self, record_id: str, when: datetime) -> float:
        """S(when) of SPEC 2 for a stored record."""
        return reads.salience_at(self._ctx, record_id, when)

    def salience_curves(self, record_ids: list[str], times: list[datetime]) -> dict[str, list[float]]:
        """S(t) of several records over a time grid in one vectorized pass (decay charts)."""
        return reads.salience_curves(self._ctx, record_ids, times)

    def retrieve(self, request: RetrieveRequest) -> RetrieveResponse:
        return reads.retrieve(self._ctx, request)

    def simulate(self, request: RetrieveRequest, counts: bool = True, clearance: TrustContext | None = None) -> Simulation:
        """Retrieval plus per-layer counts of full / redacted / hidden (the console's simulator;
        ``counts=False`` leaves them out). With an operator's ``clearance``, the records come
        through it (``clearance.simulate``): the counts stay the request's, the content does not
        go beyond the clearance."""
        if clearance is None:
            return reads.simulate(self._ctx, request, counts)
        return gate.simulate(self._ctx, request, clearance, check_flag(counts, "counts"))

    def retrieve_graph(self, request: RetrieveGraphRequest) -> RetrieveGraphResponse:
        """Ranked roots expanded over their relations, every node gated (SPEC 9)."""
        return reads.retrieve_graph(self._ctx, request)

    def neighbourhood(self, record_id: str, trust: TrustContext, max_hops: int = 2, node_limit: int = 40,
                      as_of: datetime | None = None) -> RetrieveGraphResponse:
        """The records linked to one record, both ways, as ``trust`` may see them (the record
        explorer's neighbourhood view)."""
        return reads.neighbourhood(self._ctx, record_id, trust, max_hops, node_limit, as_of)

    def retrieve_by_id(self, record_id: str, trust: TrustContext | None, as_of: datetime | None = None) -> MemoryRecord:
        return reads.retrieve_by_id(self._ctx, record_id, trust, as_of)

    def retrieve_by_type(self, memory_type: MemoryType | str, trust: TrustContext | None,
                         as_of: datetime | None = None) -> list[MemoryRecord]:
        return reads.retrieve_by_type(self._ctx, memory_type, trust, as_of)

    def explain(self, record_id: str, trust: TrustContext | None, as_of: datetime | None = None,
                min_salience: float = 0.0) -> Explanation:
        return reads.explain(self._ctx, record_id, trust, as_of, min_salience)

    def explain_many(self, record_ids: list[str], trust: TrustContext | None) -> dict[str, Verdict]:
        """Verdicts for many records at once (what-if tables)."""
        return reads.explain_many(self._ctx, record_ids, trust)

    # audit and metrics ---------------------------------------------------------------

    def audit_log(self, record_id: str) -> list[AuditEntry]:
        """The record's audit entries, oldest first (archived records keep theirs)."""
        return audit_reads.audit_log(self._ctx, record_id)

    def audit_rows(self, record_id: str) -> list[AuditRow]:
        return audit_reads.audit_rows(self._ctx, record_id)

    def history(self, record_id: str) -> list[Version]:
        """The record's changes, oldest first, each with its before and after values."""
        return audit_reads.versions(self._ctx, record_id)

    def record_at(self, record_id: str, when: datetime) -> MemoryRecord | None:
        """The record as it was at ``when`` (later changes undone, salience S(when) from the
        anchor in force then); None when it did not exist yet or was archived then."""
        return audit_reads.record_at(self._ctx, record_id, when)

    def salience_history(self, record_id: str, times: list[datetime]) -> list[float | None]:
        """S(t) over ``times`` as the record really was (its audit trail's anchors, not today's
        anchor); None before it existed and while archived."""
        return audit_reads.salience_history(self._ctx, record_id, times)

    def audit_query(self, clearance: TrustContext | None = None, **filters: Any) -> tuple[int, list[AuditRow]]:
        """Entries across the store, newest first: (total matching, one page). Filters: actor,
        action, record_id, since, until; the page: limit (default 1000), offset. With an
        operator's ``clearance``, as ``clearance.audit_query``."""
        audit_reads.check_filters(filters)
        if clearance is None:
            return audit_reads.query(self._ctx, **filters)
        return gate.audit_query(self._ctx, clearance, **filters)

    def view(self, record_id: str, clearance: TrustContext, as_of: datetime | None = None,
             actor: str | None = None) -> MemoryRecord:
        """An operator opens a record: as ``clearance`` sees it (whole, redacted, or NotFoundError),
        and with ``actor`` a sensitive record opened in full is logged (``clearance.view``)."""
        return gate.view(self._ctx, record_id, clearance, as_of, actor)

    def log_access(self, record_id: str, actor: str) -> None:
        """Record that ``actor`` opened ``record_id`` in full ("who looked"), one transaction."""
        gate.log_record_access(self._ctx, record_id, actor)

    def access_log(self, record_id: str | None = None, actor: str | None = None, clearance: TrustContext | None = None,
                   limit: int = 100, offset: int = 0) -> tuple[int, list[Any]]:
        """Access entries, newest first: (how many, the page); see ``clearance.accesses``."""
        return gate.accesses(self._ctx, clearance, record_id, actor, limit, offset)

    def verify_audit(self, checkpoint: dict[str, Any] | str | None = None) -> list[Problem]:
        """Every problem with the audit trail (SPEC 6), [] when intact; with ``checkpoint`` (what
        ``audit_checkpoint`` returned, or its JSON text) also whether the store still extends it."""
        return audit_reads.verify(self._ctx, checkpoint)

    def audit_checkpoint(self) -> dict[str, Any]:
        """The store-wide audit sequence as it is now (position, head hash, time; signed when
        MEMBRANE_AUDIT_KEY is set), JSON-serialisable: keep it away from the database and verify
        against it later (``verify_audit(checkpoint=...)``)."""
        return audit_reads.checkpoint(self._ctx)

    def metrics(self, as_of: datetime | None = None) -> dict[str, Any]:
        return store_metrics(self._ctx, as_of)

    def count(self) -> int:
        return reads.count(self._ctx)

    def scopes(self) -> list[str]:
        """The scopes records in the store carry ("" for unscoped excluded)."""
        return reads.scopes(self._ctx)

    def ids(self) -> list[str]:
        return reads.ids(self._ctx)

    # policy files (SPEC 11) -----------------------------------------------------------------

    def holds_sample(self) -> bool:
        """Whether this store holds the bundled sample (a record only the sample has), for the
        sample's own policy file to be offered."""
        return reads.holds_sample(self._ctx)

    def check_policy(self, policy: Any, as_of: datetime | None = None, limit: int | None = None,
                     within: TrustContext | None = None) -> Any:
        """Every assertion of a policy file against the store (``policies.check``); writes nothing.
        ``within``: only the records an operator's clearance sees (the operator's view)."""
        limit = policies.SHOWN_PER_FAILURE if limit is None else limit
        return policies.check(self._ctx, policy, as_of=as_of, limit=limit, within=within)

    def policy_coverage(self, policy: Any, within: TrustContext | None = None) -> dict[str, Any]:
        return policies.coverage(self._ctx, policy, within=within)

    def policy_snapshot(self, policy: Any) -> Any:
        """What each profile of ``policy`` sees now (``policy_snapshots.current``)."""
        return policy_snapshots.current(self._ctx, policy)

    def policy_snapshot_lines(self, policy: Any, within: TrustContext | None = None) -> Iterator[str]:
        """The snapshot file's text (``policy_snapshots.lines``)."""
        return policy_snapshots.lines(self._ctx, policy, within=within)

    def write_policy_snapshot(self, policy: Any, path: str | Path) -> int:
        return policy_snapshots.write(self._ctx, policy, path)

    # the operator's view (SPEC 10, "One door") ------------------------------------------------

    def as_operator(self, name: str, via: str = "console") -> OperatorView:
        """Everything an operator reads or writes, held to their role and clearance as stored
        at each call (``oversight.view.OperatorView``); ``via`` names the page or command for the
        access log. NotFoundError for an unknown or removed operator."""
        return OperatorView(self._ctx, name, via)

    # capture (SPEC 12) ----------------------------------------------------------------

    def capture_memory(self, request: CaptureMemoryRequest | dict[str, Any],
                       actor: str | None = None) -> CaptureMemoryResponse:
        """Membrane's CaptureMemory: the primary record, entities resolved or created, edges, the
        derived fact, in one transaction. ``actor=None`` names Membrane's actors."""
        return ingestion.capture(self._ctx, request, actor)

    def capture_many(self, requests: Iterable[CaptureMemoryRequest | dict[str, Any]],
                     actor: str | None = None) -> list[CaptureMemoryResponse]:
        """Several captures in order, in one transaction: all written or none."""
        return ingestion.capture_many(self._ctx, requests, actor)

    def preview_capture(self, request: CaptureMemoryRequest | dict[str, Any],
                        actor: str | None = None) -> CaptureMemoryResponse:
        """What ``capture_memory`` would write (entities matched and created, edges, the derived
        fact); writes nothing."""
        return ingestion.preview(self._ctx, request, actor)

    # review and bulk work ----------------------------------------------------------------

    def review_queue(self, clearance: TrustContext, as_of: datetime | None = None,
                     horizon: Any = None, limit: int = 200) -> Any:
        """Contested records beside what contests them, and records about to be pruned (within
        ``horizon``, default 7 days), as ``clearance`` sees them (``review.review_queue``)."""
        return review.review_queue(self._ctx, clearance, as_of, horizon, limit)

    def bulk_preview(self, op: str, ids: Iterable[str], actor: str, rationale: str,
                     clearance: TrustContext | None = None, **params: Any) -> Any:
        """One curation operation over many records, previewed: per record the plan or why it
        is refused, and the failure semantics in words (``bulk.preview``). Writes nothing."""
        return bulk.preview(self._ctx, op, ids, actor, rationale, clearance, **params)

    def bulk_apply(self, preview: Any) -> Any:
        """Apply a ``bulk_preview``: one transaction and one audit entry per record; per record
        applied or not, with the engine's sentence (``bulk.apply``)."""
        return bulk.apply(self._ctx, preview)

    # curation (SPEC 6 and 8): each operation returns the plan it applied -------------------------

    def preview(self, op: str, *args: Any, **kwargs: Any) -> CurationPlan:
        """What ``op`` (a curation operation's name) would do with these arguments, called as the
        operation itself is (``m.preview("reinforce", id, actor, rationale, gain=0.2)``): the
        records as they would be after the change and the audit entries that would be written.
        Raises what the operation would raise; writes nothing."""
        return curation.preview_within(self._ctx, None, op, *args, **kwargs)

    def preview_within(self, clearance: TrustContext | None, op: str, *args: Any, **kwargs: Any) -> CurationPlan:
        """``preview`` for an operator whose ``clearance`` must see every record involved in full
        (the operator's view, SPEC 10)."""
        return curation.preview_within(self._ctx, clearance, op, *args, **kwargs)

    def curate_within(self, clearance: TrustContext | None, op: str, *args: Any, **kwargs: Any) -> CurationPlan:
        """Apply ``op`` as an operator whose ``clearance`` must see in full every record it reads
        or creates, decided on the rows read under the write lock; refused before anything is
        written otherwise."""
        return curation.curate_within(self._ctx, clearance, op, *args, **kwargs)

    def reinforce(self, id: str, actor: str, rationale: str, gain: float | None = None) -> CurationPlan:
        """S_new = max(S(now), min(S(now) + gain, 1)); anchor and last_reinforced_at = now."""
        return curation.curate_within(self._ctx, None, "reinforce", id, actor, rationale, gain=gain)

    def penalize(self, id: str, amount: float, actor: str, rationale: str) -> CurationPlan:
        """S_new = max(S(now) - amount, min(S(now), min_salience)); anchor = now."""
        return curation.curate_within(self._ctx, None, "penalize", id, amount, actor, rationale)

    def retract(self, id: str, actor: str, rationale: str) -> CurationPlan:
        """Salience 0 (anchored now), semantic status retracted; the record stays."""
        return curation.curate_within(self._ctx, None, "retract", id, actor, rationale)

    def contest(self, id: str, contesting_ref: str, actor: str, rationale: str) -> CurationPlan:
        """Semantic status contested; relation contested_by -> ref when ref is a record id."""
        return curation.curate_within(self._ctx, None, "contest", id, contesting_ref, actor, rationale)

    def supersede(self, old_id: str, new_record: Any, actor: str, rationale: str) -> CurationPlan:
        """Retract ``old_id`` and create ``new_record`` in its place (SPEC 6)."""
        return curation.curate_within(self._ctx, None, "supersede", old_id, new_record, actor, rationale)

    def fork(self, source_id: str, forked_record: Any, actor: str, rationale: str) -> CurationPlan:
        """Create ``forked_record`` derived_from ``source_id``; the source is unchanged."""
        return curation.curate_within(self._ctx, None, "fork", source_id, forked_record, actor, rationale)

    def merge(self, ids: list[str], merged_record: Any, actor: str, rationale: str) -> CurationPlan:
        """Retract every record of ``ids`` and create ``merged_record`` derived_from each."""
        return curation.curate_within(self._ctx, None, "merge", ids, merged_record, actor, rationale)

    def pin(self, id: str, actor: str, rationale: str) -> CurationPlan:
        """Freeze salience at S(now)."""
        return curation.curate_within(self._ctx, None, "pin", id, actor, rationale)

    def unpin(self, id: str, actor: str, rationale: str) -> CurationPlan:
        """Restart decay from S(now)."""
        return curation.curate_within(self._ctx, None, "unpin", id, actor, rationale)

    def reclassify(self, id: str, actor: str, rationale: str, sensitivity: Any = None, scope: str | None = None,
                   tags: list[str] | None = None) -> CurationPlan:
        """Change sensitivity, scope and/or tags; the audit rationale names old and new values."""
        return curation.curate_within(self._ctx, None, "reclassify", id, actor, rationale, sensitivity=sensitivity,
                                      scope=scope, tags=tags)

    def delete(self, id: str, actor: str, rationale: str) -> CurationPlan:
        """Move the record to the archive (refused for deletion policy ``never``)."""
        return curation.curate_within(self._ctx, None, "delete", id, actor, rationale)

    def restore(self, id: str, actor: str, rationale: str) -> CurationPlan:
        """Bring an archived record back exactly as it was."""
        return curation.curate_within(self._ctx, None, "restore", id, actor, rationale)

    def prune(self, actor: str, rationale: str, as_of: datetime | None = None, dry_run: bool = True) -> list[str]:
        """Archive every record that is not pinned, has policy auto_prune and S(as_of) < 0.001.
        Returns the ids pruned, or with ``dry_run`` (the default) the ids that would be."""
        return curation.prune(self._ctx, actor, rationale, as_of, dry_run)

    def archived_ids(self) -> list[str]:
        """Ids in the archive (pruned or deleted), newest first."""
        return curation.archived_ids(self._ctx)

    # consolidation (SPEC 12) ---------------------------------------------------------------------

    def consolidate(self, actor: str | None = "consolidator", as_of: datetime | None = None,
                    dry_run: bool = False, only: list[str] | None = None) -> ConsolidationReport:
        """Membrane's consolidators over the store as of ``as_of`` (episodic compression, semantic,
        competence, plan graph, each with its entity links): ``report.created``, ``.reinforced``,
        ``.compressed``; with ``dry_run`` what would be, nothing written. ``only``: keys of a dry
        run's ``report.proposals`` to apply, planned anew (``report.stale``: no longer proposed)
        (``consolidation.service``)."""
        return consolidation.consolidate(self._ctx, actor, as_of, dry_run, only=only)

    def reject_consolidation(self, keys: list[str], actor: str, rationale: str,
                             as_of: datetime | None = None) -> consolidation.Rejection:
        """Reject consolidation proposals by key: later runs leave them out until their sources
        change (``consolidation.service.reject``)."""
        return consolidation.reject(self._ctx, keys, actor, rationale, as_of)

    def reinstate(self, id: str, actor: str, rationale: str) -> CurationPlan:
        """A contested semantic record back to active; salience unchanged (``plan_reinstate``)."""
        return curation.curate_within(self._ctx, None, "reinstate", id, actor, rationale)

    def restore_version(self, id: str, when: datetime, actor: str, rationale: str) -> CurationPlan:
        """Bring the record back to its version at ``when``: sensitivity, scope, tags, pinned,
        revision status and relations as they were then, salience S(when) re-anchored now
        (``plan_restore_version``); refused for episodic records."""
        return curation.curate_within(self._ctx, None, "restore_version", id, when, actor, rationale)


__all__ = ["Membrane", "DEFAULT_DB_PATH", "SAMPLE_STORE", "TYPE_NAMES"]
