"""The Membrane facade: opens a store and wires schema, trust, retrieval, selector and audit."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from membrane_engine.audit import trail as audit
from membrane_engine.audit import verify as audit_verify
from membrane_engine.rules.chain import AuditRow
from membrane_engine.rules import history
from membrane_engine.transfer import private_files
from membrane_engine.storage.columns import TYPE_NAMES, ColumnCache
from membrane_engine.errors import NilTrustError, NotFoundError, ValidationError
from membrane_engine.transfer.import_writer import import_items, write_parts
from membrane_engine.transfer.imports import PreparedImport, read_file_checks
from membrane_engine.transfer.json_items import FileItems
from membrane_engine.oversight.metrics import ActionCounts, compute_metrics
from membrane_engine.accounts.operators import Operators
from membrane_engine.retrieval.layered import (
    MAX_LIMIT,
    Explanation,
    RetrieveRequest,
    RetrieveResponse,
    Simulation,
    explain,
    retrieve_by_id,
    run,
)
from membrane_engine.rules.salience import salience_at, take
from membrane_engine.transfer.sample import sample_records, sample_store_path
from membrane_engine.model.records import (
    MAX_ACTOR_LENGTH,
    UTC,
    MemoryRecord,
    MemoryType,
    as_utc,
    check_id,
    check_ids,
    check_instant,
    check_flag,
    check_text,
    check_whole,
    format_time,
    to_epoch,
)
from membrane_engine.retrieval.graph import (
    MAX_HOPS,
    EntityTerms,
    RetrieveGraphRequest,
    RetrieveGraphResponse,
    neighbourhood,
    retrieve_graph,
)
from membrane_engine.rules.ranking import Embedder, default_embedder
from membrane_engine.storage.vectors import VectorIndex
from membrane_engine.rules.selector import DEFAULT_THRESHOLD
from membrane_engine.storage.store import DEFAULT_DB_PATH, Store, default_url
from membrane_engine.rules.trust import TrustContext, Verdict, as_trust, redact, verdict_as_read

SAMPLE_STORE = sample_store_path()

try:  # curation lives in its own module; the facade inherits its operations
    from membrane_engine.curation.operations import CurationMixin
except ImportError:  # pragma: no cover - only while curation is being written
    class CurationMixin:  # type: ignore[no-redef]
        pass


_AUDIT_FILTERS = frozenset({"actor", "action", "record_id", "since", "until", "limit", "offset"})
MAX_EXPORT_BATCH = 100_000  # records read per round trip by iter_export


MAX_WORKERS = 256  # import processes; more would only wait for the one writer


def _check_progress(progress: Any) -> None:
    if progress is not None and not callable(progress):
        raise ValidationError(f"progress must be a function (got {progress!r:.80})", [("progress", "not callable")])


def _check_actor(actor: Any) -> str:
    """The actor an import's audit entries name: stored in a column of its own."""
    if not isinstance(actor, str) or not actor.strip():
        raise ValidationError(f"actor must be a non-empty string (got {actor!r})", [("actor", repr(actor))])
    return check_text(actor, "actor", MAX_ACTOR_LENGTH)  # the rule curation's actors follow too


_DEFAULT_EMBEDDER: Any = object()  # "the provider a fresh install brings" (None turns ranking off)


class Membrane(CurationMixin):
    """A Membrane store. Open one with ``Membrane.open(url)``."""

    def __init__(self, store: Store, *, selector_threshold: float = DEFAULT_THRESHOLD,
                 embedder: Embedder | None = _DEFAULT_EMBEDDER, clock: Callable[[], datetime] | None = None):
        self.store = store
        self.columns = ColumnCache(store)
        self.action_counts = ActionCounts(store)
        self.operators = Operators(store)  # the console's people (SPEC 10)
        self.selector_threshold = selector_threshold
        self.embedder: Embedder | None = default_embedder() if embedder is _DEFAULT_EMBEDDER else embedder
        if self.embedder is not None and not isinstance(self.embedder, Embedder):
            raise ValidationError(f"embedder must have a name and an embed(texts) method (got {self.embedder!r})",
                                  [("embedder", type(self.embedder).__name__)])
        self.vectors = VectorIndex(store, self.embedder) if self.embedder is not None else None
        self.entity_terms = EntityTerms(store)
        self._clock = clock or (lambda: datetime.now(UTC))

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
            created = store.create()
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
        snap = self.columns.current()
        self.columns.index_ids()
        if self.vectors is not None:
            self.vectors.load(snap)
        self.entity_terms.load(snap)

    @property
    def url(self) -> str:
        return self.store.display_url

    def now(self) -> datetime:
        return as_utc(self._clock())

    def close(self) -> None:
        self.store.dispose()

    # import / export --------------------------------------------------------------

    def import_records(self, items: Iterable[dict[str, Any] | MemoryRecord], actor: str = "import",
                       progress: Callable[[int, int], None] | None = None) -> int:
        """Import records in Membrane's JSON shape, all or nothing. Refuses with a
        ValidationError listing every invalid record (index and field), or AlreadyExistsError
        when an id is already in the store. Returns how many were imported."""
        if isinstance(items, (dict, str, bytes, MemoryRecord)) or not hasattr(items, "__iter__"):
            raise ValidationError(f"items must be a list (or other iterable) of records (got {type(items).__name__})",
                                  [("items", type(items).__name__)])
        actor = _check_actor(actor)
        _check_progress(progress)
        # Validated and turned into rows part by part; a small import is validated in full
        # before the write lock is taken (import_writer.ImportWriter, buffered).
        total = len(items) if hasattr(items, "__len__") else None
        # The records' ranking vectors (SPEC 9) are computed as they are prepared and written in
        # the same transaction (imports.prepare); a failing provider leaves them for later.
        return import_items(self.store, ((item, None, False) for item in items), self.now(), actor, total=total,
                            progress=progress, embedder=self.embedder)

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
        if isinstance(parts, PreparedImport):
            parts, expected = [parts], len(parts.rows)
        return write_parts(self.store, parts, expected=expected, progress=progress)

    def import_file(self, path: str | Path, actor: str = "import",
                    progress: Callable[[int, int], None] | None = None, workers: int = 1) -> int:
        """Import a ``.json`` or ``.jsonl`` file, all or nothing, as ``import_records``.
        ``workers`` > 1 validates a ``.jsonl`` file's records in that many processes while this
        one writes (``jsonl_import``); ``progress(done, total)`` then counts records written."""
        workers = check_whole(workers, "workers", 1, MAX_WORKERS)
        _check_progress(progress)
        path = read_file_checks(path)
        actor = _check_actor(actor)
        if workers == 1 or path.suffix.lower() != ".jsonl":
            source = FileItems(path)  # read one record at a time: memory bounded by a part, not the file
            return import_items(self.store, source, self.now(), actor, estimate=source.estimate, progress=progress,
                                embedder=self.embedder)
        from membrane_engine.transfer import jsonl_import

        chunks = jsonl_import.chunks(path)
        total = sum(chunk.records for chunk in chunks)
        parts = jsonl_import.prepared_parts(path, self.now(), actor, workers, chunks, embedder=self.embedder)
        report = (lambda written: progress(written, total)) if progress is not None else None
        return self.import_prepared(parts, expected=total, progress=report)

    def iter_export(self, ids: Iterable[str] | None = None, trust: TrustContext | None = None,
                    as_of: datetime | None = None, batch: int = 2000) -> Iterator[dict[str, Any]]:
        """Records as Membrane JSON with ``salience = S(as_of)`` and the anchor extension fields.
        With ``trust``, only what that context may see: hidden records are left out and
        redacted ones are written as their metadata-only view."""
        # Arguments are checked now, not when the first record is asked for.
        ids = check_ids(ids) if ids is not None else None
        trust = as_trust(trust) if trust is not None else None
        when = check_instant(as_of) if as_of is not None else self.now()
        batch = check_whole(batch, "batch", 1, MAX_EXPORT_BATCH)
        return self._iter_export(ids, trust, when, batch)

    def _iter_export(self, ids: list[str] | None, trust: TrustContext | None, when: datetime,
                     batch: int) -> Iterator[dict[str, Any]]:
        snap = self.columns.current()
        if ids is None:
            rows = np.nonzero(snap.alive)[0]
        else:
            rows = np.array(sorted({snap.row_of[i] for i in ids if i in snap.row_of and snap.alive[snap.row_of[i]]}), dtype=np.int64)
        rows = rows[np.argsort(snap.ids[rows].astype(str), kind="stable")] if len(rows) else rows
        saliences = salience_at(take(snap.decay, np.sort(rows)), to_epoch(when)) if len(rows) else np.empty(0)
        s_of = dict(zip((str(x) for x in snap.ids[np.sort(rows)]), saliences))
        verdicts = None
        if trust is not None:
            from membrane_engine.rules.trust import verdicts as gate

            verdicts = dict(zip((str(x) for x in snap.ids[rows]),
                                gate(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, trust)))
        ordered = [str(x) for x in snap.ids[rows]]
        if verdicts is not None:
            ordered = [rid for rid in ordered if verdicts[rid] > 0]
        for start in range(0, len(ordered), batch):
            chunk = ordered[start:start + batch]
            with self.store.read() as conn:
                stored = self.store.fetch(conn, chunk)
                logs = audit.logs_of(conn, list(stored))
            for rid in chunk:
                row = stored.get(rid)
                if row is None:
                    continue
                doc = row.doc
                doc["salience"] = float(s_of[rid])
                doc.setdefault("lifecycle", {})["anchor_salience"] = row.anchor_salience
                doc["lifecycle"]["anchor_at"] = format_time(datetime.fromtimestamp(row.anchor_at, UTC))
                doc["audit_log"] = [e.model_dump(mode="json") for e in logs.get(rid, [])]
                if trust is None:
                    yield doc
                    continue
                # The choice above is the snapshot's, made before the batch was read; what is
                # written is decided on the labels stored with this content (SPEC 4), as
                # trust.gate_as_read decides, without validating the documents written in full.
                verdict = verdict_as_read(doc.get("sensitivity"), doc.get("scope"), trust)
                if verdict is Verdict.FULL:
                    yield doc
                elif verdict is Verdict.REDACTED:
                    yield redact(MemoryRecord.model_validate(doc)).to_json_dict()

    def export_file(self, path: str | Path, ids: Iterable[str] | None = None, trust: TrustContext | None = None,
                    as_of: datetime | None = None) -> int:
        """Write records to ``.json`` (an array) or ``.jsonl``; returns how many."""
        if not isinstance(path, (str, Path)) or str(path) == "":
            raise ValidationError(f"path must be a file path (got {path!r})", [("path", repr(path))])
        path = Path(path)
        if path.is_dir():
            raise ValidationError(f"path {str(path)!r} is a directory, not a file", [("path", str(path))])
        if not path.parent.is_dir():
            raise ValidationError(f"path {str(path)!r}: the directory {str(path.parent)!r} does not exist",
                                  [("path", str(path))])
        docs = self.iter_export(ids, trust, as_of)  # checks the arguments before a file is made
        count = 0
        tmp = path.with_name(path.name + ".partial")
        # The partial file holds records in full: the owner's only, and removed if this process
        # is stopped half-way (SIGTERM, SIGINT) as on an error (private_files).
        private_files.install_cleanup()
        private_files.track(tmp)
        try:
            with os.fdopen(private_files.create_private(tmp), "w", encoding="utf-8") as out:
                jsonl = path.suffix.lower() == ".jsonl"
                if not jsonl:
                    out.write("[\n")
                for doc in docs:
                    if not jsonl and count:
                        out.write(",\n")
                    out.write(json.dumps(doc, ensure_ascii=False))
                    if jsonl:
                        out.write("\n")
                    count += 1
                if not jsonl:
                    out.write("\n]\n")
            if path.exists():  # an export file written again keeps the mode its owner gave it
                shutil.copymode(path, tmp)
            else:  # a new one is the user's file, made as their umask makes files, once complete
                os.chmod(tmp, private_files.umask_mode())
            tmp.replace(path)  # a failed export never leaves a half-written file under the real name
        except OSError as exc:
            raise ValidationError(f"cannot write {str(path)!r}: {exc.strerror or exc}", [("path", str(path))]) from None
        finally:
            tmp.unlink(missing_ok=True)
            private_files.untrack(tmp)
        return count

    # reads --------------------------------------------------------------------------

    def get(self, record_id: str, as_of: datetime | None = None) -> MemoryRecord:
        """Operator read, no trust gate: the record with ``salience = S(as_of)`` and its audit log."""
        record_id = check_id(record_id)
        as_of = check_instant(as_of) if as_of is not None else None
        with self.store.read() as conn:
            rows = self.store.fetch(conn, [record_id])
            if record_id not in rows:
                raise NotFoundError(record_id)
            log = [r.entry for r in audit.log_of(conn, record_id)]
        row = rows[record_id]
        doc = row.doc
        doc["audit_log"] = []
        record = MemoryRecord.model_validate(doc)
        record.audit_log = log
        record.salience = self._salience(record, (row.anchor_salience, row.anchor_at), as_of)
        return record

    def _salience(self, record: MemoryRecord, anchor: tuple[float, float], as_of: datetime | None) -> float:
        from membrane_engine.rules.salience import salience_of

        return salience_of(record, as_utc(as_of) if as_of else self.now(), anchor)

    def salience_at(self, record_id: str, when: datetime) -> float:
        """S(when) of SPEC 2 for a stored record."""
        record_id = check_id(record_id)
        when = check_instant(when, "when")
        snap = self.columns.current()
        i = snap.row_of.get(record_id)
        if i is None or not snap.alive[i]:
            raise NotFoundError(record_id)
        return float(salience_at(take(snap.decay, np.array([i])), to_epoch(as_utc(when)))[0])

    def salience_curves(self, record_ids: list[str], times: list[datetime]) -> dict[str, list[float]]:
        """S(t) of several records over a time grid in one vectorized pass (decay charts)."""
        record_ids = check_ids(record_ids, "record_ids")
        if isinstance(times, (str, bytes, dict)) or not hasattr(times, "__iter__"):
            raise ValidationError(f"times must be a list of datetimes (got {times!r})", [("times", "not a list")])
        times = [check_instant(t, "times") for t in times]
        snap = self.columns.current()
        record_ids = list(dict.fromkeys(record_ids))  # a repeated id would break take()'s row mapping
        rows = []
        for rid in record_ids:
            i = snap.row_of.get(rid)
            if i is None or not snap.alive[i]:
                raise NotFoundError(rid)
            rows.append(i)
        order = np.argsort(rows)
        sorted_rows = np.array(rows, dtype=np.int64)[order]
        grid = np.array([to_epoch(as_utc(t)) for t in times])[:, None]
        values = salience_at(take(snap.decay, sorted_rows), grid)
        column_of = {int(j): k for k, j in enumerate(order)}
        # Keys in the caller's order.
        return {rid: values[:, column_of[j]].tolist() for j, rid in enumerate(record_ids)}

    def retrieve(self, request: RetrieveRequest) -> RetrieveResponse:
        return self.simulate(request, counts=False).response

    def simulate(self, request: RetrieveRequest, counts: bool = True, clearance: TrustContext | None = None) -> Simulation:
        """Retrieval plus per-layer counts of full / redacted / hidden (the console's simulator;
        ``counts=False`` leaves them out). With an operator's ``clearance``, the records come
        through it (``clearance.simulate``): the counts stay the request's, the content does not
        go beyond the clearance."""
        counts = check_flag(counts, "counts")
        if clearance is not None:
            from membrane_engine.oversight import clearance as gate

            return gate.simulate(self, request, clearance, counts)
        return self._run(request, counts, MAX_LIMIT)

    def _run(self, request: RetrieveRequest, counts: bool, cap: int | None,
             within: TrustContext | None = None) -> Simulation:
        if request is None:
            raise NilTrustError()
        if isinstance(request, dict):
            request = RetrieveRequest(**request)
        if not isinstance(request, RetrieveRequest):
            shown = repr(request) if len(repr(request)) <= 80 else repr(request)[:77] + "..."
            raise ValidationError(f"request must be a RetrieveRequest (got {shown})", [("request", "not a RetrieveRequest")])
        if request.as_of is None:  # "now" is this Membrane's clock, as for get() and metrics()
            request = request.model_copy(update={"as_of": self.now()})
        return run(self.store, self.columns, request, self.selector_threshold, self.embedder, counts=counts, cap=cap,
                   vectors=self.vectors, within=within)

    def retrieve_graph(self, request: RetrieveGraphRequest) -> RetrieveGraphResponse:
        """Ranked roots expanded over their relations, every node gated (SPEC 9)."""
        if request is None:
            raise NilTrustError()
        if isinstance(request, dict):
            request = RetrieveGraphRequest(**request)
        if not isinstance(request, RetrieveGraphRequest):
            raise ValidationError(f"request must be a RetrieveGraphRequest (got {type(request).__name__})",
                                  [("request", "not a RetrieveGraphRequest")])
        if request.as_of is None:
            request = request.model_copy(update={"as_of": self.now()})
        return retrieve_graph(self.store, self.columns, request, self.entity_terms, self.selector_threshold,
                              self.embedder, self.vectors)

    def neighbourhood(self, record_id: str, trust: TrustContext, max_hops: int = 2, node_limit: int = 40,
                      as_of: datetime | None = None) -> RetrieveGraphResponse:
        """The records linked to one record, both ways, as ``trust`` may see them (the record
        explorer's neighbourhood view)."""
        from membrane_engine.oversight.record_query import referencing

        record_id = check_id(record_id)
        trust = as_trust(trust)
        max_hops = check_whole(max_hops, "max_hops", 0, MAX_HOPS)
        node_limit = check_whole(node_limit, "node_limit", 1, MAX_LIMIT)  # also bounds the incoming links read
        when = as_utc(check_instant(as_of)) if as_of is not None else self.now()
        return neighbourhood(self.store, self.columns, record_id, trust, referencing(self, record_id, limit=node_limit),
                             when, max_hops=max_hops, node_limit=node_limit)

    def retrieve_by_id(self, record_id: str, trust: TrustContext | None, as_of: datetime | None = None) -> MemoryRecord:
        return retrieve_by_id(self.store, self.columns, record_id, trust, as_of if as_of is not None else self.now())

    def retrieve_by_type(self, memory_type: MemoryType | str, trust: TrustContext | None,
                         as_of: datetime | None = None) -> list[MemoryRecord]:
        trust = as_trust(trust)
        as_of = check_instant(as_of) if as_of is not None else None
        if isinstance(memory_type, (list, tuple, set, dict)):
            raise ValidationError(f"memory_type must be one memory type (got {memory_type!r})",
                                  [("memory_type", "not a memory type")])
        req = RetrieveRequest(trust=trust, memory_types=[memory_type], as_of=as_of)
        return self._run(req, counts=False, cap=None).response.records  # SPEC 4: no limit, not even the cap

    def explain(self, record_id: str, trust: TrustContext | None, as_of: datetime | None = None,
                min_salience: float = 0.0) -> Explanation:
        return explain(self.columns, record_id, trust, as_of, min_salience)

    def explain_many(self, record_ids: list[str], trust: TrustContext | None) -> dict[str, Verdict]:
        """Verdicts for many records at once (what-if tables)."""
        trust = as_trust(trust)
        record_ids = check_ids(record_ids, "record_ids")
        from membrane_engine.rules.trust import verdicts

        snap = self.columns.current()
        rows = np.array([snap.row_of[r] for r in record_ids if r in snap.row_of], dtype=np.int64)
        codes = verdicts(snap.sens_level[rows], snap.scope_code[rows], snap.scope_names, trust)
        names = {0: Verdict.HIDDEN, 1: Verdict.REDACTED, 2: Verdict.FULL}
        return {str(snap.ids[i]): names[int(c)] for i, c in zip(rows, codes)}

    # audit and metrics ---------------------------------------------------------------

    def audit_log(self, record_id: str) -> list:
        """The record's audit entries, oldest first (archived records keep theirs)."""
        record_id = check_id(record_id)
        with self.store.read() as conn:
            rows = audit.log_of(conn, record_id)
            if not rows and not self.store.existing_ids(conn, [record_id]):
                raise NotFoundError(record_id)
        return [r.entry for r in rows]

    def audit_rows(self, record_id: str) -> list[AuditRow]:
        record_id = check_id(record_id)
        with self.store.read() as conn:
            return audit.log_of(conn, record_id)

    def history(self, record_id: str) -> list[history.Version]:
        """The record's changes, oldest first, each with its before and after values."""
        return history.versions(self.audit_rows(self._existing(record_id)))

    def record_at(self, record_id: str, when: datetime) -> MemoryRecord | None:
        """The record as it was at ``when`` (later changes undone, salience S(when) from the
        anchor in force then); None when it did not exist yet or was archived then."""
        when = check_instant(when, "when")
        record, anchor, rows = self._with_trail(record_id)
        return history.record_at(record, anchor, rows, when)

    def salience_history(self, record_id: str, times: list[datetime]) -> list[float | None]:
        """S(t) over ``times`` as the record really was (its audit trail's anchors, not today's
        anchor); None before it existed and while archived."""
        if isinstance(times, (str, bytes, dict)) or not hasattr(times, "__iter__"):
            raise ValidationError(f"times must be a list of datetimes (got {times!r})", [("times", "not a list")])
        times = [check_instant(t, "times") for t in times]
        record, anchor, rows = self._with_trail(record_id)
        return history.salience_history(record, anchor, rows, times)

    def _existing(self, record_id: str) -> str:
        record_id = check_id(record_id)
        with self.store.read() as conn:
            if not self.store.existing_ids(conn, [record_id], include_archive=False):
                raise NotFoundError(record_id)
        return record_id

    def _with_trail(self, record_id: str) -> tuple[MemoryRecord, tuple[float, float], list[AuditRow]]:
        record_id = check_id(record_id)
        with self.store.read() as conn:
            rows = self.store.fetch(conn, [record_id])
            if record_id not in rows:
                raise NotFoundError(record_id)
            trail = audit.log_of(conn, record_id)
        row = rows[record_id]
        doc = row.doc
        doc["audit_log"] = []
        record = MemoryRecord.model_validate(doc)
        record.audit_log = [r.entry for r in trail]
        return record, (row.anchor_salience, row.anchor_at), trail

    def audit_query(self, clearance: TrustContext | None = None, **filters: Any) -> tuple[int, list[AuditRow]]:
        """Entries across the store, newest first: (total matching, one page). Filters: actor,
        action, record_id, since, until; the page: limit (default 1000), offset. With an
        operator's ``clearance``, as ``clearance.audit_query``."""
        unknown = sorted(set(filters) - _AUDIT_FILTERS)
        if unknown:
            raise ValidationError(f"audit_query has no filter {unknown[0]!r:.80} (filters: {', '.join(sorted(_AUDIT_FILTERS))})",
                                  [(unknown[0], "unknown filter")])
        if clearance is not None:
            from membrane_engine.oversight import clearance as gate

            return gate.audit_query(self, clearance, **filters)
        with self.store.read() as conn:
            return audit.query(conn, **filters)

    def view(self, record_id: str, clearance: TrustContext, as_of: datetime | None = None,
             actor: str | None = None) -> MemoryRecord:
        """An operator opens a record: as ``clearance`` sees it (whole, redacted, or NotFoundError),
        and with ``actor`` a sensitive record opened in full is logged (``clearance.view``)."""
        from membrane_engine.oversight import clearance as gate

        return gate.view(self, record_id, clearance, as_of, actor)

    def log_access(self, record_id: str, actor: str) -> None:
        """Record that ``actor`` opened ``record_id`` in full ("who looked"), one transaction."""
        from membrane_engine.oversight import clearance as gate

        record = self.get(record_id)
        gate.log_access(self, record.id, actor, record.sensitivity.value, record.scope)

    def access_log(self, record_id: str | None = None, actor: str | None = None, clearance: TrustContext | None = None,
                   limit: int = 100, offset: int = 0) -> tuple[int, list[Any]]:
        """Access entries, newest first: (how many, the page); see ``clearance.accesses``."""
        from membrane_engine.oversight import clearance as gate

        return gate.accesses(self, clearance, record_id, actor, limit, offset)

    def verify_audit(self, checkpoint: dict[str, Any] | str | None = None) -> list[audit_verify.Problem]:
        """Every problem with the audit trail (SPEC 6), [] when intact; with ``checkpoint`` (what
        ``audit_checkpoint`` returned, or its JSON text) also whether the store still extends it."""
        cp = None if checkpoint is None else audit_verify.parse_checkpoint(checkpoint)
        with self.store.read() as conn:
            return audit_verify.verify(conn, cp)

    def audit_checkpoint(self) -> dict[str, Any]:
        """The store-wide audit sequence as it is now (position, head hash, time; signed when
        MEMBRANE_AUDIT_KEY is set), JSON-serialisable: keep it away from the database and verify
        against it later (``verify_audit(checkpoint=...)``)."""
        with self.store.read() as conn:
            return audit_verify.checkpoint(conn, self.now())

    def metrics(self, as_of: datetime | None = None) -> dict[str, Any]:
        as_of = check_instant(as_of) if as_of is not None else None
        return compute_metrics(self.store, self.columns.current(), as_of=as_of or self.now(),
                               action_counts=self.action_counts.current())

    def count(self) -> int:
        return len(self.columns.current())

    def scopes(self) -> list[str]:
        """The scopes records in the store carry ("" for unscoped excluded)."""
        snap = self.columns.current()
        used = np.unique(snap.scope_code[snap.alive])
        return sorted(snap.scope_names[i] for i in used if snap.scope_names[i])

    def ids(self) -> list[str]:
        snap = self.columns.current()
        return sorted(str(x) for x in snap.ids[snap.alive])

    # policy files (SPEC 11) -----------------------------------------------------------------

    def holds_sample(self) -> bool:
        """Whether this store holds the bundled sample (a record only the sample has), for the
        sample's own policy file to be offered."""
        from membrane_engine.transfer.sample import SAMPLE_MARKER

        return SAMPLE_MARKER in self.columns.current().row_of

    def check_policy(self, policy: Any, as_of: datetime | None = None, limit: int | None = None,
                     within: TrustContext | None = None) -> Any:
        """Every assertion of a policy file against the store (``policies.check``); writes nothing.
        ``within``: only the records an operator's clearance sees (the operator's view)."""
        from membrane_engine.policy import check as policies

        limit = policies.SHOWN_PER_FAILURE if limit is None else limit
        return policies.check(self, policy, as_of=as_of, limit=limit, within=within)

    def policy_coverage(self, policy: Any, within: TrustContext | None = None) -> dict[str, Any]:
        from membrane_engine.policy import check as policies

        return policies.coverage(self, policy, within=within)

    def policy_snapshot(self, policy: Any) -> Any:
        """What each profile of ``policy`` sees now (``policy_snapshots.current``)."""
        from membrane_engine.policy import snapshots as policy_snapshots

        return policy_snapshots.current(self, policy)

    def policy_snapshot_lines(self, policy: Any, within: TrustContext | None = None) -> Iterator[str]:
        """The snapshot file's text (``policy_snapshots.lines``)."""
        from membrane_engine.policy import snapshots as policy_snapshots

        return policy_snapshots.lines(self, policy, within=within)

    def write_policy_snapshot(self, policy: Any, path: str | Path) -> int:
        from membrane_engine.policy import snapshots as policy_snapshots

        return policy_snapshots.write(self, policy, path)

    # the operator's view (SPEC 10, "One door") ------------------------------------------------

    def as_operator(self, name: str, via: str = "console") -> Any:
        """Everything an operator reads or writes, held to their role and clearance as stored
        at each call (``operator_view.OperatorView``); ``via`` names the page or command for the
        access log. NotFoundError for an unknown or removed operator."""
        from membrane_engine.oversight.view import OperatorView

        return OperatorView(self, name, via)

    # review and bulk work ----------------------------------------------------------------

    def review_queue(self, clearance: TrustContext, as_of: datetime | None = None,
                     horizon: Any = None, limit: int = 200) -> Any:
        """Contested records beside what contests them, and records about to be pruned (within
        ``horizon``, default 7 days), as ``clearance`` sees them (``review.review_queue``)."""
        from membrane_engine.curation import review

        return review.review_queue(self, clearance, as_of, review.DEFAULT_HORIZON if horizon is None else horizon,
                                   limit)

    def bulk_preview(self, op: str, ids: Iterable[str], actor: str, rationale: str,
                     clearance: TrustContext | None = None, **params: Any) -> Any:
        """One curation operation over many records, previewed: per record the plan or why it
        is refused, and the failure semantics in words (``bulk.preview``). Writes nothing."""
        from membrane_engine.curation import bulk

        return bulk.preview(self, op, ids, actor, rationale, clearance, **params)

    def bulk_apply(self, preview: Any) -> Any:
        """Apply a ``bulk_preview``: one transaction and one audit entry per record; per record
        applied or not, with the engine's sentence (``bulk.apply``)."""
        from membrane_engine.curation import bulk

        return bulk.apply(self, preview)


__all__ = ["Membrane", "DEFAULT_DB_PATH", "SAMPLE_STORE", "TYPE_NAMES"]
