"""Every observer / reflector model call of an engine built with options: ``ModelChoiceCaller``.

It is the ``ModelCaller`` (``dev_server.om.engine.cycle_context``) that memory and the
standalone API hand their engine. Each call picks the model (``dev_server.om.options.models``:
the configured id, ``ModelByInputTokens`` by the call's input tokens, or each entry of a model
list in turn with its own retry count), passes ``modelSettings`` and the answering provider's
``providerOptions`` to litellm, records the call's usage on the running cycle (the hooks'
``CycleRun``, ``dev_server.om.options.hooks``), and reports the chosen model and the trigger in
its span.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from dev_server.kernel.model import ModelRequest, ResolvedModel
from dev_server.llm.complete import Completion, complete
from dev_server.observability import spans
from dev_server.om.engine.cycle_context import OBSERVER_AGENT, CycleContext, describe_error
from dev_server.om.options.config import ObservationalMemoryOptions
from dev_server.om.options.hooks import CycleRun, current_run, current_trigger
from dev_server.om.options.models import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    DEFAULT_MODEL,
    ModelByInputTokens,
    default_temperature,
    uses_default_output_limit,
)
from dev_server.om.tokens.counting import estimate_tokens

log = logging.getLogger(__name__)

# Mastra's modelSettings -> litellm's parameters (temperature and maxOutputTokens have fields of their own)
_SETTING_KWARGS = {"topP": "top_p", "topK": "top_k", "presencePenalty": "presence_penalty",
                   "frequencyPenalty": "frequency_penalty", "stopSequences": "stop", "seed": "seed"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def input_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """The call's input size, as ``ModelByInputTokens`` compares it: the tokenx estimate of its
    user messages. The system prompt, the same few thousand tokens on every call, is left out:
    Mastra sizes the input alone (docs/observational-memory.md#tokens, G19)."""
    return sum(estimate_tokens(_text(m.get("content"))) for m in messages if m.get("role") != "system")


def usage_dict(usage: Any) -> dict[str, int]:
    """A ``Usage``, or an OpenAI-shaped usage object or dict, as the hooks' usage."""
    def get(source: Any, *names: str) -> int:
        for name in names:
            value = source.get(name) if isinstance(source, dict) else getattr(source, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return 0

    details_in = get_any(usage, "prompt_tokens_details")
    details_out = get_any(usage, "completion_tokens_details")
    inputs = get(usage, "input_tokens", "inputTokens", "prompt_tokens")
    outputs = get(usage, "output_tokens", "outputTokens", "completion_tokens")
    return {"inputTokens": inputs, "outputTokens": outputs, "totalTokens": inputs + outputs,
            "reasoningTokens": (get(usage, "reasoning_tokens", "reasoningTokens")
                                or get(details_out, "reasoning_tokens")),
            "cachedInputTokens": get(usage, "cached_input_tokens", "cachedInputTokens") or get(details_in,
                                                                                               "cached_tokens")}


def get_any(source: Any, name: str) -> Any:
    return source.get(name) if isinstance(source, dict) else getattr(source, name, None)


def error_usage(exc: BaseException) -> dict[str, int] | None:
    """What a failed call used, when its error (or one it wraps) carries a ``usage``."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < 8 and all(current is not s for s in seen):
        seen.append(current)
        usage = getattr(current, "usage", None)
        if usage is not None:
            return usage_dict(usage)
        inner = getattr(current, "original_exception", None)
        current = inner if isinstance(inner, BaseException) else (current.__cause__ or current.__context__)
    return None


class ModelChoiceCaller:
    """The ``ModelCaller`` of an engine built with ``options``: the model each call uses is
    chosen from ``observation.model`` / ``reflection.model`` (see the module's docstring)."""

    def __init__(self, options: ObservationalMemoryOptions) -> None:
        self.options = options

    async def __call__(self, ctx: CycleContext, agent: str, model: ResolvedModel, messages: list[dict[str, Any]],
                       settings: dict[str, Any]) -> Completion:
        run = current_run.get()
        if run is not None:
            await run.ensure_started()
        observer = agent == OBSERVER_AGENT
        choice = self.options.observer_choice if observer else self.options.reflector_choice
        provider_options = (self.options.observation if observer else self.options.reflection).provider_options
        # sized only for a choice by input size: the estimate reads the whole prompt (the log and
        # the transcript), a cost every observer call paid for a span attribute
        sized = any(isinstance(c.model, ModelByInputTokens) for c in choice.candidates)
        size = input_tokens(messages) if sized else None
        last = len(choice.candidates) - 1
        for index, candidate in enumerate(choice.candidates):
            called = False  # _call counts its own attempt, failed or not
            try:
                resolved = model if choice.default else await ctx.llm.resolve(candidate.pick(size))
                mastras_default = resolved.mastra_id == DEFAULT_MODEL and not resolved.is_local
                default_limit = uses_default_output_limit(choice, candidate, mastras_default)
                options = {litellm: settings[key] for key, litellm in _SETTING_KWARGS.items()
                           if settings.get(key) is not None}
                options.update(provider_options.get(resolved.provider) or {})
                temperature = settings.get("temperature")
                if temperature is None:
                    temperature = default_temperature("observation" if observer else "reflection", mastras_default)
                request = ModelRequest(model=resolved, messages=messages, temperature=temperature,
                                       max_tokens=settings.get("maxOutputTokens")
                                       or (DEFAULT_MAX_OUTPUT_TOKENS if default_limit else None),
                                       options=options or None,
                                       retries=candidate.max_retries if candidate.max_retries is not None
                                       else settings.get("maxRetries"))
                selection = {"inputTokens": size, "candidate": index,
                             "candidates": len(choice.candidates),
                             "byInputTokens": not isinstance(candidate.model, str)}
                called = True
                return await self._call(ctx, agent, resolved, request, selection, run)
            except Exception as exc:
                if run is not None and not called:
                    # failed before its model call (resolving the model): still an attempt the hooks see
                    run.add_failed_call(candidate.pick(size), error_usage(exc), describe_error(exc))
                if index == last:
                    raise
                log.warning("%s: model %s failed (%s), trying the next one", agent, candidate.pick(size),
                            describe_error(exc))
        raise AssertionError("unreachable: a model choice has at least one candidate")

    async def _call(self, ctx: CycleContext, agent: str, model: ResolvedModel, request: ModelRequest,
                    selection: dict[str, Any], run: CycleRun | None) -> Completion:
        trigger = run.trigger if run is not None else current_trigger.get()
        with ctx.open_span(f"agent run: '{agent}'", "agent_run", input={"messages": len(request.messages)},
                           attributes={"model": model.model_id, "provider": model.provider, "local": model.is_local,
                                       "mastraModel": model.mastra_id, "trigger": trigger,
                                       "modelSelection": selection}) as span:
            try:
                completion = await complete(ctx.llm, request)
            except Exception as exc:
                if run is not None:  # the failed attempt: its model, its error and what it used
                    run.add_failed_call(model.mastra_id, error_usage(exc), describe_error(exc))
                raise
            used = usage_dict(completion.usage)
            usage = completion.usage
            metadata = {model.provider: {"modelId": model.model_id, "finishReason": completion.finish_reason,
                                         "local": model.is_local, "cachedInputTokens": usage.cached_input_tokens,
                                         "reasoningTokens": usage.reasoning_tokens}}
            if run is not None:
                run.add_call(model.mastra_id, used, metadata)
            if span is not None:
                spans.set_output(span, {"text": completion.text, "usage": used, "model": model.mastra_id})
            return completion
