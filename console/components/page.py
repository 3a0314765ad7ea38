"""The preamble every page starts with, in one place.

Rule for page authors: a page's first call is ::

    page = page_preamble(keys.DECAY, "Salience decay", "What the page shows.")

It stops the page with a message when nobody is signed in (or their account is gone), gives the
engine's view for the signed-in operator (``page.view``: every read and write of the page goes
through it, SPEC 10 "One door"), draws the title, the caption and the clearance caption, and
names the page's keys (``page.key("start")``: console/keys.py). A page whose state lives in its
URL restores it with ``page.seed_from_url`` and keeps it there with ``page.keep_in_url``; what a
link asked for that the page does not take is said with ``page.link_problems``.

Then a page reads its widgets, calls the view, and draws what it returns (components draw).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from console import state
from console.keys import PageKeys
from membrane_engine import Operator, OperatorView, TrustContext

from .clearance import clearance_caption as _clearance_caption
from .clearance import operator_view
from .safe import md

LINK_PROBLEMS = "link_problems"  # a page's entry for the link parameters it ignored


@dataclass(frozen=True)
class Page:
    """What a page knows once its preamble has run."""

    keys: PageKeys
    view: OperatorView  # the signed-in operator's view: the page's one door to the store
    operator: Operator  # the operator as stored when the page began

    @property
    def clearance(self) -> TrustContext:
        return self.operator.clearance

    def key(self, *parts: object) -> str:
        """The page's session key for ``parts`` (``page.key("start")`` is ``"decay_start"``)."""
        return self.keys(*parts)

    def seed_from_url(self, widgets: tuple[str, ...], *, drawn: str | None = None,
                      trust_prefix: str | None = "") -> dict[str, str] | None:
        """What the page's widgets should be filled from on this run (``state.page_query``), or
        None when they hold its state already. ``drawn`` is a key the page's widgets always set:
        when it is gone (Streamlit drops a widget's value once another page has been shown), the
        widgets are refilled from the URL. ``trust_prefix``: where the page's trust context sits
        in its URL (None: it has none)."""
        seed = state.page_query(self.keys.name, trust_prefix=trust_prefix, widgets=widgets)
        if seed is None and drawn is not None and drawn not in st.session_state:
            seed = st.query_params.to_dict()
        return seed

    def keep_in_url(self, query: dict[str, str], *, trust_prefix: str | None = "") -> None:
        """Write the page's whole state into its URL (``state.keep_page_query``)."""
        state.keep_page_query(self.keys.name, query, trust_prefix=trust_prefix)

    def link_problems(self, problems: list[str] | None = None) -> None:
        """Warn of each link parameter the page did not take, so none is ignored silently.
        ``problems``: on a run that read the URL, what was wrong with it (kept, and said again on
        the runs after it until the URL is read anew); None: say the kept ones."""
        if problems is not None:
            st.session_state[self.key(LINK_PROBLEMS)] = list(problems)
        for problem in st.session_state.get(self.key(LINK_PROBLEMS), []):
            st.warning(md(problem, 300), icon=":material/link_off:")


def page_preamble(keys: PageKeys, title: str, caption: str | None = None, *,
                  clearance_caption: bool = True) -> Page:
    """Sign-in check, the operator's view, the title, the page's caption and (unless
    ``clearance_caption`` is False) what the operator's clearance shows: the start of every page."""
    view = operator_view(keys.name)  # stops the page when nobody is signed in
    operator = view.operator
    st.title(title)
    if caption:
        st.caption(caption)
    if clearance_caption:
        _clearance_caption(operator)
    return Page(keys, view, operator)


def ignored(problem: str) -> str:
    """A problem with a link parameter, as the pages word it."""
    return f"ignored link parameter {problem}"


__all__ = ["Page", "page_preamble", "ignored"]
