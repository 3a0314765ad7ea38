"""Every console page in a real browser: how long each takes to draw on a large store.

    python -m bench.pages --db sqlite:////tmp/membrane-bench/sqlite-1000000-s42.db

Starts the console on ``--db`` as operators start it (``membrane-console``, which opens the
store and loads its column cache in a thread while the server starts; ``--launcher streamlit``
for a bare ``streamlit run``, where the first page does that), opens the first page as soon as
the server answers (the first page after a start, in a new browser profile), then visits every
page of the navigation in turn, ``--visits`` rounds, then every page through the sidebar, and last
restarts the server on the same address and opens the first page again with the browser's cache
of the console's code (an operator's browser: the server's start alone).
A visit is a fresh page load (a fresh Streamlit session) timed from Python until the script has
finished and the page shows it drawn (idle, nothing left loading), with the CPU time the console
server and Chromium spent meanwhile; the first
round meets caches empty for that page, later rounds meet what the server kept. Pages are
opened without parameters, as from the sidebar.

Printed as a table and written as JSON to ``--out``: ``pages-sqlite-latest.json`` or
``pages-postgres-latest.json`` (one per database, so bench/README.md shows both side by side)
and a dated copy git ignores, with a screenshot of each page's last visit (``pages-<page>.png``,
not committed). Exception boxes, error alerts and JavaScript errors are recorded as problems and
make the exit status non-zero.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.browser import DEFAULT_OUT, CpuMeter, console_and_chromium, report_start, write_report  # noqa: E402
from bench.run import db_kind  # noqa: E402
from tests.support.browser import IDLE, SKELETON, Console  # noqa: E402

ERROR_ALERT = "[data-testid=stAlertContentError]"


def console_pages() -> list[str]:
    """The url paths of the console's pages, in navigation order, read from console/app.py
    (so a page added there is measured too)."""
    text = (ROOT / "console" / "app.py").read_text()
    return [path for path in re.findall(r'url_path="([^"]+)"', text) if path != "home"]


def drawn(con: Console, timeout: float) -> None:
    """Until the page's script has run and the page shows it idle with nothing left loading
    (polled every 20 ms: the time does not include the harness's settling wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if con.runs_finished() >= 1 and con.page.locator(IDLE).count() and not con.page.locator(SKELETON).count():
            return
        con.page.wait_for_timeout(20)
    raise TimeoutError(f"page {con.page.url} was not drawn within {timeout:.0f} s")


def visit(con: Console, page: str, timeout: float, meter: CpuMeter) -> dict[str, Any]:
    errors_before = len(con.page_errors)
    meter.start()
    began = time.perf_counter()
    con.start_open(page)
    drawn(con, timeout)
    seconds = time.perf_counter() - began
    cpu = meter.stop()
    runs = con.runs_finished()
    con.wait_idle(settle=0.4, timeout=timeout, runs_at_least=1)  # a page that reruns itself shows here
    if con.runs_finished() != runs:
        seconds = time.perf_counter() - began - 0.4
    problems = con.exceptions() + [f"error alert: {el.inner_text()[:300]}" for el in con.page.locator(ERROR_ALERT).all()]
    problems += [f"page error: {e[:300]}" for e in con.page_errors[errors_before:]]
    return {"s": round(seconds, 3), "server_cpu_s": round(cpu["server_cpu_ms"] / 1000, 3),
            "browser_cpu_s": round(cpu["browser_cpu_ms"] / 1000, 3), "problems": problems}


def navigate(con: Console, page: str, timeout: float, meter: CpuMeter) -> dict[str, Any]:
    """A visit through the sidebar, as an operator moves between pages: the page's script runs
    in the session already open, with the browser's code already loaded."""
    errors_before = len(con.page_errors)
    before = con.runs_finished()
    link = con.page.locator(f'[data-testid=stSidebarNav] a[href$="/{page}"]').first
    meter.start()
    began = time.perf_counter()
    link.click()
    deadline = time.monotonic() + timeout
    while con.runs_finished() <= before and time.monotonic() < deadline:
        con.page.wait_for_timeout(20)
    while time.monotonic() < deadline and not (con.page.locator(IDLE).count() and not con.page.locator(SKELETON).count()):
        con.page.wait_for_timeout(20)
    seconds = time.perf_counter() - began
    cpu = meter.stop()
    con.wait_idle(settle=0.4, timeout=timeout)
    problems = con.exceptions() + [f"error alert: {el.inner_text()[:300]}" for el in con.page.locator(ERROR_ALERT).all()]
    problems += [f"page error: {e[:300]}" for e in con.page_errors[errors_before:]]
    return {"s": round(seconds, 3), "server_cpu_s": round(cpu["server_cpu_ms"] / 1000, 3),
            "browser_cpu_s": round(cpu["browser_cpu_ms"] / 1000, 3), "problems": problems}


def run(db: str, visits: int, out: Path, timeout: float, screenshots: bool = True,
        launcher: str = "cli", home: Path | None = None) -> dict[str, Any]:
    pages = console_pages()
    report = report_start("bench.pages", db)
    report.update({"pages": pages, "visits": {}, "launcher": launcher})
    env = {"MEMBRANE_HOME": str(home)} if home is not None else None
    with console_and_chromium(db, "bench-pages", launcher=launcher, env=env) as (server, launch):
        began = time.perf_counter()
        server.start(timeout=timeout)
        report["server_start_s"] = round(time.perf_counter() - began, 3)
        con = Console.new(launch(), server)
        meter = CpuMeter(server.proc.pid)
        report["cold_open"] = visit(con, pages[0], timeout, meter)
        for round_ in range(visits):
            for page in pages:
                report["visits"].setdefault(page, []).append(visit(con, page, timeout, meter))
                if screenshots and round_ == visits - 1:
                    out.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(con.screenshot(f"bench-pages-{page}")), out / f"pages-{page}.png")
        # then through the sidebar, from the page before each (the last page first: from the first)
        con.open(pages[-1], timeout=timeout)
        report["navigations"] = {}
        for round_ in range(visits):
            for page in pages:
                report["navigations"].setdefault(page, []).append(navigate(con, page, timeout, meter))
        # An operator's browser has the console's code from earlier days: the first page after a
        # restart on the same address, with this browser's cache, times the server's own start.
        port = server.port
        con.page.goto("about:blank")  # an open tab would reconnect and rerun its page on its own
        server.stop()
        began = time.perf_counter()
        server.start(timeout=timeout, port=port)
        report["restart_server_start_s"] = round(time.perf_counter() - began, 3)
        report["restart_open"] = visit(con, pages[0], timeout, CpuMeter(server.proc.pid))
        report["restart_open"]["from_start_s"] = round(time.perf_counter() - began, 3)
        con.close()
    report["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    report["problems"] = [f"{page}: {p}" for page, vs in report["visits"].items() for v in vs for p in v["problems"]]
    report["problems"] += [f"cold open: {p}" for p in report["cold_open"]["problems"]]
    report["problems"] += [f"open after a restart: {p}" for p in report["restart_open"]["problems"]]
    report["problems"] += [f"{page} (sidebar): {p}" for page, vs in report["navigations"].items()
                           for v in vs for p in v["problems"]]
    return report


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['db']} ({report['records']:,} records), launcher {report.get('launcher')}, "
          f"load average {report['machine']['loadavg_start']} -> {report['machine'].get('loadavg_end')}")
    first = report["cold_open"]
    print(f"server start {report.get('server_start_s', 0):.2f} s; first page after it: {first['s']:.2f} s "
          f"(server CPU {first.get('server_cpu_s', 0):.2f} s, browser CPU {first.get('browser_cpu_s', 0):.2f} s), "
          "in a new browser profile")
    again = report.get("restart_open")
    if again:
        print(f"after a restart, with the browser's cache of the console: server start "
              f"{report['restart_server_start_s']:.2f} s; first page after it {again['s']:.2f} s (server CPU "
              f"{again.get('server_cpu_s', 0):.2f} s, browser CPU {again.get('browser_cpu_s', 0):.2f} s); "
              f"from the start command to the page drawn {again['from_start_s']:.2f} s")
    for title, key in (("fresh page loads (a new session each)", "visits"),
                       ("through the sidebar (the session and its browser code loaded)", "navigations")):
        table = report.get(key) or {}
        if not table:
            continue
        rounds = max(len(v) for v in table.values())
        print(title)
        print(f"{'page':16s}" + "".join(f"{'visit ' + str(k + 1):>19s}" for k in range(rounds))
              + f"{'warm median':>19s}")
        for page, vs in table.items():
            cells = "".join(f"{v['s']:7.2f} ({v.get('server_cpu_s', 0):4.2f}/{v.get('browser_cpu_s', 0):4.2f})" for v in vs)
            warm = vs[1:] or vs
            med = [statistics.median(v.get(k, 0) for v in warm) for k in ("s", "server_cpu_s", "browser_cpu_s")]
            print(f"{page:16s}{cells}{med[0]:7.2f} ({med[1]:4.2f}/{med[2]:4.2f})")
    print("seconds from navigation until the page is drawn, as seen from Python; in brackets the CPU seconds of "
          "the console server / of Chromium meanwhile; warm: visits after the first")
    for problem in report["problems"]:
        print(f"PROBLEM {problem}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="SQLAlchemy URL of the store (e.g. a bench.generate store)")
    parser.add_argument("--visits", type=int, default=2, help="rounds of visits to every page")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where pages-<db>-latest.json and screenshots go")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds allowed for the server start and each visit")
    parser.add_argument("--no-screenshot", action="store_true")
    parser.add_argument("--launcher", choices=("cli", "streamlit"), default="cli",
                        help="membrane-console (prewarms in a thread, as operators start it) or a bare streamlit run")
    parser.add_argument("--membrane-home", type=Path, default=None,
                        help="MEMBRANE_HOME of the console (where a server store's column snapshot is kept; "
                             "default a new temporary one, so a PostgreSQL store starts without one)")
    args = parser.parse_args(argv)
    report = run(args.db, args.visits, args.out, args.timeout, screenshots=not args.no_screenshot,
                 launcher=args.launcher, home=args.membrane_home)
    print_report(report)
    write_report(report, args.out, f"pages-{db_kind(args.db)}")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
