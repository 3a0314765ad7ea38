"""Machinery of the browser tests: a console server in a subprocess, and a browser tab on it
that records everything the server sends.

Why the WebSocket frames matter: `st.dataframe` draws its cells on a canvas, so a table's
content is in the protobuf frames the page receives, never in the HTML. A check that some
text is absent from a page must look at both (`Console.find`).
"""

from __future__ import annotations

import bisect
import html
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "console" / "app.py"
GATEWAY = ROOT / "console" / "gateway.py"
SCREENSHOTS = ROOT / "tests" / "e2e" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]

# url path -> page title (console/app.py)
PAGES = {
    "overview": "Overview",
    "simulator": "Trust simulator",
    "what-if": "What-if",
    "records": "Record explorer",
    "decay": "Salience decay",
    "selector": "Selector inspector",
    "policies": "Policies",
    "graph": "Graph",
    "audit": "Audit log",
    "curate": "Curate",
    "review": "Review",
    "capture": "Capture",
    "import-export": "Import / export",
    "operators": "Operators",
}

IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"
EXCEPTION = "[data-testid=stException]"
SKELETON = "[data-testid=stSkeleton]"  # an element whose code is still loading

# Every server started in this test session, so a failing test can show their logs.
SERVERS: list["ConsoleServer"] = []

# Operators every test server's store gets (SPEC 10), one per role, all with full clearance;
# a Console signs in as one of them (default the admin) before its first page.
PASSWORD = "e2e password, not a secret"
OPERATORS = {"admin": ("e2e-admin", "admin"), "curator": ("e2e-curator", "curator"), "viewer": ("e2e-viewer", "viewer")}


def ensure_operators(db_url: str, clearance: str = "hyper") -> None:
    """The test operators in the store at ``db_url`` (added once; kept if already there)."""
    from membrane_engine import Membrane

    m = Membrane.open(db_url, load_sample=False)
    try:
        have = {o.name for o in m.operators.list()}
        for name, role in OPERATORS.values():
            if name not in have:
                m.operators.add(name, role, clearance, password=PASSWORD, actor="e2e-harness")
    finally:
        m.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PortTaken(RuntimeError):
    """The port a server was started on was taken by another process first."""


def listening_pids(port: int) -> set[int]:
    """Processes with a TCP socket listening on ``port`` (Linux: /proc/net/tcp and the fds of
    /proc/<pid>/; a process of another user is not seen)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{cols[9]}]")
    pids: set[int] = set()
    if not inodes:
        return pids
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                pids.add(int(proc.name))
        except OSError:
            continue
    return pids


def _groups(pids: set[int]) -> set[int]:
    """The process groups of ``pids`` (a server started with start_new_session leads its own)."""
    out = set()
    for pid in pids:
        try:
            out.add(os.getpgid(pid))
        except OSError:
            pass
    return out


class ConsoleServer:
    """`streamlit run console/gateway.py -- --db URL` (the console behind its sign-in routes and
    guard) in its own process group; with ``launcher="cli"``, `membrane-console --db URL`
    (console/cli.py: the console as operators start it). ``operators``: add the test operators
    (``OPERATORS``) to the store first; ``extra_args``: more command-line arguments."""

    def __init__(self, name: str, db_url: str, workdir: Path, launcher: str = "streamlit",
                 operators: bool = True, extra_args: list[str] | None = None, env: dict[str, str] | None = None):
        if launcher not in ("streamlit", "cli"):
            raise ValueError(f"launcher must be 'streamlit' or 'cli', not {launcher!r}")
        self.name = name
        self.db_url = db_url
        self.workdir = workdir
        self.launcher = launcher
        self.operators = operators
        self.extra_args = list(extra_args or [])
        self.extra_env = dict(env or {})
        self.log_path = workdir / f"{name}-server.log"
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0, port: int | None = None) -> "ConsoleServer":
        """Start and wait until healthy. ``port``: listen there (say, the port of this server before
        a ``stop``, so a browser's cache of the console's assets still applies); default a free one.

        A free port is only free when asked: under parallel workers another process (a server
        of another worker, an outgoing connection) may take it before this server binds it, so
        a start on a port found taken is tried again on another one."""
        if self.operators:
            ensure_operators(self.db_url)
        for attempt in range(3):
            try:
                return self._start(timeout, port or free_port())
            except PortTaken:
                if port is not None or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _start(self, timeout: float, port: int) -> "ConsoleServer":
        self.port = port
        if self.launcher == "cli":
            cmd = [sys.executable, "-m", "console.cli", "--db", self.db_url, "--port", str(self.port),
                   "--address", "127.0.0.1", *self.extra_args]
        else:
            cmd = [sys.executable, "-m", "streamlit", "run", str(GATEWAY),
                   "--server.port", str(self.port), "--server.address", "127.0.0.1",
                   "--server.headless", "true", "--browser.gatherUsageStats", "false",
                   # pages are plain scripts: no watcher needed, and polling would cost CPU in CI
                   "--server.fileWatcherType", "none", "--server.runOnSave", "false",
                   "--server.allowedHosts", "127.0.0.1", "--server.allowedHosts", "localhost",
                   *self.extra_args, "--", "--db", self.db_url]
        env = dict(os.environ)
        env.pop("MEMBRANE_DB_URL", None)  # --db decides; nothing may fall back to a default store
        env["MEMBRANE_HOME"] = str(self.workdir / "membrane-home")
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.extra_env)
        self._log = self.log_path.open("ab")  # a restart adds to the log of the run before
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        if self not in SERVERS:
            SERVERS.append(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._log.close()
                if listening_pids(port):  # another process has the port
                    raise PortTaken(port)
                raise RuntimeError(f"console server {self.name!r} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as resp:
                    # the answer is this server's only if the listener is in its process group
                    if resp.status == 200 and self.proc.pid in _groups(listening_pids(port)):
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"console server {self.name!r} not healthy after {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        self._log.close()

    def log_tail(self, lines: int = 150) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class Frame:
    data: bytes
    msg: ForwardMsg | None


def _parse(data: bytes) -> ForwardMsg | None:
    msg = ForwardMsg()
    try:
        msg.ParseFromString(data)
    except Exception:  # not every frame has to parse for the text search to work
        return None
    return msg


def variants(needle: str) -> set[str]:
    """The ways a string can be written into HTML or a frame: as is, HTML-escaped, JSON-escaped."""
    out = {needle, html.escape(needle, quote=False), html.escape(needle, quote=True),
           json.dumps(needle)[1:-1], json.dumps(needle, ensure_ascii=False)[1:-1]}
    return {v for v in out if v}


_DOM_TEXT_JS = """() => {
  const parts = [];
  const walk = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
  let n;
  while ((n = walk.nextNode())) {
    if (n.nodeType === Node.TEXT_NODE) {
      if (n.parentElement && n.parentElement.tagName !== 'STYLE') parts.push(n.nodeValue);
      continue;
    }
    for (const a of n.attributes) if (a.name !== 'class' && a.name !== 'style') parts.push(a.value);
    if ((n.tagName === 'INPUT' || n.tagName === 'TEXTAREA') && n.value) parts.push(n.value);
  }
  return parts.join('\\n');
}"""


@dataclass
class Hit:
    needle: str
    where: str  # "html" or "frame #n" or "download <url>"
    context: str


@dataclass
class Console:
    """One browser context and tab on a console server.

    ``open(path, query)`` navigates and waits until the script has finished; ``frames`` then holds
    every WebSocket frame received since that navigation began (older tabs' frames are dropped)."""

    server: ConsoleServer
    context: object
    page: object
    frames: list[Frame] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    generation: int = 0
    marked: int = 0  # frames before this index belong to earlier states of the page (see mark)

    @classmethod
    def new(cls, browser, server: ConsoleServer, viewport=(1400, 1000), role: str | None = "admin") -> "Console":
        """A fresh browser context, signed in as the test operator of ``role`` (None: nobody)."""
        context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        context.set_default_timeout(30_000)
        page = context.new_page()
        con = cls(server=server, context=context, page=page)
        page.on("websocket", con._on_websocket)
        page.on("dialog", con._on_dialog)
        page.on("pageerror", lambda err: con.page_errors.append(str(err)))
        page.on("console", lambda m: con.console_errors.append(m.text) if m.type == "error" else None)
        if role is not None:
            con.sign_in(*OPERATORS[role][:1], PASSWORD)
        return con

    def sign_in(self, name: str, password: str, check: bool = True) -> int:
        """Post the sign-in form as the browser would (the session cookie lands in this context);
        the HTTP status of the answer (303 when signed in). ``check``: a test operator's sign-in
        that fails raises."""
        resp = self.context.request.post(f"{self.server.url}/-/signin", form={"operator": name, "password": password},
                                         max_redirects=0)
        if check and resp.status != 303 and name in {n for n, _ in OPERATORS.values()} and password == PASSWORD:
            raise RuntimeError(f"sign-in of {name} on {self.server.url} answered {resp.status}: {resp.text()[:300]}")
        return resp.status

    # recording ------------------------------------------------------------------

    def _on_websocket(self, ws) -> None:
        generation = self.generation

        def received(payload) -> None:
            if generation != self.generation:
                return
            data = payload if isinstance(payload, bytes) else str(payload).encode("utf-8")
            self.frames.append(Frame(data, _parse(data)))

        ws.on("framereceived", received)

    def _on_dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        try:
            dialog.dismiss()
        except Exception:
            pass

    def close(self) -> None:
        self.context.close()

    # navigation -----------------------------------------------------------------

    def url_for(self, path: str, query: dict | None = None) -> str:
        """``query`` values may be lists (repeated parameters)."""
        q = {k: v for k, v in (query or {}).items() if v is not None}
        return f"{self.server.url}/{path.lstrip('/')}" + (f"?{urlencode(q, doseq=True)}" if q else "")

    def open(self, path: str, query: dict | None = None, settle: float = 0.4, timeout: float = 60.0) -> "Console":
        """Navigate (a fresh page load, so a fresh session and frame record) and wait until idle."""
        self.start_open(path, query)
        self.wait_idle(settle=settle, timeout=timeout, runs_at_least=1)
        return self

    def start_open(self, path: str, query: dict | None = None) -> None:
        """Begin a navigation without waiting for the script (``wait_idle(runs_at_least=1)`` does)."""
        self.generation += 1
        self.frames = []
        self.marked = 0
        self.page.goto(self.url_for(path, query), wait_until="commit")

    def runs_finished(self) -> int:
        return sum(1 for f in self.frames if f.msg is not None and f.msg.WhichOneof("type") == "script_finished")

    def _script_frames(self) -> int:
        """Frames a script run sends (heartbeat acks and lazy table chunks do not count)."""
        return sum(1 for f in self.frames if f.msg is None
                   or f.msg.WhichOneof("type") in ("new_session", "delta", "script_finished", "navigation"))

    def wait_idle(self, settle: float = 0.4, timeout: float = 60.0, runs_at_least: int = 0) -> None:
        """Wait until ``runs_at_least`` script runs have finished, stApp is notRunning, and it stays
        so for ``settle`` seconds (pages may rerun themselves)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"page {self.page.url} did not become idle within {timeout:.0f} s "
                                   f"(runs finished: {self.runs_finished()})")
            if self.runs_finished() < runs_at_least:
                self.page.wait_for_timeout(100)
                continue
            self.page.wait_for_selector(IDLE, state="attached", timeout=left * 1000)
            if self.page.locator(SKELETON).count():  # lazily loaded widgets still drawing
                self.page.wait_for_timeout(100)
                continue
            before = self._script_frames()
            self.page.wait_for_timeout(settle * 1000)
            if self.page.locator(IDLE).count() and self._script_frames() == before:
                return

    def act(self, action: Callable[[], object], settle: float = 0.4, timeout: float = 60.0) -> None:
        """Do something that reruns the script (click, fill + Enter, ...) and wait for that rerun."""
        self.finish(self.start(action), settle=settle, timeout=timeout)

    def start(self, action: Callable[[], object]) -> int:
        """Do ``action`` without waiting for the rerun it causes; pass the result to ``finish``."""
        runs = self.runs_finished()
        action()
        return runs

    def finish(self, runs_before: int, settle: float = 0.4, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + 5
        # a widget interaction that changes nothing may not rerun at all; wait a little for one
        while self.runs_finished() == runs_before and time.monotonic() < deadline:
            if not self.page.locator(IDLE).count():
                break
            self.page.wait_for_timeout(50)
        self.wait_idle(settle=settle, timeout=timeout)

    # what the page shows --------------------------------------------------------

    def html(self) -> str:
        return self.page.content()

    def dom_text(self) -> str:
        """What the DOM carries that could come from data: every text node (style sheets left out)
        and every attribute value except class and style, plus form fields' current values."""
        return self.page.evaluate(_DOM_TEXT_JS)

    def text(self) -> str:
        return self.page.locator("[data-testid=stApp]").inner_text()

    def mark(self) -> None:
        """From now on ``find`` only looks at frames received after this call (and at earlier ones
        those frames refer to by hash): for pages whose widgets pass through other states first."""
        self.marked = len(self.frames)

    def frame_bytes(self) -> list[bytes]:
        """Frames since ``mark`` plus any earlier frame one of them refers to (Streamlit sends a
        large element the browser already has as a reference to its hash)."""
        recent = self.frames[self.marked:]
        refs = {f.msg.ref_hash for f in recent if f.msg is not None and f.msg.WhichOneof("type") == "ref_hash"}
        older = [f for f in self.frames[:self.marked] if f.msg is not None and f.msg.hash and f.msg.hash in refs]
        return [f.data for f in older + recent]

    def download_urls(self) -> list[str]:
        """Media URLs (download buttons, images) the server has announced to this tab."""
        urls: set[str] = set()
        for data in self.frame_bytes():
            for m in re.finditer(rb"/media/[0-9a-f]{16,}[\w.\-]*", data):
                urls.add(m.group(0).decode())
        for href in self.page.locator("a[href*='/media/']").evaluate_all("els => els.map(e => e.getAttribute('href'))"):
            urls.add(href)
        return sorted(urls)

    def downloads(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for url in self.download_urls():
            full = url if url.startswith("http") else f"{self.server.url}{url}"
            resp = self.context.request.get(full)
            if resp.ok:
                out[url] = resp.body()
        return out

    def find(self, needles: Iterable[str], include_downloads: bool = False) -> list[Hit]:
        """Which of ``needles`` appear in the page's DOM (``dom_text``) or in any frame received (or, with
        ``include_downloads``, in a file a download button offers). Each in all its escapings."""
        blobs: list[tuple[str, bytes]] = [("html", self.dom_text().encode("utf-8"))]
        blobs += [(f"frame #{i}", data) for i, data in enumerate(self.frame_bytes())]
        if include_downloads:
            blobs += [(f"download {u}", data) for u, data in self.downloads().items()]
        # One search per form over all blobs laid end to end (a leak test asks for hundreds of
        # needles in hundreds of frames: searching blob by blob spent its time in the loop, not
        # in the search); a match that runs across two blobs is no match.
        starts, at = [], 0
        for _, blob in blobs:
            starts.append(at)
            at += len(blob)
        ends = starts[1:] + [at]
        joined = b"".join(blob for _, blob in blobs)

        def first_blob(form: bytes) -> int | None:
            pos = joined.find(form)
            while pos >= 0:
                i = bisect.bisect_right(starts, pos) - 1
                if pos + len(form) <= ends[i]:
                    return i
                pos = joined.find(form, pos + 1)
            return None

        hits: list[Hit] = []
        for needle in needles:
            forms = [v.encode("utf-8") for v in variants(needle)]
            found = [i for i in map(first_blob, forms) if i is not None]
            if not found:
                continue
            where, blob = blobs[min(found)]  # the first blob holding any form, as a reader would meet it
            pos = next(p for p in (blob.find(f) for f in forms) if p >= 0)
            ctx = blob[max(0, pos - 60):pos + len(needle.encode()) + 60].decode("utf-8", "replace")
            ctx = re.sub(r"[\x00-\x1f\x7f\ufffd]+", "·", ctx)
            hits.append(Hit(needle, where, ctx))
        return hits

    def exceptions(self) -> list[str]:
        """Exception boxes on the page and exception elements sent in frames."""
        found = [el.inner_text()[:500] for el in self.page.locator(EXCEPTION).all()]
        for f in self.frames:
            msg = f.msg
            if msg is not None and msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
                el = msg.delta.new_element
                if el.WhichOneof("type") == "exception":
                    found.append(f"(frame) {el.exception.type}: {el.exception.message[:300]}")
        return found

    def alerts(self, kind: str = "error") -> list[str]:
        """Text of st.error / st.warning / ... boxes (``kind``) sent in frames."""
        out = []
        for f in self.frames:
            msg = f.msg
            if msg is not None and msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
                el = msg.delta.new_element
                if el.WhichOneof("type") == "alert":
                    fmt = type(el.alert).Format.Name(el.alert.format).lower()
                    if fmt == kind:
                        out.append(el.alert.body)
        return out

    def assert_healthy(self) -> None:
        """No exception box, no traceback, no store-open error, no JavaScript error, no dialog."""
        problems = self.exceptions()
        if "Traceback" in self.html():
            problems.append("'Traceback' in the page's HTML")
        problems += [f"error box: {a[:300]}" for a in self.alerts("error") if "cannot be opened" in a]
        problems += [f"page error: {e[:300]}" for e in self.page_errors]
        problems += [f"dialog: {d}" for d in self.dialogs]
        assert not problems, f"{self.page.url}:\n" + "\n".join(problems)

    def screenshot(self, name: str, max_height: int = 9000) -> Path:
        """The whole page: the main area scrolls inside stMain, so the viewport is stretched to
        its content for the shot (and put back afterwards)."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        size = self.page.viewport_size
        self.page.mouse.move(1, 1)  # no hover effects (chart toolbars, tooltips) in the picture
        height = self.page.evaluate("() => { const m = document.querySelector('[data-testid=stMain]');"
                                    " return m ? m.scrollHeight : document.body.scrollHeight; }")
        if height > size["height"]:
            self.page.set_viewport_size({"width": size["width"], "height": min(int(height) + 40, max_height)})
            self.page.wait_for_timeout(400)  # charts redraw at the new size
        try:
            self.page.screenshot(path=str(path))
        finally:
            self.page.set_viewport_size(size)
        return path

    # widgets ----------------------------------------------------------------------

    def widget(self, testid: str, label: str):
        """The widget of type ``testid`` (e.g. stTextInput) whose label is ``label``."""
        return self.page.locator(f"[data-testid={testid}]").filter(
            has=self.page.locator("[data-testid=stWidgetLabel]", has_text=label)).first
