"""A write's `reconcile_with` names a read: the runner calls it after a lost response to learn
whether the write went through, so a write there (or the write itself) would act again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from runner.base.errors import ContractError
from runner.tools.contracts import Contract, ContractSet, compile_contract, load_contracts
from runner.tools.declare import checked_contract_set
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples" / "contracts"


def _copy(source: Path, folder: Path, name: str, **changes: Any) -> None:
    """The contracts of `source`, with `changes` made to `name`'s."""
    shutil.copytree(source, folder, dirs_exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_a_write_that_names_itself_as_its_lookup_is_refused(tmp_path: Path) -> None:
    _copy(EXAMPLES, tmp_path, "refund_order", reconcile_with="refund_order")
    with pytest.raises(ContractError) as info:
        load_contracts(tmp_path)
    message = str(info.value)
    assert "refund_order" in message and "names the write itself" in message
    assert "side_effect" in message  # where a tool's read or write nature is declared


def test_a_write_whose_lookup_is_another_write_is_refused(tmp_path: Path) -> None:
    _copy(ROOT / "contracts", tmp_path, "hold_room", reconcile_with="cancel_all_holds")
    with pytest.raises(ContractError) as info:
        load_contracts(tmp_path)
    message = str(info.value)
    assert message.startswith("contract hold_room:")
    assert "'cancel_all_holds'" in message and '"side_effect": "write"' in message


def test_the_shipped_lookups_still_load() -> None:
    assert load_contracts(EXAMPLES)["refund_order"].contract.reconcile_with == "find_refund"
    assert load_contracts(ROOT / "contracts")["hold_room"].contract.reconcile_with == "lookup_hold"


def _write(name: str, lookup: str) -> Contract:
    return Contract(
        name=name,
        description="Book a seat on a flight, once the traveller has chosen one.",
        input_schema={"type": "object", "additionalProperties": False, "properties": {}},
        result_schema={"type": "object"},
        side_effect="write",
        scope="travel.book",
        timeout_s=5,
        reconcile_with=lookup,
    )


def test_declared_contracts_and_a_hand_built_set_refuse_a_write_lookup_too() -> None:
    itself = compile_contract(_write("book_seat", "book_seat"), "book_seat")
    with pytest.raises(ContractError, match="names the write itself"):
        checked_contract_set([itself])
    with pytest.raises(ContractError, match="names the write itself"):
        ContractSet([itself])
    first = compile_contract(_write("book_seat", "cancel_seat"), "book_seat")
    second = compile_contract(_write("cancel_seat", "book_seat"), "cancel_seat")
    with pytest.raises(ContractError, match="'cancel_seat', a write"):
        checked_contract_set([first, second])
    with pytest.raises(ContractError, match="'cancel_seat', a write"):
        ContractSet([first, second])


def test_a_lookup_that_needs_arguments_is_refused(tmp_path: Path) -> None:
    """The runner calls a lookup with no arguments, the key alone (as
    `ToolInvocation.operation_key`): one whose schema requires an argument was called without
    it, its schema unchecked."""
    _copy(
        EXAMPLES,
        tmp_path,
        "find_refund",
        input_schema={
            "type": "object",
            "additionalProperties": False,
            "required": ["order_id"],
            "properties": {"order_id": {"type": "string"}},
        },
    )
    with pytest.raises(ContractError) as info:
        load_contracts(tmp_path)
    message = str(info.value)
    assert message.startswith("contract refund_order:") and "'find_refund'" in message
    assert "'order_id' is a required property" in message and "operation_key" in message


def test_a_lookup_needing_a_scope_the_principal_lacks_is_not_called(tmp_path: Path) -> None:
    """The lookup reads with the run's authority: a principal allowed the write but not its
    lookup's scope does not get that read by way of a lost response. The outcome stays unknown
    (the run ends `unknown`, the key preserved); the lookup is never dispatched."""
    from runner import Engine, FunctionTools, MemoryStore, Principal, RunSpec  # noqa: PLC0415
    from runner.testing import FakeClock, FunctionModel, call, latest_results  # noqa: PLC0415

    _copy(EXAMPLES, tmp_path, "find_refund", scope="orders.admin")
    looked_up: list[dict[str, Any]] = []

    async def refund(invocation: Any) -> Any:
        raise TimeoutError("the response was lost")

    async def find(invocation: Any) -> Any:
        looked_up.append(dict(invocation.arguments))
        raise AssertionError("the lookup needs orders.admin")

    def plan(transcript: Any, tools: Any) -> Any:
        if latest_results(transcript):
            return "done"
        return call("refund_order", order_id="A-100", amount_cents=5)

    engine = Engine(
        contracts=load_contracts(tmp_path),
        toolbox=FunctionTools({"refund_order": refund, "find_refund": find}),
        store=MemoryStore(),
        clock=FakeClock(),
    )
    principal = Principal(id="clerk", scopes=frozenset({"orders.refund"}))
    spec = RunSpec(task="refund A-100", tenant="t", principal=principal, tools=("refund_order",))
    result = engine.run_sync(spec, FunctionModel(plan))
    assert looked_up == []
    assert str(result.terminal) == "unknown" and len(result.operations) == 1
    (end,) = [r for r in result.transitions if r.to_state == "unknown"]
    assert end.operation_key == result.operations[0].key  # the key handed over
    said = " ".join(f"{r.reason} {r.observation}" for r in result.transitions)
    assert "find_refund needs scope orders.admin, which is not granted to clerk" in said
