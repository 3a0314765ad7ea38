"""Episodic compression, as Membrane's ``pkg/consolidation/episodic.go``: an episode at least a
day old (at ``as_of``), not pinned and above the floor of 0.05 has its salience halved, never
below the floor; audit ``decay`` by the actor, "Episodic compression: record exceeded age
threshold".

Salience is S(as_of), where Membrane reads its stored (swept) value (SPEC 12). The new value is
anchored at the write time and never above S(write time) **(deviation: Membrane has no as_of)**:
a run ``as_of`` an earlier instant never raises a record that has decayed since. Eligibility is one numpy pass over the column
cache; only the episodes compressed are read, under the write lock.
"""

from __future__ import annotations

import numpy as np

from membrane_engine.consolidation.batch import Batch, Pass
from membrane_engine.consolidation.report import COMPRESSED, Item
from membrane_engine.model.records import AuditAction, format_time

AGE_THRESHOLD = 24 * 3600.0  # compressionAgeThreshold
MULTIPLIER = 0.5  # compressedSalienceMultiplier
FLOOR = 0.05  # compressedSalienceFloor
RATIONALE = "Episodic compression: record exceeded age threshold"


def plan(p: Pass) -> Batch:
    batch = Batch(p)
    snap = p.snap
    rows = p.source_rows()
    rows = rows[~snap.decay.pinned[rows] & (p.as_of_t - snap.created_at[rows] >= AGE_THRESHOLD)]
    s_as_of = p.salience(rows, p.as_of_t)
    keep = s_as_of > FLOOR
    rows, s_as_of = rows[keep], s_as_of[keep]
    s_now = p.salience(rows, p.now_t) if p.now_t != p.as_of_t else s_as_of
    after = np.minimum(np.maximum(s_as_of * MULTIPLIER, FLOOR), s_now)
    lowered = after < s_now
    stamp = format_time(p.as_of)
    for i, before, new, at in zip(rows[lowered].tolist(), s_now[lowered].tolist(), after[lowered].tolist(),
                                  s_as_of[lowered].tolist()):
        rid = str(snap.ids[i])
        change = batch.change(rid)
        change.salience = new
        change.entries.append((AuditAction.DECAY, RATIONALE, {
            "consolidator": p.kind, "salience": {"before": before, "after": new}, "as_of": stamp,
            "salience_as_of": at, "age_seconds": p.as_of_t - float(snap.created_at[i])}))
        anchor = (float(snap.decay.anchor_salience[i]), float(snap.decay.anchor_at[i]))  # its key's basis
        batch.items.append(Item(p.kind, COMPRESSED, rid, "episodic", (), RATIONALE, before, new, basis=anchor))
    return batch.finish()


__all__ = ["AGE_THRESHOLD", "FLOOR", "MULTIPLIER", "plan"]
