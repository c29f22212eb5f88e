"""The completion gate's data: what evidence a complete answer needs, and what is still missing.

A task may declare required evidence (`RunSpec.required_evidence`): each requirement names a tool
whose successful, validated result must be in the run's evidence, and optionally an array field of
that result whose items must match (`where`: field -> accepted values). A value not listed never
counts: in the travel world `assistance_status: unknown` is not confirmed evidence. Only tool
results count; the model's own text never does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EvidenceRequirement(BaseModel):
    """One piece of evidence a complete answer needs."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str = Field(min_length=1)
    """How the model (and the record) is told it is missing, e.g. `a validated flight option`."""
    tool: str = Field(min_length=1)
    items: str | None = None
    """The result's array field whose items are checked (None: the result itself)."""
    where: dict[str, tuple[Any, ...]] = Field(default_factory=dict)
    """Field -> the values that count; every field must match (on one item)."""

    def met_by(self, result: Mapping[str, Any]) -> bool:
        candidates: Sequence[Any] = [result]
        if self.items is not None:
            found = result.get(self.items)
            candidates = found if isinstance(found, list) else []
        return any(
            isinstance(item, Mapping)
            and all(item.get(name) in accepted for name, accepted in self.where.items())
            for item in candidates
        )


def missing_evidence(
    requirements: Sequence[EvidenceRequirement], evidence: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The names of the requirements no successful result in `evidence` meets, in order."""
    return [
        requirement.name
        for requirement in requirements
        if not any(
            item.get("tool") == requirement.tool
            and item.get("result_class") == "ok"
            and isinstance(item.get("result"), Mapping)
            and requirement.met_by(item["result"])
            for item in evidence
        )
    ]
