"""Every colour the console draws with, in one place: charts, tables, badges, the sign-in page
and the theme. A colour means one thing wherever it appears (an action, a verdict, a memory
type), so a page never picks one of its own: it names the meaning here.

Plain constants: imported by Plotly figures, pandas stylers, Streamlit badges, Graphviz source
and the sign-in page's HTML alike (nothing here imports streamlit or plotly).
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- the console's own

BRAND = "#4b5bdc"  # the theme's primary colour (cli.py), the sign-in button, bars inside table cells
BRAND_TINT = "#eef1fb"  # a box filled in the brand's hue (plan nodes)
INK = "#111827"  # near black: reference lines (now, the prune threshold), outlines, a record's own curve
BODY_TEXT = "#1f2937"  # dark text on a light tinted cell
MUTED = "#6b7280"  # grey: secondary reference lines (a min salience floor)
FAINT = "#d1d5db"  # light grey: a line that only joins markers
EDGE = "#555555"  # plan edges
UNKNOWN = "#9ca3af"  # grey: a value unknown (imported history without values)
UNKNOWN_FILL = "rgba(156,163,175,0.25)"  # the same grey, see-through, filling the unknown band
FALLBACK = "#888888"  # an action no colour is defined for
MARKER_EDGE = "black"  # the outline of a change's marker on a salience curve
MARKER_RING = "white"  # the outline of an entry's marker on the audit timeline
SIGN_IN_TEXT = "#222"  # the sign-in page's text
SIGN_IN_ERROR = "#b00020"  # the sign-in page's error line

# ----------------------------------------------------------------------------- series

# Twelve distinguishable hues for series that have no meaning of their own (records on the
# decay chart, edge types on the graph), taken in order.
PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777",
           "#4b5563", "#65a30d", "#7c3aed", "#0d9488"]
THRESHOLD = PALETTE[6]  # the operator's own drop-below threshold on the decay chart

# ----------------------------------------------------------------------------- audit actions

# One colour per audit action (no two closer than 70 apart in RGB, so each reads at a glance) and
# per curation operation, the same on every chart and table (the audit timeline, the decay page's
# markers, history, review, the overview's activity table). A retract is written as a `delete`
# entry whose record stays in the store; it has its own colour so it reads as what it is.
ACTION_COLORS: dict[str, str] = {
    "create": "#16a34a",           # green
    "reinforce": "#2563eb",        # blue
    "revise": "#9333ea",           # purple
    "fork": "#06b6d4",             # cyan
    "merge": "#78350f",            # brown
    "penalize": "#f97316",         # orange: stored as Membrane's `decay` entry
    "retract": "#db2777",          # pink
    "delete": "#b91c1c",           # dark red
    "restore": "#115e59",          # dark teal
    "pin": "#facc15",              # yellow
    "unpin": "#6b7280",            # grey
    "restore version": "#84cc16",  # lime: a record brought back to an earlier version
}

# ----------------------------------------------------------------------------- verdicts

# A record's verdict under a trust context, on charts (hex) and as a Streamlit badge (its named
# colours only), in the same hues.
VERDICT_COLORS = {"full": "#2e9e5b", "redacted": "#f0a020", "hidden": "#9aa0a6", "below_min_salience": "#c9d3f5"}
VERDICT_BADGES = {"full": "green", "redacted": "orange", "hidden": "gray"}
NO_BADGE = "gray"
# A node the clearance sees redacted is drawn locked, without its type's colour.
REDACTED_NODE = VERDICT_COLORS["hidden"]

# Retracted and superseded records, as badges.
REVISION_BADGES = {"retracted": "red", "superseded": "violet"}

# What a consolidation proposal would do, as a badge: the hues of the entries it writes (create
# green, reinforce blue, a compression's decay entry orange, as a penalize's).
CONSOLIDATION_BADGES = {"created": "green", "reinforced": "blue", "compressed": "orange"}

# An assertion of the policy file, in the assertions table.
ASSERTION_STYLES = {"holds": "background-color: #dff3e6; color: #1e6b3d",
                    "FAILS": "background-color: #fbe3e1; color: #a3271d"}

# ----------------------------------------------------------------------------- memory types

MEMORY_TYPE_COLORS = {"working": PALETTE[5], "entity": PALETTE[3], "semantic": PALETTE[0], "competence": PALETTE[2],
                      "plan_graph": PALETTE[4], "episodic": PALETTE[1]}
OTHER_TYPE = PALETTE[8]

# ----------------------------------------------------------------------------- selector signals

SIGNAL_COLORS = {"applicability": "#60a5fa", "success": "#34d399", "recency": "#fbbf24", "score": "#1e3a8a"}

# ----------------------------------------------------------------------------- counts

# ColorBrewer "Blues", light to dark: the overview's heatmap colours, as plotly draws them.
BLUES = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")
DARK_FROM = 5  # from this step of BLUES on, the text on it is white


def action_color(name: str, stored_as: dict[str, str] | None = None) -> str:
    """The colour of an action in words; one stored under another name (``stored_as``: a
    penalize is Membrane's ``decay`` entry, a pin a ``revise``) takes that one's, else revise's."""
    return ACTION_COLORS.get(name) or ACTION_COLORS.get((stored_as or {}).get(name, ""), ACTION_COLORS["revise"])


def verdict_badge(verdict: str) -> str:
    """The Streamlit badge colour of a verdict."""
    return VERDICT_BADGES.get(verdict, NO_BADGE)
