"""`membrane-console` opens the store and loads its column cache while the server starts, into
the very cache entry the pages use (console.state._open), so the first page does not wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st

from console import cli, state
from membrane_engine import Membrane
from membrane_engine.storage.columns import ColumnCache


@pytest.fixture(autouse=True)
def clean_caches() -> Iterator[None]:
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def test_prewarm_fills_the_cached_engine_the_pages_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'membrane.db'}"
    Membrane.open(url, load_sample=False).close()
    opened, loads = [], []
    real_open, real_current = Membrane.open, ColumnCache.current
    monkeypatch.setattr(Membrane, "open", classmethod(lambda cls, *a, **k: opened.append(a) or real_open(*a, **k)))
    monkeypatch.setattr(ColumnCache, "current", lambda self: loads.append(self) or real_current(self))

    monkeypatch.setattr(state, "FIRST_RUN_DONE", threading.Event())
    state.script_ran()  # a page has been drawn: nothing to wait for
    cli.prewarm(url)
    assert len(opened) == 1 and loads and all(cache is loads[0] for cache in loads)
    m = state._open(url)  # what a page gets: the prewarmed engine, not a second one
    assert len(opened) == 1 and loads[0] is m.columns
    from membrane_engine import activity

    assert m in activity._OF  # the audit activity the first pages chart is counted too


def test_prewarm_loads_the_ranking_vectors_after_the_first_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaded beside the first page, the vectors (seconds of CPU at 1M) halved what that page got."""
    url = f"sqlite:///{tmp_path / 'membrane.db'}"
    Membrane.open(url, load_sample=False).close()
    warmed = threading.Event()
    monkeypatch.setattr(Membrane, "warm", lambda self: warmed.set())
    monkeypatch.setattr(state, "FIRST_RUN_DONE", threading.Event())
    thread = threading.Thread(target=cli.prewarm, args=(url,), daemon=True)
    thread.start()
    from membrane_engine import activity

    deadline = time.monotonic() + 30
    while not any(m.url.endswith("membrane.db") for m in list(activity._OF)) and time.monotonic() < deadline:
        time.sleep(0.02)  # until the overview's needs are loaded
    assert not warmed.wait(0.5)  # the vectors wait for the first page
    state.script_ran()
    thread.join(30)
    assert warmed.is_set() and not thread.is_alive()


def test_prewarm_says_in_the_terminal_when_the_store_cannot_be_opened(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "missing-dir" / "sub"
    cli.prewarm(f"sqlite:///{missing / 'membrane.db'}")  # no exception escapes
    err = capsys.readouterr().err
    assert "cannot be opened" in err and str(missing) in err and "does not exist" in err
    assert not missing.exists()  # a mistyped path is not silently created
    cli.prewarm("postgresql+pg8000://nobody@127.0.0.1/none")
    assert "pip install 'membrane-console[postgres]'" in capsys.readouterr().err
