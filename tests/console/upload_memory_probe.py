"""Run by test_upload_memory.py in a process of its own: the Python memory the import page takes
for a ~50 MB upload made of the sample's records, next to what the test harness alone takes to
hand the page such an upload. Prints one JSON line.

usage: python upload_memory_probe.py WORKDIR MEGABYTES [PAGE_SCRIPT]
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))  # tests/, for session_kit


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


def harness_only(body: bytes) -> int:
    """Peak traced bytes of the same three runs (upload, tick, press) of a script that only holds
    an uploader, a checkbox and a button: what AppTest itself keeps of the upload."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string("import streamlit as st\nst.file_uploader('f', type=['json'], key='up')\n"
                             "st.checkbox('c', key='c')\nst.button('b', key='b')\n", default_timeout=600)
    at.run()
    tracemalloc.start()
    at.file_uploader(key="up").set_value(("big.json", body, "application/json")).run()
    at.checkbox(key="c").check().run()
    at.button(key="b").click().run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def page(body: bytes, script: Path) -> tuple[int, int, list[str]]:
    """Peak traced bytes and RSS growth of the import page previewing and importing ``body``."""
    from streamlit.testing.v1 import AppTest

    from session_kit import TEST_ADMIN, sign_in

    at = sign_in(AppTest.from_file(str(script), default_timeout=900), TEST_ADMIN)
    at.run()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    at.file_uploader(key="ie_upload").set_value(("big.json", body, "application/json")).run()
    for box in [c for c in at.checkbox if c.key == "ie_widen"]:
        box.check().run()
    at.button(key="ie_import").click().run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) * 1024
    return peak, grown, [str(e.value) for e in [*at.success, *at.error, *at.exception]]


def main() -> None:
    work, megabytes = Path(sys.argv[1]), float(sys.argv[2])
    script = Path(sys.argv[3]) if len(sys.argv) > 3 else ROOT / "console" / "app_pages" / "import_export.py"
    from membrane_engine import Membrane

    url = f"sqlite:///{work / 'upload.db'}"
    m = Membrane.open(url, load_sample=False)
    m.embedder.embed(["a warm model", "so the page's first import does not load it"])  # the server's, once
    m.close()
    os.environ["MEMBRANE_DB_URL"] = url
    body, count = upload_body(megabytes)
    harness = harness_only(body)
    peak, grown, said = page(body, script)
    m = Membrane.open(url, load_sample=False)
    stored = m.count()
    m.close()
    print(json.dumps({"bytes": len(body), "records": count, "stored": stored, "harness_peak": harness,
                      "page_peak": peak, "page_rss_growth": grown, "said": said}))


if __name__ == "__main__":
    main()
