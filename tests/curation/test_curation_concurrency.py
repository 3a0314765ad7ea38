"""Two operators never lose an update: concurrent reinforcements of one record, from threads
(one shared Membrane, or one each) and from two processes, give exactly the entries and the
salience that the same number of sequential reinforcements give."""

from __future__ import annotations

import multiprocessing
import threading

from tests.support import workers
from tests.support.curation import semantic

from membrane_engine import Membrane

THREADS, PER_THREAD = 8, 50
GAIN = 0.001
START = 0.5


def sequential(n: int) -> float:
    """The salience n sequential reinforcements give (clock fixed, so no decay between them)."""
    s = START
    for _ in range(n):
        s = max(s, min(s + GAIN, 1.0))
    return s


def check(m: Membrane, n: int) -> None:
    rows = m.audit_rows("hot")
    reinforce = [r for r in rows if r.entry.action.value == "reinforce"]
    assert len(reinforce) == n
    assert [r.position for r in rows] == list(range(len(rows)))
    # each entry's before-value is the previous one's after-value: no update read a stale value
    for prev, cur in zip(reinforce, reinforce[1:]):
        assert cur.details["salience"]["before"] == prev.details["salience"]["after"]
    assert m.get("hot").salience == sequential(n)
    assert m.verify_audit() == []


def run_threads(target, verifier: Membrane | None = None) -> list:
    """Run ``target(k)`` in THREADS threads; with ``verifier``, verify the audit chain over and over
    meanwhile and return every non-empty report (a consistent read never sees a half-done op)."""
    errors: list[BaseException] = []
    reports: list = []
    barrier = threading.Barrier(THREADS)
    done = threading.Event()

    def verify_loop() -> None:
        while not done.is_set():
            problems = verifier.verify_audit()
            if problems:
                reports.append(problems)

    def body(k: int) -> None:
        try:
            barrier.wait()
            target(k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(THREADS)]
    checker = threading.Thread(target=verify_loop) if verifier is not None else None
    for t in threads:
        t.start()
    if checker:
        checker.start()
    for t in threads:
        t.join(120)
    done.set()
    if checker:
        checker.join(60)
    assert not errors, errors
    return reports


def test_threads_shared_and_own_membranes(store_url):
    """8 threads x 50: threads 0-3 share one Membrane, threads 4-7 have one each."""
    m = Membrane.open(store_url, load_sample=False, clock=workers.fixed_clock)
    m.import_records([semantic("hot", salience=START)])
    own = [Membrane.open(store_url, load_sample=False, clock=workers.fixed_clock) for _ in range(THREADS // 2)]
    handles = [m] * (THREADS // 2) + own

    def work(k: int) -> None:
        for i in range(PER_THREAD):
            handles[k].reinforce("hot", f"thread-{k}", f"use {i}", gain=GAIN)

    watcher = Membrane.open(store_url, load_sample=False)
    assert run_threads(work, verifier=watcher) == []
    watcher.close()
    check(m, THREADS * PER_THREAD)
    actors = {r.entry.actor for r in m.audit_rows("hot")}
    assert {f"thread-{k}" for k in range(THREADS)} <= actors
    for x in own:
        x.close()
    m.close()


def test_two_processes(store_url):
    m = Membrane.open(store_url, load_sample=False, clock=workers.fixed_clock)
    m.import_records([semantic("hot", salience=START)])
    ctx = multiprocessing.get_context("spawn")
    per_process = 50
    with ctx.Manager() as manager:
        start = manager.Event()
        with ctx.Pool(2) as pool:
            results = [pool.apply_async(workers.reinforce_many, (store_url, "hot", per_process, GAIN, start))
                       for _ in range(2)]
            start.set()
            assert [r.get(timeout=180) for r in results] == [per_process, per_process]
    check(m, 2 * per_process)
    m.close()
