"""SPEC 5: the multi-solution selector."""

from __future__ import annotations

import numpy as np
import pytest

from membrane_engine import Membrane, RetrieveRequest
from membrane_engine.model.records import validate_record
from membrane_engine.rules.selector import rank, select
from membrane_engine.storage.store import Store

from tests.support.records import DAY, HOUR, T0, ago, competence, later, rec, trust

WORKED = [
    competence("A", confidence=0.95, successes=90, failures=10, reinforced=ago(HOUR)),
    competence("B", confidence=0.70, successes=50, failures=50, reinforced=ago(15 * DAY)),
    competence("C", confidence=0.40, successes=20, failures=80, reinforced=ago(60 * DAY)),
]


def _check_worked(sel) -> None:
    assert [r.id for r in sel.selected] == ["A", "B", "C"]
    assert sel.scores["A"] == pytest.approx(0.94968, abs=5e-6)
    assert sel.scores["B"] == pytest.approx(0.63570, abs=5e-6)
    assert sel.scores["C"] == pytest.approx(0.28333, abs=5e-6)
    assert round(sel.scores["A"], 4) == 0.9497 and round(sel.scores["B"], 4) == 0.6357
    assert round(sel.scores["C"], 4) == 0.2833
    assert sel.confidence == pytest.approx(0.33061, abs=5e-6)
    assert round(sel.confidence, 4) == 0.3306
    assert sel.needs_more is True


def test_worked_example_over_records():
    _check_worked(select([validate_record(d) for d in WORKED], T0))


def test_worked_example_signals():
    sel = select([validate_record(d) for d in WORKED], T0)
    a = sel.signals[0]
    assert (a.record_id, a.applicability, a.success) == ("A", 0.95, 0.9)
    assert a.recency == pytest.approx(0.5 ** (1 / 720))
    b = sel.signals[1]
    assert (b.applicability, b.success) == (0.7, 0.5)
    assert b.recency == pytest.approx(2 ** -0.5)


def test_worked_example_through_retrieve(mem):
    mem.import_records(WORKED + [rec("noise", salience=1.0)])
    sel = mem.retrieve(RetrieveRequest(trust=trust("medium"), as_of=T0)).selection
    _check_worked(sel)
    assert all(r.payload is not None for r in sel.selected)


def test_zero_candidates():
    sel = select([], T0)
    assert (sel.selected, sel.confidence, sel.needs_more, sel.scores) == ([], 0.0, True, {})


@pytest.mark.parametrize("doc, score, needs_more", [
    (WORKED[0], 0.949679, False),
    (WORKED[2], 0.283333, True),
])
def test_one_candidate_confidence_is_its_score(doc, score, needs_more):
    sel = select([validate_record(doc)], T0)
    assert sel.confidence == pytest.approx(min(score, 1.0), abs=1e-6)
    assert sel.confidence == sel.scores[doc["id"]]
    assert sel.needs_more is needs_more


def test_redacted_candidate_scores_half_flat(mem):
    mem.import_records([
        competence("great-but-high", confidence=1.0, successes=100, failures=0, reinforced=T0, sensitivity="high"),
        competence("poor-but-clear", confidence=0.1, successes=0, failures=10, reinforced=ago(300 * DAY)),
    ])
    sel = mem.retrieve(RetrieveRequest(trust=trust("medium"), as_of=T0)).selection
    assert sel.scores["great-but-high"] == 0.5
    assert [r.id for r in sel.selected][0] == "great-but-high"
    assert sel.selected[0].redacted is True and sel.selected[0].payload is None
    poor = (0.1 + 0.0 + 0.5 ** 10) / 3
    assert sel.scores["poor-but-clear"] == pytest.approx(poor)
    assert sel.confidence == pytest.approx((0.5 - poor) / 0.5)
    # the same candidate in full scores from its signals
    sel = mem.retrieve(RetrieveRequest(trust=trust("high"), as_of=T0)).selection
    assert sel.scores["great-but-high"] == pytest.approx(1.0)


@pytest.mark.parametrize("reinforced, recency", [
    (later(DAY), 1.0),               # in the future
    (later(1), 1.0),
    (None, 0.5),                     # unset
    (T0, 1.0),
    (ago(30 * DAY), 0.5),
    (ago(90 * DAY), 0.125),
])
def test_recency(lite, reinforced, recency):
    doc = rec("c", "competence", confidence=0.5, payload={"kind": "competence"}, last_reinforced_at=reinforced)
    expected = (0.5 + 0.5 + recency) / 3
    assert select([validate_record(doc)], T0).scores["c"] == pytest.approx(expected)
    lite.import_records([doc])
    sel = lite.retrieve(RetrieveRequest(trust=trust(), as_of=T0)).selection
    assert sel.scores["c"] == pytest.approx(expected)
    assert sel.signals[0].recency == pytest.approx(recency)


def test_zero_time_last_reinforced_counts_as_unset():
    doc = rec("c", "competence", confidence=0.5, payload={"kind": "competence"})
    doc["lifecycle"]["last_reinforced_at"] = "0001-01-01T00:00:00Z"
    assert select([validate_record(doc)], T0).signals[0].recency == 0.5


@pytest.mark.parametrize("performance, success", [
    ({"success_count": 1, "failure_count": 3, "success_rate": 0.99}, 0.25),
    ({"success_count": 0, "failure_count": 0, "success_rate": 0.99}, 0.5),
    ({"success_count": 7, "failure_count": 0, "success_rate": 0.0}, 1.0),
    (None, 0.5),
])
def test_competence_success_ignores_stored_rate(lite, performance, success):
    payload = {"kind": "competence"} | ({"performance": performance} if performance else {})
    doc = rec("c", "competence", confidence=0.3, payload=payload, last_reinforced_at=T0)
    expected = (0.3 + success + 1.0) / 3
    assert select([validate_record(doc)], T0).signals[0].success == success
    lite.import_records([doc])
    assert lite.retrieve(RetrieveRequest(trust=trust(), as_of=T0)).selection.scores["c"] == pytest.approx(expected)


@pytest.mark.parametrize("metrics, success", [
    ({"failure_rate": 0.4, "execution_count": 0}, 0.5),
    ({"failure_rate": 0.4, "execution_count": 5}, 0.6),
    ({"failure_rate": 0.0, "execution_count": 1}, 1.0),
    (None, 0.5),
])
def test_plan_success_only_with_executions(lite, metrics, success):
    payload = {"kind": "plan_graph"} | ({"metrics": metrics} if metrics else {})
    doc = rec("p", "plan_graph", confidence=0.3, payload=payload, last_reinforced_at=T0)
    assert select([validate_record(doc)], T0).signals[0].success == pytest.approx(success)
    lite.import_records([doc])
    sel = lite.retrieve(RetrieveRequest(trust=trust(), as_of=T0)).selection
    assert sel.scores["p"] == pytest.approx((0.3 + success + 1.0) / 3)


def test_ties_rank_by_id_and_zero_best_gives_zero_confidence():
    docs = [competence(i, confidence=0.5, successes=1, failures=1, reinforced=T0) for i in ["b", "c", "a"]]
    sel = select([validate_record(d) for d in docs], T0)
    assert [r.id for r in sel.selected] == ["a", "b", "c"]
    assert sel.confidence == 0.0 and sel.needs_more is True
    order, confidence, needs_more = rank(np.array(["x", "y"], dtype=object), np.array([0.0, 0.0]), 0.7)
    assert (list(order), confidence, needs_more) == ([0, 1], 0.0, True)


def test_threshold_is_configurable(sqlite_url):
    for threshold, needs_more in [(0.3, False), (0.33, False), (0.34, True), (0.7, True)]:
        m = Membrane.open(sqlite_url, load_sample=False, selector_threshold=threshold)
        if not m.count():
            m.import_records(WORKED)
        sel = m.retrieve(RetrieveRequest(trust=trust(), as_of=T0)).selection
        assert sel.needs_more is needs_more, threshold
        m.close()
    m = Membrane(Store(sqlite_url), selector_threshold=0.2)
    assert m.retrieve(RetrieveRequest(trust=trust(), as_of=T0)).selection.needs_more is False
    m.close()
    assert select([validate_record(d) for d in WORKED], T0, threshold=0.3).needs_more is False


class FakeEmbeddings:
    """Vectors by text (a competence's text here is its skill name); the query vector is fixed."""

    name = "fake"

    def __init__(self, vectors):
        self.vectors = vectors

    def embed(self, texts):
        return np.array([self.vectors.get(t, [0.0, 0.0]) if t != "deploy" else [1.0, 0.0] for t in texts])


def test_embedding_similarity_replaces_confidence(sqlite_url):
    m = Membrane.open(sqlite_url, load_sample=False,
                      embedder=FakeEmbeddings({"A": [0.0, 1.0], "B": [1.0, 0.0]}))
    m.import_records(WORKED)
    sel = m.retrieve(RetrieveRequest(trust=trust(), as_of=T0, task_descriptor="deploy")).selection
    signals = {s.record_id: s for s in sel.signals}
    assert signals["A"].applicability == pytest.approx(0.5)   # cos 0
    assert signals["B"].applicability == pytest.approx(1.0)   # cos 1
    assert signals["C"].applicability == pytest.approx(0.4)   # no vector: confidence
    # without a task descriptor the provider is not asked
    sel = m.retrieve(RetrieveRequest(trust=trust(), as_of=T0)).selection
    assert {s.record_id: s.applicability for s in sel.signals} == {"A": 0.95, "B": 0.7, "C": 0.4}
    m.close()


def test_many_candidates_agree_with_select_over_records(mem):
    import random

    rnd = random.Random(7)
    docs = [competence(f"c{i:03d}", confidence=rnd.choice([0.2, 0.5, 0.8, rnd.random()]),
                       successes=rnd.randint(0, 5), failures=rnd.randint(0, 5),
                       reinforced=rnd.choice([None, ago(rnd.randint(0, 90 * DAY))]),
                       sensitivity=rnd.choice(["low", "medium", "high"]))
            for i in range(120)]
    mem.import_records(docs)
    sel = mem.retrieve(RetrieveRequest(trust=trust("medium"), as_of=T0, limit=3)).selection
    views = [r for r in (mem.get(d["id"], as_of=T0) for d in docs)]
    from membrane_engine.rules.trust import redact

    views = [redact(v) if v.sensitivity.value == "high" else v for v in views]
    want = select(views, T0)
    assert sel.scores == pytest.approx(want.scores, abs=1e-12)
    assert sel.scores.keys() == want.scores.keys() and len(sel.scores) == 120
    assert sel.confidence == pytest.approx(want.confidence, abs=1e-12)
    assert sel.needs_more == want.needs_more
    got_ids = [r.id for r in sel.selected]
    assert got_ids == [r.id for r in want.selected][: len(got_ids)]  # a prefix of the full ranking
    assert len(got_ids) >= min(50, 120)
