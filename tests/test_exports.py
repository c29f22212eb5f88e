"""`runner.__all__` is exact (httpx `tests/test_exported_members.py`): every name listed exists,
everything public at the top level is listed, and it is all the core's own."""

import runner


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
