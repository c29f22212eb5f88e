"""The config's `live` section, checked when the service starts; what a live run may not ask
for; where the providers' keys come from (the environment, by the name the config gives)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.base.errors import ConfigError, NotDrivableHere
from runner.service import RunService, ServiceConfig
from runner.service.errors import ApiError
from runner.service.live import LiveRun, budget
from runner.store import MemoryStore
from runner.tools.contracts import ContractSet
from runner.travel import TRAVEL
from tests.support.live_service import CEILING, ENV, WORLD, live, live_settings
from tests.support.service_harness import KEYS

pytest.importorskip("fastapi")


def _config(folder: Path, **live_changes: Any) -> Path:
    settings = live_settings(folder, "http://127.0.0.1:9")
    settings["live"] = {**settings["live"], **live_changes}
    config = {"api_keys": [{"key": key, **value} for key, value in KEYS.items()], **settings}
    path = folder / "service.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _service(folder: Path, contracts: ContractSet, **live_changes: Any) -> RunService:
    config = ServiceConfig.load(_config(folder, **live_changes))
    return RunService(config, folder / "runs.sqlite", contracts, None, world=TRAVEL)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"world": "no_such_world"}, "live.world: no fixture named 'no_such_world'"),
        ({"tools": ["search_hotels", "book_flight"]}, "not in the world fixture"),
    ],
)
def test_a_live_section_that_cannot_work_stops_the_service_at_start(
    tmp_path: Path, contracts: ContractSet, changes: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        _service(tmp_path, contracts, **changes)


@pytest.mark.parametrize(
    "provider",
    [
        {"api_key": "sk-in-the-config", "api_key_env": "X", "models": ["m"]},  # never in clear
        {"api_key_env": "NOT A NAME", "models": ["m"]},
        {"api_key_env": "X", "models": []},
    ],
)
def test_a_provider_gives_the_name_of_its_keys_variable_never_the_key(
    tmp_path: Path, provider: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError, match=r"live\.providers\.openai") as refused:
        ServiceConfig.load(_config(tmp_path, providers={"openai": provider}))
    assert "sk-in-the-config" not in str(refused.value)


def test_a_provider_without_its_key_in_the_environment_is_refused_409(
    tmp_path: Path, contracts: ContractSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RUNNER_TEST_ANTHROPIC_KEY", ENV["RUNNER_TEST_ANTHROPIC_KEY"])
    service = _service(tmp_path, contracts)
    key = service.config.key_for("key-a-all-roles")
    assert key is not None
    with pytest.raises(ApiError) as refused:
        service.live.fixture(key, LiveRun.model_validate(live("openai:hotels-again")))
    assert (refused.value.status, refused.value.code) == (409, "no_model_key")
    assert "RUNNER_TEST_OPENAI_KEY" in refused.value.message
    made = service.live.fixture(key, LiveRun.model_validate(live("anthropic:hotels-again")))
    assert (made.tenant, made.principal.id, made.name) == ("optiverse", "agent-7", "live")
    assert made.expect is None and set(made.environment) <= set(made.tools)
    service.close()


def test_a_live_run_is_the_world_with_the_requests_task_tools_and_budget(
    tmp_path: Path, contracts: ContractSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    service = _service(tmp_path, contracts)
    key = service.config.key_for("key-b-all-roles")
    assert key is not None
    request = live(task="Only hotels.", tools=["search_hotels"], budget={"max_attempts": 3})
    made = service.live.fixture(key, LiveRun.model_validate(request))
    assert (made.task, made.tools, made.tenant) == ("Only hotels.", ["search_hotels"], "othercorp")
    assert list(made.environment) == ["search_hotels"]  # the world's outcomes for it alone
    assert made.budget.max_attempts == 3
    assert made.budget.max_seconds == CEILING["max_seconds"]  # left out: the ceiling's
    assert made.approval is not None and made.approval.rules.tools == ("hold_room",)  # the world's
    service.close()


def test_a_budget_is_bounded_field_by_field_by_the_ceiling() -> None:
    from runner.core.budget import Limits  # noqa: PLC0415

    ceiling = Limits(max_attempts=5, max_cost_usd=0.5)
    assert budget(ceiling, {"max_cost_usd": 0.5}).max_cost_usd == 0.5
    for asked in ({"max_attempts": 6}, {"max_cost_usd": 0.51}):
        with pytest.raises(ApiError, match="over this service's"):
            budget(ceiling, asked)
    assert budget(Limits(), {"max_cost_usd": 9.0}).max_cost_usd == 9.0  # no ceiling on cost


def test_a_worker_without_the_config_refuses_a_queued_live_run(
    tmp_path: Path, contracts: ContractSet
) -> None:
    from runner.cli._distributed import fixture_player  # noqa: PLC0415

    _config(tmp_path)  # writes the world fixture
    document = yaml.safe_load((tmp_path / f"{WORLD}.yaml").read_text())
    play = fixture_player(contracts, tmp_path / "world")
    with pytest.raises(NotDrivableHere, match=r"run-1 .*start the worker with --config"):
        play(MemoryStore(), "run-1", {**document, "live_model": "openai:hotels-again"}, 0, print)


def test_the_sample_configs_live_section_starts_without_keys(
    tmp_path: Path, contracts: ContractSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.paths import ROOT  # noqa: PLC0415

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = ServiceConfig.load(ROOT / "examples" / "service.yaml")
    service = RunService(config, tmp_path / "runs.sqlite", contracts, None, world=TRAVEL)
    key = config.key_for("change-me-optiverse")
    assert key is not None and service.live.world is not None
    request = LiveRun.model_validate(live("openai:gpt-4o-mini", tools=["search_hotels"]))
    with pytest.raises(ApiError, match=r"\$OPENAI_API_KEY is not set"):
        service.live.fixture(key, request)
    service.close()


def test_a_cost_bound_is_taken_for_a_model_the_price_table_prices_and_refused_for_one_it_does_not(
    tmp_path: Path, contracts: ContractSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    providers = {"openai": {"api_key_env": "RUNNER_TEST_OPENAI_KEY",
                            "models": ["gpt-4o-mini", "no-such-priced-model"]}}  # fmt: skip
    service = _service(tmp_path, contracts, providers=providers)
    key = service.config.key_for("key-a-all-roles")
    assert key is not None
    priced = live("openai:gpt-4o-mini", budget={"max_cost_usd": 0.25})
    assert service.live.fixture(key, LiveRun.model_validate(priced)).budget.max_cost_usd == 0.25
    unpriced = live("openai:no-such-priced-model", budget={"max_cost_usd": 0.25})
    with pytest.raises(ApiError) as refused:
        service.live.fixture(key, LiveRun.model_validate(unpriced))
    assert (refused.value.status, refused.value.code) == (422, "unpriced_model")
    assert "openai:no-such-priced-model" in refused.value.message
    uncapped = live("openai:no-such-priced-model", budget={"max_attempts": 3})
    assert service.live.fixture(key, LiveRun.model_validate(uncapped)).budget.max_cost_usd is None
    service.close()
    capped = _service(tmp_path, contracts, providers=providers,
                      max_budget={**CEILING, "max_cost_usd": 1.0})  # fmt: skip
    with pytest.raises(ApiError, match="this service's max_budget sets it") as ceiling:
        capped.live.fixture(key, LiveRun.model_validate(uncapped))
    assert ceiling.value.code == "unpriced_model"
    capped.close()


def test_a_worker_says_at_start_which_providers_it_cannot_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.cli._distributed import unready_providers  # noqa: PLC0415

    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RUNNER_TEST_ANTHROPIC_KEY", ENV["RUNNER_TEST_ANTHROPIC_KEY"])
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if its SDK were not installed
    live_config = ServiceConfig.load(_config(tmp_path)).live
    assert set(unready_providers(live_config)) == {
        "live runs of openai are handed back: $RUNNER_TEST_OPENAI_KEY is not set",
        "live runs of anthropic are handed back: pip install 'runner-fsm[anthropic]'",
    }
    assert unready_providers(None) == []
