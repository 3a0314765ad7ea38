"""Every console page loads on the sample store in a real browser: it draws something, shows no
exception box and no traceback, and a screenshot of it is kept in tests/e2e/screenshots/."""

from __future__ import annotations

import pytest

from tests.support.browser import PAGES

pytestmark = pytest.mark.e2e


# every page at its own address, and the console's root (which hands over to the Overview)
PATHS = list(PAGES) + [pytest.param("", id="root")]


@pytest.mark.parametrize("path", PATHS)
def test_page_loads_without_an_exception(console, path):
    con = console.open(path)
    shot = con.screenshot(f"sample-{path or 'root'}")
    con.assert_healthy()
    assert not any(f.msg is not None and f.msg.WhichOneof("type") == "page_not_found" for f in con.frames), \
        f"/{path} is not a page of the console"
    assert con.page.locator("[data-testid=stMain] h1").count() >= 1, f"/{path} drew no title ({shot})"
