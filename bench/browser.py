"""The trust simulator page in a real browser: how long until it is drawn.

    python -m bench.browser --db sqlite:////tmp/membrane-bench/sqlite-1000000-s42.db
    python -m bench.browser --db ... --launcher cli --idle 10    # as operators start it, opened later

Starts the console on ``--db`` with the browser tests' harness (tests/support/browser.py: the
server in a subprocess, Debian's Chromium through Playwright, headless), then opens the
simulator at the benchmark's request (max sensitivity medium, scopes project-alpha and
project-beta, limit 20, min salience 0.2, as of the generated stores' NOW). The loads, in this
order (PHASES below says the same in the JSON):

- **first_visit**: the first load after the server started, in a new browser profile;
- **warm** (``--warm``): the same address again, each a fresh page load and so a fresh Streamlit
  session, on a server whose caches hold the simulation;
- **uncached** (``--uncached``): as-of moved by a minute each time, so the simulation is computed;
- **cold**: the server restarted on the same port, then one load (the browser has the
  console's assets cached, as an operator's would).

Each load is timed in the page, from the navigation's start (``performance.timeOrigin``) until
the page is drawn: ``[data-testid=stApp]`` has ``data-test-script-state=notRunning``, nothing
is still loading (no ``stSkeleton``), the per-layer table and the bar chart are drawn and the
ranked result shows its records (or says there are none). Recorded beside it: the wall time seen
from Python, the time from the session's first WebSocket frame to the script's
``script_finished`` frame (roughly the server's script run), and the CPU time of the console
server, Chromium and Playwright's driver during the load. On a machine with 2 cores shared with
other work, wall time includes waiting for a core; the load average is recorded too.

Printed as a table (p95 of a handful of loads is about their slowest) and written as JSON to
``--out`` (bench/results by default): ``browser-latest.json`` (and a dated copy git ignores),
and a screenshot of a warm load, ``browser-latest.png``. Exception boxes and JavaScript errors on the page are recorded as
problems and make the exit status non-zero (a page that failed did not render quickly).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.run import stamp, store_records, write_results  # noqa: E402
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, Console, ConsoleServer, _parse  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results"
TARGET_MS = 3000
PATH = "simulator"
# The benchmark's request (bench/run.py) as simulator URL parameters (console/components/trust_form.py).
QUERY = {"max_sensitivity": "medium", "scopes": "project-alpha,project-beta", "limit": "20", "min_salience": "0.2",
         "as_of": "2026-06-01T12:00:00Z"}

# True (as performance.now(), ms since navigation start) once the page is drawn; false before.
READY_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid=stSkeleton]')) return false;
  if (document.querySelector('[data-testid=stException]')) return {t: performance.now(), error: true};
  const main = document.querySelector('[data-testid=stMain]');
  if (!main) return false;
  if (!main.querySelector('[data-testid=stDataFrame] canvas')) return false;
  if (!main.querySelector('[data-testid=stPlotlyChart] .main-svg')) return false;
  const text = main.textContent;
  if (!/Showing \\d/.test(text) && !text.includes('Nothing is returned')) return false;
  return {t: performance.now(), error: false};
}"""


# --------------------------------------------------------------------------- CPU time of processes

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (utime + stime in clock ticks, parent pid, command name) of every process."""
    out: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(entry)] = (int(fields[11]) + int(fields[12]), int(fields[1]), name)
    return out


class CpuMeter:
    """CPU time spent between ``start`` and ``stop`` by the console server (its process group),
    by Chromium, and by Playwright's driver (which relays every WebSocket frame to this process):
    the living descendants of this process, told apart by command name."""

    def __init__(self, server_pid: int):
        self.server_pid = server_pid

    def _now(self) -> dict[str, int]:
        procs = _processes()
        children: dict[int, list[int]] = {}
        for pid, (_, ppid, _) in procs.items():
            children.setdefault(ppid, []).append(pid)
        out = {"server": 0, "browser": 0, "driver": 0}
        todo = [(os.getpid(), None)]
        while todo:
            pid, kind = todo.pop()
            if pid not in procs:
                continue
            ticks, _, name = procs[pid]
            if kind is None and pid != os.getpid():
                kind = "server" if pid == self.server_pid else None
            here = kind or ("browser" if name.startswith(("chrom", "headless")) else "driver")
            if pid != os.getpid():
                out[here] += ticks
            todo.extend((c, kind) for c in children.get(pid, []))
        return out

    def start(self) -> None:
        self._t0 = self._now()

    def stop(self) -> dict[str, float]:
        t1 = self._now()
        return {f"{k}_cpu_ms": round((t1[k] - self._t0[k]) * TICK_MS) for k in t1}


# --------------------------------------------------------------------------- one page load


class FrameClock:
    """When (perf_counter) the current page's WebSocket frames of interest arrived."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.first: float | None = None
        self.finished: float | None = None

    def attach(self, con: Console) -> None:
        def on_ws(ws) -> None:
            def received(payload) -> None:
                now = time.perf_counter()
                if self.first is None:
                    self.first = now
                data = payload if isinstance(payload, bytes) else str(payload).encode("utf-8")
                if self.finished is None:
                    msg = _parse(data)
                    if msg is not None and msg.WhichOneof("type") == "script_finished":
                        self.finished = now

            ws.on("framereceived", received)

        con.page.on("websocket", on_ws)


def _query(minutes_later: int = 0) -> dict[str, str]:
    """QUERY, its as-of instant moved by ``minutes_later`` (a simulation the server has not cached)."""
    if not minutes_later:
        return dict(QUERY)
    as_of = datetime.fromisoformat(QUERY["as_of"].replace("Z", "+00:00")) + timedelta(minutes=minutes_later)
    return {**QUERY, "as_of": as_of.strftime("%Y-%m-%dT%H:%M:%SZ")}


def load(con: Console, clock: FrameClock, meter: CpuMeter, timeout: float, query: dict[str, str]) -> dict[str, Any]:
    """One navigation to the simulator, timed until the page is drawn."""
    clock.reset()
    errors_before = len(con.page_errors)
    meter.start()
    t0 = time.perf_counter()
    con.start_open(PATH, query)
    handle = con.page.wait_for_function(READY_JS, timeout=timeout * 1000, polling=20)
    t1 = time.perf_counter()
    ready = handle.json_value()
    cpu = meter.stop()
    # then let it settle (a page that reran itself would show here) and look at it
    con.wait_idle(settle=0.4, timeout=timeout, runs_at_least=1)
    out = {"ms": round(ready["t"], 1), "wall_ms": round((t1 - t0) * 1000, 1),
           "script_ms": round((clock.finished - clock.first) * 1000, 1) if clock.first and clock.finished else None,
           "script_runs": con.runs_finished(), **cpu}
    if query["as_of"] != QUERY["as_of"]:
        out["as_of"] = query["as_of"]
    problems = con.exceptions() + [f"page error: {e[:300]}" for e in con.page_errors[errors_before:]]
    if ready["error"] or problems:
        out["problems"] = problems or ["exception box on the page"]
    return out


# --------------------------------------------------------------------------- the run


def _stats(loads: list[dict[str, Any]]) -> dict[str, Any]:
    ms = sorted(ld["ms"] for ld in loads)
    p95 = ms[min(len(ms) - 1, max(0, round(0.95 * len(ms)) - 1))]
    out: dict[str, Any] = {"median_ms": round(statistics.median(ms), 1), "p95_ms": round(p95, 1),
                           "min_ms": round(ms[0], 1), "runs": len(ms)}
    for key in ("wall_ms", "script_ms", "server_cpu_ms", "browser_cpu_ms", "driver_cpu_ms"):
        values = [ld[key] for ld in loads if ld.get(key) is not None]
        if values:
            out[key.replace("_ms", "_median_ms")] = round(statistics.median(values), 1)
    out["vs_target"] = round(out["median_ms"] / TARGET_MS, 2)
    return out


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return ""


def report_start(tool: str, db: str) -> dict[str, Any]:
    """The head of a browser benchmark's report: how it was run, on which code and store, the
    load average at the start (``write_report`` adds the one at the end)."""
    return {
        "command": " ".join(["python", "-m", tool, *sys.argv[1:]]),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": _git("rev-parse", "--short", "HEAD") or None,
        # tracked files that differ from that commit (the numbers are of the worktree as it was)
        "uncommitted": _git("diff", "--name-only", "HEAD").splitlines(),
        "db": db, "records": store_records(db),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg_start": [round(x, 2) for x in os.getloadavg()]},
    }


@contextmanager
def console_and_chromium(db: str, name: str, launcher: str = "streamlit",
                         env: dict[str, str] | None = None) -> Iterator[tuple[ConsoleServer, Any]]:
    """A console server on ``db`` (not started yet) and a function launching headless Chromium;
    afterwards every browser launched is closed and the server stopped, and on an error the
    server's log is printed."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
        server = ConsoleServer(name, db, Path(tmp), launcher=launcher, env=env)
        pw = sync_playwright().start()
        browsers: list[Any] = []

        def launch() -> Any:
            browsers.append(pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS))
            return browsers[-1]

        try:
            yield server, launch
        except Exception:
            print(server.log_tail(60), file=sys.stderr)
            raise
        finally:
            for browser in browsers:
                browser.close()
            pw.stop()
            server.stop()


def write_report(report: dict[str, Any], out: Path, name: str) -> None:
    """``report`` as ``out/<name>-latest.json`` (kept in git, the figures of bench/README.md's
    tables) and a dated ``out/<start>-<name>.json`` (this machine's record only)."""
    dated = write_results(report, out, f"{name}-latest.json", f"{stamp(report['started'])}-{name}.json")
    print(f"wrote {out / f'{name}-latest.json'} and {dated.name}")


PHASES = {
    "first_visit": "the first load after the server started (store not open, caches empty: with --launcher cli "
                   "the server opens the store and loads its cache from its start on), browser profile new "
                   "(no asset of the console cached)",
    "cold": "the first load after the server was restarted on the same port (store not open, caches empty, but "
            "see first_visit for --launcher cli), browser with the console's assets cached",
    "warm": "the same address again: a fresh session on a server whose caches hold this simulation",
    "uncached": "as-of moved by a minute per load: the store is open and its column cache loaded, the "
                "simulation is computed",
}


def run(db: str, warm: int, uncached: int, out: Path, timeout: float, screenshot: bool = True,
        launcher: str = "streamlit", idle: float = 0.0) -> dict[str, Any]:
    """The measurements, in this order: first visit, warm loads, uncached loads, the screenshot,
    then a server restart and the cold load. ``idle``: seconds between a server start and the
    load after it."""
    report = report_start("bench.browser", db)
    report.update({"path": PATH, "query": QUERY, "target_ms": TARGET_MS, "phases": PHASES, "launcher": launcher,
                   "idle_s": idle})
    with console_and_chromium(db, "bench", launcher) as (server, launch):
        t0 = time.perf_counter()
        server.start(timeout=timeout)
        report["server_start_s"] = round(time.perf_counter() - t0, 2)
        time.sleep(idle)
        con = Console.new(launch(), server)
        clock = FrameClock()
        clock.attach(con)
        report["first_visit"] = load(con, clock, CpuMeter(server.proc.pid), timeout, _query())
        report["warm"] = [load(con, clock, CpuMeter(server.proc.pid), timeout, _query()) for _ in range(warm)]
        report["uncached"] = [load(con, clock, CpuMeter(server.proc.pid), timeout, _query(i + 1))
                              for i in range(uncached)]
        if screenshot:
            con.open(PATH, _query())
            out.mkdir(parents=True, exist_ok=True)
            shot = con.screenshot("bench-browser")
            target = out / "browser-latest.png"
            shutil.move(str(shot), target)
            report["screenshot"] = str(target)
        port = server.port
        server.stop()
        server.start(timeout=timeout, port=port)
        time.sleep(idle)
        report["cold"] = load(con, clock, CpuMeter(server.proc.pid), timeout, _query())
        con.close()
    report["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    for single in ("first_visit", "cold"):
        report[single]["vs_target"] = round(report[single]["ms"] / TARGET_MS, 2)
    for series in ("warm", "uncached"):
        if report[series]:
            report[f"{series}_stats"] = _stats(report[series])
    report["problems"] = [p for ld in [report["first_visit"], report["cold"], *report["warm"], *report["uncached"]]
                          for p in ld.get("problems", [])]
    return report


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['db']} ({report['records']:,} records)" if report["records"] is not None else report["db"])
    print(f"/{report['path']}?" + "&".join(f"{k}={v}" for k, v in report["query"].items()))
    how = "membrane-console (console/cli.py)" if report["launcher"] == "cli" else "streamlit run console/app.py"
    print(f"server: {how}, healthy after {report['server_start_s']} s; first visit and cold load "
          f"{report['idle_s']:g} s after a start")
    cols = ("median", "p95", "min", "wall", "script", "srv cpu", "brw cpu", "drv cpu")
    print(f"{'':12}" + "".join(f"{c:>9}" for c in cols) + f"{'/ 3 s':>8}")

    def cell(v) -> str:
        return f"{v:>9.0f}" if isinstance(v, (int, float)) else f"{'-':>9}"

    for name in ("first_visit", "cold"):
        ld = report[name]
        print(f"{name:12}" + cell(ld["ms"]) + " " * 18 + "".join(cell(ld.get(k)) for k in (
            "wall_ms", "script_ms", "server_cpu_ms", "browser_cpu_ms", "driver_cpu_ms")) + f"{ld['vs_target']:>7.2f}x")
    for name in ("warm", "uncached"):
        st = report.get(f"{name}_stats")
        if st:
            print(f"{name:12}" + "".join(cell(st.get(k)) for k in (
                "median_ms", "p95_ms", "min_ms", "wall_median_ms", "script_median_ms", "server_cpu_median_ms",
                "browser_cpu_median_ms", "driver_cpu_median_ms")) + f"{st['vs_target']:>7.2f}x  ({st['runs']} loads)")
    print("milliseconds. median/p95/min: navigation start -> page drawn, timed in the page; wall: the same from "
          "Python; script: first WebSocket frame -> script_finished frame; cpu: console server, Chromium and "
          "Playwright's driver during the load (2 cores: wall time includes waiting for one)")
    for name, text in report["phases"].items():
        print(f"  {name}: {text}")
    print(f"load average: {report['machine']['loadavg_start']} at start, {report['machine']['loadavg_end']} at end")
    for p in report["problems"]:
        print(f"PROBLEM: {p}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.browser", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="SQLAlchemy URL of the store (e.g. a bench.generate store)")
    parser.add_argument("--warm", type=int, default=5, help="warm page loads (same simulation, server caches filled)")
    parser.add_argument("--uncached", type=int, default=3,
                        help="page loads of a simulation not computed yet (as-of moved by a minute each)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where browser-latest.json/.png go")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds allowed for a server start and each load")
    parser.add_argument("--launcher", choices=("streamlit", "cli"), default="streamlit",
                        help="streamlit: `streamlit run console/app.py` (as the browser tests do); cli: "
                             "`membrane-console`, which opens the store and loads its cache while the server starts")
    parser.add_argument("--idle", type=float, default=0.0,
                        help="seconds to wait after a server start before loading the page (default 0: at once)")
    parser.add_argument("--no-screenshot", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.db, args.warm, args.uncached, args.out, args.timeout, screenshot=not args.no_screenshot,
                 launcher=args.launcher, idle=args.idle)
    print_report(report)
    write_report(report, args.out, "browser")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
