"""`load_app("module:function")` and what the factory returns: each mistake is a `ConfigError`
that says what was expected, before anything is stored or sent."""

from __future__ import annotations

import pytest

from runner import App, ConfigError, Engine, MemoryStore, Principal, RunSpec
from runner.engine.app import build_app, load_app
from runner.testing import FakeClock, FunctionModel
from tests.support.paths import ROOT
from tests.support.resume_app import tools

APP_DIR = ROOT / "tests" / "support"


def test_the_factory_named_is_found_in_the_app_dir() -> None:
    factory = load_app("resume_app:build", app_dir=APP_DIR)
    assert callable(factory) and factory.__name__ == "build"


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("resume_app", "expected module:function"),
        (":build", "expected module:function"),
        ("no_such_module_here:build", "cannot import no_such_module_here"),
        ("resume_app:nothing_by_this_name", "resume_app has no nothing_by_this_name"),
        ("resume_app.Path:x", "cannot import"),
        ("resume_app:tools.contract_set.__doc__", "is not callable"),
    ],
)
def test_a_target_that_names_no_factory_is_refused(target: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_app(target, app_dir=APP_DIR)


def _parts() -> tuple[Engine, FunctionModel, RunSpec]:
    engine = Engine(
        contracts=tools.contract_set(), toolbox=tools, store=MemoryStore(), clock=FakeClock()
    )
    spec = RunSpec(
        task="Book R-1.",
        tenant="t",
        principal=Principal(id="p", scopes=frozenset({"rooms.book"})),
        tools=("book_room",),
    )
    return engine, FunctionModel(lambda transcript, offered: "done"), spec


def test_a_plain_tuple_is_an_app_and_a_new_run_needs_its_spec() -> None:
    engine, model, spec = _parts()
    app = build_app(lambda header: (engine, model, spec), None)
    assert app == App(engine, model, spec)
    with pytest.raises(ConfigError, match="no spec for a new run"):
        build_app(lambda header: (engine, model), None)


@pytest.mark.parametrize(
    ("made", "says"),
    [
        ("engine", "returned str; expected App"),
        (("engine", "model"), "str as its engine, not an Engine"),
        ((1, 2, 3, 4), "returned tuple; expected App"),
    ],
)
def test_what_is_not_an_engine_and_a_model_is_refused(made: object, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        build_app(lambda header: made, None)  # type: ignore[arg-type,return-value]


def test_a_model_without_generate_or_a_spec_of_another_type_is_refused() -> None:
    engine, model, spec = _parts()
    with pytest.raises(ConfigError, match="object as its model: it has no generate"):
        build_app(lambda header: (engine, object(), spec), None)
    with pytest.raises(ConfigError, match="dict as its spec, not a RunSpec"):
        build_app(lambda header: (engine, model, {"task": "x"}), None)
