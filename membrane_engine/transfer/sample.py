"""The bundled sample store: a coding agent's memory (sample_data/README.md).

Its records were written as of ``SAMPLE_NOW``. A new default store takes them shifted so that
their "now" is the moment it is first opened: every instant moves by the same amount, so the
relative order and gaps (and so every salience curve) are kept, and the demo looks alive instead
of a week stale. The shift is exact, so the result is deterministic given that moment.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from membrane_engine.model.records import format_time, parse_time

SAMPLE_NOW = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)  # sample_data/build_sample.py's NOW
# A record only the bundled sample store holds (uuid5 of "s:no-force-push"): the sample policy's
# assertions are about that store, so the console offers it only there.
SAMPLE_MARKER = "3badbecb-2cdd-5bcd-87a7-a7924117c2e4"

# Every field of Membrane's JSON that holds an instant (SPEC 1, plus SPEC 2's anchor_at).
TIME_FIELDS = frozenset({"created_at", "updated_at", "last_reinforced_at", "anchor_at", "timestamp", "t",
                         "last_used_at", "last_executed_at", "start", "end"})


def sample_store_path() -> Path:
    """Inside the installed package (membrane_engine/sample_data, see pyproject.toml), or in
    sample_data/ beside the package in a source tree."""
    here = Path(__file__).resolve().parent.parent
    installed = here / "sample_data" / "membrane_sample.json"
    return installed if installed.exists() else here.parent / "sample_data" / "membrane_sample.json"


def shift_times(value: Any, by: timedelta) -> Any:
    """A copy of a Membrane JSON value with every instant moved by ``by``."""
    if isinstance(value, dict):
        return {k: (_shifted(v, by) if k in TIME_FIELDS else shift_times(v, by)) for k, v in value.items()}
    if isinstance(value, list):
        return [shift_times(v, by) for v in value]
    return value


def _shifted(value: Any, by: timedelta) -> Any:
    if not isinstance(value, str):
        return shift_times(value, by)
    try:
        return format_time(parse_time(value) + by)
    except (ValueError, TypeError):
        return value  # not an instant after all (a free-form field of that name): kept as written


def sample_records(now: datetime) -> list[dict[str, Any]]:
    """The sample's records with their "now" moved to ``now``."""
    records = json.loads(sample_store_path().read_text(encoding="utf-8"))
    # Whole seconds, so the shifted instants keep the sample's second precision.
    return shift_times(records, timedelta(seconds=round((now - SAMPLE_NOW).total_seconds())))
