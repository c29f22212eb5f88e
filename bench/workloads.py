"""What the benchmarks run: a no-op tool, a scripted model of N steps, and specs to match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.core.budget import Limits
from runner.models.scripted import ScriptedModel, ScriptedTurn
from runner.record.spec import RunSpec
from runner.tools.contracts import ContractSet, load_contracts
from runner.tools.invocation import Principal, ToolInvocation, ToolResponse
from runner.travel.rules import FlightSearchRules

CONTRACTS_DIR = Path(__file__).resolve().parent / "contracts"
TOOL = "noop_lookup"

RESULT: dict[str, Any] = {
    "status": "ok",
    "source_timestamp": "2027-03-01T09:00:00Z",
    "options": [
        {"flight_id": f"NH{i}", "assistance_status": "reported_available",
         "departs_at": "2027-04-01T10:00:00Z", "price_usd": 900 + i}
        for i in range(10)
    ],
}  # fmt: skip


def contracts() -> ContractSet:
    return load_contracts(CONTRACTS_DIR, {TOOL: FlightSearchRules})


def arguments(page: int) -> dict[str, Any]:
    return {
        "origin": "SFO", "destination": "NRT", "date_start": "2027-04-01",
        "date_end": "2027-04-03", "accessibility": "wheelchair", "max_results": 10,
        "page": page, "currency": "USD", "cabin": "economy", "flexible": False,
    }  # fmt: skip


def script(steps: int) -> list[ScriptedTurn]:
    """`steps` tool-call turns (each a different page, so none is a refused repeat), then final."""
    usage = {"input": 100, "output": 10}  # stated, so no estimate work muddies the figures
    turns = [
        ScriptedTurn.model_validate(
            {"tool_calls": [{"name": TOOL, "args": arguments(i), "id": f"c{i}"}], "usage": usage}
        )
        for i in range(steps)
    ]
    turns.append(ScriptedTurn.model_validate({"final": "done", "usage": usage}))
    return turns


def model(steps: int) -> ScriptedModel:
    return ScriptedModel(script(steps))


def spec(steps: int) -> RunSpec:
    return RunSpec(
        task="benchmark",
        tenant="bench",
        principal=Principal(id="bench", scopes=frozenset({"bench.read"})),
        tools=(TOOL,),
        limits=Limits(
            max_attempts=steps + 10,
            max_model_steps=steps + 10,
            max_tokens=10**9,
            max_seconds=10**6,
        ),
        name=f"bench_{steps}",
    )


async def noop(invocation: ToolInvocation) -> ToolResponse:
    return ToolResponse(payload=RESULT)


class NoopToolbox:
    def implementation(self, tool: str) -> Any:
        return noop if tool == TOOL else None
