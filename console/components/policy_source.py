"""Which policy file the console uses (SPEC 11), and its profiles as named trust contexts.

In order: a file a curator or admin uploaded on the Policies page (this session only),
`--policies FILE` after `streamlit run console/app.py --` (`membrane-console --policies FILE`
passes it), the MEMBRANE_POLICIES environment variable, else the bundled
sample_data/policies.toml when the store is the sample store. Parsing is the engine's
(membrane_engine.policy.check), once per file: an upload when it arrives (by its digest), a file on
disk when its mtime changes; a page run only looks the result up.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import streamlit as st

from console import auth, keys
from membrane_engine import (Operator, Policy, PolicyError, TrustContext, load_policy, parse_policy, permits,
                             sample_store_path)

SAMPLE_POLICY = sample_store_path().with_name("policies.toml")  # shipped beside the sample store
UPLOAD_KEY = keys.POLICY_UPLOAD  # the Upload in use this session
REPLACE_ACTION = "replace_policy"  # membrane_engine's ACTION_ROLES: curators and admins
# An upload is parsed in the server process every session shares: a policy file is a few KB
# (the bundled one 3), so 256 KB is room for any real one and bounds what a file can cost.
MAX_UPLOAD_BYTES = 256 * 1024


@dataclass(frozen=True)
class Source:
    policy: Policy | None
    label: str  # where it came from, for the page
    error: PolicyError | None = None


@dataclass(frozen=True)
class Upload:
    """A file uploaded this session, parsed once: ``digest`` (SHA-256 of its bytes) tells the
    same file sent again from a new one."""

    name: str
    digest: str
    size: int
    policy: Policy | None
    error: PolicyError | None


def may_replace(operator: Operator | None) -> tuple[bool, str]:
    """May ``operator`` use an uploaded policy file for the session? The answer and the reason."""
    return permits(operator, REPLACE_ACTION)


def take_upload(name: str, size: int, read: Callable[[], bytes], operator: Operator | None) -> str | None:
    """Use an uploaded file for the session: None when taken (valid or not: the Policies page
    shows its problems), else why not. The role and the size are checked before a byte is read;
    the same bytes under the same name are not parsed again."""
    allowed, why = may_replace(operator)
    if not allowed:
        return f"{name} is not used: {why}."
    if size > MAX_UPLOAD_BYTES:
        return (f"{name} is not used: it is {size:,} bytes, and an uploaded policy file may be at most "
                f"{MAX_UPLOAD_BYTES:,} bytes ({MAX_UPLOAD_BYTES // 1024} KB).")
    data = read()
    digest = hashlib.sha256(data).hexdigest()
    kept = st.session_state.get(UPLOAD_KEY)
    if isinstance(kept, Upload) and (kept.digest, kept.name) == (digest, name):
        return None
    try:
        policy, error = parse_policy(data, name), None
    except PolicyError as exc:
        policy, error = None, exc
    st.session_state[UPLOAD_KEY] = Upload(name, digest, len(data), policy, error)
    return None


def drop_upload() -> None:
    st.session_state.pop(UPLOAD_KEY, None)


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
    # The role is asked again on every run: an operator demoted since the upload is back on the
    # console's file at once.
    if isinstance(uploaded, Upload) and may_replace(auth.current())[0]:
        return Source(uploaded.policy, f"uploaded file {uploaded.name}", uploaded.error)
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


__all__ = ["Source", "Upload", "active", "profiles", "configured_path", "may_replace", "take_upload", "drop_upload",
           "UPLOAD_KEY", "MAX_UPLOAD_BYTES", "REPLACE_ACTION", "SAMPLE_POLICY"]
