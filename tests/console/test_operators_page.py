"""The Operators page (AppTest, SPEC 10): an admin lists, adds, changes and removes operators
through the engine, each write in the operator log with the admin as its actor; the role is
read from the store at each submit (an admin demoted meanwhile writes nothing); anyone else is
told the page needs the admin role and gets no form. On SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane
from membrane_engine.rules.roles import Operator
from tests.support.sessions import TEST_ADMIN, sign_in

PAGE = Path(__file__).resolve().parents[2] / "console" / "app_pages" / "operators.py"
TIMEOUT = 60
ADMIN_ACTOR = f"operator:{TEST_ADMIN.name}"


@pytest.fixture
def page_store(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("MEMBRANE_DB_URL", store_url)
    st.cache_resource.clear()
    yield store_url
    st.cache_resource.clear()


def run(target) -> AppTest:
    at = target.run(timeout=TIMEOUT)
    assert not at.exception, [e.value for e in at.exception]
    return at


def table(at: AppTest):
    return next(d.value for d in at.dataframe if "password set" in d.value.columns)


def events(url: str) -> list[tuple[str, str, str]]:
    m = Membrane.open(url, load_sample=False)
    try:
        return [(e.actor, e.action, e.operator) for e in m.operators.events() if e.actor != "test-kit"]
    finally:
        m.close()


def test_an_admin_adds_changes_and_removes_operators_all_logged(page_store):
    at = run(AppTest.from_file(str(PAGE), default_timeout=TIMEOUT))
    assert list(table(at)["name"]) == [TEST_ADMIN.name]
    at.text_input(key="op_add_name").input("bob")
    at.selectbox(key="op_add_role").select("viewer")
    at.selectbox(key="op_add_clearance").select("low")
    at.text_input(key="op_add_scopes").input("ops, billing")
    at.text_input(key="op_add_email").input("Bob@Example.org")
    at = run(at.button(key="op_add_submit").click())
    assert any("Add bob: done" in s.value for s in at.success), [e.value for e in at.error]
    rows = table(at).set_index("name")
    assert rows.loc["bob", "role"] == "viewer" and rows.loc["bob", "clearance"] == "low"
    assert rows.loc["bob", "email"] == "bob@example.org" and rows.loc["bob", "password set"] == "no"
    assert rows.loc["bob", "scopes"] == "billing, ops"

    at.selectbox(key="op_change_name").select("bob")
    at = run(at)
    at.selectbox(key="op_change_role").select("curator")
    at.selectbox(key="op_change_clearance").select("high")
    at = run(at.button(key="op_change_submit").click())
    assert any("Change bob" in s.value for s in at.success), [e.value for e in at.error]
    rows = table(at).set_index("name")
    assert (rows.loc["bob", "role"], rows.loc["bob", "clearance"]) == ("curator", "high")

    at.selectbox(key="op_remove_name").select("bob")
    at = run(at)
    assert at.button(key="op_remove_submit").disabled  # not without the confirmation
    at = run(at.checkbox(key="op_remove_confirm").check())
    at = run(at.button(key="op_remove_submit").click())
    assert list(table(at)["name"]) == [TEST_ADMIN.name]
    assert events(page_store) == [(ADMIN_ACTOR, "add", "bob"), (ADMIN_ACTOR, "set", "bob"),
                                  (ADMIN_ACTOR, "remove", "bob")]
    m = Membrane.open(page_store, load_sample=False)
    try:
        assert m.operators.events("bob")[1].details == {"role": "curator", "clearance": "high"}
    finally:
        m.close()


def test_refusals_name_the_problem_and_write_nothing(page_store):
    at = run(AppTest.from_file(str(PAGE), default_timeout=TIMEOUT))
    at.text_input(key="op_add_name").input("bad name")
    at = run(at.button(key="op_add_submit").click())
    assert any("refused" in e.value and "operator name" in e.value for e in at.error), [e.value for e in at.error]
    at.selectbox(key="op_change_name").select(TEST_ADMIN.name)
    at = run(at)
    at.selectbox(key="op_change_role").select("viewer")
    at = run(at.button(key="op_change_submit").click())
    assert any("last admin" in e.value for e in at.error), [e.value for e in at.error]
    assert events(page_store) == []


def test_an_admin_demoted_after_the_page_was_drawn_writes_nothing(page_store):
    at = run(AppTest.from_file(str(PAGE), default_timeout=TIMEOUT))
    m = Membrane.open(page_store, load_sample=False)
    try:
        m.operators.add("root", "admin", "hyper", actor="cli:root")
        m.operators.set(TEST_ADMIN.name, role="viewer", actor="cli:root")
    finally:
        m.close()
    at.text_input(key="op_add_name").input("mallory")
    at.selectbox(key="op_add_role").select("admin")
    at = run(at.button(key="op_add_submit").click())
    assert not [e for e in events(page_store) if e[2] == "mallory"]
    assert any("needs the admin role" in e.value for e in at.error), [e.value for e in at.error]


def test_a_viewer_is_told_the_page_needs_the_admin_role(page_store):
    at = AppTest.from_file(str(PAGE), default_timeout=TIMEOUT)
    sign_in(at, Operator(name="val", role="viewer", max_sensitivity="hyper"))
    at = run(at)
    assert any("needs the admin role" in e.value for e in at.error), [e.value for e in at.error]
    assert not at.text_input and not at.dataframe and not at.button


def test_a_row_written_outside_the_engine_is_listed_as_not_verifying(page_store):
    from sqlalchemy import insert

    from membrane_engine.storage.store import operators

    m = Membrane.open(page_store, load_sample=False)
    try:
        with m.store.write() as conn:
            conn.execute(insert(operators).values(name="eve", role="admin", max_sensitivity="hyper", scopes="[]",
                                                  created_at=1.0, updated_at=1.0))
    finally:
        m.close()
    rows = table(run(AppTest.from_file(str(PAGE), default_timeout=TIMEOUT))).set_index("name")
    assert rows.loc["eve", "verifies"].startswith("NO")
    assert rows.loc[TEST_ADMIN.name, "verifies"] == "yes"
