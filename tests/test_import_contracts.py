"""The house's import contracts (pyproject.toml [tool.importlinter]), checked with import-linter:
the console enters the engine only through ``membrane_engine`` and ``membrane_engine.errors``
(SPEC 10, "One door"); the engine has no UI; its layers point one way; only storage speaks SQL;
no import cycle at any depth. The lists must name every engine package, so a new one is placed
on purpose; and no module reaches for another's private names."""

from __future__ import annotations

import ast
import re
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
    run = subprocess.run([sys.executable, "-c", lint, str(ROOT / "pyproject.toml"), "--no-cache"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert f"Contracts: {len(_contracts())} kept, 0 broken." in run.stdout


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


def _engine_parts() -> set[str]:
    """The engine's top-level modules and packages, but its __init__."""
    engine = ROOT / "membrane_engine"
    parts = {f"membrane_engine.{p.stem}" for p in engine.glob("*.py") if p.stem != "__init__"}
    return parts | {f"membrane_engine.{p.name}" for p in engine.iterdir() if (p / "__init__.py").exists()}


def _contract(kind: str) -> dict:
    return next(c for c in _contracts() if c["type"] == kind)


def test_every_engine_part_has_a_layer() -> None:
    layered = {name.strip() for layer in _contract("layers")["layers"] for name in re.split(r"[:|]", layer)}
    # sample_data is the bundled store's files, not code.
    assert _engine_parts() - {"membrane_engine.sample_data"} == layered


def test_only_storage_may_speak_sql() -> None:
    sql = next(c for c in _contracts() if c["type"] == "forbidden" and "sqlalchemy" in c["forbidden_modules"])
    assert set(sql["source_modules"]) == _engine_parts() - {"membrane_engine.storage", "membrane_engine.sample_data"}
    assert {"sqlalchemy", "psycopg"} <= set(sql["forbidden_modules"])


def test_the_engine_is_checked_for_cycles_at_every_depth() -> None:
    acyclic = _contract("acyclic_siblings")
    assert acyclic["ancestors"] == ["membrane_engine"] and acyclic.get("depth", 10) >= 3
    assert not acyclic.get("ignore_imports") and not any(c.get("ignore_imports") for c in _contracts())


def test_no_module_imports_another_modules_private_names() -> None:
    found = []
    for path in sorted((ROOT / "membrane_engine").rglob("*.py")) + sorted((ROOT / "console").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("membrane_engine", "console")):
                found += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []
