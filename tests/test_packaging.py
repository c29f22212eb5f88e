"""A plain (non-editable) install: the wheel ships the travel contracts, the fixtures and
`py.typed`, and its `runner` works from any directory (issue 10).

The project (a copy: the build writes `build/` and `*.egg-info` where it builds) is installed with
`pip install --no-deps --no-build-isolation` into a fresh venv that borrows this venv's
site-packages for the dependencies through a `.pth` line, so it stays offline and takes seconds.
Directories a `.pth` line adds get no `.pth` processing of their own, so this venv's editable
`runner` is not seen there: the tests check the installed copy is the one that runs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from runner.travel import load_travel_contracts

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain-install")
    source = root / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for folder in ("runner", "contracts", "fixtures"):
        shutil.copytree(ROOT / folder, source / folder, ignore=skip)
    for file in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / file, source / file)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    (site,) = (venv / "lib").glob("python*/site-packages")
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_borrowed_dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(borrowed)))
    python = venv / "bin" / "python"
    done = _run(
        sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
        "--no-build-isolation", "--ignore-installed", source,
        cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return venv


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """Neither the checkout nor the venv: where a user would stand."""
    folder = tmp_path / "somewhere" / "else"
    folder.mkdir(parents=True)
    return folder


def test_the_installed_copy_runs_and_ships_py_typed(venv: Path, elsewhere: Path) -> None:
    done = _run(
        venv / "bin" / "python", "-c", "import runner, sys; print(runner.__file__)", cwd=elsewhere
    )
    package = Path(done.stdout.strip()).parent
    assert package.is_relative_to(venv), done.stdout + done.stderr
    assert (package / "py.typed").is_file()


def test_contracts_check_finds_the_bundled_contracts(venv: Path, elsewhere: Path) -> None:
    """The contract files and the travel world's contracts made in code (the catalogue, the
    child-run tool), all from the installed copy."""
    done = _run(venv / "bin" / "runner", "contracts", "check", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    files = {path.stem for path in (ROOT / "contracts").glob("*.json")}
    names = sorted(load_travel_contracts())
    assert files < set(names)
    assert done.stdout.strip() == f"ok: {len(names)} contracts compiled ({', '.join(names)})"


def test_a_bundled_fixture_runs_from_anywhere(venv: Path, elsewhere: Path) -> None:
    found = _run(venv / "bin" / "runner", "fixtures", "path", cwd=elsewhere)
    assert found.returncode == 0, found.stderr
    fixtures = Path(found.stdout.strip())
    assert fixtures.is_relative_to(venv)
    for folder in ("", "approval", "completion", "features", "injection"):
        shipped = sorted(path.name for path in (fixtures / folder).iterdir() if path.is_file())
        kept = sorted(
            path.name for path in (ROOT / "fixtures" / folder).iterdir() if path.is_file()
        )
        assert shipped == kept, folder
    done = _run(
        venv / "bin" / "runner", "run", fixtures / "hold_timeout_after_commit.yaml",
        "--db", "runs.sqlite",
        cwd=elsewhere,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 runs met expectations, 0 did not" in done.stdout
    assert (elsewhere / "runs.sqlite").is_file()


def test_the_package_list_names_every_package() -> None:
    """`pyproject.toml` lists packages (two of them map data folders, and the fixtures'
    subfolders are named too, so setuptools does not warn they look left out): none may be."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "runner").rglob("__init__.py")
    }
    fixture_folders = {
        f"runner.travel.bundled_fixtures.{folder.name}"
        for folder in (ROOT / "fixtures").iterdir()
        if folder.is_dir() and not folder.name.startswith((".", "__"))
    }
    data = {"runner.travel.bundled_contracts", "runner.travel.bundled_fixtures", *fixture_folders}
    assert len(fixture_folders) == 4  # approval, completion, features, injection: each named
    assert listed == found | data


def test_the_bundled_features_folder_runs_from_anywhere(venv: Path, elsewhere: Path) -> None:
    """Tool retrieval, a child run and a money budget, from the installed fixtures alone."""
    found = _run(venv / "bin" / "runner", "fixtures", "path", cwd=elsewhere)
    features = Path(found.stdout.strip()) / "features"
    done = _run(venv / "bin" / "runner", "run", features, "--db", "runs.sqlite", cwd=elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 fixtures x 1: 3 runs met expectations, 0 did not" in done.stdout
    assert "child research_trip:child" in done.stdout and "  offered " in done.stdout
