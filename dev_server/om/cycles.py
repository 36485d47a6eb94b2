"""The OM engine with hooks and model selection: ``dev_server.om.engine`` / ``dev_server.om.buffering``
wrapped at their cycle entry points, not rewritten.

* ``HookedEngine.observe`` / ``_reflect`` (turn-sync or manual) and ``HookedBuffering._observe``
  / ``_reflect`` (async-buffer) run the wrapped cycle inside a ``CycleRun``
  (``dev_server.om.hooks``): the cycle's parts are tapped on their way out (``-start``: the cycle
  really started; ``-failed``: its error; ``-end``: success), so the hooks see exactly
  what the stream sees, and the end hook runs after the cycle, never inside it.
* ``HookedEngine.ask`` is every observer / reflector model call: it picks the model
  (``dev_server.om.models``: the configured id, ``ModelByInputTokens`` by the call's input tokens,
  or each entry of a model list in turn with its own retry count), passes ``modelSettings``
  and the answering provider's ``providerOptions`` to litellm, records the call's usage on
  the running cycle, and reports the chosen model and the trigger in its span.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from dev_server.kernel.events import DataPart
from dev_server.kernel.model import ModelRequest, ResolvedModel
from dev_server.llm.complete import Completion, complete
from dev_server.observability import spans
from dev_server.om.buffering import Buffering, PartSink, QueuedCandidates
from dev_server.om.engine import OBSERVER_AGENT, CycleContext, ObservationalMemory, describe_error
from dev_server.om.hooks import CycleRun, Trigger, current_run, current_trigger
from dev_server.om.models import DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MODEL, uses_default_output_limit
from dev_server.om.tokens import estimate_tokens
from dev_server.kernel.messages import Message
from dev_server.storage.om_records import OMRecord

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
    """The call's input size, as ``ModelByInputTokens`` compares it (the tokenx estimate)."""
    return sum(estimate_tokens(_text(m.get("content"))) for m in messages)


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
            "reasoningTokens": get(usage, "reasoning_tokens", "reasoningTokens") or get(details_out, "reasoning_tokens"),
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


def _tap(run: CycleRun, part: DataPart) -> None:
    name = part.name
    if name.endswith("-start"):
        run.started = True
    elif name.endswith("-failed"):
        run.started = True
        run.error = str((part.data or {}).get("error") or "failed")
    elif name.endswith("-end"):
        run.error = None


@asynccontextmanager
async def cycle_run(engine: ObservationalMemory, ctx: CycleContext, record: OMRecord, operation: str,
                    trigger: Trigger, *, started: bool = False) -> AsyncIterator[tuple[CycleContext, CycleRun]]:
    """Run one cycle under a ``CycleRun``: its parts tapped, its end hook called after it."""
    run = CycleRun(engine.options.hooks, operation, trigger, ctx.thread_id, record.resource_id, record.id,
                   started=started)
    emit = ctx.emit

    def tapped(part: DataPart, *args: Any, **kwargs: Any) -> None:
        _tap(run, part)
        emit(part, *args, **kwargs)

    token = current_run.set(run)
    try:
        yield replace(ctx, emit=tapped), run
    except BaseException as exc:
        run.error = run.error or describe_error(exc)
        raise
    finally:
        current_run.reset(token)
        await run.finish()


class HookedEngine(ObservationalMemory):
    async def observe(self, ctx: CycleContext, record: OMRecord, messages: Sequence[Message],
                      message_tokens: int) -> OMRecord | None:
        async with cycle_run(self, ctx, record, "observation", current_trigger.get()) as (run_ctx, _):
            return await super().observe(run_ctx, record, messages, message_tokens)

    async def _reflect(self, ctx: CycleContext, record: OMRecord, target: int) -> OMRecord:
        async with cycle_run(self, ctx, record, "reflection", current_trigger.get()) as (run_ctx, _):
            return await super()._reflect(run_ctx, record, target)

    async def ask(self, ctx: CycleContext, agent: str, model: ResolvedModel, messages: list[dict[str, Any]],
                  settings: dict[str, Any]) -> Completion:
        run = current_run.get()
        if run is not None:
            await run.ensure_started()
        observer = agent == OBSERVER_AGENT
        choice = self.options.observer_choice if observer else self.options.reflector_choice
        provider_options = (self.options.observation if observer else self.options.reflection).provider_options
        size = input_tokens(messages)
        last = len(choice.candidates) - 1
        for index, candidate in enumerate(choice.candidates):
            called = False  # _call counts its own attempt, failed or not
            try:
                resolved = model if choice.default else await ctx.llm.resolve(candidate.pick(size))
                default_limit = uses_default_output_limit(choice, candidate,
                                                          resolved.mastra_id == DEFAULT_MODEL and not resolved.is_local)
                options = {litellm: settings[key] for key, litellm in _SETTING_KWARGS.items()
                           if settings.get(key) is not None}
                options.update(provider_options.get(resolved.provider) or {})
                request = ModelRequest(model=resolved, messages=messages, temperature=settings.get("temperature"),
                                       max_tokens=settings.get("maxOutputTokens")
                                       or (DEFAULT_MAX_OUTPUT_TOKENS if default_limit else None),
                                       options=options or None,
                                       retries=candidate.max_retries if candidate.max_retries is not None
                                       else settings.get("maxRetries"))
                selection = {"inputTokens": size, "candidate": index, "candidates": len(choice.candidates),
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


class _TapSink:
    """A ``PartSink`` whose parts a ``CycleRun`` also sees."""

    def __init__(self, sink: PartSink, run: CycleRun) -> None:
        self.sink, self.run = sink, run

    def emit(self, part: DataPart, durable: bool = True) -> None:
        _tap(self.run, part)
        self.sink.emit(part, durable)

    def store(self, part: DataPart) -> None:
        self.sink.store(part)

    async def flush(self) -> None:
        await self.sink.flush()


class HookedBuffering(Buffering):
    async def _observe(self, ctx: CycleContext, record: OMRecord, queued: list[Message] | QueuedCandidates,
                       cycle: Any, sink: PartSink) -> None:
        await self._job("observation", ctx, record, sink,
                        lambda c, s: super(HookedBuffering, self)._observe(c, record, queued, cycle, s))

    async def _reflect(self, ctx: CycleContext, record: OMRecord, lines: list[str], estimate: int, cycle: Any,
                       sink: PartSink) -> None:
        await self._job("reflection", ctx, record, sink,
                        lambda c, s: super(HookedBuffering, self)._reflect(c, record, lines, estimate, cycle, s))

    async def _job(self, operation: str, ctx: CycleContext, record: OMRecord, sink: PartSink, body: Any) -> None:
        trigger = current_trigger.set("async-buffer")
        try:
            # the job itself is the cycle's start: its -start part was streamed when it was queued
            async with cycle_run(self.engine, ctx, record, operation, "async-buffer", started=True) as (_, run):
                tap = _TapSink(sink, run)
                await body(replace(ctx, emit=tap.emit), tap)
        finally:
            current_trigger.reset(trigger)
