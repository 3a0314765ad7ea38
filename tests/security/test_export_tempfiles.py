"""Export files while they are written, and the console's prepared exports: private (files 0600,
directories 0700, whatever the umask) and gone when the process that wrote them ends: normally,
by an exception, or by SIGTERM / SIGINT half-way through an export (the handler removes them,
then the process dies by the signal as before). A killed process's export directory is removed
by the next process that makes one.

Each export runs in a child process with a temp folder of its own (TMPDIR), stopped by a signal
while its export is blocked half-way (after its first records are written)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import membrane_engine

REPO = Path(membrane_engine.__file__).resolve().parents[1]
RECORDS = 6

CHILD = r'''
import json, os, sys, threading
from pathlib import Path

os.umask(0o022)  # the usual umask, under which a plain open() makes a world-readable file
from membrane_engine import Membrane
from membrane_engine.transfer import export

mode, work, db = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
m = Membrane.open(db, load_sample=False)
original = export.documents

def stalled(*args, **kwargs):
    for k, doc in enumerate(original(*args, **kwargs)):
        yield doc
        if k == 1:  # two records written: say so, then wait to be stopped
            (work / "ready").write_text("stalled")
            if mode.endswith("-raise"):
                raise RuntimeError("the export failed half-way")
            threading.Event().wait()

if mode.startswith("engine"):
    export.documents = stalled
    m.export_file(work / "out" / "export.json")
elif mode.startswith("console"):
    from membrane_engine.transfer import private_files
    private_files.install_cleanup()  # as membrane-console does in its main thread, before serving
    if "stalled" in mode:
        export.documents = stalled
    done = threading.Event()

    def page():  # a page prepares its export in Streamlit's script thread, not the main one
        path = private_files.new_export_file("membrane_export.json")  # as the page does
        (work / "folder").write_text(str(path.parent))
        m.export_file(path)
        (work / "ready").write_text("prepared")
        done.set()

    threading.Thread(target=page, daemon=True).start()
    if mode == "console-exit":
        done.wait()
        sys.exit(0)
    while True:  # the server's main thread, until a signal
        threading.Event().wait(3600)
'''


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def store(tmp_path: Path) -> str:
    from tests.support.security import simple

    url = f"sqlite:///{tmp_path / 'store.db'}"
    m = membrane_engine.Membrane.open(url, load_sample=False)
    m.import_records([simple(f"r{i}", sensitivity="hyper", payload={
        "kind": "semantic", "subject": f"CANARY-{i}", "predicate": "p", "object": "o"}) for i in range(RECORDS)])
    m.close()
    return url


def _start(tmp_path: Path, store: str, mode: str) -> tuple[subprocess.Popen, Path, Path]:
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, TMPDIR=str(temp), PYTHONPATH=str(REPO))
    child = subprocess.Popen([sys.executable, str(script), mode, str(work), store], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return child, work, temp


def _wait_ready(child: subprocess.Popen, work: Path) -> None:
    deadline = time.monotonic() + 120  # a bound on a hang, not a measurement
    while not (work / "ready").exists():
        if child.poll() is not None:
            pytest.fail(f"the child ended early ({child.returncode}): {child.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            child.kill()
            pytest.fail("the child never reached its export")
        time.sleep(0.02)


def _left(temp: Path, work: Path) -> list[str]:
    """Export files and directories left behind (anything under the child's temp folder, and
    any partial or final file next to an export's destination)."""
    left = [str(p.relative_to(temp)) for p in temp.rglob("*")]
    left += [str(p.relative_to(work)) for p in (work / "out").rglob("*")]
    return left


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_half_way_through_export_file_leaves_no_partial_file(tmp_path, store, signum):
    child, work, temp = _start(tmp_path, store, "engine")
    _wait_ready(child, work)
    partial = work / "out" / "export.json.partial"
    assert partial.exists() and _mode(partial) == 0o600, oct(_mode(partial))  # private while written
    child.send_signal(signum)
    child.communicate(timeout=120)
    if signum == signal.SIGTERM:
        assert child.returncode == -signal.SIGTERM  # still dies by the signal, as a supervisor expects
    else:
        assert child.returncode != 0
    assert _left(temp, work) == []


def test_an_exception_half_way_leaves_no_partial_file(tmp_path, store):
    child, work, temp = _start(tmp_path, store, "engine-raise")
    _, err = child.communicate(timeout=120)
    assert child.returncode == 1 and "the export failed half-way" in err
    assert _left(temp, work) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("mode", ["console-stalled", "console-prepared"])
def test_the_consoles_export_folder_goes_with_the_server_on_a_signal(tmp_path, store, mode, signum):
    """A prepared export (or one being written) in the console's folder, in a thread that is not
    the main one, with the handler installed by the main thread as membrane-console does."""
    child, work, temp = _start(tmp_path, store, mode)
    _wait_ready(child, work)
    folder = Path((work / "folder").read_text())
    root = folder.parent
    assert root.parent == temp and root.name.startswith(f"membrane-export-{child.pid}-")
    assert _mode(root) == 0o700 and _mode(folder) == 0o700
    files = list(folder.iterdir())
    assert files and all(_mode(f) == 0o600 for f in files), [(f.name, oct(_mode(f))) for f in files]
    if mode == "console-prepared":
        assert json.loads(files[0].read_text())[0]["payload"]["subject"].startswith("CANARY")
    child.send_signal(signum)
    child.communicate(timeout=120)
    assert child.returncode != 0
    if signum == signal.SIGTERM:
        assert child.returncode == -signal.SIGTERM
    assert _left(temp, work) == []


def test_the_consoles_export_folder_goes_at_a_normal_exit(tmp_path, store):
    child, work, temp = _start(tmp_path, store, "console-exit")
    child.communicate(timeout=120)
    assert child.returncode == 0 and (work / "ready").exists()
    assert _left(temp, work) == []


def test_a_killed_processs_export_folder_is_removed_by_the_next_one(tmp_path, store):
    """SIGKILL leaves no chance to clean up: the next process that makes its export folder
    removes the folders of processes that are gone, and only those (this user's, by pid)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    stale = temp / f"membrane-export-{dead_pid}-abc123"
    (stale / "x").mkdir(parents=True)
    (stale / "x" / "membrane_export.json").write_text('[{"payload": "CANARY"}]')
    alive = temp / f"membrane-export-{os.getpid()}-def456"  # this test's own process: alive
    alive.mkdir()
    other = temp / "membrane-export-notapid"
    other.mkdir()
    child, work, _ = _start(tmp_path, store, "console-exit")
    child.communicate(timeout=120)
    assert child.returncode == 0
    assert not stale.exists()
    assert alive.exists() and other.exists()


SERVER = r'''
import sys, threading
from membrane_engine.transfer import private_files

def page():  # what the Import / export page does, in a thread of its own
    folder = private_files.new_export_dir()
    (folder / "membrane_export.json").write_text('[{"payload": "CANARY"}]')

worker = threading.Thread(target=page)
worker.start()
worker.join()
from console.cli import main
sys.exit(main(["--db", sys.argv[1], "--port", sys.argv[2], "--no-prewarm"]))
'''


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_membrane_console_removes_its_exports_on_sigterm(tmp_path, store):
    """The real server: Streamlit under uvicorn takes SIGTERM over while it serves, stops, and
    raises the signal again; the export folder goes, and the process still dies by SIGTERM."""
    import urllib.request

    temp = tmp_path / "tmp"
    temp.mkdir()
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    port = _free_port()
    env = dict(os.environ, TMPDIR=str(temp), PYTHONPATH=str(REPO))
    server = subprocess.Popen([sys.executable, str(script), store, str(port)], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120  # a bound on a hang, not a measurement
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the console did not start: {server.stderr.read()[-2000:] if server.poll() is not None else ''}")
                time.sleep(0.1)
        roots = [p for p in temp.iterdir() if p.name.startswith(f"membrane-export-{server.pid}-")]
        assert len(roots) == 1 and list(roots[0].rglob("membrane_export.json"))
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == -signal.SIGTERM
    assert [p.name for p in temp.rglob("*")] == []


CHECK = r'''
import sys, threading
from pathlib import Path
from membrane_engine.membrane import Membrane as Facade

work = Path(sys.argv[1])
original = Facade.import_file

def stalled(self, *args, **kwargs):
    count = original(self, *args, **kwargs)
    (work / "ready").write_text("loaded")  # the export is in the temporary store now
    threading.Event().wait()
    return count

Facade.import_file = stalled
from console.commands.check import main
sys.exit(main([sys.argv[2], "--records", sys.argv[3]]))
'''


def test_a_check_of_an_export_leaves_no_temporary_store_on_sigterm(tmp_path, store):
    """`membrane-console check --records EXPORT` loads the export into a temporary store: it
    goes with the process on SIGTERM too."""
    export = tmp_path / "export.json"
    m = membrane_engine.Membrane.open(store, load_sample=False)
    m.export_file(export)
    m.close()
    policy = tmp_path / "policy.toml"
    policy.write_text((REPO / "sample_data" / "policies.toml").read_text())
    temp = tmp_path / "tmp"
    temp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "check_child.py"
    script.write_text(CHECK)
    env = dict(os.environ, TMPDIR=str(temp), PYTHONPATH=str(REPO))
    child = subprocess.Popen([sys.executable, str(script), str(work), str(policy), str(export)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_ready(child, work)
    assert [p.name for p in temp.iterdir() if p.name.startswith("membrane-check-")]
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=120)
    assert child.returncode == -signal.SIGTERM
    assert [p.name for p in temp.rglob("*")] == []
