"""Plotly helpers for the decay, selector and audit pages: inert labels and a layout (colours:
components/colours.py).

Plotly renders a subset of HTML in labels and hover text (``<b>``, ``<br>``, ``<a href>``), so
every record string that reaches a figure goes through ``plot_text`` first.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from .safe import clean


def plot_text(text: object, limit: int = 80) -> str:
    """Record content made inert for a Plotly label or hover text.

    Only ``&``, ``<`` and ``>`` are escaped: that is enough to keep tags (``<b>``, ``<a href>``,
    ``<br>``) from being read as markup, and Plotly decodes ``&amp;``, ``&lt;`` and ``&gt;``
    back. Quotes stay as they are: Plotly does not decode ``&quot;`` or ``&#x27;`` and would show
    the entity itself."""
    return html.escape(clean(text, limit), quote=False)


def short_id(record_id: str, keep: int = 8) -> str:
    """The first characters of an id (UUIDs are long), escaped for a chart."""
    value = str(record_id)
    return plot_text(value if len(value) <= keep + 1 else value[:keep] + "…", keep + 2)


def tidy(fig: go.Figure, height: int = 420, legend_below: bool = False) -> go.Figure:
    """Common layout: compact margins and a horizontal legend above the plot (figures carry no
    title of their own; the page writes one above them), or below it with ``legend_below``."""
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=10), hovermode="closest",
                      hoverlabel=dict(namelength=-1), title=None)
    if legend_below:
        fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0))
    else:
        fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0))
    return fig
