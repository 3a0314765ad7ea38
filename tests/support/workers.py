"""Functions run in spawned processes by the concurrency tests (importable by module name)."""

from __future__ import annotations

from datetime import datetime, timezone

FIXED = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def fixed_clock() -> datetime:
    return FIXED


def reinforce_many(url: str, record_id: str, times: int, gain: float, start_event) -> int:
    from membrane_engine import Membrane

    m = Membrane.open(url, load_sample=False, clock=fixed_clock)
    try:
        start_event.wait(60)
        for k in range(times):
            m.reinforce(record_id, "proc", f"reinforce {k}", gain=gain)
        return times
    finally:
        m.close()
