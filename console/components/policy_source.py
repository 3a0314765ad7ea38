"""Which policy file the console uses (SPEC 11), and its profiles as named trust contexts.

In order: a file uploaded on the Policies page (this session only), `--policies FILE` after
`streamlit run console/app.py --` (`membrane-console --policies FILE` passes it), the
MEMBRANE_POLICIES environment variable, else the bundled sample_data/policies.toml when the
store is the sample store. Parsing is the engine's (membrane_engine.policies).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from membrane_engine import Policy, PolicyError, TrustContext, load_policy, parse_policy, sample_store_path

SAMPLE_POLICY = sample_store_path().with_name("policies.toml")  # shipped beside the sample store
UPLOAD_KEY = "policy_upload"  # (name, text) of a file uploaded this session


@dataclass(frozen=True)
class Source:
    policy: Policy | None
    label: str  # where it came from, for the page
    error: PolicyError | None = None


def configured_path() -> str | None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--policies")
    known, _ = parser.parse_known_args(sys.argv[1:])
    return known.policies or os.environ.get("MEMBRANE_POLICIES") or None


@st.cache_resource(show_spinner=False, max_entries=16)  # not cache_data: nothing to pickle
def _load(path: str, mtime: float) -> tuple[Policy | None, PolicyError | None]:
    try:
        return load_policy(path), None
    except PolicyError as exc:
        return None, exc


def _from_file(path: str, label: str) -> Source:
    try:
        mtime = Path(path).stat().st_mtime
    except OSError as exc:
        return Source(None, label, PolicyError(path, [(None, "(file)", f"cannot be read: {exc.strerror}")]))
    policy, error = _load(path, mtime)
    return Source(policy, label, error)


def active(membrane: Any) -> Source:
    uploaded = st.session_state.get(UPLOAD_KEY)
    if uploaded:
        name, text = uploaded
        try:
            return Source(parse_policy(text, name), f"uploaded file {name}")
        except PolicyError as exc:
            return Source(None, f"uploaded file {name}", exc)
    path = configured_path()
    if path:
        return _from_file(path, f"{path} (--policies / MEMBRANE_POLICIES)")
    if membrane.holds_sample():  # the facade or an operator's view: both answer it
        return _from_file(str(SAMPLE_POLICY), "the bundled sample_data/policies.toml (this is the sample store)")
    return Source(None, "no policy file: pass --policies FILE, set MEMBRANE_POLICIES, or upload one")


def profiles(membrane: Any) -> dict[str, TrustContext]:
    """The active file's profiles (empty when there is none, or it is invalid)."""
    policy = active(membrane).policy
    return {name: policy.trust(name) for name in policy.profiles} if policy else {}


__all__ = ["Source", "active", "profiles", "configured_path", "UPLOAD_KEY", "SAMPLE_POLICY"]
