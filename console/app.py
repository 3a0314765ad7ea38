"""Membrane Console's pages. Served by console/gateway.py: start it with `membrane-console [--db URL]`
(console/cli.py), or `streamlit run console/gateway.py [-- --db URL]`; run directly with
`streamlit run console/app.py` it refuses and says so."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

# `streamlit run console/app.py` puts console/ on sys.path, not the project root.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from console import auth, keys, state  # noqa: E402
from console.components.guard import engine_call  # noqa: E402

# Not through console/gateway.py: no sign-in route for the form to post to and no Host / Origin
# guard, so nothing of the store is served; the message names the command that serves it right.
if not auth.served_through_gateway():
    print(f"membrane-console: {auth.NOT_THROUGH_GATEWAY}", file=sys.stderr, flush=True)
    st.error(auth.NOT_THROUGH_GATEWAY)
    st.stop()

# A bundled icon: a Material icon as favicon would be fetched from a font CDN, which an
# offline operator's browser cannot reach.
ICON = Path(__file__).resolve().parent / "assets" / "icon.png"
st.set_page_config(page_title="Membrane Console", page_icon=str(ICON), layout="wide")
# No "Download as CSV" / copy in table toolbars: Streamlit writes those cells raw, so a record's
# "=HYPERLINK(...)" would run in a spreadsheet. Downloads are the pages' own, formula-safe ones.
st.set_option("client.disableDataExport", True)

PAGES = Path(__file__).resolve().parent / "app_pages"
pages = [
    st.Page(PAGES / "overview.py", title="Overview", icon=":material/dashboard:", url_path="overview"),
    st.Page(PAGES / "simulator.py", title="Trust simulator", icon=":material/visibility:", url_path="simulator"),
    st.Page(PAGES / "what_if.py", title="What-if", icon=":material/compare_arrows:", url_path="what-if"),
    st.Page(PAGES / "records.py", title="Record explorer", icon=":material/search:", url_path="records"),
    st.Page(PAGES / "decay.py", title="Salience decay", icon=":material/trending_down:", url_path="decay"),
    st.Page(PAGES / "selector.py", title="Selector inspector", icon=":material/target:", url_path="selector"),
    st.Page(PAGES / "policies.py", title="Policies", icon=":material/policy:", url_path="policies"),
    st.Page(PAGES / "graph.py", title="Graph", icon=":material/hub:", url_path="graph"),
    st.Page(PAGES / "audit.py", title="Audit log", icon=":material/history:", url_path="audit"),
    st.Page(PAGES / "curate.py", title="Curate", icon=":material/edit_note:", url_path="curate"),
    st.Page(PAGES / "review.py", title="Review", icon=":material/rule:", url_path="review"),
    st.Page(PAGES / "capture.py", title="Capture", icon=":material/edit_square:", url_path="capture"),
    st.Page(PAGES / "import_export.py", title="Import / export", icon=":material/swap_vert:", url_path="import-export"),
    st.Page(PAGES / "operators.py", title="Operators", icon=":material/manage_accounts:", url_path="operators"),
]


# Nobody signed in: the sign-in page only (at every page's address), before any page or the
# store is touched.
signed_in = auth.gate([p.url_path for p in pages])


def _home() -> None:
    # Streamlit serves the default page at "/" whatever its url_path; a hidden default that
    # hands over to Overview keeps /overview a real, linkable address (and "/" still works).
    st.switch_page(pages[0])


home = st.Page(_home, title="Home", url_path="home", default=True, visibility="hidden")
navigation = st.navigation(
    {"": [home], "See": pages[:4], "Understand": pages[4:9], "Change": pages[9:]},
    expanded=True,  # every page in the sidebar: past ten, Streamlit hides the rest behind "View more"
)

with st.sidebar:
    st.caption("Signed in")
    scopes = ", ".join(signed_in.scopes) or "all scopes"
    st.text(f"{signed_in.name} · {signed_in.role.value}\nclearance {signed_in.max_sensitivity.value} · {scopes}")
    st.button("Sign out", key=keys.SIGN_OUT, on_click=auth.sign_out)
    st.caption("Store")
    st.text(state.display_url())  # not st.code: that loads the code highlighter on every page

# A MembraneError a page did not handle (the store locked, gone or unreachable mid-session)
# ends as a message, not a traceback.
try:
    with engine_call():
        navigation.run()
finally:  # also when the page stopped or handed over (st.stop, st.switch_page)
    state.script_ran()
