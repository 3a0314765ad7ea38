"""`membrane-console [--db URL] [--port N]`: start the console with Streamlit.

`membrane-console COMMAND ...` runs one of the commands in ``COMMANDS`` instead (each a module
of console.commands with a ``main(argv) -> int``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
PREWARM_THREAD = "membrane-prewarm"


def prewarm(url: str) -> None:
    """Open the store and load its column cache into the console's cached engine (the
    ``st.cache_resource`` entry the pages use), so the first page does not wait for it: at a
    million records that load takes seconds. A store that cannot be opened is reported here, in
    the terminal, as well as on the pages."""
    # Streamlit warns once per call that this thread runs no script; that is the point of it.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        lambda record: record.threadName != PREWARM_THREAD)
    try:
        from console import state

        state._open(url).columns.current()
        import pandas  # noqa: F401  (the first st.dataframe would import it)
    except Exception as exc:
        # The pages show it too, but whoever started the console is looking at this terminal.
        from membrane_engine.errors import MembraneError

        reason = str(exc) if isinstance(exc, MembraneError) else f"{type(exc).__name__}: {exc}"
        print(f"membrane-console: the memory store cannot be opened: {reason}", file=sys.stderr, flush=True)


# Subcommands, imported only when asked for: serving the console needs none of them.
COMMANDS: dict[str, str] = {}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        import importlib

        return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
    return serve(argv)


def serve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="membrane-console", description=__doc__)
    parser.add_argument("--db", help="SQLAlchemy URL of the store (default: $MEMBRANE_DB_URL, else ~/.membrane/membrane.db with the sample store)")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--no-prewarm", action="store_true",
                        help="do not open the store and load its cache while the server starts (the first page will)")
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
    if not args.no_prewarm:
        # The same URL the pages will ask for (console.state.store_url, after Streamlit's argv).
        url = args.db or os.environ.get("MEMBRANE_DB_URL") or ""
        threading.Thread(target=prewarm, args=(url,), name=PREWARM_THREAD, daemon=True).start()
    return stcli.main()


if __name__ == "__main__":
    raise SystemExit(main())
