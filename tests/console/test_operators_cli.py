"""`membrane-console operators ...` and what `membrane-console` checks before it serves: the
first-run admin and its one-time link, the refusal to listen beyond loopback without a sign-in,
and the Streamlit settings it passes (allowed hosts, upload bound, no raw CSV export)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import streamlit as st

from console import cli
from membrane_engine import Membrane

PASSWORD = "a long enough passphrase"


@pytest.fixture
def url(tmp_path: Path) -> str:
    st.cache_resource.clear()
    yield f"sqlite:///{tmp_path / 'ops.db'}"
    st.cache_resource.clear()


def run(argv: list[str], monkeypatch, stdin: str = "") -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    return cli.main(argv)


def test_operators_add_list_set_passwd_remove(url, monkeypatch, capsys):
    assert run(["operators", "add", "ann", "--role", "admin", "--clearance", "hyper", "--db", url], monkeypatch) == 0
    assert run(["operators", "--db", url, "add", "bob", "--role", "viewer", "--clearance", "medium", "--scopes",
                "ops,billing", "--email", "bob@example.org", "--password-stdin"], monkeypatch, PASSWORD + "\n") == 0
    capsys.readouterr()
    assert run(["operators", "list", "--db", url], monkeypatch) == 0
    assert capsys.readouterr().out.splitlines() == ["ann\tadmin\thyper\t*\t", "bob\tviewer\tmedium\tbilling,ops\tbob@example.org"]
    assert run(["operators", "set", "bob", "--role", "curator", "--scopes", "", "--db", url], monkeypatch) == 0
    assert run(["operators", "passwd", "bob", "--password-stdin", "--db", url], monkeypatch, "another passphrase!\n") == 0
    m = Membrane.open(url, load_sample=False)
    try:
        bob = m.operators.get("bob")
        assert (bob.role.value, bob.scopes) == ("curator", ())
        assert m.operators.verify_password("bob", "another passphrase!") is not None
        assert {e.actor for e in m.operators.events()} == {cli_actor()}
        assert [e.action for e in m.operators.events()] == ["add", "add", "set", "passwd"]
    finally:
        m.close()
    assert run(["operators", "remove", "bob", "--db", url], monkeypatch) == 0
    assert run(["operators", "remove", "bob", "--db", url], monkeypatch) == 1
    assert "no operator named 'bob'" in capsys.readouterr().err


def cli_actor() -> str:
    from console.commands.operators import _actor

    return _actor()


def test_operators_refuse_bad_input_with_the_field_named(url, monkeypatch, capsys):
    assert run(["operators", "add", "x y", "--role", "viewer", "--clearance", "low", "--db", url], monkeypatch) == 1
    assert "operator name 'x y'" in capsys.readouterr().err
    assert run(["operators", "add", "x", "--role", "viewer", "--clearance", "low", "--password-stdin", "--db", url],
               monkeypatch, "short\n") == 1
    err = capsys.readouterr().err
    assert "password must be 12 to 1024 characters" in err and "short" not in err.replace("short)", "")
    with pytest.raises(SystemExit):  # a password is never an argument
        run(["operators", "add", "x", "--role", "viewer", "--clearance", "low", "--password", PASSWORD], monkeypatch)


@pytest.fixture
def no_server(monkeypatch):
    """Stop serve() where Streamlit would start: the argv it would run with."""
    seen: list[list[str]] = []
    from streamlit.web import cli as stcli

    monkeypatch.setattr(stcli, "main", lambda: seen.append(list(sys.argv)) or 0)
    # serve() sets these for the server process; monkeypatch puts them back afterwards.
    for name in ("MEMBRANE_TRUSTED_PROXY_HEADER", "MEMBRANE_SESSION_HOURS"):
        monkeypatch.setenv(name, "")  # recorded, so what serve() sets is undone after the test
        monkeypatch.delenv(name)
    return seen


def test_first_run_creates_the_admin_and_prints_a_one_time_link(url, no_server, capsys, monkeypatch):
    assert cli.main(["--db", url, "--port", "8599", "--no-prewarm"]) == 0
    out = capsys.readouterr().out
    link = next(line.strip() for line in out.splitlines() if "/-/first-run?token=" in line)
    assert link.startswith("http://127.0.0.1:8599/-/first-run?token=")
    token = link.split("token=", 1)[1]
    st.cache_resource.clear()
    m = Membrane.open(url, load_sample=False)
    try:
        assert [(o.name, o.role.value, o.max_sensitivity.value) for o in m.operators.list()] == [("admin", "admin", "hyper")]
        assert m.operators.redeem(token, "first_run").name == "admin"
        assert m.operators.redeem(token, "first_run") is None
    finally:
        m.close()
    # Restarted with no password set yet: a new link, no second admin.
    assert cli.main(["--db", url, "--port", "8599", "--no-prewarm"]) == 0
    assert "/-/first-run?token=" in capsys.readouterr().out
    st.cache_resource.clear()
    assert run(["operators", "passwd", "admin", "--password-stdin", "--db", url], monkeypatch, PASSWORD + "\n") == 0
    capsys.readouterr()
    assert cli.main(["--db", url, "--port", "8599", "--no-prewarm"]) == 0
    assert "first-run" not in capsys.readouterr().out  # a password exists: sign in with it


def test_serve_passes_the_hardening_settings(url, no_server):
    assert cli.main(["--db", url, "--no-prewarm", "--allow-host", "console.example.org,*.corp.example"]) == 0
    argv = no_server[-1]
    assert argv[2].endswith("gateway.py")
    hosts = [argv[i + 1] for i, a in enumerate(argv) if a == "--server.allowedHosts"]
    assert hosts == ["127.0.0.1", "localhost", "::1", "console.example.org", "*.corp.example"]
    opts = dict(zip(argv[3::2], argv[4::2]))
    assert opts["--server.maxUploadSize"] == str(cli.MAX_UPLOAD_MB)
    assert opts["--client.disableDataExport"] == "true" and opts["--server.enableXsrfProtection"] == "true"
    assert opts["--runner.postScriptGC"] == "false"  # as .streamlit/config.toml has it for `streamlit run`
    import streamlit.delta_generator as elements

    # The REPL check Streamlit makes at the first element drawn is answered (cli.serve); should
    # Streamlit rename it, this says the first page after a start pays for it again.
    assert elements._use_warning_has_been_displayed is True and hasattr(elements, "_maybe_print_use_warning")
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False


def test_listening_beyond_loopback_needs_a_sign_in(url, no_server, capsys, monkeypatch):
    assert cli.main(["--db", url, "--address", "0.0.0.0", "--no-prewarm"]) == 2
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0" in err and "no sign-in is configured" in err
    assert no_server == []
    st.cache_resource.clear()
    assert run(["operators", "passwd", "admin", "--password-stdin", "--db", url], monkeypatch, PASSWORD + "\n") == 0
    assert cli.main(["--db", url, "--address", "0.0.0.0", "--no-prewarm"]) == 0
    assert "0.0.0.0" not in [a for i, a in enumerate(no_server[-1]) if no_server[-1][i - 1] == "--server.allowedHosts"]


def test_a_trusted_proxy_header_counts_as_sign_in(url, no_server, monkeypatch):
    assert cli.main(["--db", url, "--address", "10.0.0.5", "--trusted-proxy-header", "X-Forwarded-Email",
                     "--no-prewarm"]) == 0
    argv = no_server[-1]
    assert "10.0.0.5" in [argv[i + 1] for i, a in enumerate(argv) if a == "--server.allowedHosts"]


def test_a_bad_session_length_is_refused(url, no_server, capsys):
    assert cli.main(["--db", url, "--session-hours", "0", "--no-prewarm"]) == 2
    assert "MEMBRANE_SESSION_HOURS must be between" in capsys.readouterr().err


def test_a_store_that_cannot_be_opened_is_said_and_only_loopback_serves(tmp_path, no_server, capsys):
    bad = "postgresql+psycopg://nobody@127.0.0.1:1/none"
    assert cli.main(["--db", bad, "--no-prewarm"]) == 0  # the pages will say it too
    assert "the memory store cannot be opened" in capsys.readouterr().err
    assert cli.main(["--db", bad, "--address", "0.0.0.0", "--no-prewarm"]) == 2
    assert "no sign-in is configured" in capsys.readouterr().err
