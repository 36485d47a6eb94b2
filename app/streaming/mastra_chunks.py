"""Mastra's own stream chunks, what the Studio and ``@mastra/client-js`` read (STUDIO-REST.md 4.3).

Every chunk is ``{type, runId, from: "AGENT", payload}``. ``encode_turn`` turns a turn's
model events into the sequence Mastra's server sends for a plain text turn:
start, step-start, text-start, text-delta..., text-end, step-finish, finish.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.agents.runner import Turn
from app.llm import Finish, ModelProviderError, TextDelta, Usage
from app.streaming.text_events import text_events


def chunk(kind: str, run_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "runId": run_id, "from": "AGENT", "payload": payload}


def usage_payload(usage: Usage | None) -> dict[str, int]:
    if usage is None:
        return {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
            "totalTokens": usage.input_tokens + usage.output_tokens}


async def encode_turn(turn: Turn, first: TextDelta | Finish,
                      events: AsyncIterator[TextDelta | Finish]) -> AsyncIterator[dict[str, Any]]:
    """The Mastra chunks of one turn; a provider failure becomes an ``error`` chunk."""
    run, message_id, text_id = turn.run_id, turn.reply_id, f"text-{turn.reply_id}"
    metadata = {"modelId": turn.model.model_id, "provider": turn.model.provider, "local": turn.model.is_local}
    yield chunk("start", run, {"id": turn.agent.id, "messageId": message_id})
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
            error: ModelProviderError = value[0]
            yield chunk("error", run, {"error": {"name": error.kind, "message": error.message}})
