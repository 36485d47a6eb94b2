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
    text_open = False
    text: list[str] = []
    try:
        event: TextDelta | Finish | None = first
        while event is not None:
            if isinstance(event, TextDelta):
                if not text_open:
                    text_open = True
                    yield chunk("text-start", run, {"id": text_id})
                text.append(event.text)
                yield chunk("text-delta", run, {"id": text_id, "text": event.text})
            else:
                if text_open:
                    text_open = False
                    yield chunk("text-end", run, {"id": text_id})
                usage = usage_payload(event.usage)
                step = {"reason": event.finish_reason, "isContinued": False}
                yield chunk("step-finish", run, {"messageId": message_id, "stepResult": step,
                                                 "output": {"text": "".join(text), "toolCalls": [], "usage": usage},
                                                 "metadata": metadata})
                yield chunk("finish", run, {"messageId": message_id, "stepResult": {"reason": event.finish_reason},
                                            "output": {"text": "".join(text), "usage": usage},
                                            "metadata": metadata,
                                            "messages": {"all": [], "user": [], "nonUser": []}})
            event = await anext(events, None)
    except ModelProviderError as exc:
        if text_open:
            yield chunk("text-end", run, {"id": text_id})
        yield chunk("error", run, {"error": {"name": exc.kind, "message": exc.message}})
