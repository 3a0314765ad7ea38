"""What-if (console): two trust contexts compared over every live record."""

from __future__ import annotations

from tests.support.records import rec

from membrane_engine import TrustContext
from membrane_engine.oversight.trust_diff import compare


def ctx(level: str, scopes: list[str] | None = None) -> TrustContext:
    return TrustContext(max_sensitivity=level, authenticated=True, actor_id="agent", scopes=scopes or [])


STORE = [
    rec("a-low", sensitivity="low", scope="alpha"),         # full under both
    rec("b-high", sensitivity="high", scope="alpha"),       # redacted -> full
    rec("c-hyper", sensitivity="hyper", scope="alpha"),     # hidden -> redacted
    rec("d-beta", sensitivity="low", scope="beta"),         # full -> hidden (B keeps alpha only)
    rec("e-high", sensitivity="high", scope=""),            # redacted -> full (unscoped)
    rec("f-hyper", sensitivity="hyper", scope="beta"),      # hidden under both: never a row
]


def test_compare_counts_orders_and_pages(mem):
    mem.import_records(STORE)
    a, b = ctx("medium"), ctx("high", ["alpha"])
    whole = compare(mem, a, b, limit=50)
    assert whole.total == 6 and whole.changed == 4
    assert whole.transitions == {("redacted", "full"): 2, ("hidden", "redacted"): 1, ("full", "hidden"): 1}
    # Gains first, the largest first (hidden -> redacted gains a level, as redacted -> full does;
    # ties by the verdict reached, then by id), losses last.
    assert [c.id for c in whole.rows] == ["b-high", "e-high", "c-hyper", "d-beta"]
    assert [(c.before, c.after) for c in whole.rows][-1] == ("full", "hidden")
    counts = compare(mem, a, b, limit=0)
    assert counts.rows == [] and (counts.listed, counts.changed, counts.transitions) == (4, 4, whole.transitions)
    assert counts.counts_a == whole.counts_a and counts.counts_b == whole.counts_b
    pages = [compare(mem, a, b, offset=k, limit=2).rows for k in (0, 2, 4)]
    assert [c.id for page in pages for c in page] == [c.id for c in whole.rows] and pages[2] == []
    gains = compare(mem, a, b, transition=("redacted", "full"), limit=0)
    assert gains.listed == 2 and gains.rows == []
    narrow = compare(mem, a, b, limit=50, clearance=ctx("medium", ["alpha"]))
    # One door (SPEC 10): counts and rows are over the records the clearance sees (high ones it
    # sees redacted); hyper and another scope's record are the one total beyond it.
    assert narrow.changed == 2 and narrow.listed == 2 and [c.id for c in narrow.rows] == ["b-high", "e-high"]
    assert narrow.beyond == 3 and narrow.total == 3
    assert sum(narrow.counts_a.values()) == sum(narrow.counts_b.values()) == 3
