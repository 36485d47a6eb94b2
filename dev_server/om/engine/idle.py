"""When buffered work activates without reaching the threshold: idle time and a new model.

A provider's prompt cache expires after a while, and a new provider has no cache of the
thread at all; either way the next call pays for the whole prompt, so that is the moment
to swap buffered observations in (docs/observational-memory.md#thresholds, #activation):

* ``activateAfterIdle`` (``dev_server.om.options.activation.parse_idle``): the time since the thread's last
  activity, the ``createdAt`` of the last assistant message's last part that is not a
  ``data-*`` part (else the message's own). ``"auto"`` is the provider's cache lifetime
  (``auto_ttl_ms``).
* ``activateOnProviderChange``: the actor's ``provider/model`` differs from the model of
  the last assistant step. Provider sub-namespaces are ignored (``openai.responses`` is
  ``openai``), and when either side has no provider only the model ids are compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dev_server.kernel.clock import parse_iso
from dev_server.kernel.messages import Message
from dev_server.kernel.model import ResolvedModel
from dev_server.om.engine.activation import Trigger
from dev_server.om.options.activation import IdleSetting

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
_BY_PROVIDER = {"deepseek": HOUR_MS, "google": 24 * HOUR_MS, "gemini": 24 * HOUR_MS, "groq": 2 * HOUR_MS}
_OPENAI_SHORT = ("gpt-4", "gpt-5", "gpt-5.1", "gpt-5.2", "gpt-5.3", "gpt-5.4")


def auto_ttl_ms(provider: str, model_id: str, prompt_cache_retention: str | None = None) -> int:
    """The prompt-cache lifetime ``"auto"`` stands for: 5 minutes for Anthropic, xAI,
    OpenRouter and anything unknown; an hour for DeepSeek; a day for Google; two hours for
    Groq; for OpenAI 5 minutes on the gpt-4 / gpt-5 ... gpt-5.4 families and an hour
    otherwise, or what ``promptCacheRetention`` says (``'24h'``: an hour, ``'in_memory'``: 5 minutes)."""
    provider = base_provider(provider)
    if provider == "openai":
        if prompt_cache_retention == "24h":
            return HOUR_MS
        if prompt_cache_retention == "in_memory":
            return 5 * MINUTE_MS
        model = model_id.lower()
        family = model.split("-")[0] + "-" + model.split("-")[1] if model.count("-") else model
        short = model.startswith("gpt-4") or family in _OPENAI_SHORT or model in _OPENAI_SHORT
        return 5 * MINUTE_MS if short else HOUR_MS
    return _BY_PROVIDER.get(provider, 5 * MINUTE_MS)


def resolve_idle_ms(setting: IdleSetting, model: ResolvedModel | None) -> int | None:
    if setting is None:
        return None
    if setting == "auto":
        return auto_ttl_ms(model.provider, model.model_id) if model is not None else 5 * MINUTE_MS
    return int(setting)


def base_provider(provider: str | None) -> str:
    return (provider or "").split(".")[0].lower()


@dataclass(frozen=True)
class StepModel:
    provider: str | None
    model_id: str | None

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model_id}" if self.provider else str(self.model_id)


def last_assistant(messages: Sequence[Message]) -> Message | None:
    return next((m for m in reversed(messages) if m.role == "assistant"), None)


def last_step_model(message: Message) -> StepModel | None:
    """The model of the message's last step: its ``step-start`` part's ``model`` if it has
    one, else the message metadata's ``provider`` / ``modelId``."""
    for part in reversed(message.content.get("parts") or []):
        if part.get("type") == "step-start" and isinstance(part.get("model"), str):
            provider, _, model_id = part["model"].rpartition("/")
            return StepModel(provider or None, model_id)
    metadata = message.content.get("metadata") or {}
    if metadata.get("modelId"):
        return StepModel(metadata.get("provider"), str(metadata["modelId"]))
    return None


def provider_changed(current: ResolvedModel, previous: StepModel | None) -> bool:
    if previous is None or not previous.model_id:
        return False
    if not previous.provider or not current.provider:
        return previous.model_id != current.model_id
    return (base_provider(previous.provider), previous.model_id) != (base_provider(current.provider),
                                                                     current.model_id)


def last_activity_ms(message: Message) -> int:
    """When the thread was last active: the ``createdAt`` of the message's last part that
    is not a ``data-*`` part, else the message's own ``createdAt`` (epoch milliseconds)."""
    for part in reversed(message.content.get("parts") or []):
        if not str(part.get("type", "")).startswith("data-") and isinstance(part.get("createdAt"), (int, float)):
            return int(part["createdAt"])
    return int(parse_iso(message.created_at).timestamp() * 1000)


def cold_cache(model: ResolvedModel | None, last: Message, idle: IdleSetting, on_provider_change: bool,
               now_ms: int) -> Trigger | None:
    """Why the provider's cache of the thread is cold, if it is: ``provider_change`` (with
    the previous and current model) when watched and the model of ``last`` (the thread's
    last reply) differs, else ``ttl`` when the thread was idle at least ``idle``. Without
    the actor's ``model`` there is no provider change, and ``"auto"`` is 5 minutes."""
    if on_provider_change and model is not None:
        previous = last_step_model(last)
        if provider_changed(model, previous):
            return Trigger("provider_change", {"previousModel": previous.label if previous else None,
                                               "currentModel": model.mastra_id})
    idle_ms = resolve_idle_ms(idle, model)
    if idle_ms is not None:
        at = last_activity_ms(last)
        if now_ms - at >= idle_ms:
            return Trigger("ttl", {"lastActivityAt": at, "ttlExpiredMs": now_ms - at, "activateAfterIdle": idle_ms})
    return None
