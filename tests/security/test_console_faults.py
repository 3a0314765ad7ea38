"""The console shows database faults as messages, never as tracebacks: console/app.py with a
store that cannot be opened (unreachable server, a directory that cannot exist, a bad URL), a
store that disappears mid-session, and the ``engine_call`` guard pages use (escaping, stopping)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from membrane_engine import Membrane

from tests.support.security import simple

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "console" / "app.py")
TIMEOUT = 120


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


def _no_traceback(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]
    shown = " ".join(str(getattr(e, "value", "")) for e in list(at.main.markdown) + list(at.main.error) + list(at.main.code))
    assert "Traceback" not in shown and 'File "' not in shown


def _main_error(at: AppTest) -> str:
    errors = [e.value for e in at.main.error]
    assert errors, "the page should say why it cannot show the store"
    return " ".join(errors).replace("\\", "")  # Markdown escapes aside


@pytest.mark.parametrize("url, words", [
    ("postgresql+psycopg://postgres:hunter2@127.0.0.1:1/test", ["cannot be opened", "unreachable", "127.0.0.1"]),
    ("postgresql+psycopg://postgres@no-such-host.invalid:5432/db", ["cannot be opened", "unreachable"]),
    ("nosuchdriver://user@host/db", ["cannot be opened", "cannot open store"]),
], ids=["closed-port", "unknown-host", "unknown-driver"])
def test_app_with_an_unreachable_store_shows_a_clear_error(url: str, words: list[str], monkeypatch):
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    _no_traceback(at)
    message = _main_error(at)
    for w in words:
        assert w in message, message
    assert "hunter2" not in message and all("hunter2" not in c.value for c in at.sidebar.code)
    assert not at.sidebar.error  # one message, where the operator is looking


def test_app_with_a_store_directory_that_cannot_exist(tmp_path: Path, monkeypatch):
    (tmp_path / "a-file").write_text("a file where the store's directory should be")
    monkeypatch.setenv("MEMBRANE_DB_URL", f"sqlite:///{tmp_path / 'a-file' / 'sub' / 'm.db'}")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    _no_traceback(at)
    assert "does not exist" in _main_error(at)  # a named store is never given a directory it lacks


def test_app_whose_store_disappears_mid_session(tmp_path: Path, monkeypatch):
    folder = tmp_path / "store"
    folder.mkdir()
    url = f"sqlite:///{folder / 'm.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_records([simple("a"), simple("b", "competence")])
    m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    _no_traceback(at)
    assert not at.main.error, [e.value for e in at.main.error]
    shutil.rmtree(folder)
    at.run()
    _no_traceback(at)
    assert "gone" in _main_error(at)


def _guard_script(mode: str) -> None:
    import streamlit as st

    from console.components.guard import engine_call
    from membrane_engine.errors import NotFoundError, StoreUnavailableError, ValidationError

    if mode == "stop":
        with engine_call("Reinforce"):
            raise NotFoundError("[click](javascript:alert(1)) ![x](https://tracker.invalid/p.png) <b>x</b>")
        st.write("not reached")
    elif mode == "continue":
        with engine_call("Import", stop=False) as outcome:
            raise ValidationError("record 0: confidence: Input should be less than or equal to 1 (got 1.5)")
        st.write(f"went on, failed={outcome.failed}")
    elif mode == "unavailable":
        with engine_call():
            raise StoreUnavailableError("the database is locked by another process; try again in a moment")
    elif mode == "fine":
        with engine_call("Read") as outcome:
            value = 41 + 1
        st.write(f"value {value}, failed={outcome.failed}")


@pytest.mark.parametrize("mode", ["stop", "continue", "unavailable", "fine"])
def test_engine_call_guard(mode: str):
    at = AppTest.from_function(_guard_script, args=(mode,), default_timeout=TIMEOUT)
    at.run()
    _no_traceback(at)
    texts = [m.value for m in at.markdown]
    if mode == "stop":
        (error,) = at.error
        assert error.value.startswith("Reinforce — ")
        # Record text is escaped: no live link, image or HTML in the message.
        assert "\\[click\\]\\(javascript\\:" in error.value and "\\!\\[x\\]" in error.value and "\\<b\\>" in error.value
        assert "not reached" not in texts
    elif mode == "continue":
        (error,) = at.error
        assert "confidence" in error.value and "1\\.5" in error.value
        assert "went on, failed=True" in texts
    elif mode == "unavailable":
        (error,) = at.error
        assert error.value.startswith("The memory store is unavailable — ") and "locked" in error.value
        assert error.icon == ":material/cloud_off:"
    else:
        assert not at.error and "value 42, failed=False" in texts
