"""The gate under a real race (SPEC 4, "the gate decides on what it returns"): one process
relabels records as fast as it can (tests/support/race_writer.py) while this one reads through
every path that hands out content under a trust context. No record may go out beyond the context.

Each record handed out in full is judged three ways:
- on its own labels, as returned (a payload under labels that do not allow full is a leak);
- on its tag, which the writer sets to the labels of the same reclassify (a mismatch would be
  a record whose content and labels come from different versions);
- against the writer's log: when the log shows the record under labels that hide it for the
  whole time the read took (no relabel of it committing during the call), a full copy is a
  leak whatever labels it came back with.
Redacted records must carry no canary (tests/support/gates.py: leaks).

A few seconds per database by default; ``MEMBRANE_RACE_SECONDS=300`` for the long run.
"""

from __future__ import annotations

import bisect
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from tests.support import gates as kit
from tests.support.gates import CONTEXT
from membrane_engine.storage.vectors import VectorIndex
from membrane_engine import Membrane, RetrieveRequest, TrustContext
from membrane_engine.oversight import trust_diff as whatif
from membrane_engine.errors import AccessDeniedError, NotFoundError

SECONDS = float(os.environ.get("MEMBRANE_RACE_SECONDS", "3"))
WRITER = "tests.support.race_writer"
ROOT = Path(__file__).resolve().parents[2]
NARROW = TrustContext(max_sensitivity="public", actor_id="agent-narrow", scopes=["alpha"])
INITIAL = ("low", "alpha")


class RecordingEmbedder:
    """A ranking provider (SPEC 9) with a constant vector."""

    name = "recording"

    def __init__(self) -> None:
        self.shown: list = []

    def embed(self, texts):
        import numpy as np

        self.shown.extend(texts)
        return np.array([[1.0, 0.5] for _ in texts])


def read_paths(m: Membrane, ids: list[str]):
    """(name, call) pairs; each call returns the records (or export documents) it handed out."""
    turn = Counter()

    def next_id(path: str) -> str:
        turn[path] += 1
        return ids[(turn[path] * 7) % len(ids)]

    def by_id():
        try:
            return [m.retrieve_by_id(next_id("by_id"), CONTEXT)]
        except (AccessDeniedError, NotFoundError):
            return []

    def by_type():
        turn["type"] += 1
        return m.retrieve_by_type(kit.TYPES[turn["type"] % len(kit.TYPES)], CONTEXT)

    def selector():
        resp = m.retrieve(RetrieveRequest(trust=CONTEXT, task_descriptor="deploy", limit=1))
        return (resp.selection.selected if resp.selection else []) + list(resp.records)

    embedder = RecordingEmbedder()
    vectors = VectorIndex(m.store, embedder)

    def selector_embedder():
        # The provider embeds records when they are stored or first asked for, whatever any
        # context may see (vectors never leave the engine, like the column cache); what this
        # path checks is what the request hands out with ranking on.
        saved = m.embedder, m.vectors
        m.embedder, m.vectors = embedder, vectors
        try:
            resp = m.retrieve(RetrieveRequest(trust=CONTEXT, task_descriptor="deploy", limit=5))
        finally:
            m.embedder, m.vectors = saved
        return (resp.selection.selected if resp.selection else []) + list(resp.records)

    def what_if():
        shown = whatif.record_view(m, next_id("what_if"), NARROW, CONTEXT)
        return [] if shown is None else [shown[0]]

    return [
        ("retrieve", lambda: m.retrieve(RetrieveRequest(trust=CONTEXT)).records),
        ("retrieve limit 10", lambda: m.retrieve(RetrieveRequest(trust=CONTEXT, limit=10)).records),
        ("retrieve_by_type", by_type),
        ("retrieve_by_id", by_id),
        ("selector", selector),
        ("selector with embedder", selector_embedder),
        ("simulate", lambda: m.simulate(RetrieveRequest(trust=CONTEXT, min_salience=0.1)).response.records),
        ("what-if record", what_if),
        ("export under trust", lambda: list(m.iter_export(trust=CONTEXT, batch=16))),
    ]


def judge_against_log(full_reads: list[tuple[str, float, float]], log_path: Path) -> tuple[list, int]:
    """Full reads the writer's log proves were made while the record's labels hid it (or
    redacted it), and how many reads the log could not decide (a relabel of that record
    committed during the call)."""
    relabels: dict[str, list[tuple[float, float, str, str]]] = defaultdict(list)
    for line in log_path.read_text().splitlines():
        rid, sensitivity, scope, before, after = json.loads(line)
        relabels[rid].append((before, after, sensitivity, scope))
    leaks, undecided = [], 0
    for rid, t0, t1 in full_reads:
        history = relabels.get(rid, [])  # in commit order: one writer, one relabel at a time
        afters = [h[1] for h in history]
        k = bisect.bisect_left(afters, t0)  # history[:k] committed before the call started
        if k < len(history) and history[k][0] <= t1:  # the next relabel may have committed during the call
            undecided += 1
            continue
        sensitivity, scope = history[k - 1][2:] if k else INITIAL
        if not kit.full_allowed(sensitivity, scope):
            leaks.append((rid, sensitivity, scope, t0, t1))
    return leaks, undecided


def test_no_record_beyond_the_context_while_relabelled(store_url, tmp_path):
    records = kit.store_records(per_type=10)
    for r in records:
        r["tags"] = ["label:low:alpha"]
    m = Membrane.open(store_url, load_sample=False)
    m.import_records(records, actor="test:race")
    ids = m.ids()
    log_path = tmp_path / "relabels.jsonl"
    writer = subprocess.Popen([sys.executable, "-m", WRITER, store_url, str(SECONDS), str(log_path)],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert writer.stdout.readline().strip() == "ready"
        reads, items, full_reads, own_label_leaks = Counter(), 0, [], []
        paths = read_paths(m, ids)
        turn = 0
        while writer.poll() is None:
            name, call = paths[turn % len(paths)]
            turn += 1
            t0 = time.monotonic()
            out = call()
            t1 = time.monotonic()
            reads[name] += 1
            for item in out:
                items += 1
                doc = kit.as_dict(item)
                bad = kit.leaks([doc])
                if doc.get("payload") is not None:
                    if doc.get("tags") != [f"label:{doc['sensitivity']}:{doc.get('scope') or ''}"]:
                        bad.append(doc["id"])  # content and labels of different versions
                    full_reads.append((doc["id"], t0, t1))
                own_label_leaks += [(name, rid, doc.get("sensitivity"), doc.get("scope")) for rid in bad]
        assert writer.wait() == 0
    finally:
        if writer.poll() is None:
            writer.kill()
        m.close()
    relabels = len(log_path.read_text().splitlines())
    log_leaks, undecided = judge_against_log(full_reads, log_path)
    summary = (f"{store_url.split(':')[0]}: {SECONDS:g} s, {sum(reads.values())} reads ({dict(reads)}), "
               f"{items} records handed out, {len(full_reads)} in full ({undecided} undecided by the log), "
               f"{relabels} relabels, {len(own_label_leaks)} leaks on own labels, {len(log_leaks)} leaks by the log")
    print(summary)
    assert relabels > 10 and all(reads[name] > 0 for name, _ in paths), summary  # the race did happen
    assert own_label_leaks == [], summary + f": {own_label_leaks[:5]}"
    assert log_leaks == [], summary + f": {log_leaks[:5]}"
