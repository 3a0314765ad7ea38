"""Run by test_upload_memory.py in a process of its own: how much the resident memory (RSS) of a
console server process grows while its Import page takes a ~50 MB upload made of the sample's
records, previews it and imports it. Prints one JSON line.

The process is first brought to where a console server stands once it has started: the store
opened, the ranking model loaded (a fixed cost of each server process, loaded by its prewarm,
not by an upload), and the page drawn for a signed-in operator. That RSS is the baseline. The
upload's bytes are then read (the server receiving them: they count as the upload's), handed to
the page, previewed, confirmed and imported; the peak is the kernel's high-water mark of the
process's RSS (VmHWM, reset to the current RSS at the baseline through /proc/self/clear_refs),
or where that reset is refused, the highest of VmRSS sampled every millisecond. Native memory
(the model's, SQLite's page cache, numpy's) counts as well as Python's.

The upload body is written by a child process, so that making it leaves no freed memory behind
in this one for the import to reuse unseen.

usage: python -m tests.support.upload_probe WORKDIR MEGABYTES [PAGE_SCRIPT | --harness]
``--harness``: the same upload handed to a script that only holds an uploader, a checkbox and a
button (what AppTest itself takes to hand over the upload), for comparison.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

KIB = 1024


def upload_body(megabytes: float) -> tuple[bytes, int]:
    """A JSON array of the sample's records, renamed (and without relations, whose targets would
    be missing), as long as it can be without passing ``megabytes`` MiB (the console's limit)."""
    sample = json.loads((ROOT / "sample_data" / "membrane_sample.json").read_text(encoding="utf-8"))
    parts, size, k = [], 2, 0
    while True:
        text = json.dumps(dict(sample[k % len(sample)], id=f"copy-{k}", relations=[]))
        if size + len(text) + 2 > megabytes * 2**20:
            break
        parts.append(text)
        size, k = size + len(text) + 2, k + 1
    return ("[" + ",\n".join(parts) + "]").encode(), k


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


class PeakRSS:
    """The process's highest RSS (bytes) between ``start`` and ``stop``."""

    def __init__(self) -> None:
        self.method = ""
        self._high = 0
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM back to the current RSS (Linux 4.0 on)
            self.method = "VmHWM"
            return
        except OSError:
            pass
        self.method = "VmRSS sampled every 1 ms"
        self._high = status_kib("VmRSS")
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.001):
            self._high = max(self._high, status_kib("VmRSS"))

    def stop(self) -> int:
        if self._thread is None:
            return status_kib("VmHWM") * KIB
        self._done.set()
        self._thread.join()
        return max(self._high, status_kib("VmRSS")) * KIB


def measured(body_file: Path, make: Callable[[], object], steps: Callable[[object, bytes], list[str]]) -> dict:
    """``make()`` an AppTest at rest, then the RSS it grows by while ``steps`` reads the upload's
    bytes and hands them over."""
    at = make()
    gc.collect()
    time.sleep(0.2)
    base = status_kib("VmRSS") * KIB
    peak = PeakRSS()
    peak.start()
    said = steps(at, body_file.read_bytes())
    top = peak.stop()
    return {"baseline_rss": base, "peak_rss": top, "growth": top - base, "method": peak.method, "said": said}


def page_run(script: Path) -> tuple[Callable[[], object], Callable[[object, bytes], list[str]]]:
    from streamlit.testing.v1 import AppTest

    from tests.support.sessions import TEST_ADMIN, sign_in

    def make() -> object:
        at = sign_in(AppTest.from_file(str(script), default_timeout=900), TEST_ADMIN)
        at.run()
        return at

    def steps(at, body: bytes) -> list[str]:
        at.file_uploader(key="ie_upload").set_value(("big.json", body, "application/json")).run()
        for box in [c for c in at.checkbox if c.key == "ie_widen"]:
            box.check().run()
        at.button(key="ie_import").click().run()
        return [str(e.value) for e in [*at.success, *at.error, *at.exception]]

    return make, steps


def harness_run() -> tuple[Callable[[], object], Callable[[object, bytes], list[str]]]:
    from streamlit.testing.v1 import AppTest

    def make() -> object:
        at = AppTest.from_string("import streamlit as st\nst.file_uploader('f', type=['json'], key='up')\n"
                                 "st.checkbox('c', key='c')\nst.button('b', key='b')\n", default_timeout=600)
        at.run()
        return at

    def steps(at, body: bytes) -> list[str]:
        at.file_uploader(key="up").set_value(("big.json", body, "application/json")).run()
        at.checkbox(key="c").check().run()
        at.button(key="b").click().run()
        return []

    return make, steps


def main() -> None:
    if sys.argv[1] == "--body":  # the child that writes the upload
        body, count = upload_body(float(sys.argv[3]))
        Path(sys.argv[2]).write_bytes(body)
        print(count)
        return
    work, megabytes = Path(sys.argv[1]), float(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else str(ROOT / "console" / "app_pages" / "import_export.py")
    body_file = work / "big.json"
    count = int(subprocess.run([sys.executable, __file__, "--body", str(body_file), str(megabytes)],
                               capture_output=True, text=True, check=True).stdout)
    if mode == "--harness":
        got = measured(body_file, *harness_run())
        print(json.dumps({"bytes": body_file.stat().st_size, "records": count, **got}))
        return
    from membrane_engine import Membrane

    url = f"sqlite:///{work / 'upload.db'}"
    m = Membrane.open(url, load_sample=False)
    m.embedder.embed(["a warm model", "as a console server's prewarm leaves it"])  # the server's, once
    m.close()
    os.environ["MEMBRANE_DB_URL"] = url
    got = measured(body_file, *page_run(Path(mode)))
    m = Membrane.open(url, load_sample=False)
    stored = m.count()
    m.close()
    print(json.dumps({"bytes": body_file.stat().st_size, "records": count, "stored": stored, **got}))


if __name__ == "__main__":
    main()
