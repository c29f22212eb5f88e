"""What a run is given (`RunSpec`) and what it comes to (`RunResult`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic_core import PydanticSerializationError, to_jsonable_python

from ..base._jsonsafe import NotJson, json_value, safe_str
from ..base.errors import ConfigError
from ..core.budget import INPUT_PROJECTION, Limits, limit_spent
from ..core.evidence import EvidenceRequirement
from ..core.states import State
from ..models.pricing import ModelPrice
from ..tools.invocation import Principal
from ..tools.retrieval import ToolRetrieval
from .trace import Durability, OperationSummary, RunHeader, RunSummary, TransitionRecord

DEFAULT_SYSTEM_PROMPT: Final = (
    "You plan tool calls to complete the user's task. Use only the tools offered. Tool results "
    "are JSON with a result_class; errors are typed. Never treat an unknown status as confirmed."
)
"""What the model is told when neither the engine nor the spec says otherwise."""

DURABILITIES: Final[tuple[Durability, ...]] = ("transition", "step")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """Everything the runtime decides about a run. Nothing here comes from the model."""

    task: str
    tenant: str
    principal: Principal
    tools: tuple[str, ...]
    """Tools the task may use; only those the principal's scopes allow are offered."""
    limits: Limits = field(default_factory=Limits)
    credentials: Mapping[str, str] = field(default_factory=dict, repr=False)
    context: Mapping[str, Any] = field(default_factory=dict)
    """Passed to semantic rules as pydantic validation context (e.g. the authorized dates), and
    kept in the header as its JSON (`check_spec` refuses a value that has none)."""
    name: str = "run"
    seed: int | None = None
    system_prompt: str | None = None
    """What the model is told first; None: the engine's (`Engine(system_prompt=...)`)."""
    continuation: Mapping[str, Any] | None = None
    """Set by `Engine.continue_approved` (and read back from the header on resume and replay):
    the approval decisions a continued run goes on with. Never from the model."""
    required_evidence: tuple[EvidenceRequirement, ...] = ()
    """What a complete answer needs (the completion gate); empty: any answer completes."""
    annotations: Mapping[str, Any] = field(default_factory=dict)
    """The caller's own JSON data about the run, kept untouched in its header (the fixture layer
    keeps the fixture and where its simulated world lives here, to resume and grade the run).
    Plain JSON only (tuples are kept as arrays): `check_spec` refuses anything else."""
    durability: Durability | None = None
    """How often the run commits (`Durability`); None: the engine's (`Engine(durability=...)`)."""
    price: ModelPrice | None = None
    """What the model's requests cost; None: the adapter's declared price, else the engine's
    price table (resolved when the run starts and kept in its header)."""
    fallback_price: ModelPrice | None = None
    """What the requests the adapter's fallback model answers cost; None: its declared price,
    else the engine's price table (resolved with `price`, when the run starts)."""
    tool_retrieval: ToolRetrieval | None = None
    """How a large catalogue is offered a few tools at a time (None: always the whole of it)."""
    render_limit: int | None = None
    """The most characters of one tool result the model is shown; None: the engine's
    (`Engine(render_limit=...)`). Kept in the header: a resumed or replayed run is shown its
    results as it was (the transcript's digest covers them)."""
    input_projection: int | None = None
    """How the next request's input is projected (`budget.INPUT_PROJECTION`); None: the newest.
    Read back from the header on resume and replay, so a stored run goes on as it began; not
    for callers to set."""

    def __post_init__(self) -> None:
        check_spec(self)


def check_spec(spec: RunSpec) -> None:
    """Refuse what the run's header and operation keys could not keep as given: a tenant,
    principal or scope that is not UTF-8 text (a key is minted from the tenant), a context that
    is not JSON (the header keeps it as JSON, and a replay's rules read it from there; NaN was
    kept as null), annotations that are not plain JSON (a set was kept as a list)."""
    if spec.render_limit is not None:
        check_render_limit(spec.render_limit, "RunSpec.render_limit")
    if spec.seed is not None and type(spec.seed) is not int:  # the header keeps an integer
        raise ConfigError(f"RunSpec.seed is a whole number or None, not {spec.seed!r}")
    projection = spec.input_projection
    if projection is not None and (
        type(projection) is not int or not 1 <= projection <= INPUT_PROJECTION
    ):
        raise ConfigError(
            f"RunSpec.input_projection is 1 to {INPUT_PROJECTION} (a stored run's), "
            f"not {projection!r}"
        )
    check_text(spec.task, "RunSpec.task")
    check_text(spec.name, "RunSpec.name")
    if spec.system_prompt is not None:
        check_text(spec.system_prompt, "RunSpec.system_prompt")
    if not isinstance(spec.credentials, Mapping):
        raise ConfigError(
            f"RunSpec.credentials must be a mapping of names to text, not "
            f"{type(spec.credentials).__name__}"
        )
    for key, value in spec.credentials.items():  # redacted from every record: text, never shown
        check_text(key, "RunSpec.credentials' name")
        check_text(value, f"RunSpec.credentials[{key!r}]", secret=True)
    check_text(spec.tenant, "RunSpec.tenant")
    check_text(spec.principal.id, "RunSpec.principal.id")
    for scope in spec.principal.scopes:
        check_text(scope, "RunSpec.principal.scopes")
    if spec.context:
        try:  # as the header writes it: the rules' own values (models, dates) as their JSON
            json_value(to_jsonable_python(dict(spec.context)), refuse_surrogates=True)
        except (NotJson, PydanticSerializationError, UnicodeError, TypeError, ValueError) as exc:
            # (a key with a lone surrogate, bytes that are not UTF-8, no mapping at all)
            raise ConfigError(f"RunSpec.context is not JSON: {safe_str(exc)}") from exc
    if spec.annotations:
        try:
            json_value(dict(spec.annotations), refuse_surrogates=True)
        except (NotJson, UnicodeError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"RunSpec.annotations are not a mapping of plain JSON: {safe_str(exc)}"
            ) from exc


def check_text(value: object, where: str, *, secret: bool = False) -> None:
    """Refuse what is not a string of UTF-8 text (`secret`: say so without quoting it)."""
    if type(value) is not str:
        raise ConfigError(f"{where} must be a string, not {type(value).__name__}")
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        shown = "" if secret else f" {value!r}"
        raise ConfigError(
            f"{where}{shown} holds a lone surrogate, which no UTF-8 text can hold"
        ) from exc


def check_render_limit(limit: object, where: str) -> None:
    """Refuse a render limit that is not a whole number of at least 1 (a run's header keeps
    it, and a replay or resume of the run is refused one that is not)."""
    if type(limit) is not int or limit < 1:
        raise ConfigError(f"{where} is a whole number of at least 1, not {limit!r}")


@dataclass(slots=True, kw_only=True)
class RunResult:
    """What a run came to; returned, never raised, whatever the outcome."""

    run_id: str
    name: str
    terminal: State
    reason: str
    answer: str | None
    attempts: int
    model_steps: int
    tokens_in: int
    tokens_out: int
    elapsed_s: float
    waits_s: list[float]
    transitions: list[TransitionRecord]
    evidence: list[dict[str, Any]]
    """Every ok or empty tool result, in the order they arrived: the partial answer's basis."""
    operations: list[OperationSummary]
    """Every operation key the run minted, with its final status."""
    prefill_per_step: list[int]
    """Input tokens of each model request, in order (the transcript is resent every step)."""
    prefill_untruncated: int
    """The cumulative prefill had no tool result been truncated."""
    cost_usd: float | None = None
    """What the model requests cost in total, at the run's price (None: an unpriced run)."""
    limit_spent: str | None = None
    """When a bound ended the run: which limit, and how to raise it (`core.budget.limit_spent`)."""

    @property
    def prefill(self) -> int:
        """Cumulative prefill: every input token of every model request."""
        return sum(self.prefill_per_step)

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @classmethod
    def of(
        cls,
        summary: RunSummary,
        *,
        name: str,
        transitions: list[TransitionRecord],
        evidence: list[dict[str, Any]],
        limits: Limits | None = None,
    ) -> RunResult:
        """The result of a run whose stored summary is `summary` (`limits`: the run's, to say
        which one ended it)."""
        return cls(
            run_id=summary.run_id,
            name=name,
            terminal=State(summary.terminal),
            reason=summary.reason,
            answer=summary.answer,
            attempts=summary.attempts,
            model_steps=summary.model_steps,
            tokens_in=summary.tokens_in,
            tokens_out=summary.tokens_out,
            elapsed_s=summary.elapsed_s,
            waits_s=summary.waits_s,
            transitions=transitions,
            evidence=evidence,
            operations=summary.operations,
            prefill_per_step=summary.prefill_per_step,
            prefill_untruncated=summary.prefill_untruncated,
            cost_usd=summary.cost_usd,
            limit_spent=limit_spent(summary.reason, limits) if limits is not None else None,
        )

    def summary(self) -> RunSummary:
        return RunSummary(
            run_id=self.run_id,
            terminal=self.terminal.value,
            reason=self.reason,
            attempts=self.attempts,
            model_steps=self.model_steps,
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            elapsed_s=self.elapsed_s,
            waits_s=self.waits_s,
            answer=self.answer,
            operations=self.operations,
            prefill_per_step=self.prefill_per_step,
            prefill_untruncated=self.prefill_untruncated,
            cost_usd=self.cost_usd,
        )


def spec_from_header(header: RunHeader, *, limits: Limits | None = None) -> RunSpec:
    """The spec a stored run was started with, as its header holds it (`limits`: others than
    its own, for a counterfactual replay). Credentials are never stored: a resumed run that
    needs them gets them with `dataclasses.replace(spec, credentials=...)`."""
    return RunSpec(
        task=header.task,
        tenant=header.tenant,
        principal=Principal(id=header.principal, scopes=frozenset(header.scopes)),
        tools=tuple(header.tools),
        limits=limits if limits is not None else Limits.model_validate(header.limits),
        context=header.context,
        name=header.name,
        seed=header.seed,
        annotations=header.annotations,
        system_prompt=header.system_prompt,
        continuation=header.continues,
        required_evidence=tuple(
            EvidenceRequirement.model_validate(r) for r in header.required_evidence
        ),
        price=header.price,
        fallback_price=header.fallback_price,
        tool_retrieval=header.tool_retrieval,
        input_projection=header.input_projection,
        render_limit=header.render_limit,
    )
