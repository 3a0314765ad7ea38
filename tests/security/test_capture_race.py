"""Two processes capture the same new name at once: the entity is created once and the other
capture links to it. Capture plans under the writers' lock (ingestion.capture.capture_many), so
what the second one resolves is what the first one committed, not what stood before it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from membrane_engine import Membrane

from tests.support.records import T0


def _entities_named(m: Membrane, name: str) -> list[str]:
    found = []
    for rid in m.ids():
        record = m.get(rid)
        if record.type.value == "entity" and record.payload.canonical_name == name:
            found.append(rid)
    return found


@pytest.fixture
def two_writers(store_url: str) -> Iterator[tuple[Membrane, Membrane]]:
    first = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    second = Membrane.open(store_url, load_sample=False, clock=lambda: T0)
    yield first, second
    first.close()
    second.close()


def test_a_new_name_captured_twice_at_once_is_one_entity(two_writers: tuple[Membrane, Membrane]) -> None:
    first, second = two_writers
    start, errors = threading.Barrier(2), []

    def capture(m: Membrane, ref: str) -> None:
        try:
            start.wait()
            for k in range(5):
                m.capture_memory({"source": "agent", "source_kind": "event",
                                  "content": {"ref": f"{ref}-{k}", "text": "met them", "project": "Quillfeather"}})
        except Exception as exc:  # reported below, with the thread's name
            errors.append(f"{ref}: {exc!r}")

    threads = [threading.Thread(target=capture, args=(m, ref)) for m, ref in ((first, "a"), (second, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len(_entities_named(first, "Quillfeather")) == 1
    assert first.verify_audit() == []
