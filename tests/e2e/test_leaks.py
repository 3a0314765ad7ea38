"""Trust gating seen from the browser (issue "Trust you can rely on"): on the canary store (every
byte a gate must withhold carries a unique CANARY-... marker, tests/support/canaries.py),
drive the trust simulator, the what-if page and the selector inspector for several trust
contexts and check that no canary of a record the context may not see in full reaches the
browser: not the DOM, not a WebSocket frame (st.dataframe cells travel only there), not a file
a download button offers. The forbidden set comes from the engine (explain_many), checked
against tests/support/canaries.py's independent verdicts."""

from __future__ import annotations

import pytest

from membrane_engine import TrustContext
from membrane_engine.rules.trust import Verdict
from tests.support import canaries

from tests.support.widgets import LAYERS, open_dropdown, set_multiselect, set_select_slider

pytestmark = pytest.mark.e2e

SENSITIVITIES = ["public", "low", "medium", "high", "hyper"]
CONTEXTS = [(s, scopes) for s in SENSITIVITIES for scopes in ((), ("alpha",))] + [("medium", ("alpha", "beta"))]


def ctx_id(ctx) -> str:
    return f"{ctx[0]}-{'+'.join(ctx[1]) or 'all-scopes'}"


@pytest.fixture(scope="module")
def canary_docs(canary_records) -> dict[str, dict]:
    return {r["id"]: r for r in canary_records}


@pytest.fixture(scope="module")
def canary_engine(canary_store_url):
    from membrane_engine import Membrane

    m = Membrane.open(canary_store_url, load_sample=False)
    yield m
    m.close()


def gate(engine, docs, max_sensitivity: str, scopes) -> dict[str, Verdict]:
    """The engine's verdicts for every record, checked against tests/support/canaries.py's own SPEC 3 rule."""
    verdicts = engine.explain_many(sorted(docs), TrustContext(max_sensitivity=max_sensitivity, scopes=list(scopes)))
    assert set(verdicts) == set(docs)
    for rid, v in verdicts.items():
        assert v.value == canaries.verdict(docs[rid], max_sensitivity, scopes), rid
    return verdicts


def forbidden(docs, verdict_sets: list[dict[str, Verdict]]) -> tuple[set[str], set[str]]:
    """(canaries no context of ``verdict_sets`` may receive, canaries of records one sees in full)."""
    full = {rid for rid in docs if any(v[rid] is Verdict.FULL for v in verdict_sets)}
    visible_ids = {rid for rid in docs if any(v[rid] is not Verdict.HIDDEN for v in verdict_sets)}
    bad: set[str] = set()
    good: set[str] = set()
    for rid, doc in docs.items():
        (good if rid in full else bad).update(canaries.canaries_for(doc))
    return bad - visible_ids - good, good


def assert_no_leak(con, bad: set[str], what: str) -> None:
    con.assert_healthy()
    hits = con.find(bad, include_downloads=True)
    assert not hits, f"{what}: {len(hits)} canaries of records the context may not see in full:\n" + "\n".join(
        f"  {h.where}: {h.needle} in …{h.context[:160]}…" for h in hits[:12])


def query(max_sensitivity: str, scopes, **extra) -> dict[str, str]:
    return {"max_sensitivity": max_sensitivity, "scopes": ",".join(scopes), "actor_id": "e2e-leak",
            "authenticated": "true", **extra}


@pytest.mark.parametrize("ctx", CONTEXTS, ids=ctx_id)
def test_simulator_and_selector_leak_nothing(ctx, canary_server, canary_docs, canary_engine, new_console):
    max_sensitivity, scopes = ctx
    verdicts = gate(canary_engine, canary_docs, max_sensitivity, scopes)
    bad, good = forbidden(canary_docs, [verdicts])
    con = new_console(canary_server)

    # Simulator, restricted to one layer (a different one for each context) so that layer's
    # redacted records, which sort first by id, are drawn as cards; then "explain any record" on
    # a hidden one.
    layer = LAYERS[CONTEXTS.index(ctx) % len(LAYERS)]
    con.open("simulator", query(max_sensitivity, scopes, memory_types=layer))
    assert_no_leak(con, bad, f"simulator ({layer}) {ctx_id(ctx)}")
    if good:  # positive control: the canaries of what is shown in full are found by the same search
        assert con.find(good), f"simulator {ctx_id(ctx)}: no canary of a full record found; the search is blind"
    hidden = sorted(rid for rid, v in verdicts.items() if v is Verdict.HIDDEN and canary_docs[rid]["type"] == layer)
    if hidden:
        con.page.locator("[data-testid=stExpander] summary", has_text="Explain any record").click()
        box = con.widget("stTextInput", "Record id").locator("input")
        con.act(lambda: (box.fill(hidden[0]), box.press("Enter")))
        assert con.page.get_by_text("HIDDEN", exact=True).count() >= 1, "the explanation of a hidden record is not shown"
    con.screenshot(f"leaks-simulator-{ctx_id(ctx)}")
    assert_no_leak(con, bad, f"simulator ({layer}, explain {hidden[:1]}) {ctx_id(ctx)}")

    # Selector inspector: competence and plan_graph candidates, their names, chart and table.
    con.open("selector", query(max_sensitivity, scopes))
    con.screenshot(f"leaks-selector-{ctx_id(ctx)}")
    assert_no_leak(con, bad, f"selector {ctx_id(ctx)}")


# Every sensitivity, with and without scopes (each run also covers the level above: B = A + 1).
WHAT_IF_CONTEXTS = [("public", ()), ("low", ("alpha",)), ("medium", ()), ("medium", ("alpha", "beta")),
                    ("high", ("alpha",)), ("hyper", ())]


@pytest.mark.parametrize("ctx", WHAT_IF_CONTEXTS, ids=ctx_id)
def test_what_if_leaks_nothing(ctx, canary_server, canary_docs, canary_engine, new_console):
    """Context A set with the widgets, B = A with max sensitivity one level up (down from hyper,
    as the page's button does); the records that
    become visible are listed, and the first hidden -> redacted one is opened as a card."""
    max_sensitivity, scopes = ctx
    level = SENSITIVITIES.index(max_sensitivity)
    b_sensitivity = SENSITIVITIES[level + 1] if level + 1 < len(SENSITIVITIES) else SENSITIVITIES[level - 1]
    v_a = gate(canary_engine, canary_docs, max_sensitivity, scopes)
    v_b = gate(canary_engine, canary_docs, b_sensitivity, scopes)
    bad, _ = forbidden(canary_docs, [v_a, v_b])

    con = new_console(canary_server)
    con.open("what-if")
    set_select_slider(con, 0, max_sensitivity, SENSITIVITIES)
    set_multiselect(con, 0, list(scopes))
    con.mark()  # on the way here the page showed other pairs of contexts (B's default, A half set)
    con.act(lambda: con.page.get_by_role("button", name="A with max sensitivity +1").click())
    thumbs = con.page.locator("[data-testid=stSlider] input[type=range]")
    assert thumbs.nth(1).get_attribute("aria-valuetext") == b_sensitivity, "B is not A with max sensitivity +1"
    assert_no_leak(con, bad, f"what-if {ctx_id(ctx)}")

    # Open one hidden -> redacted record: its card is the redacted view (metadata only).
    show = con.widget("stSelectbox", "Show")
    open_dropdown(con, show)
    option = con.page.locator("[role=option]", has_text="hidden → redacted")
    if option.count():
        con.act(lambda: option.first.click())
        grid = con.page.locator("[data-testid=stDataFrame]").last
        box = grid.bounding_box()
        con.act(lambda: con.page.mouse.click(box["x"] + 16, box["y"] + 35 + 17))
        assert con.page.get_by_text("Selected record").count() >= 1, "no record card after selecting a row"
        assert con.page.get_by_text("REDACTED", exact=True).count() >= 1, "the card opened is not the redacted view"
    else:
        con.page.keyboard.press("Escape")
    con.screenshot(f"leaks-what-if-{ctx_id(ctx)}")
    assert_no_leak(con, bad, f"what-if {ctx_id(ctx)} (record opened)")
