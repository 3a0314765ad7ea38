"""The house's import contracts (pyproject.toml [tool.importlinter]), checked with import-linter:
the console enters the engine only through ``membrane_engine`` and ``membrane_engine.errors``
(SPEC 10, "One door"), and the engine has no UI."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_contracts_hold():
    # import-linter's command, run by this interpreter (its script may not be on PATH in a venv).
    lint = "import sys; from importlinter.cli import lint_imports_command as lint; sys.argv[0] = 'lint-imports'; lint()"
    run = subprocess.run([sys.executable, "-c", lint, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert run.stdout.count(" KEPT") == len(_contracts()) and "BROKEN" not in run.stdout


def test_the_console_contract_names_every_engine_module_but_errors():
    engine = ROOT / "membrane_engine"
    modules = {f"membrane_engine.{p.stem}" for p in engine.glob("*.py") if p.stem not in ("__init__", "errors")}
    modules |= {f"membrane_engine.{p.name}" for p in engine.iterdir() if (p / "__init__.py").exists()}
    console = next(c for c in _contracts() if c["source_modules"] == ["console"])
    assert set(console["forbidden_modules"]) == modules, "a new engine module must be listed in pyproject.toml"
    assert console.get("allow_indirect_imports") is True  # console -> membrane_engine -> its modules is the point


def test_the_engine_contract_forbids_streamlit():
    engine = next(c for c in _contracts() if c["source_modules"] == ["membrane_engine"])
    assert "streamlit" in engine["forbidden_modules"]
