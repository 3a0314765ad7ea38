"""Hostile content in a real browser (issue "Trust you can rely on"): on a store whose ids, scopes,
tags, payloads, provenance and audit entries are markup, scripts, javascript: URLs, Markdown,
LaTeX, 100 000-character strings, 200-deep nesting and control characters
(tests/support/hostile.py), every page and the record explorer opened on each record
shows the content as inert text: nothing from a record becomes an element, no dialog fires, and
the page stays usable."""

from __future__ import annotations

import pytest

from tests.support.browser import PAGES

pytestmark = pytest.mark.e2e

# Elements and attributes that exist only if record content was interpreted as HTML or Markdown.
INJECTED_JS = r"""() => {
  const found = [];
  const push = (what, el) => found.push(what + ': ' + (el.outerHTML || '').slice(0, 160));
  for (const s of document.querySelectorAll('script'))
    if (/alert|document\.cookie/.test(s.textContent)) push('script', s);
  const selectors = ['img[src="x"]', 'img[src*="tracker.invalid"]', 'img[alt="pixel"]', 'img[alt="i"]',
    'iframe[src^="javascript:"]', '[href^="javascript:" i]', '[src^="javascript:" i]', '[action^="javascript:" i]',
    '[src^="data:text/html"]', '[href^="data:text/html"]', 'div[style*="background:red"]',
    'div[style*="position:fixed;top:0"]'];
  for (const sel of selectors) for (const el of document.querySelectorAll(sel)) push(sel, el);
  for (const el of document.querySelectorAll('*'))
    for (const a of el.attributes)
      if (/^on/i.test(a.name)) push('handler ' + a.name, el);
  // Markdown / HTML rendering of record strings: these words would stand alone in an element
  const words = new Set(['bold', 'italic', 'overlay', 'Heading', 'click me', 'colored', 'bold-scope', 'graph']);
  const marks = 'b, i, strong, em, h1, h2, h3, h4, a, span, div, p, li, code, blockquote';
  for (const el of document.querySelectorAll('[data-testid=stMain] :is(' + marks + ')')) {
    if (el.children.length === 0 && words.has(el.textContent.trim()) && el.tagName !== 'P' && el.tagName !== 'DIV')
      push('markup', el);
  }
  for (const el of document.querySelectorAll('annotation')) if (/pmatrix/.test(el.textContent)) push('latex', el);
  return found;
}"""

# Is the page still usable: what sits on top of the middle of the title and of the sidebar?
# (A record opened in the explorer's dialog: the dialog's own title and close button instead,
# which a modal dialog must keep on top of everything it contains.)
PAGE_PARTS = ['[data-testid=stMain] h1', '[data-testid=stSidebarNav]']
DIALOG_PARTS = ['[role=dialog] h2[slot=title]', '[role=dialog] button[aria-label=Close]']
COVERED_JS = r"""(selectors) => {
  const out = [];
  for (const sel of selectors) {
    const el = document.querySelector(sel);
    if (!el) { out.push(sel + ' missing'); continue; }
    const r = el.getBoundingClientRect();
    const top = document.elementFromPoint(r.left + Math.min(20, r.width / 2), r.top + r.height / 2);
    if (!top || !(el.contains(top) || top.contains(el))) out.push(sel + ' covered by ' + (top ? top.outerHTML.slice(0, 120) : 'nothing'));
  }
  return out;
}"""


def assert_inert(con, where: str, parts: list[str] = PAGE_PARTS) -> None:
    con.assert_healthy()
    injected = con.page.evaluate(INJECTED_JS)
    assert not injected, f"{where}: record content became markup:\n" + "\n".join(injected[:15])
    covered = con.page.evaluate(COVERED_JS, parts)
    assert not covered, f"{where}: the page is not usable: {covered}"
    assert not con.dialogs, f"{where}: a dialog fired: {con.dialogs}"


@pytest.fixture
def hostile(new_console, hostile_server):
    con = new_console(hostile_server)
    # Any script that did run would call alert(); count calls even if a dialog were suppressed.
    con.page.add_init_script("window.__alerts = 0; const _a = window.alert; "
                             "window.alert = (...x) => { window.__alerts++; return _a.apply(window, x); };")
    return con


ALL_IDS, FIRST_ID = "all ids", "first id"
VISITS = [(path, {}) for path in PAGES] + [
    ("simulator", {"max_sensitivity": "hyper", "limit": "50"}),  # every record as a card
    ("selector", {"max_sensitivity": "hyper"}),
    ("curate", ALL_IDS), ("decay", ALL_IDS), ("audit", FIRST_ID),  # ids preselected from the URL
]


@pytest.mark.parametrize("visit", VISITS, ids=[f"{p}-{q if isinstance(q, str) else '&'.join(q) or 'plain'}"
                                               for p, q in VISITS])
def test_pages_render_hostile_content_inert(visit, hostile, hostile_records):
    path, query = visit
    ids = [r["id"] for r in hostile_records]
    if query == ALL_IDS:
        query = {"id": ids}
    elif query == FIRST_ID:
        query = {"id": ids[0]}
    con = hostile.open(path, query)
    con.screenshot(f"hostile-{path}-{VISITS.index(visit)}")
    assert_inert(con, f"/{path} {query}")
    assert con.page.evaluate("window.__alerts") == 0


def test_record_explorer_shows_each_hostile_record_inert(hostile, hostile_records):
    for k, record in enumerate(hostile_records):
        con = hostile.open("records", {"id": record["id"]})
        con.screenshot(f"hostile-record-{k}-{record['type']}")
        where = f"/records?id={record['id']!r}"
        assert_inert(con, where, DIALOG_PARTS)  # the record opens in a dialog over the page
        assert con.page.evaluate("window.__alerts") == 0, where
        # the record really is open (not "no live record with id ...")
        assert con.page.get_by_role("heading", name="Record", exact=True).count() == 1, f"{where}: the record is not shown"
        assert not con.alerts("error"), f"{where}: {con.alerts('error')}"


# A bidi override (U+202D/U+202E) or embedding (U+202A/U+202B) or isolate (U+2066-U+2068) left open
# in record text reorders whatever follows it in the same paragraph: the console's own words
# and numbers ("confidence 0.70 · salience 0.889" shown as "07.0 ecnedifnoc · 988.0 ecneilas").
# Record text must be isolated (bdi / unicode-bidi: isolate) or have its controls neutralized.
BIDI_SPILL_JS = r"""() => {
  const OPENERS = new Set(['\u202A', '\u202B', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068']);
  const CLOSERS = new Set(['\u202C', '\u2069']);
  const out = [];
  const root = document.querySelector('[data-testid=stApp]') || document.body;
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  let n;
  while ((n = walk.nextNode())) {
    let depth = 0;
    for (const ch of n.nodeValue) {
      if (OPENERS.has(ch)) depth++;
      else if (CLOSERS.has(ch) && depth > 0) depth--;
    }
    if (depth === 0) continue;
    let el = n.parentElement, isolated = false, block = null;
    while (el) {
      const cs = getComputedStyle(el);
      if (cs.display !== 'inline') { block = el; break; }  // the paragraph the override acts on
      if (el.tagName === 'BDI' || /isolate/.test(cs.unicodeBidi)) { isolated = true; break; }
      el = el.parentElement;
    }
    if (isolated || !block) continue;
    const range = document.createRange();
    range.setStartAfter(n);
    range.setEndAfter(block.lastChild);
    const after = range.toString().trim();
    if (after) out.push(block.tagName + ': ' + JSON.stringify(block.textContent.slice(0, 160)));
  }
  return out;
}"""


@pytest.mark.parametrize("visit", [("simulator", {"max_sensitivity": "hyper", "limit": "50"}), ("records", "competence")],
                         ids=["simulator-hyper", "records-competence"])
def test_bidi_controls_in_record_text_do_not_reorder_console_text(visit, hostile, hostile_records):
    path, query = visit
    if query == "competence":
        query = {"id": next(r["id"] for r in hostile_records if r["type"] == "competence")}
    con = hostile.open(path, query)
    spills = con.page.evaluate(BIDI_SPILL_JS)
    assert not spills, (f"/{path}: record text with an open bidi override reorders the text after it "
                        f"({len(spills)} paragraphs):\n" + "\n".join(spills[:8]))
