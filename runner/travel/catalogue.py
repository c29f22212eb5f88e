"""A 60-tool catalogue for tool retrieval: 56 tools beside the travel contracts, all of them in
the travel world's contract set (`bundled.load_travel_contracts`).

The extra tools are travel look-alikes (near-duplicate descriptions of flights, hotels and rail)
and tools of unrelated domains (finance, people, operations, support, weather, documents), so a
retriever has to tell `search_flights` from `search_charter_flights` and `flight_status`. They are
demo-world data, built here from one table: each is a read tool with a generic result.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from ..tools.contracts import CompiledContract, Contract, compile_contract

_STRING: Final = {"type": "string", "minLength": 1, "maxLength": 120}
_RESULT: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"enum": ["ok", "error"]}},
}

# name, scope, description, argument names (all strings; the first is required)
_EXTRA: Final[tuple[tuple[str, str, str, tuple[str, ...]], ...]] = (
    # travel look-alikes
    (
        "search_charter_flights",
        "travel.read",
        "Search private charter and jet flights between two "
        "airports for a group; not for scheduled airline flights.",
        ("origin", "destination", "date"),
    ),
    (
        "flight_status",
        "travel.read",
        "Check the live departure and arrival status of a flight by "
        "its flight number; not for finding flights.",
        ("flight_number", "date"),
    ),
    (
        "search_award_flights",
        "travel.read",
        "Search flights bookable with airline miles and loyalty points between two airports.",
        ("origin", "destination", "program"),
    ),
    (
        "flight_seat_map",
        "travel.read",
        "Show the seat map of a flight: which seats are free, aisle or window.",
        ("flight_id",),
    ),
    (
        "baggage_allowance",
        "travel.read",
        "Look up the checked and cabin baggage allowance of an airline fare.",
        ("airline", "fare_class"),
    ),
    (
        "airport_lounges",
        "travel.read",
        "List the lounges in an airport terminal and who may enter them.",
        ("airport",),
    ),
    (
        "airport_transfer",
        "travel.read",
        "Search shuttle and taxi transfers between an airport and a hotel.",
        ("airport", "hotel"),
    ),
    (
        "search_hostels",
        "travel.read",
        "Search hostels and dormitory beds in a city for a stay; budget lodging, not hotels.",
        ("city", "check_in", "check_out"),
    ),
    (
        "search_vacation_rentals",
        "travel.read",
        "Search apartments and vacation rentals in a city "
        "for a stay, with the host-reported amenities.",
        ("city", "check_in", "check_out"),
    ),
    ("hotel_reviews", "travel.read", "Read guest reviews and ratings of one hotel.", ("hotel_id",)),
    (
        "hotel_amenities",
        "travel.read",
        "List the amenities of one hotel: pool, gym, parking, breakfast.",
        ("hotel_id",),
    ),
    (
        "cancel_hotel_policy",
        "travel.read",
        "Read the cancellation policy of a hotel rate.",
        ("hotel_id", "rate_code"),
    ),
    (
        "search_bus_routes",
        "travel.read",
        "Search long-distance bus and coach routes between two cities on a date.",
        ("from_city", "to_city", "travel_date"),
    ),
    (
        "search_cruises",
        "travel.read",
        "Search cruise voyages departing from a port in a month, with cabin types.",
        ("port", "month"),
    ),
    (
        "search_ferries",
        "travel.read",
        "Search ferry crossings between two ports on a date.",
        ("from_port", "to_port", "travel_date"),
    ),
    (
        "search_rental_cars",
        "travel.read",
        "Search rental cars at a pick-up location for a date range, with the vehicle class.",
        ("location", "pickup_date", "return_date"),
    ),
    (
        "rail_pass_prices",
        "travel.read",
        "Show the prices of national rail passes by duration and class; not for checking routes.",
        ("country", "days"),
    ),
    (
        "rail_timetable",
        "travel.read",
        "Show the departure timetable of a railway station for a day.",
        ("station", "date"),
    ),
    ("metro_map", "travel.read", "Show the metro and subway lines of a city.", ("city",)),
    (
        "visa_requirements",
        "travel.read",
        "Check the visa and entry requirements for a passport holder visiting a country.",
        ("passport_country", "destination_country"),
    ),
    (
        "travel_insurance_quote",
        "travel.read",
        "Quote travel insurance for a trip and its travellers.",
        ("destination", "start_date", "end_date"),
    ),
    (
        "tourist_attractions",
        "travel.read",
        "List tourist attractions and sights in a city, with opening hours.",
        ("city",),
    ),
    (
        "restaurant_search",
        "travel.read",
        "Search restaurants in a city by cuisine, with wheelchair access where reported.",
        ("city", "cuisine"),
    ),
    (
        "event_tickets",
        "travel.read",
        "Search concert, theatre and sports event tickets in a city on a date.",
        ("city", "date"),
    ),
    (
        "cherry_blossom_forecast",
        "travel.read",
        "Forecast the cherry blossom bloom dates for a city in Japan.",
        ("city",),
    ),
    (
        "travel_advisories",
        "travel.read",
        "Read government travel advisories and safety warnings for a country.",
        ("country",),
    ),
    # weather and money
    (
        "weather_forecast",
        "world.read",
        "Forecast the weather in a city for a date: temperature, rain and wind.",
        ("city", "date"),
    ),
    (
        "historical_weather",
        "world.read",
        "Look up past weather observations in a city for a date.",
        ("city", "date"),
    ),
    (
        "convert_currency",
        "finance.read",
        "Convert an amount of money from one currency to another at today's exchange rate.",
        ("amount", "from_currency", "to_currency"),
    ),
    (
        "exchange_rate_history",
        "finance.read",
        "Show the history of an exchange rate between two currencies over a period.",
        ("from_currency", "to_currency", "start_date"),
    ),
    (
        "stock_quote",
        "finance.read",
        "Get the latest price quote of a stock by its ticker symbol.",
        ("ticker",),
    ),
    (
        "company_financials",
        "finance.read",
        "Read the income statement and balance sheet of a listed company.",
        ("ticker", "year"),
    ),
    (
        "invoice_lookup",
        "finance.read",
        "Look up a customer invoice by its number: amount, due date, status.",
        ("invoice_number",),
    ),
    (
        "expense_report_status",
        "finance.read",
        "Check the approval status of an employee expense report.",
        ("report_id",),
    ),
    (
        "budget_variance",
        "finance.read",
        "Compare a department's spending with its budget for a quarter.",
        ("department", "quarter"),
    ),
    (
        "tax_rate_lookup",
        "finance.read",
        "Look up the sales tax or VAT rate of a country or region.",
        ("region",),
    ),
    # people
    (
        "employee_directory",
        "people.read",
        "Find an employee in the company directory by name: team, office, manager.",
        ("name",),
    ),
    (
        "org_chart",
        "people.read",
        "Show the reporting line and organisation chart of a team.",
        ("team",),
    ),
    (
        "pto_balance",
        "people.read",
        "Check an employee's remaining paid time off and holiday balance.",
        ("employee_id",),
    ),
    (
        "payroll_summary",
        "people.read",
        "Summarise an employee's payslips for a pay period.",
        ("employee_id", "period"),
    ),
    (
        "job_openings",
        "people.read",
        "List the open job positions and vacancies of a department.",
        ("department",),
    ),
    ("training_courses", "people.read", "Search internal training courses by topic.", ("topic",)),
    # operations
    (
        "server_status",
        "ops.read",
        "Check whether a server or host is up, with its CPU and memory load.",
        ("hostname",),
    ),
    (
        "deployment_history",
        "ops.read",
        "List the recent deployments of a service and their versions.",
        ("service",),
    ),
    (
        "error_log_search",
        "ops.read",
        "Search application error logs for a message over a time window.",
        ("service", "query"),
    ),
    (
        "incident_lookup",
        "ops.read",
        "Look up an operations incident by id: severity, status, owner.",
        ("incident_id",),
    ),
    ("on_call_schedule", "ops.read", "Show who is on call for a team this week.", ("team",)),
    ("dns_lookup", "ops.read", "Resolve a domain name to its DNS records.", ("domain",)),
    (
        "certificate_expiry",
        "ops.read",
        "Check when a website's TLS certificate expires.",
        ("domain",),
    ),
    # customers and documents
    (
        "crm_contact_lookup",
        "crm.read",
        "Find a customer contact in the CRM by email or name.",
        ("query",),
    ),
    (
        "support_ticket_lookup",
        "crm.read",
        "Look up a customer support ticket by its number.",
        ("ticket_number",),
    ),
    (
        "order_status",
        "crm.read",
        "Check the shipping status of a customer order by its order number.",
        ("order_number",),
    ),
    (
        "product_catalog_search",
        "crm.read",
        "Search the product catalog by keyword, with prices and stock.",
        ("keyword",),
    ),
    (
        "document_search",
        "docs.read",
        "Search the company wiki and documents by keyword.",
        ("query",),
    ),
    (
        "translate_text",
        "docs.read",
        "Translate a text from one language to another.",
        ("text", "target_language"),
    ),
    (
        "meeting_room_booking_status",
        "docs.read",
        "Show which meeting rooms in an office are free at a time.",
        ("office", "time"),
    ),
)

SCOPES: Final = ("travel.read", "world.read", "finance.read", "people.read", "ops.read",
                 "crm.read", "docs.read")  # fmt: skip
"""Every scope the catalogue's read tools need (a principal with all of them sees 60 tools)."""


def _contract(name: str, scope: str, description: str, arguments: tuple[str, ...]) -> Contract:
    return Contract(
        name=name,
        description=description,
        input_schema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": False,
            "required": [arguments[0]],
            "properties": {argument: _STRING for argument in arguments},
        },
        result_schema=_RESULT,
        side_effect="read",
        scope=scope,
        timeout_s=5,
    )


@functools.cache
def catalogue_contracts() -> tuple[CompiledContract, ...]:
    """The 56 extra tools, compiled once per process (the travel world's contracts hold them)."""
    return tuple(compile_contract(_contract(*row), f"catalogue:{row[0]}") for row in _EXTRA)
