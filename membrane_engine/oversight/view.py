"""The operator's view: the one door through which the console reads and writes (SPEC 10).

``m.as_operator(name)`` returns an ``OperatorView`` that knows the operator, and every call
through it is held to them, whatever the caller sends:

- role and clearance are read from the store at each call, so a demoted or removed operator
  loses the old rights at once, whatever session they hold;
- a record the clearance hides is, to every call, indistinguishable from one that does not
  exist (``NotFoundError``, same message); one it sees redacted is metadata only;
- a write needs the role (``operators.permits``) and a record the clearance sees in full, on
  the labels read under the write lock (``curation.curate_within``); otherwise
  ``AccessDeniedError`` and nothing is written; its actor is always ``operator:NAME``;
- aggregates are computed over what the clearance sees, records beyond it at most one total
  (``beyond_clearance``), never broken down;
- every call that returns payload content at or above ``access_log_level()`` appends its
  records to the access log, naming the page or command (``via``), so "who looked" is complete.

The rules themselves live where they always did (``trust``, ``clearance``, ``curation``,
``operators``): this class only makes sure no caller can skip them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from membrane_engine.audit import reads as audit_reads
from membrane_engine.context import EngineContext
from membrane_engine.curation import bulk, review
from membrane_engine.curation import operations as curation
from membrane_engine.oversight import clearance as gate
from membrane_engine.oversight.metrics import store_metrics
from membrane_engine.policy import check as policies
from membrane_engine.policy import snapshots as policy_snapshots
from membrane_engine.retrieval import reads
from membrane_engine.transfer import export, intake
from membrane_engine.errors import AccessDeniedError, NilTrustError, NotFoundError, ValidationError
from membrane_engine.retrieval.graph import RetrieveGraphRequest, RetrieveGraphResponse, within
from membrane_engine.rules.roles import Operator, Role, permits
from membrane_engine.retrieval.layered import Explanation, RetrieveRequest, RetrieveResponse, Simulation
from membrane_engine.model.records import (
    MemoryRecord,
    MemoryType,
    check_id,
    check_ids,
    check_instant,
    check_string,
    sensitivity_level,
)
from membrane_engine.rules.trust import TrustContext, Verdict, as_trust, narrowest, verdict_as_read, verdicts

MAX_VIA = 64


def _check_via(via: Any) -> str:
    via = check_string(via, "via", MAX_VIA)
    if not via.strip():
        raise ValidationError("via must name the page or command reading (got an empty string)", [("via", "empty")])
    return via.strip()


class OperatorView:
    """Everything the console shows or changes on one operator's behalf (``Membrane.as_operator``)."""

    def __init__(self, ctx: EngineContext, name: str, via: str = "console"):
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"operator name must be a non-empty string (got {name!r:.80})",
                                  [("name", repr(name)[:80])])
        self._ctx = ctx
        self._name = name.strip()
        self._via = _check_via(via)
        self.operator  # an unknown or removed operator is NotFoundError now, not at the first call

    def __repr__(self) -> str:
        return f"OperatorView({self._name!r}, via={self._via!r})"

    # who ---------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def via(self) -> str:
        return self._via

    @property
    def operator(self) -> Operator:
        """The operator as stored now (NotFoundError once removed)."""
        return self._ctx.operators.get(self._name)

    @property
    def clearance(self) -> TrustContext:
        return self.operator.clearance

    def through(self, via: str) -> "OperatorView":
        """The same operator reading through another page or command (for the access log)."""
        return OperatorView(self._ctx, self._name, via)

    def may(self, action: str) -> tuple[bool, str]:
        """May the operator, as stored now, do ``action``? The answer and the reason in words."""
        return permits(self.operator, action)

    def _allowed(self, action: str) -> Operator:
        operator = self.operator
        ok, why = permits(operator, action)
        if not ok:
            raise AccessDeniedError(why)
        return operator

    def _reader(self) -> tuple[Operator, TrustContext]:
        operator = self._allowed("read")
        return operator, operator.clearance

    # what is not a record -------------------------------------------------------------------

    def now(self) -> datetime:
        return self._ctx.now()

    @property
    def url(self) -> str:
        return self._ctx.url

    def state(self) -> tuple[str, int]:
        """The store and its change counter: any write by anyone gives it a new value (cache keys)."""
        return self._ctx.url, self._ctx.columns.current().seq

    # who looked -------------------------------------------------------------------------------

    def _looked(self, operator: Operator, records: Iterable[MemoryRecord | None]) -> None:
        """Append the records shown in full at or above the access-log level, in one transaction."""
        floor = gate.access_log_level().level
        entries, seen = [], set()
        for r in records:
            if r is None or r.redacted or r.id in seen or sensitivity_level(r.sensitivity) < floor:
                continue
            seen.add(r.id)
            entries.append((r.id, r.sensitivity.value, r.scope or ""))
        if entries:
            gate.log_accesses(self._ctx, operator.actor, entries, self._via)

    def _looked_rows(self, operator: Operator, rows: np.ndarray, snap: Any) -> None:
        """``_looked`` for rows of the column snapshot (exports, which hand over documents)."""
        floor = gate.access_log_level().level
        rows = rows[snap.sens_level[rows] >= floor]
        names = {s.level: s.value for s in _sensitivities()}
        entries = [(str(snap.ids[i]), names[int(snap.sens_level[i])], snap.scope_names[int(snap.scope_code[i])])
                   for i in rows]
        if entries:
            gate.log_accesses(self._ctx, operator.actor, entries, self._via)

    # one record -------------------------------------------------------------------------------

    def _verdict(self, record_id: str, clearance: TrustContext) -> Verdict:
        """The clearance's verdict on a live record; NotFoundError when it does not see it."""
        record_id = check_id(record_id)
        snap = self._ctx.columns.current()
        i = snap.row_of.get(record_id)
        if i is None or not snap.alive[i]:
            raise NotFoundError(record_id)
        code = int(verdicts(snap.sens_level[i:i + 1], snap.scope_code[i:i + 1], snap.scope_names, clearance)[0])
        if code == 0:
            raise NotFoundError(record_id)
        return Verdict.FULL if code == 2 else Verdict.REDACTED

    def _in_full(self, record_id: str, clearance: TrustContext, what: str) -> str:
        if self._verdict(record_id, clearance) is not Verdict.FULL:
            raise AccessDeniedError(f"record {record_id!r} is beyond your clearance (you see it redacted): "
                                    f"its {what} is withheld")
        return record_id

    def get(self, record_id: str, as_of: datetime | None = None) -> MemoryRecord:
        """The record as the clearance sees it (whole or redacted, with its audit log); hidden or
        absent alike: NotFoundError."""
        operator, clearance = self._reader()
        record = gate.view(self._ctx, record_id, clearance, as_of)
        self._looked(operator, [record])
        return record

    def verdict(self, record_id: str) -> Verdict:
        """"full" or "redacted": how the clearance sees the live record (NotFoundError: not at all)."""
        return self._verdict(record_id, self._reader()[1])

    def salience_at(self, record_id: str, when: datetime) -> float:
        """S(when) of a record the clearance sees in full (a redacted view withholds its lifecycle)."""
        _, clearance = self._reader()
        return reads.salience_at(self._ctx, self._in_full(record_id, clearance, "lifecycle"), when)

    def salience_curves(self, record_ids: list[str], times: list[datetime]) -> dict[str, list[float]]:
        _, clearance = self._reader()
        ids = [self._in_full(rid, clearance, "lifecycle") for rid in check_ids(record_ids, "record_ids")]
        return reads.salience_curves(self._ctx, ids, times)

    def salience_history(self, record_id: str, times: list[datetime]) -> list[float | None]:
        return gate.salience_history(self._ctx, record_id, times, self._reader()[1])

    def past_curve(self, record_id: str) -> Callable[[list[datetime]], list[float | None]]:
        return gate.past_curve(self._ctx, record_id, self._reader()[1])

    def time_below(self, record_id: str, threshold: float, start: datetime, end: datetime) -> datetime | None:
        return gate.time_below(self._ctx, record_id, threshold, start, end, self._reader()[1])

    def record_at(self, record_id: str, when: datetime) -> MemoryRecord | None:
        operator, clearance = self._reader()
        self._verdict(record_id, clearance)  # hidden: NotFoundError, as if absent
        record = gate.record_at(self._ctx, record_id, when, clearance)
        self._looked(operator, [record])
        return record

    def history(self, record_id: str) -> list[Any]:
        _, clearance = self._reader()
        self._verdict(record_id, clearance)
        return gate.history(self._ctx, record_id, clearance)

    def audit_rows(self, record_id: str) -> list[Any]:
        """One record's audit chain as the clearance sees it (entries of a redacted record masked).
        A record it does not see: NotFoundError, live or archived alike."""
        _, clearance = self._reader()
        record_id = check_id(record_id)
        rows = gate.audit_rows(self._ctx, record_id, clearance)
        if not rows:
            self._verdict(record_id, clearance)  # NotFoundError unless a live record it sees
        return rows

    def audit_log(self, record_id: str) -> list[Any]:
        return [r.entry for r in self.audit_rows(record_id)]

    def explain(self, record_id: str, trust: TrustContext | None = None, as_of: datetime | None = None,
                min_salience: float = 0.0) -> Explanation:
        """Why ``trust`` (default: the operator's own clearance) gets this record, shown no wider
        than the clearance; a record the clearance does not see: NotFoundError."""
        _, clearance = self._reader()
        return gate.explain(self._ctx, record_id, clearance if trust is None else trust, clearance, as_of, min_salience)

    def explain_many(self, record_ids: list[str], trust: TrustContext | None) -> dict[str, Verdict]:
        """Verdicts under ``trust`` narrowed to the clearance, of the records the clearance sees
        (the others are left out, as absent ids are)."""
        _, clearance = self._reader()
        trust = as_trust(trust)
        seen = reads.explain_many(self._ctx, record_ids, clearance)
        ids = [rid for rid, v in seen.items() if v is not Verdict.HIDDEN]
        return reads.explain_many(self._ctx, ids, narrowest(trust, clearance)) if ids else {}

    # retrieval as an agent would get it, shown through the clearance ----------------------------

    def simulate(self, request: RetrieveRequest, counts: bool = True) -> Simulation:
        """The request's retrieval as the clearance may see it (``clearance.simulate``): counts,
        the number matching and the selector's decision over what it sees. ``withheld`` is 0:
        how many matching records lie beyond the clearance would change with the simulated
        context, and so tell, context by context, where hidden records are; the store's one
        total is ``beyond_clearance()``."""
        operator, clearance = self._reader()
        out = gate.simulate(self._ctx, request, clearance, counts)
        out = replace(out, total_matching=out.total_matching - out.withheld, withheld=0)
        out = self._selection_within(out, clearance)  # group M1
        selected = out.response.selection.selected if out.response.selection is not None else []
        self._looked(operator, [*out.response.records, *selected])
        return out

    def retrieve(self, request: RetrieveRequest) -> RetrieveResponse:
        return self.simulate(request, counts=False).response

    def retrieve_by_id(self, record_id: str, trust: TrustContext | None, as_of: datetime | None = None) -> MemoryRecord:
        """``Membrane.retrieve_by_id`` for ``trust`` narrowed to the clearance: AccessDeniedError
        unless both see it in full; NotFoundError when the clearance does not see it at all."""
        operator, clearance = self._reader()
        if trust is None:
            raise NilTrustError()
        self._verdict(record_id, clearance)
        record = reads.retrieve_by_id(self._ctx, record_id, narrowest(as_trust(trust), clearance), as_of)
        self._looked(operator, [record])
        return record

    def retrieve_by_type(self, memory_type: MemoryType | str, trust: TrustContext | None,
                         as_of: datetime | None = None) -> list[MemoryRecord]:
        operator, clearance = self._reader()
        if trust is None:
            raise NilTrustError()
        records = reads.retrieve_by_type(self._ctx, memory_type, narrowest(as_trust(trust), clearance), as_of)
        self._looked(operator, records)
        return records

    def graph(self, request: RetrieveGraphRequest) -> tuple[RetrieveGraphResponse, int]:
        """The agent's graph (SPEC 9) as far as the clearance sees it: the request is run for the
        stricter of the agent's context and the clearance (``trust.narrowest``), so roots, walk
        and limits are over records the clearance sees (a count of roots or nodes short of the
        limits would otherwise tell of hidden ones), then cut by ``graph.within``: no edge out of
        a node it sees redacted, no node reached only through one. Returns the graph and how many
        nodes ``within`` dropped (records the clearance sees)."""
        operator, clearance = self._reader()
        if isinstance(request, dict):
            request = RetrieveGraphRequest(**request)
        if isinstance(request, RetrieveGraphRequest) and request.trust is not None:
            request = request.model_copy(update={"trust": narrowest(as_trust(request.trust), clearance)})
        response, withheld = within(reads.retrieve_graph(self._ctx, request), clearance)
        self._looked(operator, [n.record for n in response.nodes])
        return response, withheld

    def retrieve_graph(self, request: RetrieveGraphRequest) -> RetrieveGraphResponse:
        return self.graph(request)[0]

    def neighbourhood(self, record_id: str, trust: TrustContext, max_hops: int = 2, node_limit: int = 40,
                      as_of: datetime | None = None) -> tuple[RetrieveGraphResponse, int]:
        """The records around one the clearance sees, as ``trust`` gets them, cut to the clearance."""
        operator, clearance = self._reader()
        self._verdict(record_id, clearance)
        found = reads.neighbourhood(self._ctx, record_id, narrowest(as_trust(trust), clearance), max_hops, node_limit,
                                    as_of)
        response, withheld = within(found, clearance)
        self._looked(operator, [n.record for n in response.nodes])
        return response, withheld

    def compare(self, trust_a: TrustContext | None, trust_b: TrustContext | None, **options: Any) -> Any:
        """What-if (``whatif.compare``) over the records the clearance sees; the rest one total."""
        from membrane_engine.oversight.trust_diff import compare

        return compare(self._ctx, trust_a, trust_b, clearance=self._reader()[1], **options)

    def record_view(self, record_id: str, trust_a: TrustContext | None,
                    trust_b: TrustContext | None) -> tuple[MemoryRecord, Verdict] | None:
        """One what-if record as the more permissive context has it, no wider than the clearance."""
        from membrane_engine.oversight.trust_diff import record_view

        operator, clearance = self._reader()
        self._verdict(record_id, clearance)
        found = record_view(self._ctx, record_id, narrowest(as_trust(trust_a, "trust_a"), clearance),
                            narrowest(as_trust(trust_b, "trust_b"), clearance))
        if found is not None:
            self._looked(operator, [found[0]])
        return found

    def hidden_records(self, trust: TrustContext, memory_types: list[str] | None = None, **page: Any) -> Any:
        """Records ``trust`` does not see: counted, and listed where the clearance sees them."""
        from membrane_engine.oversight.finders import hidden_records

        return hidden_records(self._ctx, trust, self._reader()[1], memory_types, **page)

    # listings and search ----------------------------------------------------------------------

    def search(self, filters: Any = None, offset: int = 0, limit: int = 50, sort: str = "salience",
               as_of: datetime | None = None) -> tuple[int, list[MemoryRecord]]:
        """The record explorer's search (``explorer.search``) over what the clearance sees."""
        from membrane_engine.oversight.record_query import search

        operator, clearance = self._reader()
        total, page = search(self._ctx, filters, offset, limit, sort, as_of, clearance=clearance)
        self._looked(operator, page)
        return total, page

    def find(self, text: str, limit: int = 200, full_only: bool = False) -> list[Any]:
        """Records for a picker: id or tag containing ``text``, of those the clearance sees."""
        from membrane_engine.oversight.finders import search_records

        return search_records(self._ctx, text, limit, self._reader()[1], full_only)

    def tag_counts(self) -> dict[str, int]:
        from membrane_engine.oversight.record_query import tag_counts

        return tag_counts(self._ctx, self._reader()[1])

    def referencing(self, record_id: str, limit: int = 200) -> list[str]:
        """Records the clearance sees in full whose relations point at ``record_id``."""
        from membrane_engine.oversight.record_query import referencing

        _, clearance = self._reader()
        self._verdict(record_id, clearance)
        return referencing(self._ctx, record_id, limit, clearance)

    def labels(self, record_ids: list[str], limit: int | None = None) -> dict[str, str]:
        """Display names of the live records the clearance sees (a redacted one by its type),
        each at most ``limit`` characters (default ``labels.LIMIT``)."""
        from membrane_engine.retrieval.labels import labels
        from membrane_engine.rules.labels import LIMIT

        return labels(self._ctx, check_ids(record_ids, "record_ids"), self._reader()[1],
                      LIMIT if limit is None else limit)

    def briefs(self, record_ids: list[str]) -> dict[str, Any]:
        """Scalar facts (``lookups.briefs``: pinned and deletion policy among them, which a
        redacted view withholds) of the live records the clearance sees in full."""
        from membrane_engine.oversight.finders import briefs

        _, clearance = self._reader()
        ids = check_ids(record_ids, "record_ids")
        seen = reads.explain_many(self._ctx, ids, clearance)
        return briefs(self._ctx, [rid for rid in ids if seen.get(rid) is Verdict.FULL])

    def scopes(self) -> list[str]:
        return gate.scopes_seen(self._ctx, self._reader()[1])

    def archived_ids(self) -> list[str]:
        return gate.archived_ids(self._ctx, self._reader()[1])

    def review_queue(self, as_of: datetime | None = None, horizon: Any = None, limit: int = 200) -> Any:
        operator, clearance = self._reader()
        queue = review.review_queue(self._ctx, clearance, as_of, horizon, limit)
        self._looked(operator, [item.record for item in queue.contested])
        return queue

    # counts -------------------------------------------------------------------------------

    def _seen_rows(self, clearance: TrustContext, snap: Any) -> tuple[np.ndarray, np.ndarray]:
        codes = verdicts(snap.sens_level, snap.scope_code, snap.scope_names, clearance)
        return codes > 0, codes == 2

    def beyond_clearance(self) -> int:
        """How many live records the clearance does not see, now: one total, never broken down
        (counted now whatever instant a page shows, so two instants tell nothing about when
        a record beyond it was made)."""
        _, clearance = self._reader()
        if gate.sees_everything(clearance):
            return 0
        snap = self._ctx.columns.current()
        seen, _ = self._seen_rows(clearance, snap)
        return int(np.count_nonzero(snap.alive & ~seen))

    def count(self) -> int:
        """Live records the clearance sees."""
        _, clearance = self._reader()
        snap = self._ctx.columns.current()
        seen, _ = self._seen_rows(clearance, snap)
        return int(np.count_nonzero(snap.alive & seen))

    def metrics(self, as_of: datetime | None = None) -> dict[str, Any]:
        """SPEC 7 over what the clearance sees (labels, salience and confidence of records it sees;
        what a redacted view withholds only of records it sees in full; audit entries of records
        it sees), plus ``beyond_clearance``."""
        from membrane_engine.oversight.metrics import compute_metrics

        _, clearance = self._reader()
        when = check_instant(as_of) if as_of is not None else self._ctx.now()
        if gate.sees_everything(clearance):
            out = store_metrics(self._ctx, when)
        else:
            snap = self._ctx.columns.current()
            seen, full = self._seen_rows(clearance, snap)
            out = compute_metrics(self._ctx.store, snap, when, seen=seen, full=full,
                                  actions_then=gate.audit_action_counts(self._ctx, clearance, when))
        out["beyond_clearance"] = self.beyond_clearance()
        return out

    def store_breakdown(self, as_of: datetime | None = None) -> dict[str, Any]:
        """Counts by type x sensitivity and by scope of the records the clearance sees, plus
        ``beyond_clearance``."""
        from membrane_engine.oversight.metrics import store_breakdown

        _, clearance = self._reader()
        when = check_instant(as_of) if as_of is not None else self._ctx.now()
        snap = self._ctx.columns.current()
        seen = None if gate.sees_everything(clearance) else self._seen_rows(clearance, snap)[0]
        out = store_breakdown(snap, when, seen)
        out["beyond_clearance"] = self.beyond_clearance()
        return out

    # policy files (SPEC 11) through the clearance ------------------------------------------------

    def check_policy(self, policy: Any, as_of: datetime | None = None) -> Any:
        """A policy file's assertions over the records the clearance sees: counts, coverage and
        offenders of those only (``beyond_clearance`` says how many it leaves out)."""
        within = self._reader()[1]
        return policies.check(self._ctx, policy, as_of=as_of, limit=policies.SHOWN_PER_FAILURE, within=within)

    def policy_coverage(self, policy: Any) -> dict[str, Any]:
        return policies.coverage(self._ctx, policy, within=self._reader()[1])

    def policy_profile_counts(self, policy: Any) -> dict[str, dict[str, int]]:
        """Per profile of ``policy``: how many of the records the clearance sees it gets full,
        redacted and hidden."""
        from membrane_engine.policy.check import Evaluator

        ev = Evaluator(self._ctx, within=self._reader()[1])
        out = {}
        for name in policy.profiles:
            codes = ev.verdicts(policy.trust(name))[ev.alive]
            out[name] = {v: int((codes == c).sum()) for v, c in (("full", 2), ("redacted", 1), ("hidden", 0))}
        return out

    def holds_sample(self) -> bool:
        """Is this the bundled sample store (its marker record is there)? Says nothing else."""
        return reads.holds_sample(self._ctx)

    def policy_snapshot_lines(self, policy: Any) -> Iterator[str]:
        """The snapshot of what each profile sees, of the records the clearance sees (ids only)."""
        return policy_snapshots.lines(self._ctx, policy, within=self._reader()[1])

    # the audit log and the access log ---------------------------------------------------------

    def audit_query(self, **filters: Any) -> tuple[int, list[Any]]:
        """Entries across the store of records the clearance sees, newest first (``clearance.audit_query``)."""
        clearance = self._reader()[1]
        audit_reads.check_filters(filters)
        return gate.audit_query(self._ctx, clearance, **filters)

    def audit_actors(self, limit: int = 500) -> list[str]:
        return gate.audit_actors(self._ctx, self._reader()[1], limit)

    def audit_activity(self, bucket_seconds: float = 86400.0, **filters: Any) -> list[tuple[float, str, int]]:
        from membrane_engine.oversight.finders import audit_activity

        return audit_activity(self._ctx, bucket_seconds, clearance=self._reader()[1], **filters)

    def access_log(self, record_id: str | None = None, actor: str | None = None, limit: int = 100,
                   offset: int = 0) -> tuple[int, list[Any]]:
        """Who looked, at the records the clearance sees."""
        return gate.accesses(self._ctx, self._reader()[1], record_id, actor, limit, offset)

    def verify_audit(self, checkpoint: Any = None) -> list[Any]:
        """Problems of the store's audit trail (SPEC 6). The report names rows, not content; an
        admin's question about the whole store."""
        self._allowed("manage_operators")
        return audit_reads.verify(self._ctx, checkpoint)

    def audit_checkpoint(self) -> dict[str, Any]:
        self._allowed("read")
        return audit_reads.checkpoint(self._ctx)

    # export and import --------------------------------------------------------------------------

    def _export_trust(self, clearance: TrustContext, trust: TrustContext | None) -> TrustContext:
        return clearance if trust is None else narrowest(as_trust(trust), clearance)

    def iter_export(self, ids: Iterable[str] | None = None, trust: TrustContext | None = None,
                    as_of: datetime | None = None) -> Iterator[dict[str, Any]]:
        """Records as Membrane JSON, no wider than the clearance (and ``trust`` when given)."""
        operator, clearance = self._reader()
        narrowed = self._export_trust(clearance, trust)
        ids = check_ids(ids) if ids is not None else None
        self._log_export(operator, narrowed, ids)
        return export.iter_export(self._ctx, ids, narrowed, as_of)

    def export_file(self, path: str | Path, ids: Iterable[str] | None = None, trust: TrustContext | None = None,
                    as_of: datetime | None = None) -> int:
        operator, clearance = self._reader()
        narrowed = self._export_trust(clearance, trust)
        ids = check_ids(ids) if ids is not None else None
        count = export.export_file(self._ctx, path, ids=ids, trust=narrowed, as_of=as_of)
        self._log_export(operator, narrowed, ids)
        return count

    def _log_export(self, operator: Operator, trust: TrustContext, ids: list[str] | None) -> None:
        snap = self._ctx.columns.current()
        full = snap.alive & (verdicts(snap.sens_level, snap.scope_code, snap.scope_names, trust) == 2)
        if ids is not None:
            wanted = np.zeros(len(full), dtype=bool)
            wanted[[snap.row_of[i] for i in ids if i in snap.row_of]] = True
            full &= wanted
        self._looked_rows(operator, np.flatnonzero(full), snap)

    def filter_ids(self, types: list[str] | None = None, scopes: list[str] | None = None,
                   sensitivities: list[str] | None = None) -> list[str]:
        """Ids of the live records the clearance sees that match every given filter."""
        from membrane_engine.oversight.finders import filter_ids

        _, clearance = self._reader()
        ids = filter_ids(self._ctx, types, scopes, sensitivities)
        if gate.sees_everything(clearance) or not ids:
            return ids
        seen = reads.explain_many(self._ctx, ids, clearance)
        return [rid for rid in ids if seen.get(rid, Verdict.HIDDEN) is not Verdict.HIDDEN]

    def preview_import_file(self, path: str | Path) -> Any:
        """What ``import_file`` would read from ``path`` (``imports.preview_file``), for an
        operator who may import: the records' labels, and how many of their ids the store already
        holds, listed only where the clearance sees them (the import names the first one it
        refuses either way: the ids are the operator's own file's)."""
        from membrane_engine.transfer.imports import preview_file

        clearance = self._allowed("import").clearance
        found = preview_file(self._ctx.store, path)
        if found.existing and not gate.sees_everything(clearance):
            seen = reads.explain_many(self._ctx, found.existing, clearance)
            found.existing = [rid for rid in found.existing if seen.get(rid, Verdict.HIDDEN) is not Verdict.HIDDEN]
        return found

    def import_records(self, items: Iterable[Any], progress: Callable[[int, int], None] | None = None) -> int:
        operator = self._allowed("import")
        return intake.import_records(self._ctx, items, operator.actor, progress)

    def import_file(self, path: str | Path, progress: Callable[[int, int], None] | None = None,
                    workers: int = 1) -> int:
        operator = self._allowed("import")
        return intake.import_file(self._ctx, path, operator.actor, progress, workers)

    # curation (SPEC 6), as the operator ------------------------------------------------------------

    def _curate(self, op: str, *args: Any, **kwargs: Any) -> Any:
        operator = self._allowed(op)
        return curation.curate_within(self._ctx, operator.clearance, op, *self._with_actor(op, operator, args, kwargs),
                                      **kwargs)

    @staticmethod
    def _with_actor(op: str, operator: Operator, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """The operation's arguments with ``operator:NAME`` where the facade takes ``actor``."""
        from membrane_engine.curation.operations import PLANNERS

        if op not in PLANNERS and op not in ("reinstate", "restore_version"):
            raise ValidationError(f"unknown curation operation {op!r}", [("op", "unknown")])
        if "actor" in kwargs:
            raise ValidationError("actor is not an argument of the operator's view: every write names "
                                  f"{operator.actor}", [("actor", "not allowed")])
        from membrane_engine.curation.operations import planner_for

        names = list(inspect.signature(planner_for(op)).parameters)[2:]  # after the planner's view and time
        at = names.index("actor")
        if len(args) < at:
            raise ValidationError(f"{op}: expected {', '.join(names[:at])} before the rationale (got {len(args)} "
                                  "arguments)", [("args", "too few")])
        return (*args[:at], operator.actor, *args[at:])

    def preview(self, op: str, *args: Any, **kwargs: Any) -> Any:
        """What ``op`` would do, called with the view's arguments (no actor); writes nothing.
        Needs the role of ``op``: a preview shows the records as they would be."""
        operator = self._allowed(op)
        return curation.preview_within(self._ctx, operator.clearance, op, *self._with_actor(op, operator, args, kwargs),
                                       **kwargs)

    def reinforce(self, id: str, rationale: str, gain: float | None = None) -> Any:
        return self._curate("reinforce", id, rationale, gain=gain)

    def penalize(self, id: str, amount: float, rationale: str) -> Any:
        return self._curate("penalize", id, amount, rationale)

    def retract(self, id: str, rationale: str) -> Any:
        return self._curate("retract", id, rationale)

    def contest(self, id: str, contesting_ref: str, rationale: str) -> Any:
        return self._curate("contest", id, contesting_ref, rationale)

    def supersede(self, old_id: str, new_record: Any, rationale: str) -> Any:
        return self._curate("supersede", old_id, new_record, rationale)

    def fork(self, source_id: str, forked_record: Any, rationale: str) -> Any:
        return self._curate("fork", source_id, forked_record, rationale)

    def merge(self, ids: list[str], merged_record: Any, rationale: str) -> Any:
        return self._curate("merge", ids, merged_record, rationale)

    def pin(self, id: str, rationale: str) -> Any:
        return self._curate("pin", id, rationale)

    def unpin(self, id: str, rationale: str) -> Any:
        return self._curate("unpin", id, rationale)

    def reclassify(self, id: str, rationale: str, sensitivity: Any = None, scope: str | None = None,
                   tags: list[str] | None = None) -> Any:
        return self._curate("reclassify", id, rationale, sensitivity=sensitivity, scope=scope, tags=tags)

    def delete(self, id: str, rationale: str) -> Any:
        return self._curate("delete", id, rationale)

    def restore(self, id: str, rationale: str) -> Any:
        return self._curate("restore", id, rationale)

    def reinstate(self, id: str, rationale: str) -> Any:
        return self._curate("reinstate", id, rationale)

    def restore_version(self, id: str, when: datetime, rationale: str) -> Any:
        return self._curate("restore_version", id, when, rationale)

    def prune(self, rationale: str, as_of: datetime | None = None, dry_run: bool = True) -> list[str]:
        """Prune the records the clearance sees in full (SPEC 6's rule); the ids pruned, or with
        ``dry_run`` (the default) those that would be."""
        from membrane_engine.model.records import check_flag

        if check_flag(dry_run, "dry_run"):
            return list(self.preview("prune", rationale, as_of=as_of).result)
        return list(self._curate("prune", rationale, as_of=as_of).result)

    def consolidate(self, as_of: datetime | None = None, dry_run: bool = False, only: list[str] | None = None) -> Any:
        """Membrane's consolidators (SPEC 12) as this operator (a curator or admin): only records
        the clearance sees in full are sources, targets or entities, so nothing is combined from
        or revealed beyond it; every entry names ``operator:NAME``. The created records' sources
        (and, when written, the records) go to the access log like any record shown in full.
        ``only``: keys of a dry run's proposals to apply, planned anew within the clearance as
        stored now (``report.stale``: those no longer proposed, not applied)."""
        from membrane_engine.consolidation import service as consolidation

        operator = self._allowed("consolidate")
        report = consolidation.consolidate(self._ctx, operator.actor, as_of, dry_run, within=operator.clearance,
                                           only=only)
        snap = self._ctx.columns.current()
        shown = {s for item in report.items if item.action == "created" for s in item.sources}
        shown.update(report.created)  # once written, the records themselves (a dry run's are not in the store)
        rows = np.array(sorted(i for i in (snap.row_of.get(s) for s in shown) if i is not None), dtype=np.int64)
        self._looked_rows(operator, rows, snap)
        return report

    def reject_consolidation(self, keys: list[str], rationale: str, as_of: datetime | None = None) -> Any:
        """Reject consolidation proposals by key (a curator or admin): planned again within the
        clearance, the ones still proposed are recorded, naming ``operator:NAME`` and the
        rationale; later runs leave them out until their sources change. A key the clearance's
        run does not propose (stale, or beyond it) is returned in ``stale`` and not recorded."""
        from membrane_engine.consolidation import service as consolidation

        operator = self._allowed("consolidate")
        return consolidation.reject(self._ctx, keys, operator.actor, rationale, as_of, within=operator.clearance)

    def consolidation_history(self, limit: int = 50) -> list[Any]:
        """Consolidation runs, rejections and changes of the auto-apply setting, newest first
        (``ledger.history``): counts and records of what the clearance sees in full; an event
        with none of that is not listed."""
        from membrane_engine.consolidation import ledger

        _, clearance = self._reader()
        return ledger.history(self._ctx, None if gate.sees_everything(clearance) else clearance, limit)

    def consolidation_auto_apply(self) -> Any:
        """Whether the console applies consolidation proposals automatically, who set it, when."""
        from membrane_engine.consolidation import ledger

        self._reader()
        return ledger.auto_apply(self._ctx)

    def set_consolidation_auto_apply(self, on: bool) -> Any:
        """Turn applying consolidation proposals automatically on or off (an admin), audited."""
        from membrane_engine.consolidation import ledger

        operator = self._allowed("configure_consolidation")
        return ledger.set_auto_apply(self._ctx, on, operator.actor)

    def _capturing(self, requests: list[Any]) -> tuple[Operator, list[Any]]:
        """The operator may capture (a curator or admin) and sees every request's records in full:
        a capture creates records at its own sensitivity and scope, and nobody writes where they
        cannot read. Refused (AccessDeniedError) before anything is read or written."""
        from membrane_engine.ingestion.capture import as_request

        operator = self._allowed("capture")
        reqs = [as_request(r, f"requests.{k}") for k, r in enumerate(requests)]
        for k, req in enumerate(reqs):
            if verdict_as_read(req.level, req.scope, operator.clearance) is not Verdict.FULL:
                where = f" in scope {req.scope!r}" if req.scope else ""
                raise AccessDeniedError(f"capture {k} would write {req.level.value} records{where}, beyond your "
                                        "clearance; nothing was written")
        return operator, reqs

    def preview_capture(self, request: Any) -> Any:
        """What ``capture_memory`` would write (entities matched and created, edges, the derived
        fact, existing records linked), through the clearance: a record it does not see in full
        is neither matched nor linked. Writes nothing."""
        from membrane_engine.ingestion import capture as ingestion

        operator, (req,) = self._capturing([request])
        out = ingestion.preview(self._ctx, req, operator.actor, within=operator.clearance)
        self._looked(operator, out.updated_records)
        return out

    def capture_memory(self, request: Any) -> Any:
        """Capture as an agent would (SPEC 12), every entry naming ``operator:NAME``; records
        beyond the clearance are neither matched nor linked (``preview_capture`` shows the same)."""
        return self.capture_many([request])[0]

    def capture_many(self, requests: Iterable[Any]) -> list[Any]:
        """Several captures in one transaction, all written or none."""
        from membrane_engine.ingestion import capture as ingestion

        operator, reqs = self._capturing(list(requests))
        out = ingestion.capture_many(self._ctx, reqs, operator.actor, within=operator.clearance)
        self._looked(operator, [r for response in out for r in response.updated_records])
        return out

    def bulk_preview(self, op: str, ids: Iterable[str], rationale: str, **params: Any) -> Any:
        """One operation over many records, previewed through the clearance (``bulk.preview``)."""
        operator = self._allowed(op) if isinstance(op, str) else self._allowed("")
        return bulk.preview(self._ctx, op, ids, operator.actor, rationale, operator.clearance, **params)

    def bulk_apply(self, preview: Any) -> Any:
        """Apply a preview this operator made, under their role and clearance as stored now."""
        from membrane_engine.curation.bulk import BulkPreview

        if not isinstance(preview, BulkPreview):
            raise ValidationError(f"bulk_apply takes a BulkPreview (got {type(preview).__name__})",
                                  [("preview", "not a preview")])
        operator = self._allowed(preview.op)
        if preview.actor != operator.actor:
            raise AccessDeniedError(f"this preview was made by {preview.actor}, not {operator.actor}")
        return bulk.apply(self._ctx, replace(preview, clearance=operator.clearance))

    # group M1 (overview, simulator, what-if, selector, graph) ------------------------------------

    def sample_loaded_at(self) -> float | None:
        """When the bundled sample was loaded into this store (epoch seconds), None when it was
        not: a fact about the store, not about any record."""
        from membrane_engine.oversight.finders import sample_loaded_at

        self._reader()
        return sample_loaded_at(self._ctx)

    def _selection_within(self, out: Simulation, clearance: TrustContext) -> Simulation:
        """The selector's decision over the candidates the clearance sees (aggregates over what
        it sees): the scores of the others are dropped, ids and all, and the confidence and
        needs_more are ranked again over the rest by the engine's own rule (``selector.rank``).
        Otherwise a candidate beyond the clearance showed as an id in ``scores`` and as a lead
        in the confidence."""
        from membrane_engine.rules.selector import rank

        selection = out.response.selection
        if selection is None or gate.sees_everything(clearance):
            return out
        snap = self._ctx.columns.current()
        ids = list(selection.scores)
        rows = np.array([snap.row_of.get(rid, -1) for rid in ids], dtype=np.int64)
        seen = np.zeros(len(ids), dtype=bool)
        known = np.flatnonzero(rows >= 0)
        if len(known):
            r = rows[known]
            seen[known] = snap.alive[r] & (verdicts(snap.sens_level[r], snap.scope_code[r], snap.scope_names,
                                                    clearance) > 0)
        if seen.all():
            return out
        kept = [rid for rid, ok in zip(ids, seen) if ok]
        if not kept:  # as when the context has no candidate at all
            return replace(out, response=out.response.model_copy(update={"selection": None}))
        scores = np.array([selection.scores[rid] for rid in kept], dtype=float)
        order, confidence, needs_more = rank(np.array(kept, dtype=object), scores, selection.threshold)
        selection = selection.model_copy(update={
            "scores": {kept[k]: float(scores[k]) for k in order}, "confidence": confidence, "needs_more": needs_more})
        return replace(out, response=out.response.model_copy(update={"selection": selection}))

    @property
    def selector_threshold(self) -> float:
        """The engine's needs_more threshold (SPEC 5), the default the selector inspector offers."""
        return float(self._ctx.selector_threshold)

    # operators (admins) --------------------------------------------------------------------------

    def list_operators(self) -> list[Operator]:
        self._allowed("manage_operators")
        return self._ctx.operators.list()

    def operator_roster(self) -> list[tuple[Operator, bool, bool]]:
        """Every operator, with whether a password is set and whether the row verifies (never the
        password or its hash): for admins."""
        self._allowed("manage_operators")
        return self._ctx.operators.roster()

    def add_operator(self, name: str, role: Role | str, max_sensitivity: Any, scopes: Any = None,
                     email: str | None = None) -> Operator:
        operator = self._allowed("manage_operators")
        return self._ctx.operators.add(name, role, max_sensitivity, scopes, actor=operator.actor, email=email)

    def set_operator(self, name: str, **changes: Any) -> Operator:
        operator = self._allowed("manage_operators")
        if "actor" in changes:
            raise ValidationError("actor is not an argument of the operator's view", [("actor", "not allowed")])
        return self._ctx.operators.set(name, actor=operator.actor, **changes)

    def remove_operator(self, name: str) -> None:
        operator = self._allowed("manage_operators")
        self._ctx.operators.remove(name, actor=operator.actor)

    # group M2 (records, decay, audit, curate, review) ----------------------------------------------

    def claimed(self, rows: list[Any]) -> dict[int, str]:
        """``history.claimed_by`` for audit rows this view returned (``audit_query``,
        ``audit_rows``): by ``seq``, who claims an entry that came with its record ("the import"
        or "its creator") rather than being written by this engine. Only rows of records whose
        entries the clearance sees are answered."""
        from membrane_engine.rules.chain import AuditRow
        from membrane_engine.rules.history import claimed_by
        from membrane_engine.storage.audit_log import last_creates

        _, clearance = self._reader()
        rows = [r for r in rows if isinstance(r, AuditRow)]
        if not rows:
            return {}
        if not gate.sees_everything(clearance):
            ids = list(dict.fromkeys(r.record_id for r in rows))
            seen = {rid for rid, v in reads.explain_many(self._ctx, ids, clearance).items() if v is not Verdict.HIDDEN}
            archived = set(gate.archived_ids(self._ctx, clearance))
            rows = [r for r in rows if r.record_id in seen or r.record_id in archived]
        return claimed_by(rows, last_creates(self._ctx.store, (r.record_id for r in rows))) if rows else {}


def _sensitivities() -> list[Any]:
    from membrane_engine.model.records import Sensitivity

    return list(Sensitivity)


__all__ = ["OperatorView"]
