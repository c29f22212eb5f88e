"""The module paths of the flat layout still import, for one release: each is its new module,
under a `DeprecationWarning` that names where it lives now."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from runner._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_new_module_with_a_warning_naming_it(old: str) -> None:
    code = (
        "import importlib, warnings\n"
        "warnings.simplefilter('error')\n"
        "import runner\n"
        f"try:\n    importlib.import_module({old!r})\n"
        "except DeprecationWarning as warning:\n    print(warning)\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first = min((path for path in MOVED if old.startswith(path)), key=len)  # a package first
    assert ran.stdout.strip() == f"{first} moved to {MOVED[first]}: import it from there"
    with pytest.warns(DeprecationWarning):
        sys.modules.pop(old, None)
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert module.__name__ == MOVED[old]  # the module keeps its own name


def test_a_name_from_an_old_path_is_the_same_object() -> None:
    from runner.tools.contracts import ContractSet  # noqa: PLC0415

    with pytest.warns(DeprecationWarning, match="runner.contracts moved to runner.tools.contracts"):
        sys.modules.pop("runner.contracts", None)
        old = importlib.import_module("runner.contracts")
    assert old.ContractSet is ContractSet


def test_a_path_that_never_was_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("runner.no_such_module")
