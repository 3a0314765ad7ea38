"""`membrane-console` opens the store and loads its column cache while the server starts, into
the very cache entry the pages use (console.state._open), so the first page does not wait."""

from __future__ import annotations

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

    cli.prewarm(url)
    assert len(opened) == 1 and loads and all(cache is loads[0] for cache in loads)
    m = state._open(url)  # what a page gets: the prewarmed engine, not a second one
    assert len(opened) == 1 and loads[0] is m.columns
    from membrane_engine import activity

    assert m in activity._OF  # the audit activity the first pages chart is counted too


def test_prewarm_says_in_the_terminal_when_the_store_cannot_be_opened(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "missing-dir" / "sub"
    cli.prewarm(f"sqlite:///{missing / 'membrane.db'}")  # no exception escapes
    err = capsys.readouterr().err
    assert "cannot be opened" in err and str(missing) in err and "does not exist" in err
    assert not missing.exists()  # a mistyped path is not silently created
    cli.prewarm("postgresql+pg8000://nobody@127.0.0.1/none")
    assert "pip install 'membrane-console[postgres]'" in capsys.readouterr().err
