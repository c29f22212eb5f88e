"""`runner.__all__` is exact (httpx `tests/test_exported_members.py`): every name listed exists,
everything public at the top level is listed, and it is all the core's own."""

import types
import typing

import pytest

import runner
import runner.models
import runner.proof.api
import runner.testing
import runner.tools.declare


def test_all_is_exact() -> None:
    """`__all__` lists exactly the public names the package defines at top level, sorted
    (imported on first use, so `dir`, not what `vars` holds so far)."""
    public = {name for name in dir(runner) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(runner, name)).__name__ == "module"}
    assert set(runner.__all__) == public - modules
    assert runner.__all__ == sorted(runner.__all__, key=lambda n: (not n.isupper(), n))
    assert len(set(runner.__all__)) == len(runner.__all__)


def test_every_listed_name_exists_and_star_import_gives_exactly_them() -> None:
    missing = [name for name in runner.__all__ if not hasattr(runner, name)]
    assert not missing
    namespace: dict[str, object] = {}
    exec("from runner import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(runner.__all__)


def test_exports_are_the_cores_own() -> None:
    """Nothing re-exported from a dependency, and nothing of the travel world (a demo domain)."""
    for name in runner.__all__:
        module = getattr(getattr(runner, name), "__module__", "runner")
        assert module.split(".")[0] == "runner", f"{name} comes from {module}"
        assert not module.startswith("runner.travel"), f"{name} comes from the travel world"


@pytest.mark.parametrize(
    "module",
    [runner.proof.api, runner.tools.declare, runner.testing, runner.models],
)
def test_the_documented_modules_list_their_public_names(module: types.ModuleType) -> None:
    """`runner.api` had no `__all__`: a star import dragged in `asyncio`, `Literal`, ..., and a
    user's `mypy --strict` refused `from runner.api import UnreadableRun` (what `list_runs`
    returns beside `RunStatus`, and `Replay`, what `replay_run` does): not explicitly exported."""
    listed = module.__all__
    assert all(hasattr(module, name) for name in listed)
    namespace: dict[str, object] = {}
    exec(f"from {module.__name__} import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(listed)
    for name in listed:
        assert type(getattr(module, name)).__name__ != "module", name


def test_what_the_api_functions_take_and_return_is_importable_from_runner_api() -> None:
    hints = {
        **typing.get_type_hints(runner.proof.api.list_runs),
        **typing.get_type_hints(runner.proof.api.replay_run),
        **typing.get_type_hints(runner.proof.api.grade_run),
    }
    returned = {runner.proof.api.RunStatus, *typing.get_args(hints["return"])}
    wanted = {t.__name__ for t in returned if isinstance(t, type)} | {"Expect", "Replay", "Trial"}
    assert wanted <= set(runner.proof.api.__all__)
