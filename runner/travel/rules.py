"""Semantic rules for the fixtures' travel world: business rules the JSON Schemas cannot say.

Each model is validated with the run's context (`{"task": TaskConstraints}`, from the fixture
format), so rules such as "dates inside the task's authorized flexibility" see the task and never
the model's word for it.
"""

from __future__ import annotations

from datetime import date
from typing import Final, Self

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator

from ..harness.fixtures import TaskConstraints

KNOWN_AIRPORTS: Final[frozenset[str]] = frozenset(
    {"SFO", "LAX", "SEA", "JFK", "ORD", "NRT", "HND", "KIX", "ITM", "FUK", "CTS", "OKA", "NGO"}
)


def _check_window(first: date, last: date, info: ValidationInfo, what: str) -> None:
    if first > last:
        raise ValueError(f"{what} start {first} is after its end {last}")
    task = (info.context or {}).get("task")
    if isinstance(task, dict):  # the context as a replay rebuilds it from a run header
        task = TaskConstraints.model_validate(task)
    if not isinstance(task, TaskConstraints):
        return
    if task.earliest is not None and first < task.earliest:
        raise ValueError(f"{what} start {first} is before the authorized window ({task.earliest})")
    if task.latest is not None and last > task.latest:
        raise ValueError(f"{what} end {last} is after the authorized window ({task.latest})")


class FlightSearchRules(BaseModel):
    model_config = ConfigDict(extra="ignore")

    origin: str
    destination: str
    date_start: date
    date_end: date

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> Self:
        for code in (self.origin, self.destination):
            if code not in KNOWN_AIRPORTS:
                raise ValueError(f"unknown airport code {code}")
        if self.origin == self.destination:
            raise ValueError("origin and destination are the same airport")
        _check_window(self.date_start, self.date_end, info, "date range")
        return self


class StayRules(BaseModel):
    """Hotel searches and holds: a stay of at least one night inside the window."""

    model_config = ConfigDict(extra="ignore")

    check_in: date
    check_out: date

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> Self:
        if self.check_out <= self.check_in:
            raise ValueError(f"check_out {self.check_out} must be after check_in {self.check_in}")
        _check_window(self.check_in, self.check_out, info, "stay")
        return self


class RailRules(BaseModel):
    model_config = ConfigDict(extra="ignore")

    from_station: str
    to_station: str
    travel_date: date

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> Self:
        if self.from_station == self.to_station:
            raise ValueError("from_station and to_station are the same")
        _check_window(self.travel_date, self.travel_date, info, "travel date")
        return self


SEMANTIC_RULES: Final[dict[str, type[BaseModel]]] = {
    "search_flights": FlightSearchRules,
    "search_hotels": StayRules,
    "hold_room": StayRules,
    "check_rail": RailRules,
}
