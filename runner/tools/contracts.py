"""Tool contracts: load `contracts/*.json`, compile their schemas once, validate calls and results.

Schemas are Draft 2020-12 with format assertions really enabled: every format a contract uses is
one the runner checks itself (`_formats.ASSERTED_FORMATS`), and a contract using any other format,
or a `pattern` the reference cannot read as ECMA-262 does, is refused when it loads. Arguments pass
the schema first, then the tool's semantic rules (a pydantic model validated with the run's
context; the caller gives them: `load_contracts(directory, rules)`). A contract that does not
compile is one `ContractError`.

Two validators per schema: `jsonschema` is the reference (meta-schema checks, detailed messages);
a compiled `jsonschema-rs` validator is the hot path and decides alone only when it accepts. Both
are built in `_validators.py`, which fetches nothing and reads every schema as 2020-12 (a schema
naming another `$schema` than a published draft's, or a `$vocabulary`, is refused here). They
call the same format functions, and the reference reads patterns as ECMA-262 (`_patterns.py`), so
they agree; the differential tests prove it on every contract and on every asserted format
(`tests/tools/test_fast_validation.py`), and on generated schemas playing with drafts, `$id`s and
anchors (`tests/tools/test_schema_dialects.py`).
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, overload

import jsonschema_rs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..base._documents import (
    TOO_DEEP,
    TOO_LONG_NUMBER,
    DocumentProblem,
    check_shape,
    load_json,
    read_text,
)
from ..base.errors import ContractError
from ._formats import ASSERTED_FORMATS, unasserted_formats
from ._patterns import PatternRefused, python_source
from ._schema_refs import data_reference, reference_loop
from ._schema_walk import subschemas
from ._validators import dialect_problem, fast_validator, meta_schema_error, reference_validator

if TYPE_CHECKING:  # jsonschema (the reference) is imported when a contract is compiled
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError as SchemaViolation

RESERVED_ARGUMENTS: Final[frozenset[str]] = frozenset(
    {
        "tenant",
        "tenant_id",
        "principal",
        "scopes",
        "credentials",
        "credential",
        "api_key",
        "token",
        "authorization",
        "operation_key",
        "idempotency_key",
    }
)
"""Names only the runtime supplies: no contract may declare them, no model may send them."""


class Contract(BaseModel):
    """A tool contract as written in `contracts/<name>.json`."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    description: str = Field(min_length=20)
    """When to use the tool and when not; shown to the model."""
    input_schema: dict[str, Any]
    result_schema: dict[str, Any]
    side_effect: Literal["read", "write"]
    scope: str = Field(min_length=1)
    """The principal scope required to see and call the tool."""
    timeout_s: float = Field(gt=0, le=600)
    reconcile_with: str | None = None
    """For writes: the read tool that looks an operation up by its key."""
    suppresses_duplicates: bool = False
    """For writes: the destination returns the existing record for a repeated key."""
    results_field: str | None = None
    """The result array whose emptiness means a valid query found nothing (a domain result)."""
    audience: Literal["model", "runtime"] = "model"
    """`runtime`: called by the runner itself (reconciliation lookups), never offered."""
    requires_approval: bool = False
    """For writes: a call records a proposal instead of committing; a person approves it outside
    the model (a confirm token bound to the exact parameters) before it is sent."""
    approval_summary: str | None = Field(default=None, max_length=300)
    """For writes: what an approver reads, with `{argument}` placeholders, e.g. `Hold 1
    {room_type} room at {hotel_id}, {check_in} to {check_out}, {guests} guests`."""


CHILD_FIELD: Final = "child_run"
"""The field of a child-run tool's answer that carries the child run (`tools.children`)."""

UNCHECKABLE: Final = "the schema cannot be checked on this value: its references loop"
"""Why a value was refused when validating it recursed without end."""


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """Why arguments were rejected, naming the field where one can be named."""

    field: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class CompiledContract:
    """A contract with its validators built once per process."""

    contract: Contract
    input_validator: Draft202012Validator
    result_validator: Draft202012Validator
    rules: type[BaseModel] | None
    fast_input: jsonschema_rs.Validator
    fast_result: jsonschema_rs.Validator
    digest: str = ""
    """The contract, hashed (`contract_digest`): a run's header keeps it per tool, and a resume
    under another contract for one of its tools is refused."""
    carries_child: bool = False
    """Whether the tool's answers carry a child run (`tools.children`): read from the result
    schema once, when the contract is compiled, not on every call."""

    @property
    def name(self) -> str:
        return self.contract.name

    def check_arguments(
        self, arguments: Mapping[str, Any], context: Mapping[str, Any]
    ) -> ArgumentProblem | None:
        """Schema first, then semantic rules; None when the arguments are valid."""
        if not RESERVED_ARGUMENTS.isdisjoint(arguments):  # (in C: the usual case)
            for key in arguments:
                if key in RESERVED_ARGUMENTS:
                    return ArgumentProblem(key, "supplied by the runtime, never by the model")
        if not self.fast_input.is_valid(arguments):
            try:
                error = _first_error(self.input_validator, arguments)
            except RecursionError:  # a loop `_schema_refs` could not see (an embedded `$id`)
                return ArgumentProblem(None, UNCHECKABLE)
            if error is not None:
                return _describe_argument_error(error, arguments)
        if self.rules is not None:
            try:
                self.rules.model_validate(dict(arguments), context=dict(context))
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(part) for part in first["loc"]) or None
                return ArgumentProblem(loc, str(first["msg"]).removeprefix("Value error, "))
            except Exception as exc:  # a rule that breaks on these arguments cannot accept them
                return ArgumentProblem(None, f"the semantic rules failed: {type(exc).__name__}")
        return None

    def check_result(self, payload: object) -> tuple[str, ...]:
        """Every way `payload` breaks the result schema, most relevant first (empty: valid)."""
        if self.fast_result.is_valid(payload):
            return ()
        try:
            return tuple(_describe_all(self.result_validator.iter_errors(payload))[:5])
        except RecursionError:  # as in `check_arguments`
            return (f"(root): {UNCHECKABLE}",)


def _error_rank(error: SchemaViolation) -> tuple[int, str]:
    return (-len(error.absolute_path), error.message)


def _first_error(validator: Draft202012Validator, instance: object) -> SchemaViolation | None:
    return next(iter(validator.iter_errors(instance)), None)


def _branch_errors(error: SchemaViolation) -> list[SchemaViolation]:
    """For a failed oneOf/anyOf, the errors of the branch the instance meant to match.

    A branch whose discriminator (`const`) matched is the intended one (status ok vs error);
    without one, the branch with the fewest errors.
    """
    branches: dict[object, list[SchemaViolation]] = {}
    for inner in error.context or ():
        branches.setdefault(inner.relative_schema_path[0], []).append(inner)
    if not branches:
        return [error]
    intended = [errs for errs in branches.values() if not any(e.validator == "const" for e in errs)]
    return min(intended or list(branches.values()), key=len)


MESSAGE_LIMIT: Final = 300
"""The most characters of one schema violation's message that are kept: jsonschema quotes the
offending value whole, and a 10 MB result (or argument) would otherwise reach the model in full,
past `render_limit`, and fill every record of the call."""


def _brief(message: str) -> str:
    if len(message) <= MESSAGE_LIMIT:
        return message
    return (
        f"{message[: MESSAGE_LIMIT - 60]} ...[{len(message)} characters in all]... {message[-40:]}"
    )


def _where(error: SchemaViolation) -> str:
    return "/".join(str(part) for part in error.absolute_path) or "(root)"


def _describe_all(errors: Iterable[SchemaViolation]) -> list[str]:
    described: list[str] = []
    for error in sorted(errors, key=_error_rank):
        if error.context:
            described.extend(_describe_all(_branch_errors(error)))
        else:
            described.append(f"{_where(error)}: {_brief(error.message)}")
    return described


def _describe_argument_error(
    error: SchemaViolation, arguments: Mapping[str, Any]
) -> ArgumentProblem:
    if error.validator == "additionalProperties":
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        allowed = set(schema.get("properties", {}))
        extra = sorted(set(arguments) - allowed)
        return ArgumentProblem(extra[0] if extra else None, "unexpected argument")
    if error.validator == "required":
        required: list[str] = list(error.validator_value)  # type: ignore[arg-type]
        missing = [name for name in required if name not in arguments]
        return ArgumentProblem(missing[0] if missing else None, "required argument missing")
    path = ".".join(str(part) for part in error.absolute_path) or None
    return ArgumentProblem(path, _brief(error.message))


def _refuse_reference_outside(
    source: str | Path, label: str, where: str, schema: Mapping[str, Any]
) -> None:
    """A reference must stay inside the contract (`#...`): anything else would be fetched as
    the contract loads (a file, the network), and could change under a stored run's replay."""
    for keyword in ("$ref", "$dynamicRef"):
        ref = schema.get(keyword)
        if isinstance(ref, str) and ref.partition("#")[0]:
            raise ContractError(
                source,
                f"{label} at {where}: {keyword} {ref!r} points outside the contract; only "
                "references within it (starting with '#') are allowed: nothing is fetched",
            )


def refuse_unread_dialect(source: str | Path, label: str, schema: Any) -> None:
    """A `$schema` other than a spelling of the drafts the runner reads as 2020-12, or a
    `$vocabulary`, anywhere in `schema`, is one `ContractError` naming where and what."""
    dialect = dialect_problem(schema)
    if dialect is not None:
        where, problem = dialect
        raise ContractError(source, f"{label} at {where}: {problem}")


def _refuse_what_cannot_be_checked(source: str | Path, label: str, schema: Any) -> None:
    """A draft other than those the runner reads as 2020-12, a reference loop that consumes
    nothing, a format it cannot assert, or a pattern it cannot read as ECMA-262, is refused."""
    refuse_unread_dialect(source, label, schema)
    into_data = data_reference(schema)
    if into_data is not None:
        where, ref = into_data
        raise ContractError(
            source,
            f"{label} at {where}: $ref {ref!r} points into data (const, enum, default or "
            "examples), which is not a schema",
        )
    loop = reference_loop(schema)
    if loop is not None:
        raise ContractError(
            source,
            f"{label} at {loop}: a reference leads back here on the same value, so "
            "validating it never ends",
        )
    unasserted = unasserted_formats(schema)
    if unasserted:
        where, name = unasserted[0]
        raise ContractError(
            source,
            f"{label} at {where}: format {name!r} cannot be asserted "
            f"(asserted: {', '.join(ASSERTED_FORMATS)})",
        )
    for where, sub in subschemas(schema):
        _refuse_reference_outside(source, label, where, sub)
        pattern = sub.get("pattern")
        keys = sub.get("patternProperties")
        candidates = [pattern] if isinstance(pattern, str) else []
        candidates += list(keys) if isinstance(keys, dict) else []
        for candidate in candidates:
            try:
                python_source(candidate)
            except PatternRefused as exc:
                raise ContractError(
                    source, f"{label} at {where}: pattern {candidate!r} is refused: {exc}"
                ) from exc


def compile_contract(
    contract: Contract, source: str | Path, rules: type[BaseModel] | None = None
) -> CompiledContract:
    """Check both schemas against the 2020-12 meta-schema and build their validators."""
    from referencing.exceptions import Unresolvable  # noqa: PLC0415  # the reference, on first use

    for label, schema in (
        ("input_schema", contract.input_schema),
        ("result_schema", contract.result_schema),
    ):
        # First, so a pattern is refused with its reason, not the meta-schema's "is not a regex".
        _refuse_what_cannot_be_checked(source, label, schema)
        error = meta_schema_error(schema)
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(root)"
            raise ContractError(source, f"{label} at {where}: {error.message}")
    if contract.input_schema.get("type") != "object":
        raise ContractError(source, "input_schema must have type object")
    if contract.input_schema.get("additionalProperties") is not False:
        raise ContractError(source, "input_schema must set additionalProperties to false")
    reserved = sorted(set(contract.input_schema.get("properties", {})) & RESERVED_ARGUMENTS)
    if reserved:
        raise ContractError(
            source, f"input_schema declares {', '.join(reserved)}, which only the runtime supplies"
        )
    if contract.side_effect == "write" and contract.reconcile_with is None:
        raise ContractError(source, "a write tool must name its reconcile_with lookup tool")
    template = contract.approval_summary
    if template is not None:
        named = {field for _, field, _, _ in string.Formatter().parse(template) if field}
        unknown = sorted(named - set(contract.input_schema.get("properties", {})))
        if unknown:
            raise ContractError(
                source, f"approval_summary names {', '.join(unknown)}, not arguments of the tool"
            )
    if contract.requires_approval and contract.side_effect != "write":
        raise ContractError(
            source, "requires_approval applies to writes only (a read commits nothing)"
        )
    input_validator = reference_validator(contract.input_schema)
    result_validator = reference_validator(contract.result_schema)
    for label, validator in (
        ("input_schema", input_validator),
        ("result_schema", result_validator),
    ):
        try:  # $refs resolve lazily; probe once so a dangling one fails now, not mid-run
            for _ in validator.iter_errors({}):
                pass
        except Unresolvable as exc:
            raise ContractError(source, f"{label}: unresolvable reference {exc}") from exc
        # What a server may list to crash the pin (the differential test found these):
        except RecursionError as exc:  # `{"$ref": "#"}`
            raise ContractError(
                source, f"{label}: a reference leads back to itself before any value is checked"
            ) from exc
        except Exception as exc:  # referencing trips on a pointer through `true`, into a string
            raise ContractError(  # or into a list by name: whatever it is, it is not a schema
                source,
                f"{label}: a reference points into what is not a schema "
                f"({type(exc).__name__}: {exc})",
            ) from exc
    try:
        fast_input = fast_validator(contract.input_schema)
        fast_result = fast_validator(contract.result_schema)
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        # jsonschema-rs adds lines about an instance (there is none): its first line says it
        raise ContractError(source, f"does not compile: {str(exc).splitlines()[0]}") from exc
    return CompiledContract(
        contract,
        input_validator,
        result_validator,
        rules,
        fast_input,
        fast_result,
        contract_digest(contract),
        carries_child=any(
            CHILD_FIELD in branch.get("properties", ())
            for branch in contract.result_schema.get("oneOf", ())
        ),
    )


def contract_digest(contract: Contract) -> str:
    """A short hash of the whole of `contract` as canonical JSON. Its wording decides too: the
    descriptions are the manifest the model is sent, whose size sets each request's output
    limit and cost, so a reworded contract re-drives a run otherwise than it was recorded."""
    text = json.dumps(
        contract.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def contract_digests(
    contracts: Mapping[str, CompiledContract], tools: Iterable[str]
) -> dict[str, str]:
    """The digest of each of `tools` and of the lookup each write reconciles with: every
    contract a run of those tools may call under (those `contracts` has)."""
    digests: dict[str, str] = {}
    for name in tools:
        compiled = contracts.get(name)
        if compiled is None:
            continue
        digests[name] = compiled.digest
        lookup = compiled.contract.reconcile_with
        found = contracts.get(lookup) if lookup is not None else None
        if found is not None:
            digests[found.name] = found.digest
    return digests


def refuse_acting_lookup(
    compiled: CompiledContract, by_name: Mapping[str, CompiledContract]
) -> None:
    """A write's lookup must be another tool, a read: after a lost response the runner calls it
    (by the operation key, with no arguments of the model's) to learn whether the write went
    through, so a write there would act again. A lookup not in `by_name` is left to the
    callers that require every one (`load_contracts`, `checked_contract_set`). The lookup is
    called with no arguments, so its input schema must accept none."""
    target = compiled.contract.reconcile_with
    if target is None:
        return
    if target == compiled.name:
        raise ContractError(
            compiled.name,
            f"reconcile_with names the write itself ({target!r}): a lost response would send "
            'it again; name a read-only lookup (a contract with "side_effect": "read")',
        )
    lookup = by_name.get(target)
    if lookup is None:
        return
    if lookup.contract.side_effect != "read":
        raise ContractError(
            compiled.name,
            f"reconcile_with names {target!r}, a write (its contract says "
            '"side_effect": "write"): a lost response would make it act; name a read-only '
            'lookup (a contract with "side_effect": "read")',
        )
    refused = _first_error(lookup.input_validator, {})
    if refused is not None:
        raise ContractError(
            compiled.name,
            f"reconcile_with names {target!r}, whose input_schema refuses no arguments "
            f"({_where(refused)}: {refused.message}): the runner calls a lookup with none, "
            "the key alone (as ToolInvocation.operation_key)",
        )


_T = TypeVar("_T")


class ContractSet(Mapping[str, CompiledContract]):
    """Compiled contracts by tool name."""

    def __init__(self, contracts: Iterable[CompiledContract]) -> None:
        self._by_name = {compiled.name: compiled for compiled in contracts}
        for compiled in self._by_name.values():
            refuse_acting_lookup(compiled, self._by_name)

    def __getitem__(self, name: str) -> CompiledContract:
        return self._by_name[name]

    @overload
    def get(self, name: str, /) -> CompiledContract | None: ...
    @overload
    def get(self, name: str, /, default: CompiledContract | _T) -> CompiledContract | _T: ...
    def get(self, name: str, /, default: object = None) -> object:
        """The dict's own `get` (`Mapping.get` goes through `__getitem__` and a `KeyError`;
        admission asks once a call)."""
        return self._by_name.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


def load_contract_file(path: Path, rules: Mapping[str, type[BaseModel]]) -> CompiledContract:
    """Read, check and compile one contract file."""
    try:
        data = load_json(read_text(path))
        check_shape(data)
    except OSError as exc:
        raise ContractError(path, f"cannot read: {exc.strerror}") from exc
    except RecursionError as exc:
        raise ContractError(path, TOO_DEEP) from exc
    except DocumentProblem as exc:
        raise ContractError(path, str(exc)) from exc
    except json.JSONDecodeError as exc:
        raise ContractError(
            path, f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    except ValueError as exc:  # after JSONDecodeError, its subclass
        raise ContractError(path, TOO_LONG_NUMBER) from exc
    try:
        contract = Contract.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        raise ContractError(path, f"{where}: {first['msg']}") from exc
    if contract.name != path.stem:
        raise ContractError(path, f"name {contract.name!r} must match the file name {path.stem!r}")
    return compile_contract(contract, path, rules.get(contract.name))


def load_contracts(
    directory: Path, rules: Mapping[str, type[BaseModel]] | None = None
) -> ContractSet:
    """Load every `*.json` contract in `directory`; the first bad one raises `ContractError`."""
    if not directory.is_dir():
        raise ContractError(directory, "contracts directory not found")
    rules = rules or {}
    compiled = [load_contract_file(path, rules) for path in sorted(directory.glob("*.json"))]
    if not compiled:
        raise ContractError(directory, "no *.json contracts found")
    contracts = ContractSet(compiled)
    for item in compiled:
        target = item.contract.reconcile_with
        if target is not None and target not in contracts:
            raise ContractError(
                item.name, f"reconcile_with names {target!r}, which is not a loaded contract"
            )
    return contracts
