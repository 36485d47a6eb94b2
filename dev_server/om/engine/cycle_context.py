"""What an OM cycle runs with, and the two ports its engine is handed at construction.

* ``CycleContext``: what one cycle needs from the turn (who answers, where its parts and
  spans go).
* ``ModelCaller``: every observer / reflector model call goes through one. ``call_model``
  (the default) asks the given model as it is; ``dev_server.om.engine.model_calls.ModelChoiceCaller``
  picks the model from the options (model lists, ``ModelByInputTokens``) and records usage
  for the hooks.
* ``CycleHooks``: wraps every cycle, synchronous or background, so that something outside
  the engine sees it start and end. ``NO_CYCLE_HOOKS`` (the default) does nothing;
  ``dev_server.om.engine.cycle_hooks.HookedCycles`` calls ``observationalMemory.hooks``.

Nothing is overridden: an engine built without a caller or hooks runs the bare cycles.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from dev_server.kernel.events import DataPart
from dev_server.kernel.model import LLMClient, ModelRequest, ResolvedModel
from dev_server.kernel.ports import Emit
from dev_server.kernel.processors import SpanOpener, no_span
from dev_server.llm.complete import Completion, complete
from dev_server.observability import spans
from dev_server.om.options.config import DEFAULT_MODEL
from dev_server.om.options.hooks import CycleTrigger
from dev_server.storage.om_records import OMRecord

# Mastra's observer and reflector are agents by these names (their model calls' spans)
OBSERVER_AGENT = "observational-memory-observer"
REFLECTOR_AGENT = "observational-memory-reflector"


@dataclass
class CycleContext:
    """What a cycle needs from the turn: who answers, where its parts and spans go."""

    llm: LLMClient
    agent_model: ResolvedModel
    thread_id: str
    hints: dict[str, Any] | None  # the thread's OM metadata (1.2), kept current by the cycles' writes
    emit: Emit
    open_span: SpanOpener = no_span
    # the turn's token counts by message (``dev_server.om.tokens.counting.count_message``'s memo): its window
    # is counted after each decision of its first step, and lives no longer than the turn
    counted: dict[Any, int] = field(default_factory=dict)
    # the extractors of each operation as resolved for this turn (or manual call) and thread, with the
    # failures of those whose functions raised (``dev_server.om.engine.extraction.Extraction.resolved``)
    extractors: dict[str, Any] = field(default_factory=dict)


async def om_model(llm: LLMClient, configured: str | None, agent_model: ResolvedModel) -> ResolvedModel:
    """Who observes or reflects: the configured model; by default Mastra's own when its key
    is set, else the agent's model (the local model when no provider key is set at all)."""
    if configured is not None and configured != DEFAULT_MODEL:
        return await llm.resolve(configured)
    default = await llm.resolve(DEFAULT_MODEL)
    return default if not default.is_local else agent_model


def describe_error(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    status = getattr(exc, "status", None)
    return (f"{message} (HTTP {status})" if isinstance(status, int) and status >= 400 else message)[:2000]


class ModelCaller(Protocol):
    """One observer or reflector model call: ``agent`` names the caller (its span's name),
    ``model`` is who the cycle chose, ``settings`` Mastra's ``modelSettings``."""

    async def __call__(self, ctx: CycleContext, agent: str, model: ResolvedModel, messages: list[dict[str, Any]],
                       settings: dict[str, Any]) -> Completion: ...


async def call_model(ctx: CycleContext, agent: str, model: ResolvedModel, messages: list[dict[str, Any]],
                     settings: dict[str, Any]) -> Completion:
    """Ask ``model`` as it is, in an ``agent_run`` span (the bare engine's caller)."""
    request = ModelRequest(model=model, messages=messages, temperature=settings.get("temperature"),
                           max_tokens=settings.get("maxOutputTokens"))
    with ctx.open_span(f"agent run: '{agent}'", "agent_run", input={"messages": len(messages)},
                       attributes={"model": model.model_id, "provider": model.provider,
                                   "local": model.is_local}) as span:
        completion = await complete(ctx.llm, request)
        if span is not None:
            spans.set_output(span, {"text": completion.text,
                                    "usage": {"inputTokens": completion.usage.input_tokens,
                                              "outputTokens": completion.usage.output_tokens}})
        return completion


class JobParts(Protocol):
    """Where a background job's parts go (``dev_server.om.engine.buffering.PartSink``): streamed
    (``emit``), kept on the stored reply only (``store``), written out when the job ends (``flush``)."""

    def emit(self, part: DataPart, durable: bool = True) -> None: ...

    def store(self, part: DataPart) -> None: ...

    async def flush(self) -> None: ...


class CycleHooks(Protocol):
    """Wraps each cycle. ``cycle``: a synchronous one (a turn's or a manual one; ``trigger``
    None: the trigger of the running context); ``background``: a buffering job, whose parts
    go to ``sink``. Each yields what the cycle runs with instead."""

    def cycle(self, ctx: CycleContext, record: OMRecord, operation: str,
              trigger: CycleTrigger | None = None) -> AbstractAsyncContextManager[CycleContext]: ...

    def background(self, ctx: CycleContext, record: OMRecord, operation: str,
                   sink: JobParts) -> AbstractAsyncContextManager[tuple[CycleContext, JobParts]]: ...


class NoCycleHooks:
    """Cycles run as they are."""

    @asynccontextmanager
    async def cycle(self, ctx: CycleContext, record: OMRecord, operation: str,
                    trigger: CycleTrigger | None = None) -> AsyncIterator[CycleContext]:
        yield ctx

    @asynccontextmanager
    async def background(self, ctx: CycleContext, record: OMRecord, operation: str,
                         sink: JobParts) -> AsyncIterator[tuple[CycleContext, JobParts]]:
        yield ctx, sink


NO_CYCLE_HOOKS = NoCycleHooks()
