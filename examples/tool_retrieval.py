"""Tool retrieval over a large catalogue: 30 tools are declared, but each model request is offered
only the few most relevant to the task and the latest turn (BM25 over each tool's name,
description and arguments), so the model chooses among few and every request resends a small
manifest. The record names what each request offered; a replay offers exactly the same.

    python examples/tool_retrieval.py   # needs: pip install 'runner-fsm[retrieval]'

The test suite runs it and type-checks it with `mypy --strict`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runner import (
    DeclaredTools,
    Engine,
    FakeClock,
    MemoryStore,
    Principal,
    RunResult,
    RunSpec,
    ToolSpec,
    Transcript,
)
from runner.models.transcript import ToolResultMessage
from runner.proof.api import replay_run_sync
from runner.testing import FunctionModel, Reply, call, latest_results
from runner.tools.retrieval import ToolRetrieval

CATALOGUE = {  # name: what the model reads (a real catalogue: your services' tools)
    "convert_currency": "Convert an amount of money from one currency to another at today's rate.",
    "exchange_rate_history": "Show how an exchange rate between two currencies moved over time.",
    "weather_forecast": "Forecast the weather in a city for a date: temperature, rain, wind.",
    "historical_weather": "Look up past weather observations in a city for a date.",
    "stock_quote": "Get the latest price quote of a stock by its ticker symbol.",
    "invoice_lookup": "Look up a customer invoice by its number: amount, due date, status.",
    "tax_rate_lookup": "Look up the sales tax or VAT rate of a country or region.",
    "employee_directory": "Find an employee in the company directory by name.",
    "pto_balance": "Check an employee's remaining paid time off.",
    "server_status": "Check whether a server is up, with its CPU and memory load.",
    "deployment_history": "List the recent deployments of a service and their versions.",
    "error_log_search": "Search application error logs for a message over a time window.",
    "incident_lookup": "Look up an operations incident by id: severity, status, owner.",
    "dns_lookup": "Resolve a domain name to its DNS records.",
    "certificate_expiry": "Check when a website's TLS certificate expires.",
    "crm_contact_lookup": "Find a customer contact in the CRM by email or name.",
    "support_ticket_lookup": "Look up a customer support ticket by its number.",
    "order_status": "Check the shipping status of a customer order by its number.",
    "product_catalog_search": "Search the product catalog by keyword, with prices and stock.",
    "document_search": "Search the company wiki and documents by keyword.",
    "translate_text": "Translate a text from one language to another.",
    "meeting_room_status": "Show which meeting rooms in an office are free at a time.",
    "search_flights": "Search scheduled flights between two airports on a date.",
    "search_hotels": "Search hotels in a city for a stay.",
    "rail_timetable": "Show the departure timetable of a railway station for a day.",
    "visa_requirements": "Check the visa requirements for a passport holder visiting a country.",
    "restaurant_search": "Search restaurants in a city by cuisine.",
    "tourist_attractions": "List tourist attractions and sights in a city.",
    "event_tickets": "Search concert, theatre and sports tickets in a city on a date.",
    "travel_advisories": "Read government travel advisories for a country.",
}


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str


class Answer(BaseModel):
    status: str = "ok"
    text: str


async def answer(args: Query) -> Answer:
    return Answer(text=f"(an answer about {args.query})")


tools = DeclaredTools()
for name, description in CATALOGUE.items():  # one function answers for every tool here
    declare = tools.tool(
        name=name,
        description=description,
        arguments=Query,
        result=Answer,
        scope="app.read",
        timeout_s=5,
    )
    declare(answer)


def agent(transcript: Transcript, offered: tuple[ToolSpec, ...]) -> Reply:
    """Convert the money, then look up the weather, then answer."""
    done = sum(isinstance(message, ToolResultMessage) for message in transcript.messages)
    if done == 0:
        return call("convert_currency", query="120 EUR in JPY")
    if done == 1:
        return call("weather_forecast", query="Kyoto tomorrow")
    return f"Done: {latest_results(transcript)[0].tool} answered last."


def run(retrieval: ToolRetrieval) -> tuple[RunResult, MemoryStore]:
    store = MemoryStore()
    engine = Engine(contracts=tools.contract_set(), toolbox=tools, store=store, clock=FakeClock())
    spec = RunSpec(
        task="Convert 120 euros to yen at today's rate, then forecast tomorrow's weather in Kyoto.",
        tenant="acme",
        principal=Principal(id="assistant", scopes=frozenset({"app.read"})),
        tools=tuple(CATALOGUE),
        tool_retrieval=retrieval,
    )
    return engine.run_sync(spec, FunctionModel(agent)), store


def main() -> None:
    narrowed, store = run(ToolRetrieval(max_offered=8, top_k=3))
    whole, _ = run(ToolRetrieval(max_offered=1000))  # the same run, the catalogue offered whole
    print(f"catalogue: {len(CATALOGUE)} tools; each request offered 3 of them")
    offers = [r.offered for r in narrowed.transitions if r.offered is not None]
    for step, offered in enumerate(offers, start=1):
        print(f"request {step} offered: {', '.join(offered)}")
    calls = [f"{r.tool} {r.result_class}" for r in narrowed.transitions if r.trigger == "classify"]
    print(f"calls: {', '.join(calls)}; run: {narrowed.terminal.value} ({narrowed.reason})")

    def sent(result: RunResult) -> int:
        return sum(r.manifest_tokens or 0 for r in result.transitions)

    print(f"tool manifests sent: {sent(narrowed)} tokens (whole catalogue: {sent(whole)})")
    replayed = replay_run_sync(store, narrowed.run_id, tools.contract_set())
    print(f"replayed, offering the same: {'identical' if replayed.identical else 'diverged'}")


if __name__ == "__main__":
    main()
