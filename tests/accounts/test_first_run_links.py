"""First-run links (SPEC 10, membrane_engine/operator_store.py): one works once, and only while
its operator has no password; setting a password ends the links still outstanding."""

from __future__ import annotations

from membrane_engine import Membrane
from membrane_engine.accounts.operators import FIRST_RUN

PASSWORD = "a password for these tests"


def test_a_first_run_link_is_refused_once_the_operator_has_a_password(tmp_path):
    m = Membrane.open(f"sqlite:///{tmp_path / 'm.db'}", load_sample=False)
    try:
        m.operators.add("admin", "admin", "hyper", actor="first-run")
        before = m.operators.issue_token("admin", FIRST_RUN, 3600)
        spare = m.operators.issue_token("admin", FIRST_RUN, 3600)
        m.operators.passwd("admin", PASSWORD, actor="operator:admin")
        assert m.operators.redeem(before, FIRST_RUN) is None  # outstanding links ended by passwd
        after = m.operators.issue_token("admin", FIRST_RUN, 3600)  # e.g. printed by an old process
        assert m.operators.redeem(after, FIRST_RUN) is None  # the operator has a password
        assert m.operators.redeem(spare, FIRST_RUN) is None
    finally:
        m.close()


def test_a_first_run_link_works_once_for_an_operator_without_a_password(tmp_path):
    m = Membrane.open(f"sqlite:///{tmp_path / 'm.db'}", load_sample=False)
    try:
        m.operators.add("admin", "admin", "hyper", actor="first-run")
        link = m.operators.issue_token("admin", FIRST_RUN, 3600)
        assert m.operators.redeem(link, FIRST_RUN).name == "admin"
        assert m.operators.redeem(link, FIRST_RUN) is None
    finally:
        m.close()
