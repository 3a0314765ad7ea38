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
    counted = []
    real_metrics = Membrane.metrics
    monkeypatch.setattr(Membrane, "metrics", lambda self, *a, **k: counted.append(self) or real_metrics(self, *a, **k))

    monkeypatch.setattr(state, "FIRST_RUN_DONE", threading.Event())
    monkeypatch.setattr(cli, "QUIET_BEFORE_WARM", 0.0)
    state.script_ran()  # a page has been drawn: nothing to wait for
    cli.prewarm(url)
    assert len(opened) == 1 and loads and all(cache is loads[0] for cache in loads)
    m = state._open(url)  # what a page gets: the prewarmed engine, not a second one
    assert len(opened) == 1 and loads[0] is m.columns
    assert counted == [m]  # the audit log counted by action, which the first overview reads


def test_prewarm_loads_the_ranking_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranking model is the server's to load, once: not the first import's (whose memory it
    would be counted in) nor the first ranked page's."""
    from membrane_engine.rules.ranking import StaticLexicalEmbedder

    url = f"sqlite:///{tmp_path / 'membrane.db'}"
    Membrane.open(url, load_sample=False).close()  # no record: nothing of the store needs the model
    asked: list[list[str]] = []
    real = StaticLexicalEmbedder.embed
    monkeypatch.setattr(StaticLexicalEmbedder, "embed", lambda self, texts: asked.append(list(texts)) or real(self, texts))
    monkeypatch.setattr(state, "FIRST_RUN_DONE", threading.Event())
    monkeypatch.setattr(cli, "QUIET_BEFORE_WARM", 0.0)
    state.script_ran()
    cli.prewarm(url)
    assert len(asked) == 1 and asked[0]
    assert state._open(url).embedder is not None

def test_prewarm_counts_the_audit_log_the_overview_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before anyone signs in there is no clearance to key the overview's page entries by: the
    prewarm counts the whole audit log by action into the engine's counters, and the first
    overview of a clearance that sees everything only counts the entries written since."""
    from datetime import datetime, timezone

    from console.components import overview_data
    from console.components.clearance import key_of
    from membrane_engine.context import EngineContext

    url = f"sqlite:///{tmp_path / 'membrane.db'}"
    Membrane.open(url, load_sample=True).close()  # the sample store: records and audit entries
    moment = datetime.now(timezone.utc).replace(microsecond=0)  # after the sample store was opened
    monkeypatch.setattr(EngineContext, "now", lambda self: moment)  # one minute for the prewarm and the page
    monkeypatch.setattr(state, "FIRST_RUN_DONE", threading.Event())
    monkeypatch.setattr(cli, "QUIET_BEFORE_WARM", 0.0)
    monkeypatch.setattr(Membrane, "warm", lambda self: None)
    state.script_ran()
    cli.prewarm(url)
    m = state._open(url)
    m.operators.add("ada", "admin", "hyper", actor="test")
    view = m.as_operator("ada", via="page:overview")
    counted_from = []
    real = type(m.store).audit_actions_after
    monkeypatch.setattr(type(m.store), "audit_actions_after",
                        lambda self, conn, seq: counted_from.append(seq) or real(self, conn, seq))
    key = overview_data.minute_of(moment).isoformat()
    numbers = overview_data.metrics(view, *overview_data.store_key(view), key_of(view.clearance), key, True)
    assert numbers["total_records"] == m.count() > 0 and numbers["beyond_clearance"] == 0
    assert counted_from and min(counted_from) > 0  # from where the prewarm stopped, not from the start
    m.reinforce(m.ids()[0], "operator:ann", "seen")  # a write: the page counts afresh
    again = overview_data.metrics(view, *overview_data.store_key(view), key_of(view.clearance), key, True)
    assert again["total_audit_entries"] == numbers["total_audit_entries"] + 1


def test_prewarm_loads_the_rest_once_the_first_page_is_drawn(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaded beside the first page, the id index and the vectors (seconds of CPU at 1M) halved
    what that page got and slowed the browser's drawing: they wait for a finished script run and
    then for quiet (no run finishing for QUIET_BEFORE_WARM seconds), the id index first."""
    url = f"sqlite:///{tmp_path / 'membrane.db'}"
    Membrane.open(url, load_sample=False).close()
    warmed: list[bool] = []  # whether the id index was built when the vectors began to load
    monkeypatch.setattr(Membrane, "warm", lambda self: warmed.append(self.columns._columns._row_of is not None))
    indexed: list[int] = []
    real_index = ColumnCache.index_ids
    monkeypatch.setattr(ColumnCache, "index_ids", lambda self: indexed.append(1) or real_index(self))
    monkeypatch.setattr(state, "FIRST_RUN_DONE", threading.Event())
    monkeypatch.setattr(cli, "QUIET_BEFORE_WARM", 1.0)
    counted = threading.Event()
    real_metrics = Membrane.metrics
    monkeypatch.setattr(Membrane, "metrics", lambda self, *a, **k: (real_metrics(self, *a, **k), counted.set())[0])
    thread = threading.Thread(target=cli.prewarm, args=(url,), daemon=True)
    thread.start()
    assert counted.wait(30)  # the overview's needs are loaded
    time.sleep(0.5)
    assert not warmed and not indexed  # they wait for the first page
    state.script_ran()
    time.sleep(0.6)
    state.script_ran()  # a second run (the page reran itself): quiet counts from here
    time.sleep(0.6)
    assert not warmed and not indexed and thread.is_alive()
    thread.join(30)
    assert indexed == [1] and warmed == [True] and not thread.is_alive()


def test_waiting_for_quiet_gives_up_after_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "FIRST_RUN_DONE", threading.Event())
    began = time.monotonic()
    assert not state.wait_until_quiet(0.1, timeout=0.3)  # no page was ever drawn
    state.script_ran()
    assert state.wait_until_quiet(0.1, timeout=5)
    state.script_ran()
    assert not state.wait_until_quiet(10, timeout=0.3)  # runs keep finishing: not quiet in time
    assert time.monotonic() - began < 3


def test_prewarm_says_in_the_terminal_when_the_store_cannot_be_opened(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "missing-dir" / "sub"
    cli.prewarm(f"sqlite:///{missing / 'membrane.db'}")  # no exception escapes
    err = capsys.readouterr().err
    assert "cannot be opened" in err and str(missing) in err and "does not exist" in err
    assert not missing.exists()  # a mistyped path is not silently created
    cli.prewarm("postgresql+pg8000://nobody@127.0.0.1/none")
    assert "pip install 'membrane-console[postgres]'" in capsys.readouterr().err
