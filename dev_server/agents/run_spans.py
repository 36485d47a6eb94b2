"""A run's spans under its generation: ``model_step`` per step, ``tool_call`` per tool
under its step, ``processor_run`` per processor's ``before_step`` (the loop's hooks,
``kernel.loop.LoopHooks``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span

from dev_server.kernel.events import StepFinish
from dev_server.kernel.loop import LoopHooks
from dev_server.kernel.model import ToolCall
from dev_server.kernel.processors import ReplyContext, StepContext, TurnProcessor
from dev_server.kernel.tools import ToolOutcome
from dev_server.llm.content import for_trace
from dev_server.observability import spans


class RunSpans(LoopHooks):
    """The loop's spans: ``model_step`` per step under the generation, ``tool_call`` per
    tool under its step, ``processor_run`` per processor's ``before_step`` under its step."""

    def __init__(self, tracer: trace.Tracer, ids: dict[str, str], generation: Span, input_chars: int = 0) -> None:
        self.tracer, self.ids, self.generation = tracer, ids, generation
        self.input_chars = input_chars  # of the model's input, what the generation records (0: all)
        self.steps: list[Span] = []
        self._tool: Span | None = None
        self.processor_context: Context | None = None  # while a processor's before_step runs: its span

    def open_span(self, name: str, span_type: str, **kwargs: Any) -> Any:
        """A span under the running processor's (else the step's): a processor's own model call."""
        parent = self.processor_context or self.step_context()
        return spans.child(self.tracer, name, span_type, self.ids, parent, **kwargs)

    def step_started(self, index: int) -> None:
        if self.steps:
            spans.finish(self.steps[-1], attributes={"stepIndex": index - 1, "finishReason": "tool-calls"})
        self.steps.append(spans.start(self.tracer, f"step: {index}", "model_step", self.ids,
                                      parent=trace.set_span_in_context(self.generation)))

    def model_called(self, index: int, messages: list[dict[str, Any]]) -> None:
        # only for a span that records (telemetry on): the input is the whole context, which
        # with Observational Memory is the whole unobserved window (bounded: for_trace)
        if index == 0 and self.generation.is_recording():
            spans.set_input(self.generation, {"messages": for_trace(messages, limit=self.input_chars)})

    def step_context(self) -> Context:
        return trace.set_span_in_context(self.steps[-1])

    @contextmanager
    def tool_call(self, call: ToolCall, input: Any) -> Iterator[Context | None]:
        with spans.child(self.tracer, f"tool: '{call.name}'", "tool_call", self.ids, self.step_context(),
                         input=input, attributes={"toolId": call.name, "toolCallId": call.id}) as span:
            self._tool = span
            try:
                yield trace.set_span_in_context(span)
            finally:
                self._tool = None

    def tool_finished(self, outcome: ToolOutcome) -> None:
        if self._tool is None:
            return
        if outcome.error is not None:
            self._tool.set_attribute("mastra.error", spans.to_json({"message": outcome.error, "name": "ToolError"}))
            self._tool.set_status(trace.Status(trace.StatusCode.ERROR, outcome.error))
        else:
            spans.set_output(self._tool, outcome.output)


class TracedProcessor(TurnProcessor):
    """A processor's turn object whose ``before_step`` runs inside its own ``processor_run``
    span, under the step; its other moments are its own."""

    def __init__(self, processor: TurnProcessor, hooks: RunSpans) -> None:
        self.processor, self.hooks = processor, hooks
        self.name = processor.name

    async def after_step(self, step: StepContext, output: StepFinish) -> None:
        await self.processor.after_step(step, output)

    async def finish(self, done: ReplyContext) -> None:
        await self.processor.finish(done)

    async def before_step(self, step: StepContext) -> None:
        with spans.child(self.hooks.tracer, f"input processor: {self.name}", "processor_run", self.hooks.ids,
                         self.hooks.step_context(),
                         attributes={"processorName": self.name, "stepIndex": step.index}) as span:
            self.hooks.processor_context = trace.set_span_in_context(span)
            try:
                await self.processor.before_step(step)
            finally:
                self.hooks.processor_context = None
