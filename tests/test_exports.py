import runner


def test_all_is_exact() -> None:
    """`__all__` lists exactly the public names the package defines at top level, sorted."""
    public = {name for name in vars(runner) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(runner, name)).__name__ == "module"}
    assert set(runner.__all__) == public - modules
    assert runner.__all__ == sorted(runner.__all__, key=lambda n: (not n.isupper(), n))
