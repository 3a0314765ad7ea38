""""Who gains access?" before a change is applied: the engine's exposures (membrane_engine.
exposure) per profile, and the confirmation a curator must give when a change widens access.

Profiles are the active policy file's (console.components.policy_source); without one, the
trust form's presets stand in, so the question is always asked of some named agents. Rows of
records the signed-in operator's clearance hides are withheld and only counted.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pandas as pd
import streamlit as st

from console import auth
from console.components import policy_source
from console.components.safe import clean
from console.components.trust_form import PRESETS
from membrane_engine import Exposures, TrustContext, Verdict, decide

ARROW = "→"


def preview_profiles(membrane: Any) -> tuple[dict[str, TrustContext], str]:
    """The named contexts to ask about, and where they come from."""
    named = policy_source.profiles(membrane)
    if named:
        return named, "profiles of the policy file"
    presets = {name: TrustContext(**values) for name, values in PRESETS.items() if values}
    return presets, "the console's preset contexts (no policy file is active)"


def _seen_by_operator(sensitivity: str, scope: str) -> bool:
    operator = auth.current()
    return operator is not None and decide(sensitivity, scope, operator.clearance).verdict != Verdict.HIDDEN


def show_exposures(ex: Exposures, origin: str, key: str) -> None:
    """Per profile, how many records become (or stop being) full or redacted, then the rows."""
    st.markdown("**Who gains access?** Verdicts before and after, per profile (" + origin + ").")
    summary = [{"profile": clean(name, 80), "gains": ex.gained(name), "losses": ex.lost(name),
                "changes": ", ".join(f"{b} {ARROW} {a}: {n}" for (b, a), n in sorted(per.items()))}
               for name, per in ex.counts.items()]
    st.dataframe(pd.DataFrame(summary, columns=["profile", "gains", "losses", "changes"]), hide_index=True,
                 key=f"{key}_summary")
    rows = [e for e in ex.changes if _seen_by_operator(e.sensitivity, e.scope)]
    if rows:
        st.dataframe(pd.DataFrame([{"access": "gain" if e.gain else "loss", "profile": clean(e.profile, 80),
                                    "id": clean(e.id, 120), "type": e.type, "sensitivity": e.sensitivity,
                                    "scope": clean(e.scope, 120), "before": e.before, "after": e.after}
                                   for e in rows]), hide_index=True, key=f"{key}_rows")
    withheld = len(ex.changes) - len(rows)
    if withheld:
        why = "above your clearance" if auth.current() else "not listed until you sign in"
        st.caption(f"{withheld} row(s) about records {why} are not shown (counted above).")


def _digest(ex: Exposures) -> str:
    """Names the exact widening, so a confirmation does not carry over to a different change."""
    gains = sorted((name, b, a, n) for name, per in ex.counts.items() for (b, a), n in per.items()
                   if (b, a) in (("hidden", "redacted"), ("hidden", "full"), ("redacted", "full")))
    return hashlib.sha256(repr(gains).encode()).hexdigest()[:12]


def widening_confirmed(ex: Exposures, key: str) -> bool:
    """True when the change widens nobody's access, or the operator ticked the confirmation for
    this very widening. Pages check the answer again when Apply is pressed (same script run), so
    the refusal holds on the server, not only in a disabled button."""
    if not ex.widens:
        return True
    gaining = [f"{clean(name, 80)} (+{ex.gained(name)})" for name in ex.counts if ex.gained(name)]
    st.warning("This change widens access: " + ", ".join(gaining) + ".", icon=":material/lock_open:")
    operator = auth.current()
    who = f" ({operator.actor})" if operator else ""
    digest = _digest(ex)
    if st.session_state.get(f"{key}_for") != digest:  # another widening than the one confirmed: ask again
        st.session_state[key] = False
        st.session_state[f"{key}_for"] = digest
    return st.checkbox(f"I confirm{who} that these profiles may see these records.", key=key)


__all__ = ["preview_profiles", "show_exposures", "widening_confirmed"]
