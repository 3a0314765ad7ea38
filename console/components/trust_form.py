"""The trust-context form, its presets, and its encoding in the page URL."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import streamlit as st

from console import keys
from console.keys import TRUST_FIELDS, Param
from membrane_engine import CANONICAL_LAYER_ORDER, MAX_TASK_LENGTH, Sensitivity, TrustContext

from . import time_picker
from .page import ignored

SENSITIVITIES = [s.value for s in Sensitivity]
LAYERS = [t.value for t in CANONICAL_LAYER_ORDER]

PRESETS: dict[str, dict] = {
    "Custom": {},
    "Public agent (public, no scopes)": {"max_sensitivity": "public", "authenticated": False, "actor_id": "public-agent", "scopes": []},
    "Project agent (medium, project-alpha)": {"max_sensitivity": "medium", "authenticated": True, "actor_id": "agent-1", "scopes": ["project-alpha"]},
    "Ops agent (high, infra-ops)": {"max_sensitivity": "high", "authenticated": True, "actor_id": "ops-agent", "scopes": ["infra-ops"]},
    "Administrator (hyper, every scope)": {"max_sensitivity": "hyper", "authenticated": True, "actor_id": "admin", "scopes": []},
}


@dataclass
class RequestParams:
    """A simulation: trust context plus request, as read from widgets or the URL."""

    trust: TrustContext
    task: str = ""
    memory_types: tuple[str, ...] = ()
    min_salience: float = 0.0
    limit: int = 20
    as_of: datetime | None = None

    def to_query(self) -> dict[str, str]:
        q = {
            "max_sensitivity": self.trust.max_sensitivity.value,
            "scopes": ",".join(self.trust.scopes),
            "actor_id": self.trust.actor_id,
            "authenticated": "true" if self.trust.authenticated else "false",
            Param.MEMORY_TYPES: ",".join(self.memory_types),
            Param.MIN_SALIENCE: f"{self.min_salience:g}",
            Param.LIMIT: str(self.limit),
            Param.TASK: self.task,
        }
        if self.as_of is not None:
            q[Param.AS_OF] = time_picker.to_param(self.as_of)
        return q


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def params_from_query(query: dict[str, str]) -> tuple[dict, list[str]]:
    """Widget defaults from URL parameters, and a list of problems with the ones that are bad."""
    out: dict = {}
    problems: list[str] = []
    if "max_sensitivity" in query:
        if query["max_sensitivity"] in SENSITIVITIES:
            out["max_sensitivity"] = query["max_sensitivity"]
        else:
            problems.append(f"max_sensitivity {query['max_sensitivity']!r} is not one of {', '.join(SENSITIVITIES)}")
    if "scopes" in query:
        out["scopes"] = _split(query["scopes"])
    if "actor_id" in query:
        out["actor_id"] = query["actor_id"]
    if "authenticated" in query:
        value = query["authenticated"].lower()
        if value in ("true", "false"):
            out["authenticated"] = value == "true"
        else:
            problems.append(f"authenticated {query['authenticated']!r} must be true or false")
    if "memory_types" in query:
        types = _split(query["memory_types"])
        bad = [t for t in types if t not in LAYERS]
        if bad:
            problems.append(f"memory_types has unknown types: {', '.join(bad)}")
        out["memory_types"] = [t for t in types if t in LAYERS]
    if "min_salience" in query:
        try:
            value = float(query["min_salience"])
            if not 0 <= value < float("inf"):
                raise ValueError
            out["min_salience"] = value
        except ValueError:
            problems.append(f"min_salience {query['min_salience']!r} must be a non-negative number")
    if "limit" in query:
        try:
            value = int(query["limit"])
            if not 0 <= value <= 10000:
                raise ValueError
            out["limit"] = value
        except ValueError:
            problems.append(f"limit {query['limit']!r} must be an integer from 0 to 10000")
    if query.get(Param.AS_OF):
        moment, problem = time_picker.from_param(Param.AS_OF, query[Param.AS_OF])
        if problem:
            problems.append(problem)
        else:
            out["as_of"] = moment
    if "task" in query:
        if len(query["task"]) > MAX_TASK_LENGTH:  # the engine refuses it; a link must not stall the page
            problems.append(f"task of {len(query['task']):,} characters: a task descriptor has at most "
                            f"{MAX_TASK_LENGTH:,}")
        else:
            out["task"] = query["task"]
    return out, problems


_CONTEXT_FIELDS = TRUST_FIELDS


def context_query(prefix: str, trust: TrustContext) -> dict[str, str]:
    """One trust context as URL parameters named with ``prefix`` (several contexts on one page)."""
    q = RequestParams(trust=trust).to_query()
    return {prefix + k: q[k] for k in _CONTEXT_FIELDS}


def context_from_query(prefix: str, query: dict[str, str]) -> tuple[dict, list[str]]:
    """Form defaults for the context under ``prefix`` in the URL, and problems with its values."""
    mine = {k[len(prefix):]: v for k, v in query.items() if k.startswith(prefix) and k[len(prefix):] in _CONTEXT_FIELDS}
    values, problems = params_from_query(mine)
    return values, [f"{prefix}{p}" for p in problems]


def _seed(key: str, values: dict) -> None:
    """Put values into the form's widget state (used for URL defaults and presets)."""
    mapping = {"max_sensitivity": "max_sensitivity", "scopes": "scopes", "actor_id": "actor_id",
               "authenticated": "authenticated"}
    for field, suffix in mapping.items():
        if field in values:
            st.session_state[f"{key}_{suffix}"] = list(values[field]) if field == "scopes" else values[field]


BASE = {"max_sensitivity": "medium", "scopes": [], "actor_id": "agent-1", "authenticated": True}


def fill(key: str, values: dict) -> None:
    """Set the form ``key`` to ``values`` (the fields missing: the form's defaults) before it is
    drawn: a page restoring its state from the URL or from the session's shared context."""
    _seed(key, {**BASE, **values})
    st.session_state[f"{key}_preset"] = "Custom"


PROFILE_PREFIX = "Profile: "


def profile_presets() -> dict[str, dict]:
    """The active policy file's profiles (SPEC 11) as presets, "Profile: NAME" -> form values."""
    from console.components import policy_source
    from console.components.clearance import operator_view

    return {PROFILE_PREFIX + name: {"max_sensitivity": t.max_sensitivity.value, "authenticated": t.authenticated,
                                    "actor_id": t.actor_id, "scopes": list(t.scopes)}
            for name, t in policy_source.profiles(operator_view(keys.TRUST_FORM_VIEW)).items()}


def _apply_preset(key: str) -> None:
    name = st.session_state.get(f"{key}_preset", "Custom")
    preset = PRESETS.get(name) or profile_presets().get(name, {})
    if preset:
        _seed(key, preset)


def trust_context_form(key: str, scopes_available: list[str], defaults: dict | None = None,
                       with_presets: bool = True) -> TrustContext:
    """Widgets for one trust context. ``key`` keeps several forms apart on one page; ``defaults``
    (e.g. from the URL) fill the form the first time it is drawn in a session."""
    if f"{key}_max_sensitivity" not in st.session_state:
        _seed(key, BASE)
        _seed(key, defaults or {})
    if with_presets:
        options = list(PRESETS) + list(profile_presets())
        if st.session_state.get(f"{key}_preset", "Custom") not in options:  # a profile of a file no longer active
            st.session_state[f"{key}_preset"] = "Custom"
        st.selectbox("Preset", options, key=f"{key}_preset", on_change=_apply_preset,
                     args=(key,), help="Fill the form with a typical trust context, or a profile of the policy file")
    chosen = st.session_state.get(f"{key}_scopes", [])
    options = sorted(set(scopes_available) | set(chosen))
    max_sensitivity = st.select_slider(
        "Max sensitivity", SENSITIVITIES, key=f"{key}_max_sensitivity",
        help="Records at or below this level are visible in full; one level above, redacted (metadata only)")
    scopes = st.multiselect("Scopes", options, key=f"{key}_scopes",
                            help="Empty means every scope is allowed. Unscoped records are always visible")
    # One above the other: side by side, the checkbox's label was cut in the Graph page's narrow column.
    actor_id = st.text_input("Actor id", key=f"{key}_actor_id")
    authenticated = st.checkbox("Authenticated", key=f"{key}_authenticated")
    if not scopes:
        st.warning("No scopes selected: this context sees every scope.", icon=":material/warning:")
    return TrustContext(max_sensitivity=max_sensitivity, authenticated=authenticated, actor_id=actor_id, scopes=scopes)


def seed_request_form(key: str, seed: dict[str, str]) -> tuple[dict, list[str]]:
    """Fill the request widgets a retrieve-like page shares (trust context ``key``, task, memory
    types, as of) from URL parameters; the parsed values (for the page's own widgets) and the
    parameters it ignored, worded for ``Page.link_problems``."""
    defaults, problems = params_from_query(seed)
    fill(key, {k: v for k, v in defaults.items() if k in TRUST_FIELDS})
    st.session_state[f"{key}_task"] = defaults.get("task", "")
    st.session_state[f"{key}_types"] = list(defaults.get("memory_types", []))
    time_picker.set_instant(f"{key}_as_of", defaults.get("as_of"))
    return defaults, [ignored(p) for p in problems]
