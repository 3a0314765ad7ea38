"""The clearance leak grid in a real browser (SPEC 10): operators at each clearance x every page
of the console on the canary store (tests/support/canaries.py). Each page is driven to show
records (a record opened by ``?id=``, the simulator and the selector asked for hyper with every
scope, decay curves and curate's template asked for records above the clearance, an export
prepared); no canary of a record the operator's clearance may not see in full may reach the
browser: not the HTML, not a WebSocket frame (st.dataframe cells travel only there), not a
download.

Each session signs in through the console's sign-in form as the grid's operator of that
clearance (curators, added to the canary store once). CI runs one clearance per page
(rotating through the grid: each page once, with a different clearance); MEMBRANE_SECURITY_FULL=1
runs every clearance on every page (marked slow). The same grid without a browser, every cell,
is tests/console/test_clearance_pages.py.
"""

from __future__ import annotations

import os
import re

import pytest

from tests.support import canaries

from tests.support.browser import PAGES, PASSWORD

pytestmark = pytest.mark.e2e

FULL = os.environ.get("MEMBRANE_SECURITY_FULL", "") not in ("", "0")
SENSITIVITIES = ["public", "low", "medium", "high", "hyper"]
CLEARANCES = [(s, scopes) for s in SENSITIVITIES for scopes in ((), ("alpha",))]


def operator_name(clearance) -> str:
    return f"c-{clearance[0]}-{'+'.join(clearance[1]) or 'all'}"



CELLS = [(page, clearance) for page in PAGES for clearance in CLEARANCES]
CI_CELLS = [(page, CLEARANCES[(3 * k + 1) % len(CLEARANCES)]) for k, page in enumerate(PAGES)]
GRID = [pytest.param(page, c, id=f"{page}-{operator_name(c)}",
                     marks=[pytest.mark.slow] if (page, c) not in CI_CELLS else [])
        for page, c in CELLS if FULL or (page, c) in CI_CELLS]


@pytest.fixture(scope="module")
def grid_operators(canary_store_url) -> None:
    """The grid's operators in the canary store, once (curators: the curate page shows them records)."""
    from membrane_engine import Membrane

    m = Membrane.open(canary_store_url, load_sample=False)
    try:
        have = {o.name for o in m.operators.list()}
        for c in CLEARANCES:
            if operator_name(c) not in have:
                m.operators.add(operator_name(c), "curator", c[0], list(c[1]), password=PASSWORD, actor="e2e-grid")
    finally:
        m.close()


def one(sensitivity: str, scope: str, type_: str = "semantic") -> str:
    return f"rec-{type_}-{sensitivity}-{scope or 'unscoped'}"


def query_for(page: str) -> dict:
    wide = {"max_sensitivity": "hyper", "scopes": "", "limit": "0"}
    return {
        "simulator": wide, "selector": wide,
        "records": {"id": one("high", "alpha")},
        "decay": {"id": ",".join(one(s, "alpha") for s in SENSITIVITIES)},
        "curate": {"id": one("medium", "alpha"), "op": "fork"},
    }.get(page, {})


def assert_no_leak(con, bad: set[str], what: str) -> None:
    con.assert_healthy()
    hits = con.find(bad, include_downloads=True)
    assert not hits, f"{what}: {len(hits)} canaries beyond the clearance:\n" + "\n".join(
        f"  {h.where}: {h.needle} in …{h.context[:160]}…" for h in hits[:12])


@pytest.mark.parametrize("page,clearance", GRID)
def test_clearance_leak_grid_in_the_browser(page, clearance, canary_server, grid_operators, canary_records,
                                            new_console):
    sens, scopes = clearance
    bad = canaries.forbidden_canaries(canary_records, sens, list(scopes))
    con = new_console(canary_server, role=None)
    con.sign_in(operator_name(clearance), PASSWORD)
    con.open(page, query_for(page))
    assert con.page.get_by_text("Sign in to use the console").count() == 0, "the session is not signed in"
    assert_no_leak(con, bad, f"{page} as {operator_name(clearance)}")
    if page == "import-export":
        con.act(lambda: con.page.get_by_role("tab", name="Export").click())
        con.act(lambda: con.page.get_by_role("button", name="Prepare the export file").click())
        assert con.download_urls(), "no export offered"
        assert_no_leak(con, bad, f"export as {operator_name(clearance)}")
    con.screenshot(f"clearance-{page}-{operator_name(clearance)}")


def test_the_browser_grid_is_not_blind(canary_server, canary_records, new_console):
    """Positive control: the harness's admin (hyper, every scope) sees canaries on the explorer;
    the search above would find a leak."""
    con = new_console(canary_server)
    con.open("records", {"id": one("hyper", "vault")})
    assert con.find(canaries.canaries_for(next(r for r in canary_records if r["id"] == one("hyper", "vault"))))


# ------------------------------------------------------------------------------ the Review page on a canary
# store with a queue: every semantic record contested by a working record two levels up in another
# scope, every episodic record below the prune threshold (as tests/console/test_clearance_pages.py).

SCOPES = ["", "alpha", "beta", "vault"]
REVIEW_CELLS = [pytest.param(c, id=operator_name(c), marks=[] if k in (2, 5) else [pytest.mark.slow])
                for k, c in enumerate(CLEARANCES) if FULL or k in (2, 5)]


@pytest.fixture(scope="module")
def review_canary_server(canary_records, tmp_path_factory):
    import copy

    from membrane_engine import Membrane

    from .conftest import _serve, build_store

    docs = copy.deepcopy(canary_records)
    for doc in docs:
        if doc["type"] == "episodic":
            doc["lifecycle"]["decay"]["half_life_seconds"] = 3600
    url = build_store(tmp_path_factory.mktemp("e2e-canary-review") / "membrane.db", records=docs)
    m = Membrane.open(url, load_sample=False)
    try:
        for doc in docs:
            if doc["type"] == "semantic" and doc["id"].startswith("rec-"):
                level = SENSITIVITIES[(SENSITIVITIES.index(doc["sensitivity"]) + 2) % len(SENSITIVITIES)]
                scope = SCOPES[(SCOPES.index(doc["scope"]) + 1) % len(SCOPES)]
                m.contest(doc["id"], one(level, scope, "working"), "canary-admin", "contested for the grid")
        for c in CLEARANCES:
            m.operators.add(operator_name(c), "curator", c[0], list(c[1]), password=PASSWORD, actor="e2e-grid")
    finally:
        m.close()
    yield from _serve("canary-review", url, tmp_path_factory.mktemp("e2e-canary-review-server"))


@pytest.mark.parametrize("clearance", REVIEW_CELLS)
def test_review_page_leak_grid_in_the_browser(clearance, review_canary_server, canary_records, new_console):
    sens, scopes = clearance
    bad = canaries.forbidden_canaries(canary_records, sens, list(scopes))
    con = new_console(review_canary_server, role=None)
    con.sign_in(operator_name(clearance), PASSWORD)
    con.open("review")
    assert con.page.get_by_text("Sign in to use the console").count() == 0, "the session is not signed in"
    assert_no_leak(con, bad, f"review as {operator_name(clearance)}")
    pick_all = con.page.get_by_role("button", name=re.compile("^Select all"))
    if pick_all.count():
        con.act(lambda: pick_all.click())
        box = con.page.locator("[data-testid=stTextInput]", has_text="Rationale").last.locator("input")
        con.act(lambda: (box.fill("keep"), box.press("Enter")))
        assert_no_leak(con, bad, f"review's bulk preview as {operator_name(clearance)}")
    con.screenshot(f"clearance-review-{operator_name(clearance)}")


def test_the_review_grid_is_not_blind(review_canary_server, canary_records, new_console):
    """Positive control: the admin sees contested records', contesters' and prunable records' labels."""
    con = new_console(review_canary_server)
    con.open("review")
    by_id = {r["id"]: r for r in canary_records}
    contested = by_id[one("low", "alpha")]
    assert con.find([contested["payload"]["subject"]]), "a contested record's label is not shown"
    assert con.find([by_id[one("low", "alpha", "episodic")]["payload"]["timeline"][0]["summary"]]), \
        "a record about to be pruned is not shown"
