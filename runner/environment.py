"""The simulated world a fixture scripts: each tool's outcomes, consumed in call order."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Mapping, Sequence

from .clock import Clock
from .fixtures import ToolOutcome
from .tools import ToolImplementation, ToolInvocation, ToolResponse


class ScriptExhausted(RuntimeError):
    """The fixture scripted fewer outcomes than the run made calls."""


class ScriptedTool:
    def __init__(self, name: str, outcomes: Sequence[ToolOutcome], clock: Clock) -> None:
        self.name = name
        self._outcomes = deque(outcomes)
        self._clock = clock
        self.invocations: list[ToolInvocation] = []

    async def __call__(self, invocation: ToolInvocation) -> ToolResponse:
        self.invocations.append(invocation)
        if not self._outcomes:
            raise ScriptExhausted(
                f"no scripted outcome left for {self.name} call {len(self.invocations)}"
            )
        outcome = self._outcomes.popleft()
        if outcome.latency_s:
            await self._clock.sleep(outcome.latency_s)
        if outcome.timeout:
            # Outlast the call's timeout; the engine's timeout ends the wait.
            await self._clock.sleep(invocation.timeout_s + 1.0)
            raise TimeoutError(f"{self.name} did not answer")
        if outcome.fail == "connection":
            raise ConnectionResetError(f"{self.name}: connection reset by peer")
        if outcome.fail == "crash":
            raise RuntimeError(f"{self.name} crashed")
        return ToolResponse(payload=copy.deepcopy(outcome.respond), retry_after=outcome.retry_after)


class ScriptedEnvironment:
    """A `ToolBox` whose tools play a fixture's scripted outcomes. Build a fresh one per run."""

    def __init__(
        self, script: Mapping[str, Sequence[ToolOutcome]], tools: Sequence[str], clock: Clock
    ) -> None:
        self.tools = {name: ScriptedTool(name, script.get(name, ()), clock) for name in tools}

    def implementation(self, tool: str) -> ToolImplementation | None:
        return self.tools.get(tool)
