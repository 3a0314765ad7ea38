"""The Policies page in a real browser: on the sample store every assertion of the bundled
policy holds; on a copy where a secret was reclassified low, the failing assertion is drawn as
failing, with the offending record and the engine's reasons; no payload reaches the browser."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from membrane_engine import Membrane

from .conftest import SAMPLE, _serve, build_store
from tests.support.browser import ConsoleServer

pytestmark = pytest.mark.e2e

AWS_KEY = "4bd4e60f-41ba-508a-b7d1-a8b178a6aa8b"  # hyper, infra-ops, tagged secret


@pytest.fixture(scope="module")
def broken_server(tmp_path_factory) -> Iterator[ConsoleServer]:
    tmp = tmp_path_factory.mktemp("e2e-policies")
    url = build_store(tmp / "membrane.db", json_file=SAMPLE)
    m = Membrane.open(url, load_sample=False)
    m.reclassify(AWS_KEY, "tester", "a mistake the policy must catch", sensitivity="low", scope="")
    m.close()
    yield from _serve("policies-broken", url, tmp)


def test_the_sample_policy_holds_in_the_browser(console) -> None:
    con = console.open("policies")
    con.screenshot("policies-sample")
    con.assert_healthy()
    assert con.find(["Every assertion holds"]), "no success line on the Policies page"
    assert con.find(["holds"]) and not con.find(["FAILS"])
    assert not con.alerts("error")


def test_a_failing_assertion_is_drawn_as_failing(new_console, broken_server: ConsoleServer) -> None:
    con = new_console(broken_server).open("policies")
    con.screenshot("policies-failing")
    con.assert_healthy()
    errors = " ".join(con.alerts("error"))
    assert "assertion(s) fail" in errors and "no secret reaches docs" in errors.replace("\\", "")
    assert con.find(["FAILS"]), "the failing assertion's status is not in the table"
    assert not con.find(["FAKE"]), "a payload canary reached the browser"
    # Signed in as the test admin (clearance hyper): the offending record is listed with its reasons.
    assert con.find(["sensitivity low is one level above max public: redacted"]), "no reasons for the failure"
