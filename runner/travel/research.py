"""The travel world's research sub-agent: `research_trip`, a child-run tool
(`runner.tools.children`). A call runs a run of its own, with its own task (made from the call's
`question`), tools and model, on a budget carved from what the calling run has left; a fixture
scripts that run in its `children:` (`runner.harness.fixtures.ChildScript`).
"""

from __future__ import annotations

import functools
from typing import Final

from ..tools.children import child_contracts
from ..tools.contracts import CompiledContract

RESEARCH_TOOL: Final = "research_trip"
"""The child-run tool's name (its runtime lookup is `research_trip_lookup`)."""


@functools.cache
def research_contracts() -> tuple[CompiledContract, ...]:
    """The child-run tool's contract and its lookup's, compiled once per process."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "required": ["question"],
        "properties": {"question": {"type": "string", "minLength": 3, "maxLength": 500}},
    }
    return tuple(
        child_contracts(
            RESEARCH_TOOL,
            "Research one part of the trip with a sub-agent that has its own tools; it answers "
            "the question or says why it could not.",
            schema,
            scope="travel.read",
            timeout_s=120,
        )
    )
