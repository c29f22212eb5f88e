"""Tools declared in Python: a contract built from pydantic models, registered with its code.

`declare_contract` turns an arguments model and a result type into the same `Contract` a JSON file
holds (their JSON Schema, Draft 2020-12) and compiles it with `compile_contract`: the same
meta-schema checks, asserted formats, ECMA-262 patterns and jsonschema-rs fast path as a file. A
`DeclaredTools` keeps such contracts with their implementations (a `ToolBox` for the engine):

    tools = DeclaredTools()

    @tools.tool(arguments=SearchArgs, result=SearchResult, scope="travel.read", timeout_s=10)
    async def search_flights(args: SearchArgs, invocation: ToolInvocation) -> SearchResult:
        '''Search flights ... (the docstring is the description the model sees).'''

The JSON Schema is the contract: arguments and results are checked against it, never by pydantic,
so a declared contract and its exported file (`runner contracts export`, `contract_json`) decide
alike. Pydantic validators cannot travel in a schema, so a model carrying one is refused; rules
that need Python go in `rules=` (validated with the run's context, as for contract files).
"""

from __future__ import annotations

import inspect
import json
import types
import warnings
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, Literal, TypeVar, get_args

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.errors import PydanticUserError
from pydantic.functional_validators import (
    AfterValidator,
    BeforeValidator,
    PlainValidator,
    WrapValidator,
)
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticSerializationError, core_schema

from ..base.errors import ContractError
from ._schema_walk import subschemas
from .contracts import CompiledContract, Contract, ContractSet, compile_contract
from .invocation import ToolImplementation, ToolInvocation, ToolResponse
from .toolbox import ComposesInOrder

__all__ = ["DeclaredTools", "contract_json", "declare_contract", "json_schema_of"]

DRAFT: Final = "https://json-schema.org/draft/2020-12/schema"
_VALIDATORS: Final = (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)

ToolFunction = Callable[..., Awaitable[object]]
F = TypeVar("F", bound=ToolFunction)


class _WithoutFieldTitles(GenerateJsonSchema):
    """pydantic's schema without a `title` on every field: the exported file stays readable."""

    def field_title_should_be_set(self, schema: core_schema.CoreSchemaType) -> bool:  # type: ignore[override]
        return False


def json_schema_of(declared: Any) -> dict[str, Any]:
    """The Draft 2020-12 schema of a pydantic model or any type pydantic can validate."""
    schema = TypeAdapter(declared).json_schema(schema_generator=_WithoutFieldTitles)
    return {"$schema": DRAFT, **schema}


_PYDANTIC_ONLY: Final = frozenset(
    {"ge", "gt", "le", "lt", "min_length", "max_length", "multiple_of", "strict", "max_digits"}
)
"""Constraint names pydantic leaves in a schema verbatim where it cannot translate them (on a
union, say): no validator knows them, so the constraint would silently not be checked."""


def _untranslated(schema: dict[str, Any]) -> str | None:
    for where, sub in subschemas(schema):
        leaked = sorted(_PYDANTIC_ONLY & set(sub))
        if leaked:
            return f"at {where}: {leaked[0]!r} is a pydantic constraint, not JSON Schema"
    return None


def _validators_in(declared: Any, seen: set[int]) -> list[str]:
    """Where `declared` (a model, a union, a generic...) carries pydantic validators."""
    if id(declared) in seen:
        return []
    seen.add(id(declared))
    found: list[str] = []
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        decorators = declared.__pydantic_decorators__
        for kind in ("validators", "field_validators", "root_validators", "model_validators"):
            found += [f"{declared.__name__}.{name}" for name in getattr(decorators, kind)]
        for field_name, info in declared.model_fields.items():
            if any(isinstance(meta, _VALIDATORS) for meta in info.metadata):
                found.append(f"{declared.__name__}.{field_name}")
            found += _validators_in(info.annotation, seen)
    for meta in getattr(declared, "__metadata__", ()):
        if isinstance(meta, _VALIDATORS):
            found.append(repr(meta))
    for inner in get_args(declared):
        found += _validators_in(inner, seen)
    return found


def _source(declared: Any, name: str) -> str:
    module = getattr(declared, "__module__", None)
    return f"{name} (declared in {module})" if module else name


def declare_contract(
    *,
    name: str,
    description: str,
    arguments: type[BaseModel],
    result: Any,
    scope: str,
    timeout_s: float,
    side_effect: Literal["read", "write"] = "read",
    reconcile_with: str | None = None,
    suppresses_duplicates: bool = False,
    results_field: str | None = None,
    audience: Literal["model", "runtime"] = "model",
    rules: type[BaseModel] | None = None,
    requires_approval: bool = False,
) -> CompiledContract:
    """A compiled contract from pydantic models; every problem is one `ContractError`.

    Args:
        arguments: a model with `extra="forbid"` (a contract refuses arguments it does not name).
        result: a model, or a union of models (the ok and error shapes, discriminated by `status`).
        rules: semantic rules as for contract files, run after the schema with the run's context.
    """
    source = _source(arguments, name)
    if not (isinstance(arguments, type) and issubclass(arguments, BaseModel)):
        raise ContractError(source, "arguments must be a pydantic model class")
    if arguments.model_config.get("extra") != "forbid":
        raise ContractError(
            source,
            f"arguments model {arguments.__name__} must forbid extra fields "
            "(model_config = ConfigDict(extra='forbid')), as every contract's input_schema does",
        )
    carried = _validators_in(arguments, set()) + _validators_in(result, set())
    if carried:
        raise ContractError(
            source,
            f"pydantic validators cannot be written as JSON Schema ({', '.join(carried)}): "
            "move them to rules=",
        )
    try:
        input_schema, result_schema = json_schema_of(arguments), json_schema_of(result)
    except (PydanticUserError, PydanticSerializationError, TypeError) as exc:
        raise ContractError(source, f"cannot be written as JSON Schema: {exc}") from exc
    for label, schema in (("arguments", input_schema), ("result", result_schema)):
        leaked = _untranslated(schema)
        if leaked is not None:  # e.g. Field(ge=0) on `float | None`: put it on the float
            raise ContractError(
                source, f"{label} {leaked} (it would not be checked): constrain the inner type"
            )
    try:
        contract = Contract(
            name=name,
            description=description,
            input_schema=input_schema,
            result_schema=result_schema,
            side_effect=side_effect,
            scope=scope,
            timeout_s=timeout_s,
            reconcile_with=reconcile_with,
            suppresses_duplicates=suppresses_duplicates,
            results_field=results_field,
            audience=audience,
            requires_approval=requires_approval,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        raise ContractError(source, f"{where}: {first['msg']}") from exc
    return compile_contract(contract, source, rules)


def contract_json(compiled: CompiledContract) -> str:
    """The contract as its canonical file `contracts/<name>.json` holds it (defaults left out)."""
    data = compiled.contract.model_dump(mode="json", exclude_defaults=True)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _adapt(function: ToolFunction, arguments: type[BaseModel]) -> ToolImplementation:
    """The engine's calling convention around `function(args[, invocation])`.

    It returns a `ToolResponse` (kept as is, e.g. to carry a Retry-After), a pydantic model
    (dumped to JSON by alias, fields that are None left out: declare an optional field that may
    be absent but never null as `X | SkipJsonSchema[None] = None`) or plain JSON; whatever it
    returns is checked against the result schema by the classifier, like any tool's answer.
    """
    wants_invocation = len(inspect.signature(function).parameters) >= 2

    async def implementation(invocation: ToolInvocation) -> ToolResponse:
        parsed = arguments.model_validate(dict(invocation.arguments))
        answer = await (function(parsed, invocation) if wants_invocation else function(parsed))
        return _response(answer)

    return implementation


def _require_async(name: str, function: object) -> None:
    """The engine awaits its tools; a plain function would block the event loop."""
    if not inspect.iscoroutinefunction(function):
        raise ContractError(name, "a tool implementation must be an async def")


def _response(answer: object) -> ToolResponse:
    if isinstance(answer, ToolResponse):
        return answer
    if isinstance(answer, BaseModel):
        return ToolResponse(
            payload=answer.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
    return ToolResponse(payload=answer)


class DeclaredTools(ComposesInOrder):
    """Contracts and their implementations, declared together; a `ToolBox` for the engine
    (`before` puts it ahead of another: `tools.before(FunctionTools({...}))`).

    `runner contracts export --module pkg.mod` finds every `DeclaredTools` (and every
    `CompiledContract`) among a module's globals.
    """

    def __init__(self) -> None:
        self._contracts: dict[str, CompiledContract] = {}
        self._implementations: dict[str, ToolImplementation] = {}

    def add(
        self, contract: CompiledContract, implementation: ToolImplementation | None = None
    ) -> None:
        """Add a contract (from `declare_contract` or a file), with its implementation if any."""
        known = self._contracts.get(contract.name)
        if known is not None and known is not contract:
            raise ContractError(contract.name, "declared twice in one DeclaredTools")
        self._contracts[contract.name] = contract
        if implementation is not None:
            self._implementations[contract.name] = implementation

    def tool(
        self,
        *,
        arguments: type[BaseModel],
        result: Any,
        scope: str,
        timeout_s: float,
        name: str | None = None,
        description: str | None = None,
        side_effect: Literal["read", "write"] = "read",
        reconcile_with: str | None = None,
        suppresses_duplicates: bool = False,
        results_field: str | None = None,
        audience: Literal["model", "runtime"] = "model",
        rules: type[BaseModel] | None = None,
        requires_approval: bool = False,
    ) -> Callable[[F], F]:
        """Declare a contract and register the decorated `async def` as its implementation.

        The name defaults to the function's, the description to its docstring. The function
        receives the arguments as an instance of `arguments` (and the `ToolInvocation`, when it
        takes a second parameter: tenant, credentials, operation key). It is returned unchanged.
        """

        def register(function: F) -> F:
            tool_name = name or function.__name__
            _require_async(tool_name, function)
            contract = declare_contract(
                name=tool_name,
                description=description or " ".join((function.__doc__ or "").split()),
                arguments=arguments,
                result=result,
                scope=scope,
                timeout_s=timeout_s,
                side_effect=side_effect,
                reconcile_with=reconcile_with,
                suppresses_duplicates=suppresses_duplicates,
                results_field=results_field,
                audience=audience,
                rules=rules,
                requires_approval=requires_approval,
            )
            self.add(contract, _adapt(function, arguments))
            return function

        return register

    def implement(self, contract: CompiledContract) -> Callable[[F], F]:
        """Register the decorated function for an existing contract (e.g. one loaded from JSON).

        The function receives the arguments as a plain mapping, and the invocation."""

        def register(function: F) -> F:
            _require_async(contract.name, function)

            async def implementation(invocation: ToolInvocation) -> ToolResponse:
                return _response(await function(dict(invocation.arguments), invocation))

            self.add(contract, implementation)
            return function

        return register

    def implementation(self, tool: str) -> ToolImplementation | None:
        return self._implementations.get(tool)

    @property
    def contracts(self) -> list[CompiledContract]:
        return list(self._contracts.values())

    def contract_set(self, *others: ContractSet | Iterable[CompiledContract]) -> ContractSet:
        """These contracts (and any others: a `ContractSet`, e.g. `load_contracts(folder)`, or
        compiled contracts) for an `Engine`."""
        combined = [*self._contracts.values()]
        for group in others:  # a ContractSet is a mapping: its contracts are its values
            combined += group.values() if isinstance(group, ContractSet) else group
        return checked_contract_set(combined)


def checked_contract_set(contracts: Iterable[CompiledContract]) -> ContractSet:
    """A `ContractSet`, refusing two contracts of one name and a dangling `reconcile_with`."""
    by_name: dict[str, CompiledContract] = {}
    for item in contracts:
        known = by_name.get(item.name)
        if known is not None and known is not item:
            raise ContractError(item.name, "declared twice")
        by_name[item.name] = item
    for item in by_name.values():
        target = item.contract.reconcile_with
        if target is not None and target not in by_name:
            raise ContractError(
                item.name, f"reconcile_with names {target!r}, which is not a declared contract"
            )
    return ContractSet(by_name.values())


def declared_in(module: types.ModuleType) -> list[CompiledContract]:
    """Every contract a module declares: its `DeclaredTools`' and its `CompiledContract` globals."""
    found: list[CompiledContract] = []
    for value in vars(module).values():
        if isinstance(value, DeclaredTools):
            found.extend(value.contracts)
        elif isinstance(value, CompiledContract):
            found.append(value)
    return list(checked_contract_set(found).values())


def __getattr__(name: str) -> Any:
    if name == "Toolset":  # renamed for what it holds; the old name kept for a release
        warnings.warn(
            "runner.tools.declare.Toolset is now DeclaredTools", DeprecationWarning, stacklevel=2
        )
        return DeclaredTools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
