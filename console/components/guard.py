"""Engine errors as messages, never tracebacks.

Every engine error is a ``MembraneError`` whose text names what went wrong (the field and value
refused, the record not found, the store locked, read-only, gone or unreachable). Pages show
that text; a traceback would show the operator nothing useful and could show internals.

Rule for page authors: wrap engine calls in ``engine_call()``::

    from console.components.guard import engine_call

    with engine_call("Reinforce"):
        m.reinforce(record_id, operator, rationale)

A ``MembraneError`` inside becomes ``st.error`` with its message (escaped: record ids and
values are data, never Markdown) and the page stops there. With ``stop=False`` the page goes
on after the message (a form that can be corrected and submitted again); the ``outcome``
object says whether the call failed. ``console/app.py`` also wraps every page in one, so an
error a page forgot to handle still ends as a message.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import streamlit as st

from membrane_engine.errors import (
    AccessDeniedError,
    AlreadyExistsError,
    EpisodicImmutableError,
    MembraneError,
    NilTrustError,
    NotFoundError,
    StoreUnavailableError,
    ValidationError,
)

from console.components.safe import md

# What kind of problem, in the operator's words.
_KINDS: tuple[tuple[type[MembraneError], str], ...] = (
    (StoreUnavailableError, "The memory store is unavailable"),
    (ValidationError, "Refused"),
    (NotFoundError, "Not found"),
    (AlreadyExistsError, "Already exists"),
    (EpisodicImmutableError, "Episodic records are immutable"),
    (AccessDeniedError, "Access denied"),
    (NilTrustError, "No trust context"),
)


def sentence(exc: BaseException) -> str:
    """An error as a sentence for the operator (plain text, not escaped): the engine's own text
    with a capital and a full stop; never the exception's class name."""
    if not isinstance(exc, MembraneError):
        return "Something went wrong that the engine did not expect; nothing was changed by this step."
    text = " ".join(str(exc).split()) or next((label for cls, label in _KINDS if isinstance(exc, cls)),
                                              "The engine refused")
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def describe(exc: MembraneError, action: str | None = None) -> str:
    """The message shown for an engine error: the action that failed (else what kind of
    problem it is) and the engine's own text, Markdown-escaped and bounded."""
    kind = next((label for cls, label in _KINDS if isinstance(exc, cls)), "The engine refused")
    return f"{md(action) if action else kind} — {md(str(exc), limit=1500)}"


def show_error(exc: MembraneError, action: str | None = None) -> None:
    icon = ":material/cloud_off:" if isinstance(exc, StoreUnavailableError) else ":material/error:"
    st.error(describe(exc, action), icon=icon)


@dataclass
class Outcome:
    """What happened inside ``engine_call(stop=False)``."""

    error: MembraneError | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


@contextmanager
def engine_call(action: str | None = None, *, stop: bool = True) -> Iterator[Outcome]:
    """Run engine calls; a MembraneError becomes ``st.error`` and (by default) stops the page.
    Streamlit's own control flow (``st.stop``, reruns) passes through untouched."""
    outcome = Outcome()
    try:
        yield outcome
    except MembraneError as exc:
        outcome.error = exc
        show_error(exc, action)
        if stop:
            st.stop()


__all__ = ["engine_call", "show_error", "describe", "sentence", "Outcome"]
