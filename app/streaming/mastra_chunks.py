"""Mastra's own stream chunks, what the Studio and ``@mastra/client-js`` read (STUDIO-REST.md 4.3).

Every chunk is ``{type, runId, from: "AGENT", payload}``. ``encode_run`` turns a run's
model events into the sequence Mastra's server sends for a plain text turn:
start, step-start, text-start, text-delta..., text-end, step-finish, finish; a failure at
any point becomes an ``error`` chunk (``text_events``). It takes plain values, not the
runner's ``Turn``: streaming sits below the agents layer and never imports it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from app.llm import Finish, ResolvedModel, TextDelta, Usage
from app.streaming.text_events import StreamError, text_events


@dataclass(frozen=True)
class RunIds:
    """Who is speaking in a run's chunks."""

    run_id: str
    message_id: str  # the assistant message that will be stored
    agent_id: str
    model: ResolvedModel


def chunk(kind: str, run_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "runId": run_id, "from": "AGENT", "payload": payload}


def error_chunk(run_id: str, error: StreamError) -> dict[str, Any]:
    return chunk("error", run_id, {"error": {"name": error.kind, "message": error.message}})


def usage_payload(usage: Usage | None) -> dict[str, int]:
    if usage is None:
        return {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
            "totalTokens": usage.input_tokens + usage.output_tokens}


async def encode_run(ids: RunIds, first: TextDelta | Finish,
                     events: AsyncIterator[TextDelta | Finish]) -> AsyncIterator[dict[str, Any]]:
    """The Mastra chunks of one run."""
    run, message_id, text_id = ids.run_id, ids.message_id, f"text-{ids.message_id}"
    metadata = {"modelId": ids.model.model_id, "provider": ids.model.provider, "local": ids.model.is_local}
    yield chunk("start", run, {"id": ids.agent_id, "messageId": message_id})
    yield chunk("step-start", run, {"messageId": message_id, "request": {}, "warnings": []})
    text: list[str] = []
    async for kind, *value in text_events(first, events):
        if kind == "text-start":
            yield chunk("text-start", run, {"id": text_id})
        elif kind == "text-delta":
            text.append(value[0])
            yield chunk("text-delta", run, {"id": text_id, "text": value[0]})
        elif kind == "text-end":
            yield chunk("text-end", run, {"id": text_id})
        elif kind == "finish":
            finish: Finish = value[0]
            usage = usage_payload(finish.usage)
            output = {"text": "".join(text), "toolCalls": [], "usage": usage}
            yield chunk("step-finish", run, {"messageId": message_id, "metadata": metadata, "output": output,
                                             "stepResult": {"reason": finish.finish_reason, "isContinued": False}})
            yield chunk("finish", run, {"messageId": message_id, "stepResult": {"reason": finish.finish_reason},
                                        "output": {"text": "".join(text), "usage": usage}, "metadata": metadata,
                                        "messages": {"all": [], "user": [], "nonUser": []}})
        else:
            yield error_chunk(run, value[0])
