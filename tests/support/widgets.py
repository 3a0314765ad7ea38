"""Helpers shared by the browser tests: what a record may not show (needles), reading metrics,
and driving the console's widgets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from membrane_engine import Membrane, TrustContext
from membrane_engine.rules.trust import REDACTED_KEEP, Verdict

from tests.support.browser import ROOT, Console

LAYERS = ["working", "entity", "semantic", "competence", "plan_graph", "episodic"]
MIN_NEEDLE = 7  # strings shorter than this are too common to prove a leak


def string_leaves(value: Any) -> Iterable[str]:
    """Every string inside a JSON value (dict keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from string_leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from string_leaves(v)


def payload_needles(doc: dict) -> set[str]:
    """What of a record only its full view may show: every payload string of MIN_NEEDLE or more
    characters (and the first 40 characters of long ones, in case a page cuts them), provenance
    refs, and the JSON of the payload as a whole."""
    out: set[str] = set()
    payload = doc.get("payload")
    sources = (doc.get("provenance") or {}).get("sources") or []
    leaves = list(string_leaves(payload)) + [s.get("ref", "") for s in sources]
    for s in leaves:
        s = s.strip()
        if len(s) >= MIN_NEEDLE:
            out.add(s)
            if len(s) > 60:
                out.add(s[:40])
    if payload is not None:
        out.add(json.dumps(payload))
        out.add(json.dumps(payload, ensure_ascii=False))
        out.add(json.dumps(payload, separators=(",", ":"), ensure_ascii=False))
    return out


def metadata_text(doc: dict) -> str:
    return json.dumps({k: doc.get(k) for k in REDACTED_KEEP}, ensure_ascii=False)


def store_docs(m: Membrane) -> dict[str, dict]:
    """Every record of the store as Membrane JSON (full, audit log included)."""
    return {doc["id"]: doc for doc in m.iter_export()}


def verdicts(m: Membrane, trust: TrustContext) -> dict[str, Verdict]:
    return m.explain_many(m.ids(), trust)


def console_source() -> str:
    """The console's own words: a needle found there may be UI text, so it proves nothing."""
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "console").rglob("*.py")))


def forbidden_needles(docs: dict[str, dict], verdict_sets: list[dict[str, Verdict]]) -> set[str]:
    """Payload needles of the records no context in ``verdict_sets`` sees in full, minus any text
    those contexts may legitimately see (full records entire, redacted records' metadata) and
    words of the console's own source."""
    full = {rid for rid in docs if any(v.get(rid) == Verdict.FULL for v in verdict_sets)}
    shown = {rid for rid in docs if any(v.get(rid) in (Verdict.FULL, Verdict.REDACTED) for v in verdict_sets)}
    allowed = "\n".join(json.dumps(docs[rid], ensure_ascii=False) + "\n" + json.dumps(docs[rid]) for rid in full)
    allowed += "\n".join(metadata_text(docs[rid]) for rid in shown - full)
    allowed += console_source()
    needles: set[str] = set()
    for rid, doc in docs.items():
        if rid not in full:
            needles |= payload_needles(doc)
    return {n for n in needles if n not in allowed}


# ------------------------------------------------------------------------------ reading pages


def metrics(con: Console) -> dict[str, str]:
    """st.metric label -> value as shown."""
    out: dict[str, str] = {}
    for el in con.page.locator("[data-testid=stMetric]").all():
        label = el.locator("[data-testid=stMetricLabel]").inner_text().strip()
        value = el.locator("[data-testid=stMetricValue]").inner_text().strip()
        out[label] = value
    return out


def number(text: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", text))


# ------------------------------------------------------------------------------ driving widgets


def click_tab(con: Console, starts_with: str) -> None:
    """Select the tab whose label starts with ``starts_with``. Tabs made with on_change="rerun"
    rerun the script, which is waited for; plain tabs switch in the browser only, and waiting
    for a rerun there would wait out Console.finish's grace for one that never comes."""
    tab = con.page.locator("[data-testid=stTab]", has_text=re.compile("^" + re.escape(starts_with))).first
    if tab_reruns(con, starts_with) is False:
        tab.click()
        con.page.wait_for_function("el => el.getAttribute('aria-selected') === 'true'", arg=tab.element_handle())
        con.wait_idle()
    else:
        con.act(lambda: tab.click())


def tab_reruns(con: Console, starts_with: str) -> bool | None:
    """Whether the tabs labelled ``starts_with``... rerun the script when chosen, from the frames
    that drew them: a tab container carries a widget id only when it does. None: no such tab in
    the frames, or tabs of both kinds."""
    containers: dict[tuple[int, ...], str] = {}
    tabs: list[tuple[tuple[int, ...], str]] = []
    for f in con.frames:
        msg = f.msg
        if msg is None or msg.WhichOneof("type") != "delta" or msg.delta.WhichOneof("type") != "add_block":
            continue
        block, path = msg.delta.add_block, tuple(msg.metadata.delta_path)
        kind = block.WhichOneof("type")
        if kind == "tab_container":
            containers[path] = block.tab_container.id
        elif kind == "tab":
            tabs.append((path, block.tab.label))
    kinds = {bool(containers.get(path[:-1])) for path, label in tabs if label.startswith(starts_with)}
    return kinds.pop() if len(kinds) == 1 else None


def tab_labels(con: Console) -> list[str]:
    return [t.inner_text().strip() for t in con.page.locator("[data-testid=stTab]").all()]


def fill_text(con: Console, label: str, value: str, area: bool = False) -> None:
    """Type into a text input (or text area) by its label and commit it (one rerun)."""
    kind = "stTextArea" if area else "stTextInput"
    box = con.widget(kind, label).locator("textarea" if area else "input")

    def do() -> None:
        box.fill(value)
        if area:
            box.press("Control+Enter")
        else:
            box.press("Enter")

    con.act(do)


def set_select_slider(con: Console, index: int, option: str, options: list[str]) -> None:
    """Move the ``index``-th select slider on the page to ``option`` with the keyboard."""
    thumb = con.page.locator("[data-testid=stSlider] input[type=range]").nth(index)
    current = thumb.get_attribute("aria-valuetext") or ""
    if current == option:
        return
    steps = options.index(option) - (options.index(current) if current in options else 0)
    key = "ArrowRight" if steps > 0 else "ArrowLeft"

    def do() -> None:
        thumb.focus()
        for _ in range(abs(steps)):
            thumb.press(key)

    con.act(do, settle=0.8)
    got = thumb.get_attribute("aria-valuetext")
    assert got == option, f"select slider #{index} shows {got!r}, wanted {option!r}"


def open_dropdown(con: Console, widget) -> None:
    """Open a selectbox's or multiselect's option list (clicking its input until it shows).

    Never presses Escape to start over: inside a dialog it closes the dialog."""
    options = con.page.locator("[role=listbox] [role=option]").first
    for _ in range(3):
        if not options.is_visible():
            widget.locator("input").first.click()
        try:
            options.wait_for(state="visible", timeout=5000)
            return
        except Exception:
            pass
    raise AssertionError("the option list does not open")


def multiselect_values(box) -> list[str]:
    return [t.strip() for t in box.locator(".react-aria-ComboBox [data-tag] span[title]").all_inner_texts()]


def set_multiselect(con: Console, index: int, values: list[str]) -> None:
    """Make the ``index``-th multiselect on the page hold exactly ``values``."""
    box = con.page.locator("[data-testid=stMultiSelect]").nth(index)
    for old in multiselect_values(box):
        if old not in values:
            con.act(lambda old=old: box.locator(f".react-aria-ComboBox button[aria-label='Remove {old}']").click())
    for value in values:
        if value in multiselect_values(box):
            continue

        def add(value=value) -> None:
            open_dropdown(con, box)
            box.locator("input").first.fill(value)
            con.page.locator("[role=listbox] [role=option]", has_text=re.compile("^" + re.escape(value) + "$")).first.click()

        con.act(add)
        con.page.keyboard.press("Escape")
    got = multiselect_values(box)
    assert sorted(got) == sorted(values), f"multiselect #{index} holds {got}, wanted {values}"


def run_bench_tool(tmp_path: Path, module: str, *args: str, records: int = 2000) -> tuple[dict, Path]:
    """``python -m <module> --db <a generated store of ``records``> --out <dir> <args>`` (a
    browser benchmark, bench/browser.py or bench/pages.py), which must exit 0; returns its JSON
    report (the one latest file it wrote; a dated copy sits beside it) and the output folder."""
    import pytest

    from tests.support.browser import CHROMIUM

    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the browser benchmarks need Debian's chromium "
                    "(apt-get install chromium; .ci/run installs it)", pytrace=False)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    # In a process of its own: bench.generate forks its side processes, and a fork of a test
    # process that runs other threads (an xdist worker's, Playwright's) can deadlock the child.
    subprocess.run([sys.executable, "-m", "bench.generate", "--n", str(records), "--db", url, "--quiet"],
                   cwd=ROOT, check=True, timeout=600)
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", module, "--db", url, "--out", str(out), *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(done.stdout)
    print(done.stderr[-3000:], file=sys.stderr)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (report,) = out.glob("*-latest.json")
    return json.loads(report.read_text()), out
