"""The package as pip builds it: every package of the tree is listed in pyproject.toml, and a
non-editable install carries the sample store (and the sample captures) and starts on it."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_in_the_tree_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for top in ("membrane_engine", "console"):
        for init in (ROOT / top).rglob("*.py"):
            if "__pycache__" not in init.parts:
                found.add(".".join(init.parent.relative_to(ROOT).parts))
    assert found - listed == set(), "packages missing from pyproject.toml's list"
    assert "membrane_engine.sample_data" in listed


def _site_dirs() -> list[str]:
    """The site-packages folders of the interpreter running the tests: its own venv's too when it
    runs in one (``--system-site-packages`` would give only the base interpreter's, which need
    not have the dependencies)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if Path(d).is_dir()]


def test_a_non_editable_install_opens_the_sample_store(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # The dependencies come from this interpreter's folders, appended after the venv's own; a
    # plain path line does not run those folders' .pth files, so this tree's editable install
    # stays out and the copy pip installs below is the one imported.
    (own,) = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                            check=True, capture_output=True, text=True).stdout.split()
    (Path(own) / "test-dependencies.pth").write_text("\n".join(_site_dirs()) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(ROOT)],
                   check=True, cwd=tmp_path)
    code = ("from membrane_engine import Membrane; import membrane_engine; from pathlib import Path;"
            "m = Membrane.open(); print(membrane_engine.__file__); print(m.count());"
            "print((Path(membrane_engine.__file__).parent / 'sample_data' / 'captures.json').is_file())")
    env = {**os.environ, "MEMBRANE_HOME": str(tmp_path / "home"), "PYTHONPATH": ""}
    env.pop("MEMBRANE_DB_URL", None)
    out = subprocess.run([str(py), "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path, env=env).stdout.split()
    assert str(venv) in out[0]  # the installed copy, not this source tree
    assert int(out[1]) > 0      # started on the sample store
    assert out[2] == "True"     # sample_data/captures.json ships beside it (package-data *.json)
