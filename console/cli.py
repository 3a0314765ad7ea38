"""`membrane-console [--db URL] [--port N]`: start the console with Streamlit."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="membrane-console", description=__doc__)
    parser.add_argument("--db", help="SQLAlchemy URL of the store (default: $MEMBRANE_DB_URL, else ~/.membrane/membrane.db with the sample store)")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--address", default="127.0.0.1")
    args = parser.parse_args(argv)
    from streamlit.web import cli as stcli

    # Config passed as flags, so the console looks the same from any working directory.
    sys.argv = [
        "streamlit", "run", str(APP),
        "--server.port", str(args.port), "--server.address", args.address,
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "minimal", "--client.showErrorDetails", "none",
        "--server.fileWatcherType", "none", "--theme.base", "light", "--theme.primaryColor", "#4b5bdc",
    ]
    if args.db:
        sys.argv += ["--", "--db", args.db]
    os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
    return stcli.main()


if __name__ == "__main__":
    raise SystemExit(main())
