"""Files an export writes before they are done: private, and gone when the process ends.

An export holds records in full (hyper ones too, for a wide enough context), so while it is
written, and wherever a server keeps prepared exports for download, it is only the owner's
(files 0600, directories 0700), and it does not outlive the process that wrote it:

- ``track(path)`` names a file or directory to remove at exit; ``untrack`` when it is done with.
- ``install_cleanup()`` (from the main thread; idempotent) removes every tracked path at normal
  exit (atexit) and on SIGTERM, SIGINT and SIGHUP, then lets the signal do what it did before:
  the handler that was there is called, or the default action (the process dies by the signal,
  as a supervisor expects). A server that takes these signals over while it runs (uvicorn)
  puts this handler back and raises the signal again once it has stopped, so the same happens.
- ``export_root()`` is one directory per process (``membrane-export-<pid>-*`` in the temp
  folder) for prepared exports; making it also removes such directories whose process is gone
  (killed with SIGKILL, or before these rules).

A forked child (import workers) inherits the list but never removes its parent's files.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

PREFIX = "membrane-export-"
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name))
_STALE = re.compile(re.escape(PREFIX) + r"(\d+)-")

_lock = threading.Lock()
_tracked: dict[Path, None] = {}  # insertion-ordered set
_owner = os.getpid()
_root: Path | None = None
_installed_in: int | None = None  # pid whose handlers are installed
_previous: dict[int, Any] = {}


def track(path: str | Path) -> Path:
    path = Path(path)
    with _lock:
        _tracked[path] = None
    return path


def untrack(path: str | Path) -> None:
    with _lock:
        _tracked.pop(Path(path), None)


def tracked() -> list[Path]:
    with _lock:
        return list(_tracked)


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def cleanup() -> None:
    """Remove every tracked path (this process's own only)."""
    if os.getpid() != _owner:
        return
    # No lock: a signal may arrive while the interrupted code holds it.
    for path in reversed(list(_tracked)):
        _remove(path)
        _tracked.pop(path, None)


def _on_signal(signum: int, frame: Any) -> None:
    cleanup()
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)  # e.g. Python's SIGINT handler: KeyboardInterrupt
        return
    if previous == signal.SIG_IGN:
        return
    # The default action (terminate), with the exit status a supervisor expects of it.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_cleanup() -> bool:
    """Remove tracked paths at exit and on SIGTERM / SIGINT / SIGHUP. Signal handlers can only
    be set from the main thread: elsewhere only the atexit part is done (returns False)."""
    global _installed_in, _owner
    if os.getpid() != _owner:  # a forked child: its own list from now on
        _owner = os.getpid()
        with _lock:
            _tracked.clear()
    if _installed_in == os.getpid():
        return True
    atexit.register(cleanup)
    if threading.current_thread() is not threading.main_thread():
        return False
    for signum in SIGNALS:
        current = signal.getsignal(signum)
        if current is None:  # a handler set outside Python: left alone (it cannot be chained)
            continue
        if current is not _on_signal:
            _previous[signum] = current
            signal.signal(signum, _on_signal)
    _installed_in = os.getpid()
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep_stale(folder: str | Path | None = None) -> list[Path]:
    """Remove this user's ``membrane-export-<pid>-*`` directories whose process is gone."""
    folder = Path(folder or tempfile.gettempdir())
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _STALE.match(entry.name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if info.st_uid != os.getuid() or not entry.is_dir() or entry.is_symlink() or _alive(int(match.group(1))):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def export_root() -> Path:
    """This process's directory for prepared exports (0700), removed when the process ends."""
    global _root
    with _lock:
        if _root is not None and _owner == os.getpid() and _root.is_dir():
            return _root
    install_cleanup()
    sweep_stale()
    root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))  # mkdtemp: 0700
    with _lock:
        _root = root
    track(root)
    return root


def new_export_dir() -> Path:
    """A directory of its own (0700) under ``export_root`` for one prepared export."""
    return Path(tempfile.mkdtemp(dir=export_root()))


def new_export_file(name: str) -> Path:
    """An empty file ``name`` (0600) in a ``new_export_dir``: ``export_file`` writing over it
    keeps its mode, so the prepared export stays its owner's only."""
    path = new_export_dir() / name
    os.close(create_private(path))
    return path


def umask_mode() -> int:
    """The mode ``open()`` gives a new file under this process's umask (0644 under 022). Read
    from /proc where it is shown: setting the umask to read it would briefly change it for
    every thread."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return 0o666 & ~mask


def create_private(path: str | Path) -> int:
    """Open a new file for writing, readable by its owner only (0600 whatever the umask); a file
    already at ``path`` (a stale partial export) is replaced, not reused with its mode."""
    path = Path(path)
    path.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    return os.open(path, flags, 0o600)


__all__ = ["PREFIX", "cleanup", "create_private", "export_root", "install_cleanup", "new_export_dir",
           "new_export_file", "sweep_stale", "track", "tracked", "umask_mode", "untrack"]
