"""Plotly styling shared by the pages, and the console's fixed color vocabulary."""

from __future__ import annotations

import plotly.graph_objects as go

VERDICT_COLORS = {"full": "#2e9e5b", "redacted": "#f0a020", "hidden": "#9aa0a6", "below_min_salience": "#c9d3f5"}


def style(fig: go.Figure, height: int = 320) -> go.Figure:
    """Compact margins and a fixed height, so charts line up in columns."""
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10), hoverlabel=dict(namelength=-1))
    return fig
