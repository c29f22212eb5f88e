"""Live models by name: `openai:MODEL` or `anthropic:MODEL` as an adapter, and the live model a
stored run recorded, rebuilt to resume it. The provider modules need their extras and are
imported only when a live model is asked for.
"""

from __future__ import annotations

from ..base.errors import ConfigError, ResumeRefused
from .base import ModelAdapter
from .identity import SCRIPTED, ModelIdentity, identity_of


def live_model(
    spec: str, *, base_url: str | None = None, fallback_model: str | None = None
) -> ModelAdapter:
    """`openai:MODEL` or `anthropic:MODEL` as an adapter (keys from the environment)."""
    provider, _, name = spec.partition(":")
    if not name:
        raise ConfigError(f"--model {spec!r}: use openai:MODEL or anthropic:MODEL")
    if provider == "openai":
        from .openai import OpenAIChatModel  # noqa: PLC0415  # optional extra

        return OpenAIChatModel(name, base_url=base_url, fallback_model=fallback_model)
    if provider == "anthropic":
        from .anthropic import AnthropicModel  # noqa: PLC0415  # optional extra

        return AnthropicModel(name, base_url=base_url, fallback_model=fallback_model)
    raise ConfigError(f"--model {spec!r}: unknown provider {provider!r} (openai or anthropic)")


def model_for_resume(
    run_id: str,
    recorded: ModelIdentity | None,
    given: ModelAdapter | None,
    *,
    replied_live: bool,
) -> ModelAdapter | None:
    """The model a stored run goes on with: None for its fixture's script, else a live adapter.

    `given` (the caller's `--model`) must be the recorded model; without it a live model is rebuilt
    from the record (its key from the environment). Whatever cannot be had is refused
    (`ResumeRefused`), never replaced by another source of replies. `replied_live`: some recorded
    reply came from an adapter without a script position, which tells a live model apart in
    headers stored before the identity was recorded.
    """
    if recorded is None:  # a header from before the identity was recorded
        if given is not None:
            return given  # the caller's word is all there is
        if replied_live:
            raise ResumeRefused(
                run_id,
                "a live model drove it and its header (older than this runner) does not say "
                "which; give it with --model",
            )
        return None
    if given is not None:
        offered = identity_of(given)
        if offered != recorded:
            raise ResumeRefused(
                run_id, f"it was driven by {recorded.describe()}, not {offered.describe()}"
            )
        return None if recorded.provider == SCRIPTED.provider else given
    if recorded.provider == SCRIPTED.provider:
        return None
    if not recorded.live:
        raise ResumeRefused(
            run_id, f"it was driven by {recorded.describe()}; resume it with that adapter"
        )
    try:
        return live_model(
            f"{recorded.provider}:{recorded.name}",
            base_url=recorded.base_url,
            fallback_model=recorded.fallback,
        )
    except ConfigError as exc:
        raise ResumeRefused(
            run_id, f"it was driven by {recorded.describe()}, which is not available here: {exc}"
        ) from exc
