"""`search_flights` declared in Python, meant to behave exactly as `contracts/search_flights.json`.

Imported by `tests/tools/test_declare.py`, and by `runner contracts export --module
tests.support.declared_tools`.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from runner.tools.declare import DeclaredTools
from runner.tools.invocation import ToolInvocation

Airport = Annotated[str, Field(pattern=r"^[A-Z]{3}$")]


class SearchFlights(BaseModel):
    model_config = ConfigDict(extra="forbid")

    origin: Airport
    destination: Airport
    date_start: date
    date_end: date
    accessibility: Literal["wheelchair", "none"]
    max_results: int = Field(default=5, ge=1, le=10)


class FlightOption(BaseModel):
    model_config = ConfigDict(extra="forbid")

    flight_id: str = Field(min_length=2)
    assistance_status: Literal["unknown", "reported_available", "reported_unavailable"]
    departs_at: datetime | SkipJsonSchema[None] = None
    price_usd: Annotated[float, Field(ge=0)] | SkipJsonSchema[None] = None


class FlightsFound(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["ok"]
    options: list[FlightOption] = Field(max_length=10)
    source_timestamp: datetime


class ToolError(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["error"]
    error_code: Literal["invalid_arguments", "access_denied", "rate_limited", "service_unavailable"]
    retryable: bool
    message: Annotated[str, Field(max_length=500)] | SkipJsonSchema[None] = None
    field: str | SkipJsonSchema[None] = None


tools = DeclaredTools()


@tools.tool(
    arguments=SearchFlights,
    result=FlightsFound | ToolError,
    scope="travel.read",
    timeout_s=10,
    results_field="options",
)
async def search_flights(args: SearchFlights, invocation: ToolInvocation) -> FlightsFound:
    """Search scheduled flights between two airports over a date range, with the carrier-reported
    wheelchair assistance status of each option. Use it to find flight options; do not use it to
    book, and never treat an `unknown` assistance status as confirmed."""
    return FlightsFound(
        status="ok",
        options=[FlightOption(flight_id="NH7", assistance_status="reported_available")],
        source_timestamp=datetime.fromisoformat("2027-03-01T09:00:00+00:00"),
    )
