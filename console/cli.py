"""`membrane-console [--db URL] [--port N]`: start the console with Streamlit.

On a store without operators it creates an admin and prints a one-time sign-in link (as
Jupyter and Datasette's --root do). It serves console/gateway.py: the console behind its
sign-in routes and its Host / Origin / framing guard.

`membrane-console COMMAND ...` runs one of the commands in ``COMMANDS`` instead (each a module
of console.commands with a ``main(argv) -> int``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path

from console import keys
from console.components import colours

APP = Path(__file__).resolve().parent / "app.py"
GATEWAY = Path(__file__).resolve().parent / "gateway.py"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The most a file upload may weigh (MB): the import page parses it in memory.
MAX_UPLOAD_MB = 50
PREWARM_THREAD = "membrane-prewarm"
FIRST_PAGE_WAIT = 20.0  # seconds the vectors wait for the first page before loading anyway
QUIET_BEFORE_WARM = 3.0  # seconds without a finished script run: the browser has drawn the page


def prewarm(url: str) -> None:
    """Open the store and load its column cache into the console's cached engine (the
    ``st.cache_resource`` entry the pages use), so the first page does not wait for it: at a
    million records that load takes seconds (about one from the cache's snapshot file). Then
    what the overview counts over the whole audit log (entries by action, and by day for its
    activity table: seconds at millions of entries, then kept current per process) and the
    table library it draws with. Last, once the browser has drawn the first page: the id -> row
    index, the chart library of the other pages, the ranking vectors and entity names, and the
    ranking model. A store that cannot be opened is reported here, in the terminal, as well as
    on the pages."""
    # Streamlit warns once per call that this thread runs no script; that is the point of it.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        lambda record: record.threadName != PREWARM_THREAD)
    try:
        from console import state

        m = state._open(url)
        m.columns.current()  # what every page reads
        from console.components import overview_data

        # The overview's numbers, in the cache the page reads: the audit entries counted by action
        # (metrics.ActionCounts) and by hour (membrane_engine.audit.activity), kept current from here on.
        overview_data.count_now(m)
        import pandas  # noqa: F401  (the overview's tables would import it)
        import PIL.Image  # noqa: F401  (and the page icon)
        # The rest waits until the first page has run and the browser has drawn it: on two cores,
        # work beside the first page slowed the browser's drawing as much as the server's own.
        # A page opened sooner does its own part (a look-up by id builds the index), and with
        # nobody visiting, it all loads after a while.
        state.FIRST_RUN_DONE.wait(timeout=FIRST_PAGE_WAIT)
        state.wait_until_quiet(QUIET_BEFORE_WARM, timeout=FIRST_PAGE_WAIT)
        m.columns.index_ids()  # a noticeable wait at 1M, for the first look-up by id
        import plotly.graph_objects  # noqa: F401  (the other pages' charts)
        m.warm()  # ranking vectors, entity names: seconds of CPU at 1M
        if m.embedder is not None:
            # The ranking model, once per server: otherwise the first import or ranked request
            # loads it, and its memory counts as that upload's or that page's.
            m.embedder.embed(["a task"])
    except Exception as exc:
        # The pages show it too, but whoever started the console is looking at this terminal.
        from membrane_engine.errors import MembraneError

        reason = str(exc) if isinstance(exc, MembraneError) else f"{type(exc).__name__}: {exc}"
        print(f"membrane-console: the memory store cannot be opened: {reason}", file=sys.stderr, flush=True)


# Subcommands, imported only when asked for: serving the console needs none of them.
COMMANDS: dict[str, str] = {
    "operators": "console.commands.operators",
    "check": "console.commands.check",  # policy files, SPEC 11
    "audit": "console.commands.audit",  # audit checkpoints and verification, SPEC 6
    "capture": "console.commands.capture",  # write as an agent would, SPEC 12
    "consolidate": "console.commands.consolidate",  # Membrane's consolidators, SPEC 12
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        import importlib

        return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
    return serve(argv)


def allowed_hosts(address: str, extra: list[str]) -> list[str]:
    """The names the console answers to (server.allowedHosts): loopback, the bound address, and
    every --allow-host. Any other Host (a DNS-rebound attacker.example) is refused."""
    hosts = list(LOOPBACK)
    if address not in ("0.0.0.0", "::", ""):
        hosts.append(address)
    for name in extra:
        hosts += [h.strip() for h in name.split(",") if h.strip()]
    return list(dict.fromkeys(hosts))


def sign_in_configured(m) -> str | None:
    """Which sign-in protects a console reachable from other machines, or None."""
    from console import signin

    if signin.oidc_configured():
        return "OpenID Connect ([auth] in secrets)"
    if signin.proxy_header():
        return f"the trusted proxy header {signin.proxy_header()}"
    if m.operators.has_password():
        return "local accounts"
    return None


def first_run(m, host: str, port: int) -> str | None:
    """On a store with no operator: create the admin and return its one-time sign-in link. On a
    store whose operators have no password yet (and no other sign-in): a new link for the first
    admin, so restarting is no lock-out."""
    from console import signin
    from membrane_engine import FIRST_RUN

    ops = m.operators
    if ops.count() == 0:
        ops.add("admin", "admin", "hyper", actor="membrane-console:first-run")
        name = "admin"
    elif sign_in_configured(m) is None:
        admins = [o.name for o in ops.list() if o.role.value == "admin"]
        if not admins:
            return None
        name = admins[0]
    else:
        return None
    token = ops.issue_token(name, FIRST_RUN, signin.FIRST_RUN_TTL, actor="membrane-console:first-run")
    return f"http://{host}:{port}/-/first-run?{keys.Param.TOKEN}={token}"


def serve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="membrane-console", description=__doc__)
    parser.add_argument("--db", help="SQLAlchemy URL of the store (default: $MEMBRANE_DB_URL, else ~/.membrane/membrane.db with the sample store)")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--address", default="127.0.0.1",
                        help="address to listen on; anything but loopback needs a sign-in configured (SECURITY.md)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="another host name the console is served under (server.allowedHosts); repeatable")
    parser.add_argument("--session-hours", type=float, default=None,
                        help="how long a sign-in lasts (default: $MEMBRANE_SESSION_HOURS, else 12)")
    parser.add_argument("--trusted-proxy-header", default=None, metavar="HEADER",
                        help="sign operators in by this header of a reverse proxy (e.g. X-Forwarded-Email); only "
                             "when the console is reachable through that proxy alone")
    parser.add_argument("--trusted-proxies", default=None, metavar="ADDRESSES",
                        help="comma-separated addresses or networks of reverse proxies whose X-Forwarded-For names "
                             "the client for sign-in throttling (default: $MEMBRANE_TRUSTED_PROXIES, else none)")
    parser.add_argument("--policies", metavar="FILE", help="policy file for the Policies page and the access previews "
                        "(default: $MEMBRANE_POLICIES, else the bundled sample policy on the sample store)")
    parser.add_argument("--no-prewarm", action="store_true",
                        help="do not open the store and load its cache while the server starts (the first page will)")
    args = parser.parse_args(argv)
    from streamlit.web import cli as stcli

    from console import signin, state
    from membrane_engine import install_private_cleanup, sweep_stale_private
    from membrane_engine.errors import MembraneError

    if args.session_hours is not None:
        os.environ[signin.SESSION_HOURS_ENV] = str(args.session_hours)
    if args.trusted_proxy_header:
        os.environ[signin.PROXY_HEADER_ENV] = args.trusted_proxy_header
    if args.trusted_proxies is not None:
        os.environ[signin.TRUSTED_PROXIES_ENV] = args.trusted_proxies
    try:
        signin.session_ttl()
        # What uvicorn believes X-Forwarded-For from (console/gateway.py sets it too).
        os.environ["FORWARDED_ALLOW_IPS"] = ",".join(str(net) for net in signin.trusted_proxies())
    except ValueError as exc:
        print(f"membrane-console: {exc}", file=sys.stderr)
        return 2
    # The same URL the pages will ask for (console.state.store_url, after Streamlit's argv).
    url = args.db or os.environ.get("MEMBRANE_DB_URL") or ""
    # Opened here, before Streamlit runs any script: its "no script context" warning is noise.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
    try:
        m = state._open(url)
        if not args.no_prewarm:  # while the rest starts (the column cache's load is a thread's own)
            threading.Thread(target=prewarm, args=(url,), name=PREWARM_THREAD, daemon=True).start()
        link = first_run(m, "localhost" if args.address in ("0.0.0.0", "::") else args.address, args.port)
        protected = sign_in_configured(m)
    except MembraneError as exc:
        # The pages say so too; on loopback the console still starts (the store may come back).
        print(f"membrane-console: the memory store cannot be opened: {exc}", file=sys.stderr, flush=True)
        link, protected = None, None
    if args.address not in LOOPBACK and protected is None:
        print(f"membrane-console: refusing to listen on {args.address}: other machines could reach the console "
              "and no sign-in is configured. Give an operator a password (membrane-console operators passwd "
              "NAME --password-stdin), configure OpenID Connect ([auth] in .streamlit/secrets.toml) or a trusted "
              "proxy header (--trusted-proxy-header), or listen on 127.0.0.1.", file=sys.stderr)
        return 2

    # Config passed as flags, so the console looks the same from any working directory.
    sys.argv = [
        "streamlit", "run", str(GATEWAY),
        "--server.port", str(args.port), "--server.address", args.address,
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "minimal", "--client.showErrorDetails", "none",
        "--server.fileWatcherType", "none", "--theme.base", "light", "--theme.primaryColor", colours.BRAND,
        "--server.maxUploadSize", str(MAX_UPLOAD_MB), "--server.enableXsrfProtection", "true",
        "--client.disableDataExport", "true", "--runner.postScriptGC", "false",
    ]
    for host in allowed_hosts(args.address, args.allow_host):
        sys.argv += ["--server.allowedHosts", host]
    if args.db:
        sys.argv += ["--", "--db", args.db]
    if args.policies:
        sys.argv += ["--"] * (not args.db) + ["--policies", args.policies]
    os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
    # At the first element any script draws, Streamlit asks once whether it runs in a Python REPL,
    # through inspect.stack() over the script thread's deep stack, a noticeable part of the
    # first page after a start (bench/README.md). This process is `streamlit run`; the flag only skips that question.
    import streamlit.delta_generator

    streamlit.delta_generator._use_warning_has_been_displayed = True
    if link:
        print(f"\n  First run: sign in as admin (works once, within the hour):\n\n    {link}\n", flush=True)
    # Prepared exports hold records in full: removed on SIGTERM / SIGINT too (uvicorn hands the
    # signal back to this handler once it has stopped), and a killed server's are removed now.
    # Installed here because signal handlers can only be set from the main thread.
    install_private_cleanup()
    sweep_stale_private()
    return stcli.main()


if __name__ == "__main__":
    raise SystemExit(main())
