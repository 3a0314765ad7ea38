"""One curation operation over many records: one preview, then one transaction per record.

``preview(ctx, op, ids, actor, rationale, clearance=None, **params)`` plans ``op`` for every
id with curation's planners (the same ones ``operations.preview_within`` and the operations run),
in one read transaction, and says per record what would change (the plan) or why it is refused
(an error sentence). ``apply(ctx, preview)`` then applies the records the preview accepted, each in a
write transaction of its own that appends that record's one audit entry.

Failure semantics, stated in every preview (``FAILURE_POLICY``): records are independent. A
record refused in the preview is not touched; a record that fails when applied -- deleted,
rewritten or relabelled by someone else since the preview (its audit chain head moved), now
beyond the operator's clearance, or refused by the operation's own rules -- is rolled back
alone and reported with the engine's sentence; every other record is applied.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from membrane_engine.context import EngineContext
from membrane_engine.curation import operations as curation
from membrane_engine.errors import MembraneError, NotFoundError, ValidationError
from membrane_engine.model.records import check_ids
from membrane_engine.rules.trust import TrustContext, as_trust

# The operations that can be applied to many records, each with the parameters it takes (beside
# the record, the actor and the rationale).
BULK_OPS: dict[str, tuple[str, ...]] = {
    "reinforce": ("gain",),
    "penalize": ("amount",),
    "retract": (),
    "contest": ("contesting_ref",),
    "reinstate": (),
    "pin": (),
    "unpin": (),
    "reclassify": ("sensitivity", "scope", "tags"),
    "delete": (),
}
MAX_BULK = 1000
FAILURE_POLICY = ("Each record is changed in its own transaction, with its own audit entry. A record refused "
                  "here is left as it is; a record that changes, leaves your clearance or is refused when you "
                  "apply is left as it is and reported; every other record is applied.")


@dataclass(frozen=True)
class BulkItem:
    """One record of a bulk preview: the plan (what would change) or the refusal."""

    record_id: str
    plan: curation.CurationPlan | None
    error: str | None
    token: str | None = field(default=None, repr=False)  # the record's audit chain head when previewed

    @property
    def ok(self) -> bool:
        return self.plan is not None


@dataclass(frozen=True)
class BulkPreview:
    op: str
    actor: str
    rationale: str
    params: dict[str, Any]
    at: datetime
    items: tuple[BulkItem, ...]
    clearance: TrustContext | None = None
    policy: str = FAILURE_POLICY

    @property
    def accepted(self) -> list[BulkItem]:
        return [i for i in self.items if i.ok]

    @property
    def refused(self) -> list[BulkItem]:
        return [i for i in self.items if not i.ok]


@dataclass(frozen=True)
class BulkOutcome:
    """What happened to one record: applied (with the plan written) or not, with the sentence."""

    record_id: str
    applied: bool
    plan: curation.CurationPlan | None
    error: str | None


@dataclass(frozen=True)
class BulkResult:
    op: str
    outcomes: tuple[BulkOutcome, ...]

    @property
    def applied(self) -> list[str]:
        return [o.record_id for o in self.outcomes if o.applied]

    @property
    def failed(self) -> list[BulkOutcome]:
        return [o for o in self.outcomes if not o.applied]


def _check_op(op: Any) -> str:
    if not isinstance(op, str) or op not in BULK_OPS:
        raise ValidationError(f"op {op!r:.80} cannot be applied to many records (one of {', '.join(BULK_OPS)})",
                              [("op", "not a bulk operation")])
    return op


def _check_params(op: str, params: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(params) - set(BULK_OPS[op]))
    if unknown:
        takes = ", ".join(BULK_OPS[op]) or "no parameters"
        raise ValidationError(f"{op} takes {takes}; got {unknown[0]!r}", [(unknown[0], "unknown parameter")])
    if op == "penalize" and "amount" not in params:
        raise ValidationError("penalize needs an amount", [("amount", "missing")])
    return dict(params)


def _call(op: str, rid: str, actor: str, rationale: str, params: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """The planner's arguments for one record, in SPEC 8 order."""
    if op == "penalize":
        return (rid, params["amount"], actor, rationale), {}
    if op == "contest":
        return (rid, params.get("contesting_ref", ""), actor, rationale), {}
    return (rid, actor, rationale), {k: v for k, v in params.items() if v is not None}


def _message(exc: MembraneError) -> str:
    return str(exc)


def _gate(doc: dict[str, Any] | None, rid: str, clearance: TrustContext | None) -> None:
    """The operator's clearance must see the record in full (``curation.gate_write``)."""
    curation.gate_write(doc, rid, clearance)


def _check_arguments(planner: Any, view: Any, now: datetime, op: str, actor: str, rationale: str,
                     params: dict[str, Any]) -> None:
    """The op's arguments, checked once for every record: planners check their arguments before
    looking the record up (SPEC 6 order), so planning for an id that is in no store either
    passes them (NotFoundError) or refuses them (the whole call's refusal)."""
    args, kwargs = _call(op, "bulk-argument-check-" + uuid.uuid4().hex, actor, rationale, params)
    try:
        planner(view, now, *args, **kwargs)
    except NotFoundError:
        return


def preview(ctx: EngineContext, op: str, ids: Any, actor: str, rationale: str,
            clearance: TrustContext | None = None, **params: Any) -> BulkPreview:
    """What ``op`` would do to each of ``ids`` (de-duplicated, at most MAX_BULK), read in one
    transaction: per record the plan, or the engine's sentence saying why it is refused.
    Arguments are checked first (one refusal for the whole call): the op, the ids, the actor,
    the rationale and the op's parameters."""
    op = _check_op(op)
    ids = list(dict.fromkeys(check_ids(ids)))
    if not ids:
        raise ValidationError("ids must not be empty", [("ids", "empty")])
    if len(ids) > MAX_BULK:
        raise ValidationError(f"at most {MAX_BULK} records at once (got {len(ids)})", [("ids", "too many")])
    actor, rationale = curation.checked_who(actor, rationale)
    params = _check_params(op, params)
    clearance = as_trust(clearance, "clearance") if clearance is not None else None
    planner = curation.planner_for(op)
    items: list[BulkItem] = []
    with ctx.store.read() as conn:
        now = ctx.now()
        view = curation.PlanView(ctx.store, conn, False)
        _check_arguments(planner, view, now, op, actor, rationale, params)
        rows = ctx.store.fetch(conn, ids)
        for rid in ids:
            row = rows.get(rid)
            try:
                _gate(row.doc if row is not None else None, rid, clearance)
                args, kwargs = _call(op, rid, actor, rationale, params)
                plan = planner(view, now, *args, **kwargs)
            except MembraneError as exc:
                items.append(BulkItem(rid, None, _message(exc)))
                continue
            items.append(BulkItem(rid, plan, None, row.audit_head))
    return BulkPreview(op, actor, rationale, params, now, tuple(items), clearance)


def _apply_one(ctx: EngineContext, p: BulkPreview, item: BulkItem) -> curation.CurationPlan:
    args, kwargs = _call(p.op, item.record_id, p.actor, p.rationale, p.params)
    planner = curation.planner_for(p.op)
    with ctx.store.write(prefetch=curation.named_record(p.op, args)) as conn:
        now = ctx.now()
        view = curation.PlanView(ctx.store, conn, True, None)
        row = view.rows([item.record_id]).get(item.record_id)  # read and locked before anything is decided
        _gate(row.doc if row is not None else None, item.record_id, p.clearance)
        if row.audit_head != item.token:
            raise ValidationError(f"record {item.record_id!r} was changed by someone else since the preview; "
                                  "it was left as it is (preview again to include it)",
                                  [("id", "changed since the preview")])
        plan = planner(view, now, *args, **kwargs)
        written = curation.execute(ctx.store, conn, plan, view, last=True)
    ctx.columns.written(written)
    return plan


def apply(ctx: EngineContext, p: BulkPreview) -> BulkResult:
    """Apply the records ``p`` accepted, one transaction (and one audit entry) per record, in the
    preview's order; see the module's failure semantics. Records the preview refused are
    reported as not applied, with the preview's sentence."""
    if not isinstance(p, BulkPreview):
        raise ValidationError(f"apply takes a BulkPreview (got {type(p).__name__})", [("preview", "not a preview")])
    outcomes: list[BulkOutcome] = []
    for item in p.items:
        if not item.ok:
            outcomes.append(BulkOutcome(item.record_id, False, None, f"refused in the preview: {item.error}"))
            continue
        try:
            plan = _apply_one(ctx, p, item)
        except NotFoundError as exc:
            outcomes.append(BulkOutcome(item.record_id, False, None, f"{_message(exc)} (deleted, or no longer "
                                                                      "within your clearance, since the preview)"))
        except MembraneError as exc:
            outcomes.append(BulkOutcome(item.record_id, False, None, _message(exc)))
        else:
            outcomes.append(BulkOutcome(item.record_id, True, plan, None))
    return BulkResult(p.op, tuple(outcomes))


__all__ = ["BULK_OPS", "FAILURE_POLICY", "MAX_BULK", "BulkItem", "BulkOutcome", "BulkPreview", "BulkResult",
           "apply", "preview"]
