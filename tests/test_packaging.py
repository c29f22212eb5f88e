"""A plain (non-editable) `pip install .` works from any directory: the default contracts travel
with the package. Built as a real wheel, installed into a fresh virtual environment, run from a
folder far from the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _pip(*args: str, cwd: Path = REPO) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=300,
    )


def test_an_installed_wheel_finds_its_default_contracts(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: building in the checkout leaves build/ behind
    for part in ("runner", "contracts"):
        shutil.copytree(REPO / part, source / part, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    _pip("wheel", "--no-deps", "-w", str(tmp_path / "dist"), str(source))
    (wheel,) = (tmp_path / "dist").glob("runner-*.whl")
    env_dir = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120
    )
    python = env_dir / "bin" / "python"
    _pip("--python", str(python), "install", "--no-deps", str(wheel))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The dependencies come from this interpreter's site-packages (a PYTHONPATH entry: its .pth
    # files, the editable checkout among them, are not read), the runner from the wheel.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_path("purelib")}
    done = subprocess.run(
        [str(env_dir / "bin" / "runner"), "contracts", "check"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "5 contracts compiled" in done.stdout
    where = subprocess.run(
        [str(python), "-c", "import runner; print(runner.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(env_dir) in where.stdout  # the wheel's copy ran, not the checkout
