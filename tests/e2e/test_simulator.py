"""The trust simulator in a real browser, on the sample store: a simulation given by its URL shows
the engine's counts, and nothing of the records that context may not see in full reaches the
browser (neither the HTML nor any WebSocket frame: st.dataframe cells only travel in frames)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from membrane_engine import RetrieveRequest, TrustContext
from membrane_engine.rules.trust import Verdict

from tests.support.widgets import LAYERS, click_tab, forbidden_needles, metrics, number, payload_needles, store_docs, tab_labels, verdicts

pytestmark = pytest.mark.e2e

AS_OF = "2026-11-20T12:00:00Z"
LIMIT = 50


def query(max_sensitivity: str) -> dict[str, str]:
    return {"max_sensitivity": max_sensitivity, "as_of": AS_OF, "limit": str(LIMIT), "actor_id": "agent-1",
            "authenticated": "true"}


def trust(max_sensitivity: str) -> TrustContext:
    return TrustContext(max_sensitivity=max_sensitivity, authenticated=True, actor_id="agent-1", scopes=[])


def expected(m, max_sensitivity: str):
    when = datetime.fromisoformat(AS_OF.replace("Z", "+00:00")).astimezone(timezone.utc)
    return m.simulate(RetrieveRequest(trust=trust(max_sensitivity), limit=LIMIT, as_of=when))


def open_every_tab(con) -> None:
    """The ranked result is drawn on load; each layer's records only when its tab is opened."""
    for layer in LAYERS:
        click_tab(con, layer + " (")
        con.assert_healthy()


def test_simulation_from_url_shows_the_engines_counts(console, sample_membrane):
    sim = expected(sample_membrane, "medium")
    totals = {v: sum(getattr(c, v) for c in sim.counts.values()) for v in ("full", "redacted", "hidden")}
    assert totals["redacted"] and totals["hidden"], "the sample store should exercise every verdict at medium"

    con = console.open("simulator", query("medium"))
    con.screenshot("simulator-medium")
    con.assert_healthy()
    shown = metrics(con)
    for label, value in (("Full", totals["full"]), ("Redacted", totals["redacted"]), ("Hidden", totals["hidden"]),
                         ("Returned", min(sim.total_matching, LIMIT))):
        assert label in shown, f"no {label!r} metric on the simulator: {shown}"
        assert number(shown[label]) == value, f"{label}: page shows {shown[label]}, engine says {value}"
    # per layer: each tab is labelled with the records that layer returns (full + redacted)
    labels = tab_labels(con)
    for layer, counts in sim.counts.items():
        want = f"{layer} ({counts.full + counts.redacted:,})"
        assert want in labels, f"no tab {want!r} in {labels}"
    # the form shows the context of the link
    thumb = con.page.locator("[data-testid=stSlider] input[type=range]").first
    assert thumb.get_attribute("aria-valuetext") == "medium"


def test_medium_simulation_sends_nothing_of_high_and_hyper_records(console, sample_membrane):
    docs = store_docs(sample_membrane)
    seen = verdicts(sample_membrane, trust("medium"))
    secret = {rid for rid, doc in docs.items() if doc["sensitivity"] in ("high", "hyper")}
    assert secret and all(seen[rid] != Verdict.FULL for rid in secret)
    needles = forbidden_needles(docs, [seen])
    # every high / hyper record contributes needles (else the check would prove nothing about it)
    bare = [rid for rid in secret if not (payload_needles(docs[rid]) & needles)]
    assert len(bare) <= len(secret) // 10, f"high/hyper records with nothing distinctive to look for: {bare}"

    con = console.open("simulator", query("medium"))
    open_every_tab(con)
    con.screenshot("simulator-medium-tabs")
    hits = con.find(needles, include_downloads=True)
    assert not hits, "content of records medium may not see in full reached the browser:\n" + "\n".join(
        f"{h.where}: {h.needle[:80]!r} in …{h.context}…" for h in hits[:20])

    # Positive control 1: the same search finds what the cards do show (full records' payload text).
    sim = expected(sample_membrane, "medium")
    shown_full = [r for r in sim.response.records[:10] if not r.redacted]
    control = set()
    for r in shown_full:
        control |= {s for s in payload_needles(docs[r.id]) if len(s) < 200}
    assert con.find(control), "the search finds none of the payload text of the full records shown: it is blind"
    # Redacted cards are on the page (so the absence above means something).
    assert con.page.get_by_text("REDACTED", exact=True).count() >= 1, "no redacted record was shown"


def test_hyper_simulation_does_show_the_high_and_hyper_content(console, sample_membrane):
    """Positive control 2: with max sensitivity hyper the very needles of the test above are found,
    so their absence under medium is the gate working, not the search failing."""
    docs = store_docs(sample_membrane)
    needles = forbidden_needles(docs, [verdicts(sample_membrane, trust("medium"))])
    con = console.open("simulator", query("hyper"))
    open_every_tab(con)
    con.assert_healthy()
    hits = con.find(needles)
    assert len({h.needle for h in hits}) >= 3, f"only {len(hits)} high/hyper strings found under hyper"
