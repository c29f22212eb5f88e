"""The service's live runs: a world fixture to play in, two providers at the loopback model server
whose keys come from the environment, a budget ceiling, and a request body for one live run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support.service_harness import A, Service

KEYS = {"openai": "sk-openai-SECRET-0f3c9a7e5b1d", "anthropic": "sk-ant-SECRET-77e1c0b9d4a2"}
"""The providers' API keys, in the service's environment only."""


ENV = {"RUNNER_TEST_OPENAI_KEY": KEYS["openai"], "RUNNER_TEST_ANTHROPIC_KEY": KEYS["anthropic"]}


WORLD = "live_world"


MODELS = ["fixture-read_only_success", "hotels-again", "live-hold"]


SEARCHES = 10
"""Searches the slow model makes before it answers (each reply takes real time)."""


CEILING = {"max_attempts": 20, "max_model_steps": 20, "max_tokens": 100_000, "max_seconds": 60}


def write_world(folder: Path) -> Path:
    """The world live runs play in: flights, many hotel searches, and holds that need approval."""
    found = {"status": "ok", "source_timestamp": "2027-03-01T09:00:00Z"}
    hotels = {**found, "options": [{"hotel_id": "H-SHIBA", "name": "Shiba Park Hotel",
                                    "accessible_room_status": "reported_available"}]}  # fmt: skip
    flights = {**found, "options": [{"flight_id": "NH7", "assistance_status":
                                     "reported_available", "price_usd": 1180}]}  # fmt: skip
    world = {
        "name": WORLD,
        "description": "The world of the service's live runs.",
        "task": "(given by each request)",
        "tenant": "(given by each key)",
        "principal": {"id": "nobody", "scopes": []},
        "constraints": {"earliest": "2027-03-25", "latest": "2027-04-15"},
        "tools": ["search_flights", "search_hotels", "hold_room", "lookup_hold"],
        "environment": {
            "search_flights": [{"respond": flights}],
            "search_hotels": [{"latency_s": 0.2, "respond": hotels}] * (SEARCHES + 2),
            "hold_room": [{"write": "commit"}],
        },
        "model": [{"final": "never read: a live model plans"}],
        "approval": {"rules": {"tools": ["hold_room"]}},
    }
    path = folder / "live_world.yaml"
    path.write_text(yaml.safe_dump(world), encoding="utf-8")
    return path


def provider(url: str, key_env: str) -> dict[str, Any]:
    return {"base_url": url, "api_key_env": key_env, "models": MODELS}


def live_settings(folder: Path, llm: str) -> dict[str, Any]:
    return {
        "fixtures": [str(write_world(folder))],
        "pace_s": 0.02,
        "live": {
            "world": WORLD,
            "tools": ["search_flights", "search_hotels", "hold_room"],
            "providers": {
                "openai": provider(f"{llm}/v1", "RUNNER_TEST_OPENAI_KEY"),
                "anthropic": provider(llm, "RUNNER_TEST_ANTHROPIC_KEY"),
            },
            "max_budget": CEILING,
        },
    }


def live(model: str = "openai:fixture-read_only_success", **changes: Any) -> dict[str, Any]:
    body = {
        "task": "Find wheelchair-accessible flights SFO to NRT, 2027-04-01..03, and an "
        "accessible Tokyo hotel.",
        "tools": ["search_flights", "search_hotels"],
        "model": model,
        "budget": {"max_attempts": 8, "max_seconds": 30},
    }
    return {**body, **changes}


def submit(service: Service, body: dict[str, Any], key: str = A) -> str:
    with service.client(key) as client:
        response = client.post("/v1/runs", json=body)
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id
