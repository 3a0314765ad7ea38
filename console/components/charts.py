"""Plotly styling shared by the pages (their colours: components/colours.py)."""

from __future__ import annotations

import plotly.graph_objects as go


def style(fig: go.Figure, height: int = 320) -> go.Figure:
    """Compact margins and a fixed height, so charts line up in columns."""
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10), hoverlabel=dict(namelength=-1))
    return fig
