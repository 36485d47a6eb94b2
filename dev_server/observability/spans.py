"""Spans of an agent run, in the tree the Studio renders (Mastra's Studio REST API: trace detail):

    agent_run  "agent run: '<agentId>'"     input = the user's message, output {text}
    ├── memory_operation  "memory: save messages" / "memory: save reply" (only when the run stores them)
    └── model_generation  "llm: '<model>'"   model, provider, streaming; input messages; output text; usage
        └── model_step    "step: N"          stepIndex, usage, finishReason
            ├── processor_run  "input processor: <name>"   one per processor that shapes the step (history, ...)
            └── tool_call      "tool: '<name>'"            input, output or error

The ``mastra.*`` attributes are the contract with ``otlp_mapping`` (the receiving side):
plain strings for ids and types, JSON strings for input/output/attributes/error (always
valid JSON: an infinity is null, an integer too long to write out a string saying so,
``dev_server.kernel.json_text``; anything else JSON has no form for is its ``str``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode

from dev_server.kernel.json_text import Encoder

_JSON = Encoder(default=str, separators=(",", ":"))
# Dates and dataclasses are written as ``str`` writes them, as the standard library's encoder
# does with ``default=str``.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def to_json(value: Any) -> str:
    """A span attribute's JSON text. orjson, several times faster on a model's input (with
    Observational Memory, tens of kilobytes per step), and unescaped UTF-8; what it refuses
    (a lone surrogate, a non-string key, an integer past 64 bits) is written by the standard
    library's encoder (``dev_server.kernel.json_text``), as before."""
    try:
        return orjson.dumps(value, default=str, option=_ORJSON_OPTIONS).decode()
    except TypeError:
        return _JSON.encode(value)


def identity(*, agent_id: str, agent_name: str, run_id: str, thread_id: str | None,
             resource_id: str | None) -> dict[str, str]:
    """Attributes every span of a run carries, so any of them can be filtered by thread."""
    found = {"mastra.entity_type": "agent", "mastra.entity_id": agent_id, "mastra.entity_name": agent_name,
             "mastra.run_id": run_id}
    if thread_id:
        found["mastra.thread_id"] = thread_id
    if resource_id:
        found["mastra.resource_id"] = resource_id
    return found


def start(tracer: trace.Tracer, name: str, span_type: str, ids: dict[str, str], *,
          parent: Context | None = None, input: Any = None, attributes: dict[str, Any] | None = None) -> Span:
    values: dict[str, Any] = {"mastra.span_type": span_type, **ids}
    if input is not None:
        values["mastra.input"] = to_json(input)
    if attributes:
        values["mastra.attributes"] = to_json(attributes)
    return tracer.start_span(name, context=parent, attributes=values)


def set_input(span: Span, value: Any) -> None:
    span.set_attribute("mastra.input", to_json(value))


def set_output(span: Span, value: Any) -> None:
    span.set_attribute("mastra.output", to_json(value))


def finish(span: Span, *, output: Any = None, attributes: dict[str, Any] | None = None,
           error: BaseException | None = None, error_kind: str | None = None) -> None:
    if output is not None:
        set_output(span, output)
    if attributes:
        span.set_attribute("mastra.attributes", to_json(attributes))
    if error is not None:
        message = getattr(error, "message", None) or str(error) or type(error).__name__
        span.set_attribute("mastra.error", to_json({"message": message, "name": error_kind or type(error).__name__}))
        span.set_status(Status(StatusCode.ERROR, message))
    span.end()


@contextmanager
def child(tracer: trace.Tracer, name: str, span_type: str, ids: dict[str, str], parent: Context | None,
          **kwargs: Any) -> Iterator[Span]:
    span = start(tracer, name, span_type, ids, parent=parent, **kwargs)
    try:
        yield span
    except BaseException as exc:
        finish(span, error=exc)
        raise
    if span.is_recording():
        span.end()
