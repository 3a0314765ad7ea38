"""Operators (SPEC 10): the admins' page to see, add, change and remove the console's operators.

Every write goes through the engine (the operator's view, ``Membrane.as_operator``, over
``Membrane.operators``), one transaction each, with the signed-in admin as the actor
(``operator:NAME``) in the operator log. The role (``permits(operator, "manage_operators")``) is
checked from the store, not from the session, when the page is drawn and again by the engine at
each write: an admin demoted meanwhile writes nothing. Passwords are never shown or set here
(``membrane-console operators passwd``, or a sign-in by e-mail through OpenID Connect or a
trusted proxy).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from console import keys
from console.components.page import page_preamble
from console.components.safe import clean, md
from membrane_engine import Operator, Role, Sensitivity
from membrane_engine.errors import AccessDeniedError, MembraneError

K = keys.OPERATORS
ACTION = "manage_operators"
RESULT_KEY = K("result")
RESET_KEY = K("reset")
ROLES = [r.value for r in Role]
LEVELS = [s.value for s in Sensitivity]


page = page_preamble(K, "Operators", clearance_caption=False)
me = page.operator


# ----------------------------------------------------------------------------- the engine
# Every engine call of the page, here and nowhere else. Writes go through the operator's view
# (``Membrane.as_operator``): the engine reads the role from the store at the call and names the
# actor operator:NAME; the list is the view's too (admins only).


def may_manage() -> tuple[bool, str]:
    """May the signed-in operator, as the store has them now, manage operators?"""
    return page.view.may(ACTION)


def roster() -> list[tuple[Operator, bool, bool]]:
    return page.view.operator_roster()


def add(name: str, role: str, clearance: str, scopes: str, email: str) -> None:
    page.view.add_operator(name, role, clearance, scopes, email=email or None)


def change(name: str, changes: dict[str, str]) -> None:
    page.view.set_operator(name, **changes)


def remove(name: str) -> None:
    page.view.remove_operator(name)


# ----------------------------------------------------------------------------- the page


def submit(what: str, write) -> None:
    """Run ``write()``; the outcome (Markdown, names escaped) is shown after the rerun. The role
    is the engine's to check, from the store, at the write (an admin demoted since the page was
    drawn gets AccessDeniedError and nothing is written)."""
    what = md(what, 300)
    try:
        write()
    except AccessDeniedError as exc:
        st.session_state[RESULT_KEY] = ("error", f"{what} not allowed: managing operators needs the admin role "
                                                 f"({md(exc, 300)}). Nothing was written.")
        return
    except MembraneError as exc:  # validation, unknown or duplicate operator, last admin, no audit key
        st.session_state[RESULT_KEY] = ("error", f"{what} refused: {md(exc, 800)}")
        return
    st.session_state[RESULT_KEY] = ("success", f"{what}: done, logged as {md(me.actor, 80)}.")
    st.session_state[RESET_KEY] = True


allowed, reason = may_manage()
if not allowed:
    st.error(f"Managing operators needs the admin role ({md(reason, 300)}).", icon=":material/block:")
    st.stop()

if st.session_state.pop(RESET_KEY, False):
    for key in (K("add_name"), K("add_scopes"), K("add_email")):
        st.session_state[key] = ""
    st.session_state[K("remove_confirm")] = False
result = st.session_state.pop(RESULT_KEY, None)
if result is not None:
    (st.success if result[0] == "success" else st.error)(result[1])

people = roster()
st.caption("The console's people: each one's role says which changes they may make, their clearance what they "
           "see. Every change here is logged with you as its actor. Passwords are set with `membrane-console "
           "operators passwd`.")
st.dataframe(pd.DataFrame([{
    "name": clean(op.name, 64),
    "role": op.role.value,
    "clearance": op.max_sensitivity.value,
    "scopes": clean(", ".join(op.scopes) or "(every scope)", 300),
    "email": clean(op.email or "", 256),
    "password set": "yes" if has_password else "no",
    "verifies": "yes" if verifies else "NO: changed outside the engine, signs no one in",
} for op, has_password, verifies in people], columns=["name", "role", "clearance", "scopes", "email", "password set",
                                                      "verifies"]),
    hide_index=True, key=K("table"))

names = [op.name for op, _, _ in people]
tab_add, tab_change, tab_remove = st.tabs(["Add", "Change", "Remove"])

with tab_add:
    with st.form(K("add_form")):
        name = st.text_input("Name (letters, digits, _.@-)", key=K("add_name"), max_chars=64)
        role = st.selectbox("Role", ROLES, key=K("add_role"))
        clearance = st.selectbox("Clearance (max sensitivity)", LEVELS, index=LEVELS.index("medium"),
                                 key=K("add_clearance"))
        scopes = st.text_input("Scopes (comma-separated; empty: every scope)", key=K("add_scopes"))
        email = st.text_input("E-mail (optional; signs in through OpenID Connect or a proxy)", key=K("add_email"))
        if st.form_submit_button("Add operator", key=K("add_submit")):
            submit(f"Add {name.strip()}", lambda: add(name.strip(), role, clearance, scopes, email.strip()))
            st.rerun()

with tab_change:
    if not names:
        st.info("No operators yet.")
    else:
        target = st.selectbox("Operator", names, key=K("change_name"))
        current = next(op for op, _, _ in people if op.name == target)
        with st.form(K("change_form")):
            new_role = st.selectbox("Role", ROLES, index=ROLES.index(current.role.value), key=K("change_role"))
            new_level = st.selectbox("Clearance (max sensitivity)", LEVELS,
                                     index=LEVELS.index(current.max_sensitivity.value), key=K("change_clearance"))
            new_scopes = st.text_input("Scopes (comma-separated; empty: every scope)", value=", ".join(current.scopes),
                                       key=K("change_scopes", target))
            new_email = st.text_input("E-mail (empty: none)", value=current.email or "",
                                      key=K("change_email", target))
            if st.form_submit_button("Save changes", key=K("change_submit")):
                changes: dict[str, str] = {}
                if new_role != current.role.value:
                    changes["role"] = new_role
                if new_level != current.max_sensitivity.value:
                    changes["max_sensitivity"] = new_level
                if sorted(s.strip() for s in new_scopes.split(",") if s.strip()) != sorted(current.scopes):
                    changes["scopes"] = new_scopes
                if new_email.strip().lower() != (current.email or ""):
                    changes["email"] = new_email.strip()
                if not changes:
                    st.session_state[RESULT_KEY] = ("error", f"Nothing to change for {md(target, 64)}.")
                else:
                    submit(f"Change {target} ({', '.join(sorted(changes))})", lambda: change(target, changes))
                st.rerun()
        st.caption("A change of role, clearance or scopes ends that operator's sessions: it applies from their next "
                   "sign-in.")

with tab_remove:
    if not names:
        st.info("No operators yet.")
    else:
        victim = st.selectbox("Operator", names, key=K("remove_name"))
        confirmed = st.checkbox(f"Yes, remove {md(victim, 64)} and end their sessions", key=K("remove_confirm"))
        if st.button("Remove operator", key=K("remove_submit"), disabled=not confirmed, type="primary") and confirmed:
            submit(f"Remove {victim}", lambda: remove(victim))
            st.rerun()
